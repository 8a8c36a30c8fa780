/* stdio — the MCP stdio transport: newline-delimited JSON-RPC messages
 * on a pair of file descriptors (the client's pipe to our stdin and from
 * our stdout).  Nothing but MCP messages is ever written to out_fd.
 *
 * The calling thread reads; tool calls are queued for one worker thread
 * and run in order, so that ping, tools/list and notifications/cancelled
 * are answered while code runs.  At end of input the queued and running
 * calls are finished and answered, then the connection is closed (its
 * sandbox deleted).  When stop_fd becomes readable (a signal), running
 * calls are killed and queued ones dropped at once. */
#ifndef PETRI_MCP_STDIO_H
#define PETRI_MCP_STDIO_H

#include "mcp/mcp.h"

#define MCP_STDIO_QUEUE_MAX 64	/* tool calls waiting to run */

/* Returns 0 at end of input or when the client stopped reading, 1 when
 * stop_fd fired, -errno when in_fd failed.  Closes c (mcp_conn_close). */
int mcp_stdio_serve(struct mcp_conn *c, int in_fd, int out_fd, int stop_fd);

#endif
