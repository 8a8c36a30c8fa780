/* registry — the MCP connections of the Streamable HTTP transport, by
 * Mcp-Session-Id.  Each id is one struct mcp_conn (and so one sandbox,
 * created on first use).  A connection ends when the client DELETEs it,
 * when it has not been used for MCP_HTTP_FORGET_S beyond the sandbox's idle
 * timeout (later requests with its id get 404, as the spec asks, and the
 * client initializes again), or with the server.
 *
 * Thread-safe.  Expired connections are swept on every open and lookup. */
#ifndef PETRI_MCP_REGISTRY_H
#define PETRI_MCP_REGISTRY_H

#include "config/config.h"
#include "mcp/mcp.h"
#include "session/session.h"

#define MCP_HTTP_ID_LEN ID_LEN("mcp", 32)	/* "mcp_" NODE "-" 32 hex (util/ids.h) */
#define MCP_HTTP_FORGET_S 3600.0

struct mcp_registry;

int mcp_registry_new(struct smgr *sm, const struct petri_config *cfg,
		     struct mcp_registry **out);
/* Close every connection and free.  NULL ok. */
void mcp_registry_free(struct mcp_registry *r);
/* A new connection and its id.  -EAGAIN when at the cap. */
int mcp_registry_open(struct mcp_registry *r, struct mcp_conn **out,
		      char id[MCP_HTTP_ID_LEN + 1]);
/* A reference to the connection with this id, or NULL. */
struct mcp_conn *mcp_registry_get(struct mcp_registry *r, const char *id);
/* Close and forget a connection: 0, or -ENOENT. */
int mcp_registry_close(struct mcp_registry *r, const char *id);

#endif
