/* The MCP protocol core: JSON-RPC framing rules, the lifecycle
 * (initialize, version negotiation), and the methods petri serves. */
#include "mcp/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp/tools.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/version.h"

#define CANCELLED_MAX 64	/* cancellations remembered for requests not yet run */

/* Newest first: the answer to an unknown version is the first. */
static const char *const versions[] = {
	MCP_VERSION_LATEST, "2025-06-18", "2025-03-26", "2024-11-05", NULL
};

/* A tools/call being run, so that notifications/cancelled can stop it. */
struct inflight {
	json_t *id;
	int pipe[2];
	bool cancelled;
	struct inflight *next;
};

struct mcp_conn {
	struct tools *tools;
	const char *transport;
	pthread_mutex_t lock;		/* everything below */
	const char *version;		/* negotiated; NULL before initialize */
	bool initialized;		/* notifications/initialized came */
	double last_used;
	struct inflight *running;
	json_t *cancelled;		/* ids cancelled before they ran */
	atomic_int refs;
};

bool mcp_version_supported(const char *v)
{
	for (size_t i = 0; v && versions[i]; i++)
		if (!strcmp(v, versions[i]))
			return true;
	return false;
}

/* ---- connections ------------------------------------------------------- */

int mcp_conn_new(struct smgr *sm, const struct petri_config *cfg, const char *transport,
		 struct mcp_conn **out)
{
	struct mcp_conn *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->cancelled = json_array();
	if (!c->cancelled || tools_new(sm, cfg, &c->tools) < 0) {
		json_decref(c->cancelled);
		free(c);
		return -ENOMEM;
	}
	c->transport = transport;
	c->last_used = clock_mono_s();
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->refs, 1);
	*out = c;
	return 0;
}

void mcp_conn_set_key(struct mcp_conn *c, int key)
{
	tools_set_key(c->tools, key);
}

struct mcp_conn *mcp_conn_ref(struct mcp_conn *c)
{
	atomic_fetch_add(&c->refs, 1);
	return c;
}

/* Stop every running tool call (their responses are still sent). */
static void stop_running(struct mcp_conn *c)
{
	pthread_mutex_lock(&c->lock);
	for (struct inflight *f = c->running; f; f = f->next)
		if (write(f->pipe[1], "x", 1) < 0)
			log_debug("mcp: cannot signal a running call");
	pthread_mutex_unlock(&c->lock);
}

void mcp_conn_close(struct mcp_conn *c)
{
	stop_running(c);
	tools_close(c->tools);
}

void mcp_conn_put(struct mcp_conn *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	tools_free(c->tools);
	json_decref(c->cancelled);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const char *mcp_conn_version(struct mcp_conn *c)
{
	const char *v;

	pthread_mutex_lock(&c->lock);
	v = c->version ? c->version : "";
	pthread_mutex_unlock(&c->lock);
	return v;
}

double mcp_conn_last_used(struct mcp_conn *c)
{
	double t;

	pthread_mutex_lock(&c->lock);
	t = c->last_used;
	pthread_mutex_unlock(&c->lock);
	return t;
}

/* ---- messages ---------------------------------------------------------- */

json_t *mcp_error(json_t *id, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
			 id ? id : json_null(), "error", "code", code, "message", msg);
}

static json_t *reply(json_t *id, json_t *result)
{
	if (!result)
		return mcp_error(id, MCP_INTERNAL_ERROR, "out of memory");
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

json_t *mcp_parse(const char *data, size_t len, json_t **error_response)
{
	json_error_t jerr;
	json_t *msg;

	*error_response = NULL;
	msg = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!msg)
		*error_response = mcp_error(NULL, MCP_PARSE_ERROR, "Parse error: %s (line %d, "
					    "column %d)", jerr.text, jerr.line, jerr.column);
	return msg;
}

/* A valid id: a string or a number (MCP: never null). */
static bool id_valid(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id) || json_is_real(id);
}

void mcp_conn_answered(struct mcp_conn *c, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));

	/* The client has its tools: its model calls them next. */
	if (json_is_object(msg) && method && !strcmp(method, "tools/list"))
		tools_warm(c->tools);
}

bool mcp_is_initialize(json_t *msg)
{
	return json_is_object(msg) &&
	       json_is_string(json_object_get(msg, "method")) &&
	       !strcmp(json_string_value(json_object_get(msg, "method")), "initialize");
}

static bool is_request(json_t *m)
{
	return json_is_object(m) && json_object_get(m, "id") && json_object_get(m, "method");
}

bool mcp_has_request(json_t *msg)
{
	size_t i;
	json_t *m;

	if (!json_is_array(msg))
		return is_request(msg);
	json_array_foreach(msg, i, m)
		if (is_request(m))
			return true;
	return false;
}

/* ---- methods ----------------------------------------------------------- */

static json_t *initialize(struct mcp_conn *c, json_t *id, json_t *params)
{
	json_t *pv = json_object_get(params, "protocolVersion");
	const char *want = json_string_value(pv), *got = versions[0];
	const char *client = json_string_value(json_object_get(json_object_get(params,
							"clientInfo"), "name"));

	if (!json_is_string(pv))
		return mcp_error(id, MCP_INVALID_PARAMS,
				 "initialize: 'params.protocolVersion' (a string) is required");
	for (size_t i = 0; versions[i]; i++)
		if (!strcmp(want, versions[i]))
			got = versions[i];
	pthread_mutex_lock(&c->lock);
	if (c->version) {
		pthread_mutex_unlock(&c->lock);
		return mcp_error(id, MCP_INVALID_REQUEST, "the connection is already initialized");
	}
	c->version = got;
	pthread_mutex_unlock(&c->lock);
	log_info("mcp (%s): client '%.100s' asked for protocol %.40s, using %s", c->transport,
		 client ? client : "?", want, got);
	return reply(id, json_pack(
		"{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
		"protocolVersion", got,
		"capabilities", "tools", "listChanged", false,
		"serverInfo", "name", "petri", "title", "petri sandbox", "version", petri_version(),
		"instructions",
		"petri runs code in an isolated sandbox that keeps its state: use the execute tool "
		"to run Python (numpy, pandas, matplotlib, scipy, openpyxl), bash or C; charts come "
		"back as images; files live in /work (write_file, read_file, list_files)."));
}

static bool take_cancelled(struct mcp_conn *c, json_t *id)
{
	size_t i;
	json_t *v;
	bool found = false;

	pthread_mutex_lock(&c->lock);
	json_array_foreach(c->cancelled, i, v) {
		if (json_equal(v, id)) {
			json_array_remove(c->cancelled, i);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

static json_t *call_tool(struct mcp_conn *c, json_t *id, json_t *params)
{
	json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
	struct inflight f = { .id = id, .pipe = { -1, -1 } };
	json_t *result;
	bool cancelled;

	if (!json_is_string(name))
		return mcp_error(id, MCP_INVALID_PARAMS, "tools/call: 'params.name' (a string) is "
				 "required");
	if (args && !json_is_object(args) && !json_is_null(args))
		return mcp_error(id, MCP_INVALID_PARAMS, "tools/call: 'params.arguments' must be "
				 "an object");
	if (!tools_known(c->tools, json_string_value(name)))
		return mcp_error(id, MCP_INVALID_PARAMS, "Unknown tool: %.100s",
				 json_string_value(name));
	if (take_cancelled(c, id))
		return NULL;
	if (pipe2(f.pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return mcp_error(id, MCP_INTERNAL_ERROR, "cannot run the call: %s", strerror(errno));
	pthread_mutex_lock(&c->lock);
	f.next = c->running;
	c->running = &f;
	pthread_mutex_unlock(&c->lock);

	result = tools_call(c->tools, json_string_value(name), json_is_object(args) ? args : NULL,
			    f.pipe[0], NULL);

	pthread_mutex_lock(&c->lock);
	for (struct inflight **p = &c->running; *p; p = &(*p)->next)
		if (*p == &f) {
			*p = f.next;
			break;
		}
	cancelled = f.cancelled;
	pthread_mutex_unlock(&c->lock);
	close(f.pipe[0]);
	close(f.pipe[1]);
	if (cancelled) {
		/* The client said it no longer wants the answer. */
		json_decref(result);
		return NULL;
	}
	return reply(id, result);
}

static void cancel(struct mcp_conn *c, json_t *params)
{
	json_t *id = json_object_get(params, "requestId");
	bool found = false;

	if (!id_valid(id))
		return;
	pthread_mutex_lock(&c->lock);
	for (struct inflight *f = c->running; f; f = f->next) {
		if (json_equal(f->id, id)) {
			f->cancelled = found = true;
			if (write(f->pipe[1], "x", 1) < 0)
				log_debug("mcp: cannot signal a running call");
		}
	}
	/* Not running yet (stdio queues calls): remember it, boundedly. */
	if (!found) {
		if (json_array_size(c->cancelled) >= CANCELLED_MAX)
			json_array_remove(c->cancelled, 0);
		json_array_append(c->cancelled, id);
	}
	pthread_mutex_unlock(&c->lock);
	log_info("mcp (%s): request cancelled by the client", c->transport);
}

static void notification(struct mcp_conn *c, const char *method, json_t *params)
{
	if (!strcmp(method, "notifications/initialized")) {
		pthread_mutex_lock(&c->lock);
		c->initialized = true;
		pthread_mutex_unlock(&c->lock);
	} else if (!strcmp(method, "notifications/cancelled")) {
		cancel(c, params);
	}
	/* Any other notification is ignored, as JSON-RPC asks. */
}

static json_t *request(struct mcp_conn *c, json_t *id, const char *method, json_t *params)
{
	json_t *cursor;
	bool ready;

	if (!strcmp(method, "initialize"))
		return initialize(c, id, params);
	if (!strcmp(method, "ping"))
		return reply(id, json_object());
	pthread_mutex_lock(&c->lock);
	ready = c->version != NULL;
	pthread_mutex_unlock(&c->lock);
	if (!ready)
		return mcp_error(id, MCP_INVALID_REQUEST, "the connection is not initialized: send "
				 "'initialize' first");
	if (!strcmp(method, "tools/list")) {
		json_t *list;

		cursor = json_object_get(params, "cursor");
		if (cursor && !json_is_string(cursor) && !json_is_null(cursor))
			return mcp_error(id, MCP_INVALID_PARAMS, "tools/list: 'cursor' must be a "
					 "string");
		list = tools_list(c->tools);
		return reply(id, list ? json_pack("{s:o}", "tools", list) : NULL);
	}
	if (!strcmp(method, "tools/call"))
		return call_tool(c, id, params);
	return mcp_error(id, MCP_METHOD_NOT_FOUND, "Method not found: %.100s", method);
}

/* One message of a batch, or a message alone. */
static json_t *handle_one(struct mcp_conn *c, json_t *m, bool in_batch)
{
	json_t *id, *method, *params, *jsonrpc;

	if (!json_is_object(m))
		return mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: a message must be a "
				 "JSON object");
	id = json_object_get(m, "id");
	method = json_object_get(m, "method");
	params = json_object_get(m, "params");
	jsonrpc = json_object_get(m, "jsonrpc");
	if (id && !id_valid(id))
		return mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: 'id' must be a "
				 "string or a number");
	if (!json_is_string(jsonrpc) || strcmp(json_string_value(jsonrpc), "2.0") != 0)
		return mcp_error(id, MCP_INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be "
				 "\"2.0\"");
	if (!method) {
		/* A response to a request of ours: petri sends none. */
		if (id && (json_object_get(m, "result") || json_object_get(m, "error")))
			return NULL;
		return mcp_error(id, MCP_INVALID_REQUEST, "Invalid Request: no 'method'");
	}
	if (!json_is_string(method))
		return mcp_error(id, MCP_INVALID_REQUEST, "Invalid Request: 'method' must be a "
				 "string");
	if (params && !json_is_object(params)) {
		if (!id)
			return NULL;
		return mcp_error(id, json_is_array(params) ? MCP_INVALID_PARAMS :
				 MCP_INVALID_REQUEST, "'params' must be an object");
	}
	pthread_mutex_lock(&c->lock);
	c->last_used = clock_mono_s();
	pthread_mutex_unlock(&c->lock);
	if (!id) {
		notification(c, json_string_value(method), params);
		return NULL;
	}
	if (in_batch && !strcmp(json_string_value(method), "initialize"))
		return mcp_error(id, MCP_INVALID_REQUEST, "initialize must not be part of a batch");
	return request(c, id, json_string_value(method), params);
}

json_t *mcp_conn_handle(struct mcp_conn *c, json_t *msg)
{
	const char *v;
	json_t *out, *m;
	size_t i;

	if (!json_is_array(msg))
		return handle_one(c, msg, false);
	/* JSON-RPC batches: only protocol 2025-03-26 has them (2025-06-18
	 * removed them; 2024-11-05 did not have them yet). */
	v = mcp_conn_version(c);
	if (strcmp(v, "2025-03-26") != 0)
		return mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: JSON-RPC batches are "
				 "not supported %s%s", *v ? "in protocol version " :
				 "before initialize", v);
	if (json_array_size(msg) == 0)
		return mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: an empty batch");
	if (json_array_size(msg) > MCP_BATCH_MAX)
		return mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: a batch of more "
				 "than %d messages", MCP_BATCH_MAX);
	out = json_array();
	if (!out)
		return NULL;
	json_array_foreach(msg, i, m) {
		json_t *r = handle_one(c, m, true);

		if (r)
			json_array_append_new(out, r);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}
