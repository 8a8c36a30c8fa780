/* The HTTP server: listening, routing, authentication, request bodies and
 * the common ways to answer.  Endpoint logic lives in handlers.c, files.c
 * and stream.c; header checks in guard.c; blocking handlers run in
 * worker.c.
 *
 * Threads: accept.c's thread accepts connections and hands them to
 * libmicrohttpd's http_threads event threads (epoll), each serving many
 * connections, so an idle or slow socket costs a few KiB and no thread.
 * They read headers and bodies, answer /healthz, /readyz,
 * /metrics and the OpenAPI document themselves, and hand every other
 * request to the workers with its connection suspended.  A streamed
 * execution runs on its worker after the response was queued; its content
 * reader never waits (stream.c); an upload whose sandbox is slow waits
 * suspended, resumed by files.c's waiter thread.  Shutdown (api_stop) joins
 * the workers and ends the streams before MHD closes the connections, so no
 * thread of the API holds a session once it returns.
 *
 * Budgets: a JSON body at most max_json_kb, scanned by util/jsoncost
 * before jansson builds it; an upload at most max_file_mb; all bodies held
 * at once at most max_buffered_mb, one tenant (key or address) at most its
 * share of that (share.h), each coming at least BODY_PACE; connections max_connections (the fd
 * limit is raised to fit), max_connections_per_ip from one address, each
 * idle at most http_timeout_s. */
#include "api/api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/accept.h"
#include "api/answers.h"
#include "api/clients.h"
#include "e2b/e2b.h"
#include "api/events.h"
#include "api/http.h"
#include "api/openapi.h"
#include "api/worker.h"
#include "mcp/registry.h"
#include "util/cidr.h"
#include "util/clock.h"
#include "util/jsoncost.h"
#include "util/listen.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/utf8.h"
#include "util/version.h"

struct api_server {
	const struct petri_config *cfg;
	struct smgr *sm;
	/* The event threads: a libmicrohttpd daemon each, fed by the acceptor. */
	struct MHD_Daemon *daemons[CONFIG_HTTP_THREADS_MAX];
	unsigned ndaemons;
	int listen_fd;			/* -1 once quiesced */
	struct acceptor *acceptor;	/* accepts on it (accept.h) */
	char address[300];
	char unix_path[108];
	atomic_bool quiescing;
	atomic_uint active;
	struct share *bodies;		/* request body bytes held now, per tenant */
	/* With several keys, the requests in flight that make an answer, per
	 * key, from their start until their answer is read; NULL: one key or
	 * none, the only tenant. */
	struct share *turns;
	struct mcp_registry *mcp;	/* MCP over HTTP: /mcp */
	struct api_workers *workers;
	struct stream_hub *streams;
	struct files_waiter *waiter;
	struct e2b *e2b;		/* the E2B front end's sandboxes */
	struct events *events;		/* GET /v1/events */
	struct answers *answers;	/* answers not yet read (answers.h) */
	struct clients *clients;	/* with trusted_proxies (clients.h) */
	char listen_host[256];		/* the Host it answers to by default; "*": any */
	/* The expensive reads (listings of the record, exports, archive
	 * downloads) in flight,
	 * in all and per API key (napi_keys of them), and their bounds. */
	atomic_uint reads;
	atomic_uint *key_reads;
	unsigned reads_max;
};

/* Expensive reads at once: per key, and at most for the daemon (less
 * when the workers beside max_executions are fewer than twice that). */
#define READS_PER_KEY 2
#define READS_MAX 8

/* What jansson may build from one request body: bodies are flat objects
 * (one-shot files at most 100, env at most 64 entries). */
static const struct jsoncost_limits body_cost = { .max_nodes = 20000, .max_depth = 32 };

/* ---- answering -------------------------------------------------------- */

static enum MHD_Result queue(struct api_req *rq, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (status >= 400 || log_get_level() >= LOG_DEBUG) {
		char who[64] = "";

		if (rq->has_client) {
			memcpy(who, " (client ", 9);
			cidr_addr_text(rq->client, who + 9, sizeof(who) - 10);
			strcat(who, ")");
		}
		if (status >= 400)
			log_info("%s %s -> %u%s", rq->method, rq->url, status, who);
		else
			log_debug("%s %s -> %u%s", rq->method, rq->url, status, who);
	}
	if (rq->answered) {	/* one response per request */
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	rq->answered = true;
	if (rq->deferred) {	/* on a worker: the event thread queues it */
		rq->status = status;
		rq->resp = resp;
		return MHD_YES;
	}
	r = MHD_queue_response(rq->conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

enum MHD_Result http_queue(struct api_req *rq, unsigned status, struct MHD_Response *resp)
{
	return queue(rq, status, resp);
}

/* http_answer() with one more header (name NULL: none), which the answer
 * is not sent without. */
static enum MHD_Result answer_with(struct api_req *rq, unsigned status, const char *type,
				   char *text, size_t len, const char *name, const char *value)
{
	struct MHD_Response *resp = answers_response(rq->answers, &rq->tenant, text, len);

	if (resp && type)
		MHD_add_response_header(resp, "Content-Type", type);
	if (resp && name && MHD_add_response_header(resp, name, value) != MHD_YES) {
		MHD_destroy_response(resp);
		resp = NULL;
	}
	return queue(rq, status, resp);
}

enum MHD_Result http_answer(struct api_req *rq, unsigned status, const char *type,
			    char *text, size_t len)
{
	return answer_with(rq, status, type, text, len, NULL, NULL);
}

enum MHD_Result http_text(struct api_req *rq, unsigned status, const char *type,
			  const char *text, size_t len)
{
	char *copy = malloc(len ? len : 1);

	if (copy)
		memcpy(copy, text, len);
	return copy ? http_answer(rq, status, type, copy, len) : queue(rq, status, NULL);
}

enum MHD_Result http_empty(struct api_req *rq, unsigned status)
{
	return queue(rq, status, MHD_create_response_from_buffer(0, (void *)"",
								 MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result http_json(struct api_req *rq, unsigned status, json_t *body)
{
	return http_json_header(rq, status, body, NULL, NULL);
}

enum MHD_Result http_json_header(struct api_req *rq, unsigned status, json_t *body,
				 const char *name, const char *value)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	if (!text) {
		static const char oom[] =
			"{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";

		return http_text(rq, 500, "application/json", oom, sizeof(oom) - 1);
	}
	return answer_with(rq, status, "application/json", text, strlen(text), name, value);
}

json_t *http_string(const char *s)
{
	return utf8_json_string(s, strlen(s));
}

enum MHD_Result http_error(struct api_req *rq, unsigned status, const char *code,
			   const char *fmt, ...)
{
	struct MHD_Response *resp;
	char msg[512];
	char *text;
	json_t *body;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status == 400)
		metrics_inc(M_REJECT_BAD_REQUEST);
	else if (status == 413)
		metrics_inc(M_REJECT_TOO_LARGE);
	/* The message may quote what the client sent: made valid UTF-8, or
	 * the client would get a 500 for its own bad bytes. */
	/* E2B's SDKs read {"code": <status>, "message"}: the same refusal in
	 * their words (a bad body, a foreign Origin, a body too large...). */
	body = rq->e2b_kind != E2B_NONE ?
	       json_pack("{s:i, s:o}", "code", (int)status, "message", http_string(msg)) :
	       json_pack("{s:{s:s, s:o}}", "error", "code", code, "message", http_string(msg));
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return http_json(rq, status, NULL);
	resp = answers_response(rq->answers, &rq->tenant, text, strlen(text));
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (status == 401 && rq->e2b_kind == E2B_NONE)	/* E2B's keys are not Bearer */
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	else if (status == 429 || status == 503)
		MHD_add_response_header(resp, "Retry-After", "1");
	return queue(rq, status, resp);
}

json_t *http_body_object(struct api_req *rq, enum MHD_Result *answered)
{
	json_error_t jerr;
	json_t *obj;

	if (rq->body.len == 0)
		return json_object();
	obj = json_loadb(rq->body.data, rq->body.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj) {
		*answered = http_error(rq, 400, "invalid_json", "the body is not valid JSON: %s "
				       "(line %d, column %d)", jerr.text, jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(obj)) {
		json_decref(obj);
		*answered = http_error(rq, 400, "invalid_json", "the body must be a JSON object");
		return NULL;
	}
	return obj;
}

bool http_only_keys(struct api_req *rq, json_t *obj, const char *const *allowed,
		    enum MHD_Result *answered)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		bool ok = false;

		for (size_t i = 0; allowed[i] && !ok; i++)
			ok = !strcmp(k, allowed[i]);
		if (!ok) {
			*answered = http_error(rq, 400, "invalid_request", "unknown field '%.100s'", k);
			return false;
		}
	}
	return true;
}

bool http_wants_sse(struct api_req *rq)
{
	const char *accept = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Accept");

	return accept && strstr(accept, "text/event-stream");
}

/* ---- authentication --------------------------------------------------- */

bool http_same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
	unsigned char diff = (unsigned char)(la != lb);

	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)((i < la ? a[i] : 0) ^ (i < lb ? b[i] : 0));
	return diff == 0;
}

/* key's index in the n secrets of list, or -1: every one compared,
 * whichever matches, so that the time says nothing of which. */
static int find_secret(const char *key, char *const *list, size_t n)
{
	int found = -1;

	for (size_t i = 0; key && i < n; i++)
		if (http_same_secret(key, list[i]) && found < 0)
			found = (int)i;
	return found;
}

bool http_key_find(const struct petri_config *cfg, const char *key, int *index)
{
	*index = -1;
	if (cfg->napi_keys == 0)
		return true;
	*index = find_secret(key, cfg->api_keys, cfg->napi_keys);
	return *index >= 0;
}

bool http_key_ok(const struct petri_config *cfg, const char *key)
{
	int index;

	return http_key_find(cfg, key, &index);
}

/* The node's administration (docs/cluster.md): drain and undrain. */
static bool is_node_path(const char *url)
{
	return !strcmp(url, "/v1/node") || !strncmp(url, "/v1/node/", 9);
}

/* May the request administer the node?  With [cluster] admin_keys, only
 * with one of them (an API key never can: a tenant must not drain a
 * node); without, only a server without API keys (local use). */
static bool admin_authorized(struct api_req *rq)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Authorization");

	rq->key_index = -1;
	if (rq->cfg->nadmin_keys == 0)
		return rq->cfg->napi_keys == 0;
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	return find_secret(h + 7, rq->cfg->admin_keys, rq->cfg->nadmin_keys) >= 0;
}

/* Is the request's key one of the server's (or are there none)?  Notes
 * which in rq->key_index. */
static bool authorized(struct api_req *rq)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Authorization");

	if (rq->cfg->napi_keys == 0)
		return true;
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	return http_key_find(rq->cfg, h + 7, &rq->key_index);
}

/* ---- expensive reads ---------------------------------------------------
 *
 * A listing of the record or an export reads up to a page of 8 MiB and
 * costs milliseconds of CPU each, for a request of a hundred bytes.  So
 * few may be in flight at once, per key and for the daemon, counted from
 * the moment they are handed to a worker until their answer is sent:
 * more are refused at once, on the event thread, and can never fill the
 * workers' queue ahead of the executions.  One that waits in the queue
 * or runs when its client hangs up stops there (http_gone()). */

static bool is_expensive_read(const struct api_req *rq)
{
	const char *p;

	if (strcmp(rq->method, "GET"))
		return false;
	if (!strcmp(rq->url, "/v1/executions") || !strcmp(rq->url, "/v1/executions/export"))
		return true;
	if (strncmp(rq->url, "/v1/sessions/", 13) || !(p = strchr(rq->url + 13, '/')))
		return false;
	/* An archive's worker waits for its writer to list the directory (at
	 * most http_timeout_s, on the sandbox's CPU, which the sandbox can
	 * starve): a key's archives must not take the workers executions
	 * need. */
	return !strcmp(p, "/executions") || !strcmp(p, "/export") || !strcmp(p, "/archive");
}

/* Take a slot for rq: false when the daemon's or its key's are taken. */
static bool take_read(struct api_server *srv, struct api_req *rq)
{
	atomic_uint *key = rq->key_index >= 0 && srv->key_reads ?
			   &srv->key_reads[rq->key_index] : NULL;

	if (atomic_fetch_add(&srv->reads, 1) >= srv->reads_max) {
		atomic_fetch_sub(&srv->reads, 1);
		return false;
	}
	if (key && atomic_fetch_add(key, 1) >= READS_PER_KEY) {
		atomic_fetch_sub(key, 1);
		atomic_fetch_sub(&srv->reads, 1);
		return false;
	}
	rq->read_slot = true;
	return true;
}

static void give_read(struct api_server *srv, struct api_req *rq)
{
	if (!rq->read_slot)
		return;
	rq->read_slot = false;
	if (rq->key_index >= 0 && srv->key_reads)
		atomic_fetch_sub(&srv->key_reads[rq->key_index], 1);
	atomic_fetch_sub(&srv->reads, 1);
}

bool http_gone(void *arg)
{
	struct api_req *rq = arg;

	if (rq->client_fd < 0) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (!ci)
			return false;
		rq->client_fd = ci->connect_fd;
	}
	return http_client_gone(rq->client_fd);
}

/* ---- routing ---------------------------------------------------------- */

enum MHD_Result http_not_allowed(struct api_req *rq, const char *allow)
{
	char msg[128];
	struct MHD_Response *resp;

	snprintf(msg, sizeof(msg),
		 "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"use %s\"}}", allow);
	resp = MHD_create_response_from_buffer(strlen(msg), msg, MHD_RESPMEM_MUST_COPY);
	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "application/json");
		MHD_add_response_header(resp, "Allow", allow);
	}
	return queue(rq, 405, resp);
}

#define LANGUAGES_WAIT_S 20.0	/* GET /v1/languages waits for the probe */

bool http_is_probe(const char *url)
{
	return !strcmp(url, "/healthz") || !strcmp(url, "/readyz");
}

/* Why the node should get no new work now (/readyz), or NULL.  A warm
 * path that is off or failed is ready: its sandboxes start cold, but
 * start; one starting is not, for a while. */
static const char *not_ready(const struct smgr_health *h)
{
	if (h->stopping)
		return "stopping";
	if (h->draining)
		return "draining";
	if (!strcmp(h->warm, "starting"))
		return "warming";
	return NULL;
}

/* /healthz's answer, also the node's state after a drain or an undrain;
 * with readiness, /readyz's: the same, 503 with "status": "not_ready" and
 * a reason while not_ready().  Polled by load balancers and Kubernetes:
 * atomics only, no lock a slow path (a template starting, a session
 * spawning) holds. */
static enum MHD_Result health(struct api_req *rq, bool readiness)
{
	struct smgr_health h;
	const char *why;

	smgr_health(rq->sm, &h);
	why = readiness ? not_ready(&h) : NULL;
	return http_json(rq, why ? 503 : 200,
			 json_pack("{s:s, s:s, s:s, s:I, s:b, s:s, s:I, s:s, s:I, s:b, s:s*}",
				   "status", why ? "not_ready" : "ok", "node", rq->cfg->node,
				   "version", petri_version(),
				   "sessions", (json_int_t)h.sessions,
				   "cgroups", smgr_cgroups(rq->sm),
				   "warm", h.warm, "pool", (json_int_t)h.pool, "light", h.light,
				   "max_sessions", (json_int_t)h.max_sessions,
				   "draining", h.draining, "reason", why));
}

/* GET /v1/node, POST /v1/node/drain and /v1/node/undrain: the node's
 * administration, for an admin key (admin_authorized()). */
static enum MHD_Result handle_node(struct api_req *rq)
{
	const char *url = rq->url, *m = rq->method;

	if (!strcmp(url, "/v1/node")) {
		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		return health(rq, false);
	}
	if (strcmp(url, "/v1/node/drain") && strcmp(url, "/v1/node/undrain"))
		return http_error(rq, 404, "not_found", "no such endpoint: %.200s", url);
	if (strcmp(m, "POST"))
		return http_not_allowed(rq, "POST");
	smgr_drain(rq->sm, !strcmp(url, "/v1/node/drain"));
	return health(rq, false);
}

static enum MHD_Result route(struct api_req *rq)
{
	const char *url = rq->url, *m = rq->method;

	/* A Host naming a sandbox's server: all of its paths are its own. */
	if (rq->e2b_port_host)
		return e2b_route(rq);
	if (http_is_probe(url)) {
		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		return health(rq, !strcmp(url, "/readyz"));
	}
	if (is_node_path(url))
		return handle_node(rq);
	if (!strcmp(url, "/metrics")) {
		struct buf b = BUF_INIT;
		enum MHD_Result r;

		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		if (metrics_render(&b) < 0) {
			buf_release(&b);
			return http_error(rq, 500, "internal", "out of memory");
		}
		r = http_text(rq, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
		buf_release(&b);
		return r;
	}
	if (!strcmp(url, "/v1/openapi.json")) {
		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
	{
		/* The binary's own bytes: sent from where they are, no copy
		 * to hold (or charge) per client. */
		struct MHD_Response *resp = MHD_create_response_from_buffer(
			openapi_json_len(), (void *)openapi_json(), MHD_RESPMEM_PERSISTENT);

		if (resp)
			MHD_add_response_header(resp, "Content-Type", "application/json");
		return http_queue(rq, 200, resp);
	}
	}
	if (rq->e2b_kind != E2B_NONE)
		return e2b_route(rq);
	if (web_is_asset(url))
		return handle_web(rq);
	if (!strcmp(url, "/v1/events"))
		return handle_events(rq);
	if (!strcmp(url, "/mcp"))
		return handle_mcp(rq);
	if (!strcmp(url, "/v1/sessions"))
		return handle_sessions(rq);
	if (!strcmp(url, "/v1/executions"))
		return handle_executions(rq);
	if (!strcmp(url, "/v1/executions/export"))
		return handle_oneshots_export(rq);
	if (!strcmp(url, "/v1/languages")) {
		json_t *found;

		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		/* On a worker: the first answers wait for the probe (seconds). */
		if (!(found = smgr_found(rq->sm, LANGUAGES_WAIT_S)))
			return http_error(rq, 500, "internal", "out of memory");
		return http_json(rq, 200, found);
	}
	if (!strcmp(url, "/v1/execute")) {
		if (strcmp(m, "POST"))
			return http_not_allowed(rq, "POST");
		return handle_oneshot(rq);
	}
	if (!strncmp(url, "/v1/sessions/", 13)) {
		char id[SESSION_ID_LEN + 1];
		const char *p = url + 13, *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0)
			return http_error(rq, 404, "not_found", "no such endpoint: %.200s", url);
		if (n > SESSION_ID_LEN) {
			metrics_inc(M_REJECT_NOT_FOUND);
			return http_error(rq, 404, "session_not_found", "no such session");
		}
		memcpy(id, p, n);
		id[n] = '\0';
		return handle_session(rq, id, slash ? slash : "");
	}
	return http_error(rq, 404, "not_found", "no such endpoint: %.200s", url);
}

/* ---- libmicrohttpd callbacks ------------------------------------------ */

/* PUT /v1/sessions/{id}/files/{path} and POST /v1/sessions/{id}/archive:
 * raw uploads, not JSON. */
static bool is_upload(const char *method, const char *url)
{
	const char *p;

	if (strncmp(url, "/v1/sessions/", 13) || !(p = strchr(url + 13, '/')))
		return false;
	return (!strcmp(method, "PUT") && !strncmp(p, "/files/", 7)) ||
	       (!strcmp(method, "POST") && !strcmp(p, "/archive"));
}

/* Answered on the event thread: nothing here waits (an event stream
 * suspends its connection when it has nothing to send). */
static bool runs_inline(const char *url)
{
	return http_is_probe(url) || !strcmp(url, "/metrics") ||
	       !strcmp(url, "/v1/openapi.json") || !strcmp(url, "/v1/events") ||
	       is_node_path(url) || web_is_asset(url);
}

/* Requests whose answer is small whatever the client does: deleting
 * (a session, a process, an E2B sandbox), changing a session's timeouts,
 * keeping it alive, interrupting or restarting its runtime, an upload.
 * Every other request handed to a worker makes an answer the server holds
 * until the client has read it (answers.h: results, listings of files and
 * of the record, MCP replies), so it is refused while its tenant, or the
 * server, holds too much unread already; these never are, so that a client
 * over its share can still end what it holds. */
static bool answers_little(const struct api_req *rq)
{
	const char *m = rq->method, *tail = strrchr(rq->url, '/');

	/* A sandbox's server answers what it likes, to any method and path. */
	if (rq->e2b_kind == E2B_PORT || http_is_port(rq->url))
		return false;
	return !strcmp(m, "DELETE") || !strcmp(m, "PATCH") || rq->raw_upload ||
	       (!strcmp(m, "POST") && tail && (!strcmp(tail, "/keepalive") ||
					  !strcmp(tail, "/interrupt") ||
					  !strcmp(tail, "/restart")));
}

/* E2B's envd upload, POST /files (its body is the file, or multipart). */
static bool envd_upload(struct api_req *rq)
{
	char route[512];

	return rq->e2b_kind == E2B_ENVD && !strcmp(rq->method, "POST") &&
	       !strcmp(e2b_route_path(rq, route, sizeof(route)), "/files");
}

static enum MHD_Result too_large(struct api_req *rq)
{
	if (rq->raw_upload)	/* a file is PUT, an archive POSTed */
		return http_error(rq, 413, "too_large", "the %s is larger than the %llu MiB "
				  "upload limit", strcmp(rq->method, "POST") ? "file" : "archive",
				  (unsigned long long)(rq->body_max >> 20));
	if (envd_upload(rq) && rq->opaque_body)
		return http_error(rq, 413, "too_large", "the upload is larger than the %llu MiB "
				  "limit (max_file_mb, within max_body_mb)",
				  (unsigned long long)(rq->body_max >> 20));
	return http_error(rq, 413, "too_large", "the JSON body is larger than the %llu KiB "
			  "limit (max_json_kb)", (unsigned long long)(rq->body_max >> 10));
}

/* Keep a chunk of the body, within the request's cap and the server's
 * budget for all bodies; past either, drop what was kept and answer at
 * the end. */
static void keep_chunk(struct api_req *rq, const char *data, size_t n)
{
	struct api_server *srv = rq->srv;
	int r;

	if (rq->too_large || rq->too_busy || rq->over_share)
		return;
	if (rq->body.len + n > rq->body_max) {
		rq->too_large = true;
	} else if ((r = share_take(srv->bodies, &rq->tenant, n)) < 0) {
		rq->over_share = r == -EDQUOT;
		rq->too_busy = r != -EDQUOT;
	} else {
		rq->reserved += n;
		if (buf_append(&rq->body, data, n) == 0)
			return;
		rq->too_busy = true;
	}
	share_give(srv->bodies, &rq->tenant, rq->reserved);
	rq->reserved = 0;
	buf_release(&rq->body);
}

/* A body held here must come at BODY_PACE bytes a second on average after
 * its first http_timeout_s: a client that sends a byte now and then (never
 * idle for MHD's timeout) does not keep its share of the budget forever.
 * A body already refused holds nothing and is read to its end, to answer. */
#define BODY_PACE (64u << 10)

static bool body_too_slow(const struct api_req *rq, size_t more)
{
	double late = clock_mono_s() - rq->body_since - rq->cfg->http_timeout_s;

	return rq->reserved && late > 0 && late * BODY_PACE > (double)(rq->body.len + more);
}

/* A JSON body, as it streams in. */
static void take_json_chunk(struct api_req *rq, const char *data, size_t n)
{
	keep_chunk(rq, data, n);
}

/* The first call, with the headers: refuse what they condemn before a
 * byte of the body is read. */
static enum MHD_Result on_headers(struct api_server *srv, struct api_req *rq)
{
	const char *cl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
						     "Content-Length");
	const struct petri_config *cfg = srv->cfg;
	enum MHD_Result answered;

	if (atomic_load(&srv->quiescing))
		return http_error(rq, 503, "shutting_down", "the server is shutting down");
	rq->e2b_kind = e2b_kind_of(rq->conn, rq->url, &rq->e2b_port_host);
	rq->raw_upload = rq->e2b_kind != E2B_PORT && is_upload(rq->method, rq->url);
	rq->body_max = rq->raw_upload ? cfg->max_file_bytes : cfg->max_json_bytes;
	if (rq->e2b_kind == E2B_ENVD) {
		/* Multipart uploads (a file and its part headers), octet-stream
		 * ones (the file, or its gzip stream: a little larger when it
		 * does not compress) and Connect envelopes: parsed by envd.c,
		 * within these bounds. */
		const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
							     "Content-Type");
		const char *ce = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
							     "Content-Encoding");

		rq->opaque_body = ct && strncasecmp(ct, "application/json", 16);
		if (ct && !strncasecmp(ct, "multipart/form-data", 19))
			rq->body_max = cfg->max_file_bytes + (64u << 10);
		else if (ct && !strncasecmp(ct, "application/octet-stream", 24) && envd_upload(rq))
			rq->body_max = cfg->max_file_bytes + (ce ? (64u << 10) : 0);
	}
	/* A request to a session's port is its server's to parse. */
	if (http_is_port(rq->url) || rq->e2b_kind == E2B_PORT)
		rq->opaque_body = true;
	if (!rq->raw_upload && rq->body_max > cfg->max_body_bytes)
		rq->body_max = cfg->max_body_bytes;
	if (!guard_request(rq, srv->listen_host, &answered))
		return answered;
	if (cl && strtoull(cl, NULL, 10) > rq->body_max)
		return too_large(rq);
	/* Without keys the server is this machine's only (it listens on
	 * loopback): a router must not open it to the clients behind it. */
	if (!cfg->napi_keys && rq->forwarded && !cidr_loopback(rq->client)) {
		metrics_inc(M_REJECT_AUTH);
		return http_error(rq, 403, "forbidden", "this server has no API keys: it serves "
				  "its own machine only, not clients behind a router (configure "
				  "api_keys)");
	}
	if (rq->e2b_kind != E2B_NONE) {
		/* E2B's SDKs bring their own credentials: an API key on the
		 * control plane, a sandbox's token on the data plane. */
		if (!e2b_authorize(rq, &answered))
			return answered;
		share_tenant_of_bytes(rq->has_client ? rq->client : NULL, rq->key_index,
				      &rq->tenant);
		return MHD_YES;
	}
	if (is_node_path(rq->url) && !admin_authorized(rq)) {
		metrics_inc(M_REJECT_AUTH);
		return http_error(rq, rq->cfg->nadmin_keys ? 401 : 403, "unauthorized",
				  rq->cfg->nadmin_keys ? "an admin key is required: Authorization: "
				  "Bearer <one of [cluster] admin_keys>" : "this server has API keys "
				  "and no [cluster] admin_keys: no one may administer the node over "
				  "HTTP");
	}
	/* The web page's files hold no data: the page asks for the key. */
	if (!http_is_probe(rq->url) && !is_node_path(rq->url) && !web_is_asset(rq->url) &&
	    !authorized(rq)) {
		metrics_inc(M_REJECT_AUTH);
		return http_error(rq, 401, "unauthorized",
				  "a valid API key is required: Authorization: Bearer <key>");
	}
	share_tenant_of_bytes(rq->has_client ? rq->client : NULL, rq->key_index, &rq->tenant);
	/* An upload streams into its session's writer (files.c), never held
	 * here: it starts now that the request may be made. */
	return rq->raw_upload ? files_upload_start(rq) : MHD_YES;
}

/* The body is in: check what it would cost, then answer here or on a
 * worker. */
static enum MHD_Result on_body_done(struct api_server *srv, struct api_req *rq)
{
	if (rq->too_large)
		return too_large(rq);
	if (rq->too_busy)
		return http_error(rq, 503, "busy", "the server holds too many request bodies; "
				  "retry later");
	if (rq->over_share)
		return http_error(rq, 429, "too_many_bodies", "this %s holds its share (%llu KiB) "
				  "of the request bodies the server keeps at once; finish them or "
				  "retry later", rq->key_index >= 0 ? "API key" : "client",
				  (unsigned long long)(share_per_tenant(rq->srv->bodies) >> 10));
	if (atomic_load(&srv->quiescing))
		return http_error(rq, 503, "shutting_down", "the server is shutting down");
	if (!rq->raw_upload && !rq->opaque_body &&
	    !jsoncost_within(rq->body.data, rq->body.len, &body_cost, NULL)) {
		static const char msg[] = "the JSON body is nested too deep or has too many values";

		if (!strcmp(rq->url, "/mcp"))
			return mcp_http_refuse(rq, 413, msg);
		return http_error(rq, 413, "too_complex", "%s (at most %u levels and %zu values)",
				  msg, body_cost.max_depth, body_cost.max_nodes);
	}
	if (runs_inline(rq->url) && !rq->e2b_port_host)
		return route(rq);
	if (is_expensive_read(rq) && !take_read(srv, rq)) {
		metrics_inc(M_REJECT_CAPACITY);
		return http_error(rq, 429, "too_many_reads", "too many listings and exports of the "
				  "record and archive downloads are in flight (at most %u per API key, %u in all): "
				  "retry when one has ended", READS_PER_KEY, srv->reads_max);
	}
	if (!answers_little(rq) && srv->turns) {
		/* One key's executions, and the answers its clients have not
		 * read yet, cannot take every execution slot from the others:
		 * each key has its share of max_executions, counted until the
		 * answer has been read (on_completed). */
		if (share_take(srv->turns, &rq->tenant, 1) < 0)
			return http_error(rq, 429, "over_capacity", "this API key has its share "
					  "of max_executions (%llu) in flight, answers not yet "
					  "read included; retry when one has ended",
					  (unsigned long long)share_per_tenant(srv->turns));
		rq->turn = true;
	}
	if (!answers_little(rq)) {
		enum answers_room room = answers_room(srv->answers, &rq->tenant);

		if (room == ANSWERS_TENANT_FULL)
			return http_error(rq, 429, "unread_answers", "this %s's clients have not "
					  "read the answers they asked for (%llu MiB held, its share "
					  "of max_answers_mb); read them, then retry",
					  rq->key_index >= 0 ? "API key" : "address",
					  (unsigned long long)(answers_held(srv->answers,
									    &rq->tenant) >> 20));
		if (room == ANSWERS_SERVER_FULL)
			return http_error(rq, 503, "busy", "the server holds max_answers_mb of "
					  "answers its clients have not read yet; retry later");
	}
	if (!workers_submit(srv->workers, rq))
		return http_error(rq, 503, "shutting_down", "the server is shutting down");
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_size, void **ctx)
{
	struct api_server *srv = cls;
	struct api_req *rq = *ctx;
	enum client_verdict verdict;
	enum MHD_Result r;

	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->srv = srv;
		rq->cfg = srv->cfg;
		rq->sm = srv->sm;
		rq->mcp = srv->mcp;
		rq->streams = srv->streams;
		rq->waiter = srv->waiter;
		rq->e2b = srv->e2b;
		rq->events = srv->events;
		rq->client_fd = -1;
		rq->conn = conn;
		rq->key_index = -1;
		verdict = clients_admit(srv->clients, rq);
		/* Its address until its key is known. */
		share_tenant_of_bytes(rq->has_client ? rq->client : NULL, -1, &rq->tenant);
		rq->body_since = clock_mono_s();
		rq->answers = srv->answers;
		rq->method = method;
		rq->url = url;
		*ctx = rq;
		atomic_fetch_add(&srv->active, 1);
		rq->counted = true;
		if (verdict == CLIENT_BAD_HEADER)
			return http_error(rq, 400, "bad_request", "Bad Request: X-Forwarded-For "
					  "from a trusted proxy names no address");
		if (verdict == CLIENT_TOO_MANY)
			return http_error(rq, 429, "too_many_requests", "this client has "
					  "max_connections_per_ip requests open through the "
					  "router already; retry when one has ended");
		return on_headers(srv, rq);
	}
	if (rq->ran) {		/* resumed: queue what the worker kept */
		if (!rq->resp)
			return MHD_NO;	/* the handler could not answer: close */
		r = MHD_queue_response(conn, rq->status, rq->resp);
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
		return r;
	}
	if (*upload_size && rq->raw_upload)
		return files_upload_chunk(rq, upload_data, upload_size);
	if (*upload_size) {
		if (body_too_slow(rq, *upload_size)) {
			log_debug("http: %s %.200s: the body came too slowly; closed", method, url);
			return MHD_NO;
		}
		take_json_chunk(rq, upload_data, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->answered)
		return MHD_YES;
	return on_body_done(srv, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **ctx,
			 enum MHD_RequestTerminationCode why)
{
	struct api_server *srv = cls;
	struct api_req *rq = *ctx;

	(void)conn;
	(void)why;
	if (!rq)
		return;
	if (rq->counted)
		atomic_fetch_sub(&srv->active, 1);
	clients_release(srv->clients, rq);
	give_read(srv, rq);
	if (rq->turn)
		share_give(srv->turns, &rq->tenant, 1);
	if (rq->resp)
		MHD_destroy_response(rq->resp);
	share_give(srv->bodies, &rq->tenant, rq->reserved);
	files_upload_end(rq);
	buf_release(&rq->body);
	free(rq);
	*ctx = NULL;
}

/* Percent-decoding of the URL and query.  A decoded NUL would cut the path
 * short where MHD hands it to us as a C string: it becomes 0x01 instead,
 * which the path checks refuse as a control character. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *r = s, *w = s;

	(void)cls;
	(void)c;
	while (*r) {
		if (r[0] == '%' && r[1] && r[2] && strchr("0123456789abcdefABCDEF", r[1]) &&
		    strchr("0123456789abcdefABCDEF", r[2])) {
			char hex[3] = { r[1], r[2], 0 };
			char v = (char)strtol(hex, NULL, 16);

			*w++ = v ? v : '\x01';
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

/* The acceptor counted every connection; behind trusted routers,
 * clients.c counts it against its address's cap. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api_server *srv = cls;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED && srv->acceptor)
		acceptor_closed(srv->acceptor, conn);
	if (srv->clients)
		clients_on_connection(srv->clients, conn, socket_context, toe);
}

__attribute__((format(printf, 2, 0)))
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_debug("http: %s", msg);
}

/* ---- listening -------------------------------------------------------- */

/* Connections arrive in bursts (a load balancer, a thousand agents); the
 * kernel caps it at net.core.somaxconn. */
#define LISTEN_BACKLOG 4096

/* The name the server answers to without allowed_hosts: the host it
 * listens on, or any for a wildcard address or a unix socket (which a
 * browser cannot rebind a name to). */
static void set_listen_host(struct api_server *srv, const char *listen_at)
{
	const char *colon = strrchr(listen_at, ':');
	size_t n = colon ? (size_t)(colon - listen_at) : 0;

	if (!strncmp(listen_at, "unix:", 5) || !colon || n >= sizeof(srv->listen_host)) {
		snprintf(srv->listen_host, sizeof(srv->listen_host), "*");
		return;
	}
	if (listen_at[0] == '[' && n > 2) {
		memcpy(srv->listen_host, listen_at + 1, n - 2);
		srv->listen_host[n - 2] = '\0';
	} else {
		memcpy(srv->listen_host, listen_at, n);
		srv->listen_host[n] = '\0';
	}
	if (!strcmp(srv->listen_host, "0.0.0.0") || !strcmp(srv->listen_host, "::") ||
	    !srv->listen_host[0])
		snprintf(srv->listen_host, sizeof(srv->listen_host), "*");
}

/* Raise the fd limit for max_connections sockets besides what sessions
 * hold; past the hard limit, serve fewer connections. */
static unsigned fit_connections(const struct petri_config *cfg)
{
	rlim_t others = (rlim_t)cfg->max_sessions * 16 + 256, want = cfg->max_connections + others;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return cfg->max_connections;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= want)
		return cfg->max_connections;
	if (rl.rlim_cur < others + 64) {
		log_warn("http: the fd limit %llu is too low; serving 64 connections",
			 (unsigned long long)rl.rlim_cur);
		return 64;
	}
	log_warn("http: the fd limit %llu fits %llu connections, not max_connections = %u",
		 (unsigned long long)rl.rlim_cur, (unsigned long long)(rl.rlim_cur - others),
		 cfg->max_connections);
	return (unsigned)(rl.rlim_cur - others);
}

static int listen_unix(struct api_server *srv, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path) || path[0] != '/') {
		snprintf(err, errlen, "listen: '%s' is not an absolute socket path of at most "
			 "%zu bytes", path, sizeof(sa.sun_path) - 1);
		return -EINVAL;
	}
	/* Replace a stale socket, never any other kind of file. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "listen: '%s' exists and is not a socket", path);
			return -EEXIST;
		}
		unlink(path);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0660) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		int e = errno;

		snprintf(err, errlen, "listen on unix:%s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	snprintf(srv->unix_path, sizeof(srv->unix_path), "%s", path);
	snprintf(srv->address, sizeof(srv->address), "unix:%s", path);
	return fd;
}


int api_open(const struct petri_config *cfg, struct api_server **out, char *err, size_t errlen)
{
	struct api_server *srv;
	int fd, r;

	*out = NULL;
	if ((r = config_check_listen(cfg, err, errlen)) < 0)
		return r;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = cfg;
	fd = !strncmp(cfg->listen, "unix:", 5) ? listen_unix(srv, cfg->listen + 5, err, errlen) :
						 listen_tcp(cfg->listen, LISTEN_BACKLOG, srv->address,
							    sizeof(srv->address), err, errlen);
	if (fd < 0) {
		free(srv);
		return fd;
	}
	srv->listen_fd = fd;
	set_listen_host(srv, cfg->listen);
	*out = srv;
	return 0;
}

/* Close what api_open() made, when api_start() never ran or failed. */
static void api_close(struct api_server *srv)
{
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	if (srv->unix_path[0])
		unlink(srv->unix_path);
	free(srv);
}

/* Free what api_start() made, its threads stopped, then what api_open()
 * made.  Each part may be missing (a start that failed half-way). */
static void api_free(struct api_server *srv)
{
	workers_free(srv->workers);
	events_free(srv->events);
	if (srv->streams)
		stream_hub_free(srv->streams);
	files_waiter_free(srv->waiter);
	mcp_registry_free(srv->mcp);
	e2b_free(srv->e2b);
	clients_free(srv->clients);
	free(srv->key_reads);
	share_free(srv->bodies);
	share_free(srv->turns);
	answers_free(srv->answers);
	api_close(srv);
}

int api_start(struct api_server *srv, struct smgr *sm, char *err, size_t errlen)
{
	const struct petri_config *cfg = srv->cfg;
	unsigned workers, spare, limit;
	int fd = srv->listen_fd, r;

	srv->sm = sm;
	workers = cfg->http_workers ? cfg->http_workers : cfg->max_executions + 16;
	spare = workers > cfg->max_executions ? (workers - cfg->max_executions) / 2 : 0;
	srv->reads_max = spare < 1 ? 1 : spare > READS_MAX ? READS_MAX : spare;
	if (answers_new(cfg, &srv->answers) < 0 ||
	    (cfg->napi_keys && !(srv->key_reads = calloc(cfg->napi_keys,
							  sizeof(*srv->key_reads)))) ||
	    mcp_registry_new(sm, cfg, &srv->mcp) < 0 || e2b_new(&srv->e2b) < 0 ||
	    clients_new(cfg, &srv->clients) < 0 ||
	    share_new(cfg->max_buffered_bytes, config_share_of(cfg, cfg->max_buffered_bytes),
		      &srv->bodies) < 0 ||
	    (cfg->napi_keys > 1 && share_new(UINT64_MAX / 2, config_share_of(cfg, cfg->max_executions),
					     &srv->turns) < 0)) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	if ((r = stream_hub_new(&srv->streams)) < 0 || (r = files_waiter_new(&srv->waiter)) < 0 ||
	    (r = events_new(cfg, sm, srv->streams, &srv->events)) < 0 ||
	    (r = workers_start(workers, route, &srv->workers)) < 0) {
		snprintf(err, errlen, "cannot start the HTTP server's threads: %s", strerror(-r));
		goto fail;
	}
	/* Behind trusted routers, clients.c caps each address's connections
	 * (the routers' spared); else the acceptor does. */
	limit = fit_connections(cfg);
	for (unsigned i = 0; i < cfg->http_threads; i++) {
		srv->daemons[i] = MHD_start_daemon(
			MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
			MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG,
			0, NULL, NULL, on_request, srv,
			MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
			MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
			MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
			MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			/* Above the acceptor's part for it: libmicrohttpd reports a
			 * close before it counts it, so the acceptor may hand it the
			 * next connection while it still counts the old one. */
			MHD_OPTION_CONNECTION_LIMIT, limit + 1,
			MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(cfg->http_timeout_s + 0.5),
			MHD_OPTION_END);
		if (!srv->daemons[i]) {
			snprintf(err, errlen, "cannot start the HTTP server");
			r = -EIO;
			goto fail_daemons;
		}
		srv->ndaemons++;
	}
	if ((r = acceptor_start(fd, srv->daemons, srv->ndaemons, limit,
				srv->clients ? 0 : cfg->max_connections_per_ip, &srv->acceptor)) < 0) {
		snprintf(err, errlen, "cannot start the HTTP server's threads: %s", strerror(-r));
		goto fail_daemons;
	}
	return 0;
fail_daemons:
	for (unsigned i = 0; i < srv->ndaemons; i++)
		MHD_stop_daemon(srv->daemons[i]);
fail:
	if (srv->waiter)
		files_waiter_stop(srv->waiter);
	api_free(srv);
	return r;
}

void api_quiesce(struct api_server *srv)
{
	atomic_store(&srv->quiescing, true);
	acceptor_stop(srv->acceptor);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);	/* the port refuses from now on */
	srv->listen_fd = -1;
	/* An event stream would last forever: end them now, so that the
	 * requests in flight are those that will end. */
	events_stop(srv->events);
}

unsigned api_active(const struct api_server *srv)
{
	return atomic_load(&srv->active);
}

const char *api_address(const struct api_server *srv)
{
	return srv->address;
}

void api_stop(struct api_server *srv)
{
	if (!srv)
		return;
	if (!atomic_load(&srv->quiescing))
		api_quiesce(srv);
	/* Every handler returns (the sandboxes are dead), then every stream
	 * ends: no connection stays suspended, and MHD can close them all,
	 * dropping the last references to sessions. */
	workers_stop(srv->workers);
	stream_hub_stop(srv->streams);
	files_waiter_stop(srv->waiter);
	for (unsigned i = 0; i < srv->ndaemons; i++)
		MHD_stop_daemon(srv->daemons[i]);
	acceptor_free(srv->acceptor);	/* MHD_stop_daemon reported its closes */
	/* The event streams went with MHD, and every response it held. */
	api_free(srv);
}
