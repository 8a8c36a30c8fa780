/* clients — who a request's client is (clients.h). */
#include "api/clients.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api/http.h"
#include "api/share.h"
#include "util/cidr.h"
#include "util/log.h"
#include "util/metrics.h"

/* Addresses of one X-Forwarded-For chain read, at most: a chain of routers
 * is short, and what a client wrote before the first router is not read. */
#define CHAIN_MAX 64

struct clients {
	struct cidr *proxies;
	size_t nproxies;
	/* Per address: connections straight from it, and requests in flight
	 * through the routers for it; each at most max_connections_per_ip. */
	struct share *held;
};

int clients_new(const struct petri_config *cfg, struct clients **out)
{
	struct clients *c;
	int r;

	*out = NULL;
	if (!cfg->ntrusted_proxies)
		return 0;
	if (!(c = calloc(1, sizeof(*c))) ||
	    !(c->proxies = calloc(cfg->ntrusted_proxies, sizeof(*c->proxies)))) {
		free(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cfg->ntrusted_proxies; i++)
		if (!cidr_parse(cfg->trusted_proxies[i], &c->proxies[c->nproxies++])) {
			clients_free(c);
			return -EINVAL;	/* config.c checked them */
		}
	if ((r = share_new(UINT64_MAX, cfg->max_connections_per_ip ? cfg->max_connections_per_ip :
			   UINT64_MAX, &c->held)) < 0) {
		clients_free(c);
		return r;
	}
	*out = c;
	return 0;
}

void clients_free(struct clients *c)
{
	if (!c)
		return;
	share_free(c->held);
	free(c->proxies);
	free(c);
}

static bool peer_of(struct MHD_Connection *conn, unsigned char addr[16])
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	return ci && cidr_addr_of(ci->client_addr, addr);
}

/* A connection straight from an untrusted address counts against its cap;
 * past it, the connection is shut at once (the client reads its end, as
 * when libmicrohttpd refuses one). */
void clients_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			   enum MHD_ConnectionNotificationCode toe)
{
	struct clients *c = cls;
	struct share_tenant t;
	unsigned char addr[16];

	if (!peer_of(conn, addr) || cidr_any(c->proxies, c->nproxies, addr))
		return;
	share_tenant_of_bytes(addr, -1, &t);
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (*socket_context)
			share_give(c->held, &t, 1);
		return;
	}
	if (share_take(c->held, &t, 1) == 0) {
		*socket_context = c;	/* counted: given back when it closes */
		return;
	}
	{
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		metrics_inc(M_REJECT_CAPACITY);
		if (fd)
			shutdown(fd->connect_fd, SHUT_RDWR);
	}
}

struct chain {
	char *v[CHAIN_MAX];
	size_t n;
	bool cut;	/* more than CHAIN_MAX: the oldest were dropped */
};

/* Every X-Forwarded-For header, in order, each split at commas: copies. */
static enum MHD_Result collect(void *arg, enum MHD_ValueKind kind, const char *key,
			       const char *value)
{
	struct chain *ch = arg;
	char *copy, *save = NULL, *tok;

	(void)kind;
	if (strcasecmp(key, "X-Forwarded-For") || !value || !(copy = strdup(value)))
		return MHD_YES;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end = tok + strlen(tok);

		while (*tok == ' ' || *tok == '\t')
			tok++;
		while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (ch->n == CHAIN_MAX) {	/* keep the newest */
			free(ch->v[0]);
			memmove(ch->v, ch->v + 1, (CHAIN_MAX - 1) * sizeof(ch->v[0]));
			ch->n--;
			ch->cut = true;
		}
		if ((ch->v[ch->n] = strdup(tok)))
			ch->n++;
	}
	free(copy);
	return MHD_YES;
}

/* The client a trusted router names: the rightmost address of the chain
 * that is not a trusted router itself.  false: the header is missing
 * (*named false) or names no address. */
static bool forwarded_client(struct clients *c, struct MHD_Connection *conn,
			     unsigned char addr[16], bool *named)
{
	struct chain ch = { .n = 0 };
	bool ok = true;

	*named = false;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, collect, &ch);
	for (size_t i = ch.n; i-- > 0;) {
		*named = true;
		if (!cidr_addr_parse(ch.v[i], addr)) {
			ok = false;
			break;
		}
		if (!cidr_any(c->proxies, c->nproxies, addr))
			break;
		/* A router in front of a router: the one before it said. */
	}
	for (size_t i = 0; i < ch.n; i++)
		free(ch.v[i]);
	return ok && *named;
}

enum client_verdict clients_admit(struct clients *c, struct api_req *rq)
{
	struct share_tenant t;
	unsigned char fwd[16];
	bool named;

	rq->has_client = peer_of(rq->conn, rq->client);
	if (!c || !rq->has_client || !cidr_any(c->proxies, c->nproxies, rq->client))
		return CLIENT_OK;
	if (!forwarded_client(c, rq->conn, fwd, &named))
		return named ? CLIENT_BAD_HEADER : CLIENT_OK;	/* the router's own */
	memcpy(rq->client, fwd, 16);
	rq->forwarded = true;
	share_tenant_of_bytes(rq->client, -1, &t);
	if (share_take(c->held, &t, 1) < 0)
		return CLIENT_TOO_MANY;
	rq->client_held = true;
	return CLIENT_OK;
}

void clients_release(struct clients *c, struct api_req *rq)
{
	struct share_tenant t;

	if (!c || !rq->client_held)
		return;
	share_tenant_of_bytes(rq->client, -1, &t);
	share_give(c->held, &t, 1);
	rq->client_held = false;
}
