/* /mcp: the MCP Streamable HTTP transport (docs/mcp.md).  The HTTP side
 * only: sessions by Mcp-Session-Id, status codes, headers.  The protocol
 * is src/mcp/mcp.c; the connections live in src/mcp/registry.c.
 *
 *   POST    one JSON-RPC message (a batch only in protocol 2025-03-26);
 *           requests are answered as application/json, or as one SSE
 *           event when the client accepts only text/event-stream;
 *           notifications and responses get 202 and no body
 *   DELETE  ends the session (and deletes its sandbox)
 *   GET     405: petri sends no server-initiated messages */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/answers.h"
#include "api/http.h"
#include "mcp/mcp.h"
#include "mcp/registry.h"
#include "util/buf.h"

#define MCP_SESSION_NOT_FOUND (-32001)

static const char *header(struct api_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

/* Send a JSON-RPC message (consumed; NULL: no body) with a status, as
 * JSON or as one SSE event, with the session id when given. */
static enum MHD_Result send_rpc(struct api_req *rq, unsigned status, json_t *msg, bool sse,
				const char *session_id)
{
	struct MHD_Response *resp;
	char *text = NULL;
	size_t len = 0;
	struct buf b = BUF_INIT;

	if (msg) {
		text = json_dumps(msg, JSON_COMPACT);
		json_decref(msg);
		if (!text)
			return http_error(rq, 500, "internal", "out of memory");
		len = strlen(text);
		if (sse) {
			int r = buf_appendf(&b, "event: message\ndata: %s\n\n", text);

			free(text);
			if (r < 0) {
				buf_release(&b);
				return http_error(rq, 500, "internal", "out of memory");
			}
			text = b.data;	/* the buffer's, now the answer's */
			len = b.len;
		}
		/* Held until the client has read it, charged to its key. */
		resp = answers_response(rq->answers, &rq->tenant, text, len);
	} else {
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (resp) {
		if (msg)
			MHD_add_response_header(resp, "Content-Type", sse ? "text/event-stream" :
						"application/json");
		if (session_id)
			MHD_add_response_header(resp, "Mcp-Session-Id", session_id);
	}
	return http_queue(rq, status, resp);
}

static enum MHD_Result rpc_error(struct api_req *rq, unsigned status, int code, const char *msg)
{
	return send_rpc(rq, status, mcp_error(NULL, code, "%s", msg), false, NULL);
}

enum MHD_Result mcp_http_refuse(struct api_req *rq, unsigned status, const char *msg)
{
	return rpc_error(rq, status, MCP_INVALID_REQUEST, msg);
}

static bool accepts(const char *accept, const char *type)
{
	return accept && (strstr(accept, type) || strstr(accept, "*/*"));
}

static enum MHD_Result post(struct api_req *rq)
{
	const char *ctype = header(rq, "Content-Type"), *accept = header(rq, "Accept");
	const char *sid = header(rq, "Mcp-Session-Id"), *pv = header(rq, "MCP-Protocol-Version");
	bool sse = accept && !accepts(accept, "application/json") &&
		   strstr(accept, "text/event-stream");
	char new_id[MCP_HTTP_ID_LEN + 1];
	struct mcp_conn *c = NULL;
	json_t *msg, *resp, *perr;
	enum MHD_Result answered;
	int r;

	if (ctype && strncasecmp(ctype, "application/json", 16) != 0)
		return rpc_error(rq, 415, MCP_INVALID_REQUEST,
				 "Unsupported Media Type: send Content-Type: application/json");
	if (accept && !accepts(accept, "application/json") && !sse)
		return rpc_error(rq, 406, MCP_INVALID_REQUEST, "Not Acceptable: the client must "
				 "accept application/json or text/event-stream");
	msg = mcp_parse(rq->body.data ? rq->body.data : "", rq->body.len, &perr);
	if (!msg)
		return send_rpc(rq, 400, perr, false, NULL);

	if (mcp_is_initialize(msg)) {
		if (sid) {
			answered = rpc_error(rq, 400, MCP_INVALID_REQUEST, "Bad Request: initialize "
					     "starts a new session: send it without Mcp-Session-Id");
			goto out;
		}
		if (smgr_draining(rq->sm)) {
			/* A new MCP session is a new session: another node's. */
			answered = rpc_error(rq, 503, MCP_INTERNAL_ERROR,
					     sm_result_message(SM_DRAINING));
			goto out;
		}
		if ((r = mcp_registry_open(rq->mcp, &c, new_id)) < 0) {
			answered = rpc_error(rq, r == -EAGAIN ? 503 : 500, MCP_INTERNAL_ERROR,
					     r == -EAGAIN ? "too many MCP sessions: try again later" :
					     "cannot start an MCP session");
			goto out;
		}
		mcp_conn_set_key(c, rq->key_index + 1);
		resp = mcp_conn_handle(c, msg);
		if (json_object_get(resp, "error")) {
			/* A failed initialize leaves no session behind. */
			mcp_registry_close(rq->mcp, new_id);
			answered = send_rpc(rq, 200, resp, sse, NULL);
		} else {
			answered = send_rpc(rq, 200, resp, sse, new_id);
		}
		goto out;
	}
	if (!sid) {
		answered = rpc_error(rq, 400, MCP_INVALID_REQUEST, "Bad Request: Mcp-Session-Id "
				     "header is required (send initialize first)");
		goto out;
	}
	c = mcp_registry_get(rq->mcp, sid);
	if (!c) {
		answered = rpc_error(rq, 404, MCP_SESSION_NOT_FOUND, "Session not found: it ended "
				     "or never existed; initialize a new one");
		goto out;
	}
	if (pv && (!mcp_version_supported(pv) || strcmp(pv, mcp_conn_version(c)) != 0)) {
		char m[200];

		snprintf(m, sizeof(m), "Bad Request: unsupported MCP-Protocol-Version '%.40s' "
			 "(this session uses %s)", pv, mcp_conn_version(c));
		answered = rpc_error(rq, 400, MCP_INVALID_REQUEST, m);
		goto out;
	}
	if (json_is_array(msg) && strcmp(mcp_conn_version(c), "2025-03-26") != 0) {
		answered = send_rpc(rq, 400, mcp_conn_handle(c, msg), false, NULL);
		goto out;
	}
	resp = mcp_conn_handle(c, msg);
	if (!mcp_has_request(msg))
		/* Notifications and responses; an error means one was invalid. */
		answered = resp ? send_rpc(rq, 400, resp, false, NULL) :
				  send_rpc(rq, 202, NULL, false, NULL);
	else if (!resp)
		answered = send_rpc(rq, 202, NULL, false, NULL);	/* cancelled */
	else
		answered = send_rpc(rq, 200, resp, sse, NULL);
out:
	mcp_conn_put(c);
	json_decref(msg);
	return answered;
}

enum MHD_Result handle_mcp(struct api_req *rq)
{
	const char *sid;

	/* Origin, Host and Content-Type were checked with the headers
	 * (guard.c). */
	if (!strcmp(rq->method, "POST"))
		return post(rq);
	if (!strcmp(rq->method, "DELETE")) {
		sid = header(rq, "Mcp-Session-Id");
		if (!sid)
			return rpc_error(rq, 400, MCP_INVALID_REQUEST,
					 "Bad Request: Mcp-Session-Id header is required");
		if (mcp_registry_close(rq->mcp, sid) < 0)
			return rpc_error(rq, 404, MCP_SESSION_NOT_FOUND, "Session not found");
		return send_rpc(rq, 204, NULL, false, NULL);
	}
	{
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
									   MHD_RESPMEM_PERSISTENT);

		if (resp)
			MHD_add_response_header(resp, "Allow", "POST, DELETE");
		return http_queue(rq, 405, resp);
	}
}
