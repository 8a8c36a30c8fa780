#include "mcp/registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

struct entry {
	char id[MCP_HTTP_ID_LEN + 1];
	struct mcp_conn *conn;
};

struct mcp_registry {
	struct smgr *sm;
	const struct petri_config *cfg;
	pthread_mutex_t lock;
	struct entry *v;
	size_t n, max;
};

int mcp_registry_new(struct smgr *sm, const struct petri_config *cfg,
		     struct mcp_registry **out)
{
	struct mcp_registry *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->sm = sm;
	r->cfg = cfg;
	/* Connections cost little until they run code (the session cap
	 * bounds the sandboxes), but they are bounded too. */
	r->max = cfg->max_sessions * 4 > 64 ? (size_t)cfg->max_sessions * 4 : 64;
	r->v = calloc(r->max, sizeof(*r->v));
	if (!r->v) {
		free(r);
		return -ENOMEM;
	}
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void mcp_registry_free(struct mcp_registry *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		mcp_conn_close(r->v[i].conn);
		mcp_conn_put(r->v[i].conn);
	}
	pthread_mutex_destroy(&r->lock);
	free(r->v);
	free(r);
}

/* Take out connections unused for too long (lock held); they are closed
 * by the caller, outside the lock, from `gone`. */
static size_t sweep(struct mcp_registry *r, struct mcp_conn **gone, size_t max)
{
	double limit = r->cfg->idle_timeout_s + MCP_HTTP_FORGET_S, now = clock_mono_s();
	size_t n = 0;

	for (size_t i = 0; i < r->n && n < max;) {
		if (now - mcp_conn_last_used(r->v[i].conn) > limit) {
			log_info("mcp (http): session %s forgotten after %.0f s unused",
				 r->v[i].id, limit);
			gone[n++] = r->v[i].conn;
			r->v[i] = r->v[--r->n];
		} else {
			i++;
		}
	}
	return n;
}

static void close_all(struct mcp_conn **gone, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		mcp_conn_close(gone[i]);
		mcp_conn_put(gone[i]);
	}
}

int mcp_registry_open(struct mcp_registry *r, struct mcp_conn **out,
		      char id[MCP_HTTP_ID_LEN + 1])
{
	struct mcp_conn *gone[16], *c;
	size_t ngone;
	int e;

	*out = NULL;
	if ((e = id_make(id, MCP_HTTP_ID_LEN + 1, "mcp", r->cfg->node, 32)) < 0)
		return e;
	if ((e = mcp_conn_new(r->sm, r->cfg, "http", &c)) < 0)
		return e;
	pthread_mutex_lock(&r->lock);
	ngone = sweep(r, gone, 16);
	if (r->n == r->max) {
		pthread_mutex_unlock(&r->lock);
		close_all(gone, ngone);
		mcp_conn_put(c);
		return -EAGAIN;
	}
	memcpy(r->v[r->n].id, id, MCP_HTTP_ID_LEN + 1);
	r->v[r->n++].conn = mcp_conn_ref(c);
	pthread_mutex_unlock(&r->lock);
	close_all(gone, ngone);
	*out = c;
	return 0;
}

struct mcp_conn *mcp_registry_get(struct mcp_registry *r, const char *id)
{
	struct mcp_conn *gone[16], *c = NULL;
	size_t ngone;

	pthread_mutex_lock(&r->lock);
	ngone = sweep(r, gone, 16);
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->v[i].id, id)) {
			c = mcp_conn_ref(r->v[i].conn);
			break;
		}
	pthread_mutex_unlock(&r->lock);
	close_all(gone, ngone);
	return c;
}

int mcp_registry_close(struct mcp_registry *r, const char *id)
{
	struct mcp_conn *c = NULL;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->v[i].id, id)) {
			c = r->v[i].conn;
			r->v[i] = r->v[--r->n];
			break;
		}
	pthread_mutex_unlock(&r->lock);
	if (!c)
		return -ENOENT;
	log_info("mcp (http): session %s ended by the client", id);
	mcp_conn_close(c);
	mcp_conn_put(c);
	return 0;
}
