/* api — petri's HTTP/JSON API on libmicrohttpd (docs/api.md).
 *
 * A few epoll event threads serve every connection; a request that waits
 * on a sandbox (an execution, a stream) runs on a bounded pool of workers
 * with its connection suspended, so it blocks neither another connection
 * nor /healthz (server.c says more).  The API knows nothing of namespaces:
 * it speaks to the session manager (src/session), files included
 * (src/session/workspace.h). */
#ifndef PETRI_API_H
#define PETRI_API_H

#include <stddef.h>

#include "config/config.h"
#include "session/session.h"

struct api_server;

/* Listen on cfg->listen (refusing a non-loopback address without API
 * keys): the first thing petri serve does, so that an address in use is an
 * error before anything else starts.  Nothing is served yet. */
int api_open(const struct petri_config *cfg, struct api_server **out, char *err, size_t errlen);
/* Serve what srv listens on with sm until api_stop().  On failure srv is
 * closed and freed. */
int api_start(struct api_server *srv, struct smgr *sm, char *err, size_t errlen);
/* Stop accepting connections and answer 503 to new requests. */
void api_quiesce(struct api_server *srv);
/* Requests being handled now. */
unsigned api_active(const struct api_server *srv);
/* Close everything and free.  The session manager must already have
 * killed its sandboxes, so no request waits forever.  On return no thread
 * of the API runs and none holds a session: the manager may be freed. */
void api_stop(struct api_server *srv);

/* The bound address, e.g. "127.0.0.1:8080" (the real port if 0 was
 * asked) or "unix:/path". */
const char *api_address(const struct api_server *srv);

#endif
