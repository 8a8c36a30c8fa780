/* clients — who a request's client is, and how many connections it holds.
 * Internal to src/api.
 *
 * Without [server] trusted_proxies, the client is the connection's peer,
 * and libmicrohttpd caps the connections of each address
 * (max_connections_per_ip).  With them, a router's connections carry many
 * clients: from a trusted address only, the client is the address its
 * X-Forwarded-For names (the rightmost one that is not itself a trusted
 * router; HAProxy's `option forwardfor` appends the address it saw), and
 * each client may have max_connections_per_ip requests in flight through
 * the routers, answered 429 past it; connections straight from anyone
 * else are capped per address here, as libmicrohttpd would (it cannot
 * exempt the routers).  From an address not trusted, X-Forwarded-For is
 * never read.  The client is who its requests are charged to without API
 * keys (share.h), and the address the log names. */
#ifndef PETRI_API_CLIENTS_H
#define PETRI_API_CLIENTS_H

#include <microhttpd.h>
#include <stdbool.h>

#include "config/config.h"

struct api_req;
struct clients;

/* NULL in *out when cfg trusts no router (nothing to do then). */
int clients_new(const struct petri_config *cfg, struct clients **out);
void clients_free(struct clients *c);

/* MHD_OPTION_NOTIFY_CONNECTION's callback (c its closure): counts and caps
 * the connections of untrusted addresses. */
void clients_on_connection(void *c, struct MHD_Connection *conn, void **socket_context,
			   enum MHD_ConnectionNotificationCode toe);

enum client_verdict {
	CLIENT_OK,
	CLIENT_BAD_HEADER,	/* a trusted router sent an X-Forwarded-For that names no address */
	CLIENT_TOO_MANY,	/* the forwarded client has its requests in flight */
};
/* At a request's start: rq->client (and has_client, forwarded), and for a
 * forwarded client one of its requests in flight, held until
 * clients_release(). */
enum client_verdict clients_admit(struct clients *c, struct api_req *rq);
void clients_release(struct clients *c, struct api_req *rq);

#endif
