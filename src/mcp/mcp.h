/* mcp — the Model Context Protocol (JSON-RPC 2.0) core, independent of
 * the transport (src/mcp/stdio.c, src/api/mcp.c).  docs/mcp.md.
 *
 * One `struct mcp_conn` is one MCP connection: a stdio process, or one
 * Mcp-Session-Id over HTTP.  It negotiates the protocol version at
 * `initialize`, answers ping, tools/list and tools/call, and owns one
 * sandbox (struct tools) created on first use and deleted by
 * mcp_conn_close().
 *
 * Everything a client sends is untrusted: the transport bounds the size
 * of a message (MCP_MESSAGE_MAX), mcp_parse() rejects invalid JSON and
 * duplicate keys, and mcp_conn_handle() validates every member it reads.
 *
 * Threads: mcp_conn_handle() may be called from several threads at once
 * (HTTP requests of one session, or stdio's reader and worker); tool calls
 * run one at a time, and a notifications/cancelled from another thread
 * stops a running execution.
 *
 * Ownership: connections are reference-counted (mcp_conn_ref/_put);
 * functions returning json_t give a new reference. */
#ifndef PETRI_MCP_H
#define PETRI_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "session/session.h"

#define MCP_MESSAGE_MAX	(96u << 20)	/* bytes of one message (a stdio line) */
#define MCP_BATCH_MAX	64		/* messages in one batch */
#define MCP_VERSION_LATEST "2025-11-25"
/* What a server assumes when an HTTP request names no version. */
#define MCP_VERSION_HTTP_DEFAULT "2025-03-26"

/* JSON-RPC error codes. */
#define MCP_PARSE_ERROR		(-32700)
#define MCP_INVALID_REQUEST	(-32600)
#define MCP_METHOD_NOT_FOUND	(-32601)
#define MCP_INVALID_PARAMS	(-32602)
#define MCP_INTERNAL_ERROR	(-32603)

struct mcp_conn;

/* sm and cfg must outlive the connection.  transport names it in logs. */
int mcp_conn_new(struct smgr *sm, const struct petri_config *cfg, const char *transport,
		 struct mcp_conn **out);
/* The API key (session_params.key) the connection's session is charged
 * to; right after mcp_conn_new(), before any message. */
void mcp_conn_set_key(struct mcp_conn *c, int key);
struct mcp_conn *mcp_conn_ref(struct mcp_conn *c);
/* Drop a reference; the last one closes and frees.  NULL ok. */
void mcp_conn_put(struct mcp_conn *c);
/* The client is gone: stop what runs, delete the sandbox.  Later
 * messages are still answered, tool calls with an error. */
void mcp_conn_close(struct mcp_conn *c);

/* Parse one message.  On failure returns NULL and *error_response is a
 * -32700 response (id null) to send. */
json_t *mcp_parse(const char *data, size_t len, json_t **error_response);

/* Handle one parsed message: a request, a notification, a response, or a
 * batch (only for protocol version 2025-03-26).  Returns what to send
 * back (an object, or an array for a batch), or NULL when nothing is to
 * be sent (notifications, responses, a cancelled request). */
json_t *mcp_conn_handle(struct mcp_conn *c, json_t *msg);

/* A transport has sent the answer to msg (a request it handled): after
 * tools/list, what makes the first tool call fast starts in the background
 * (tools_warm(): the warm template, finding out what the sandboxes have),
 * so that initialize and tools/list never wait for it nor compete with it
 * (docs/mcp.md "Start-up").  A tools/call starts it too. */
void mcp_conn_answered(struct mcp_conn *c, json_t *msg);

/* The negotiated version ("" before initialize): a constant string. */
const char *mcp_conn_version(struct mcp_conn *c);
/* Has the client sent anything since the given time (CLOCK_MONOTONIC s)? */
double mcp_conn_last_used(struct mcp_conn *c);

bool mcp_version_supported(const char *v);
/* A JSON-RPC error response; id may be NULL (sent as null). */
json_t *mcp_error(json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What a message is, for a transport that must know before handling it. */
bool mcp_is_initialize(json_t *msg);
/* Does msg (or any element of a batch) carry a request (an "id" and a
 * "method")? */
bool mcp_has_request(json_t *msg);

#endif
