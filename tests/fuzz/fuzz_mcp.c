/* MCP messages from a client: mcp_parse and mcp_conn_handle over one
 * connection without sandboxes (src/mcp/mcp.c, the argument checks of
 * src/mcp/tools.c).  The input is up to 16 messages, one per line, as on
 * the stdio transport, so that the fuzzer can initialize (with any
 * version) and then send requests, batches and notifications.
 *
 * Oracle: every answer is a JSON-RPC response (or an array of them) that
 * serializes, with "jsonrpc": "2.0", an id, and exactly one of result and
 * error; error codes are the ones petri uses. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct petri_config cfg;

static void check_response(json_t *r)
{
	json_t *err = json_object_get(r, "error"), *res = json_object_get(r, "result");
	json_t *jsonrpc = json_object_get(r, "jsonrpc");

	assert(json_is_object(r));
	assert(json_is_string(jsonrpc) && !strcmp(json_string_value(jsonrpc), "2.0"));
	assert(json_object_get(r, "id"));
	assert(!err != !res);
	if (err) {
		json_int_t code = json_integer_value(json_object_get(err, "code"));

		assert(json_is_string(json_object_get(err, "message")));
		assert(code == MCP_PARSE_ERROR || code == MCP_INVALID_REQUEST ||
		       code == MCP_METHOD_NOT_FOUND || code == MCP_INVALID_PARAMS ||
		       code == MCP_INTERNAL_ERROR);
	} else {
		assert(json_is_object(res));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct mcp_conn *c;

	if (!cfg.max_sessions)
		config_defaults(&cfg);
	if (mcp_conn_new(NULL, &cfg, "fuzz", &c) < 0)
		return 0;
	for (int i = 0; i < 16 && p < end; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *err, *msg = mcp_parse(p, len, &err), *r;
		char *text;

		p += len + (nl ? 1 : 0);
		r = msg ? mcp_conn_handle(c, msg) : err;
		if (r) {
			if (json_is_array(r)) {
				size_t k;
				json_t *x;

				assert(json_array_size(r) > 0 && json_array_size(r) <= MCP_BATCH_MAX);
				json_array_foreach(r, k, x)
					check_response(x);
			} else {
				check_response(r);
			}
			text = json_dumps(r, JSON_COMPACT);
			assert(text && !strchr(text, '\n'));
			free(text);
		}
		json_decref(r);
		json_decref(msg);
	}
	mcp_conn_close(c);
	mcp_conn_put(c);
	return 0;
}
