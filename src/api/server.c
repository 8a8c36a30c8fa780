/* The HTTP server: listening, routing, authentication, request bodies and
 * the common ways to answer.  Endpoint logic lives in handlers.c, files.c
 * and stream.c. */
#include "api/api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/http.h"
#include "api/openapi.h"
#include "mcp/registry.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/utf8.h"

struct api_server {
	const struct petri_config *cfg;
	struct smgr *sm;
	struct MHD_Daemon *daemon;
	int listen_fd;
	char address[300];
	char unix_path[108];
	atomic_bool quiescing;
	atomic_uint active;
	struct mcp_registry *mcp;	/* MCP over HTTP: /mcp */
};

/* ---- answering -------------------------------------------------------- */

static enum MHD_Result queue(struct api_req *rq, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	r = MHD_queue_response(rq->conn, status, resp);
	MHD_destroy_response(resp);
	if (status >= 400)
		log_info("%s %s -> %u", rq->method, rq->url, status);
	else
		log_debug("%s %s -> %u", rq->method, rq->url, status);
	return r;
}

enum MHD_Result http_queue(struct api_req *rq, unsigned status, struct MHD_Response *resp)
{
	return queue(rq, status, resp);
}

enum MHD_Result http_text(struct api_req *rq, unsigned status, const char *type,
			  const char *text, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);

	if (resp)
		MHD_add_response_header(resp, "Content-Type", type);
	return queue(rq, status, resp);
}

enum MHD_Result http_empty(struct api_req *rq, unsigned status)
{
	return queue(rq, status, MHD_create_response_from_buffer(0, (void *)"",
								 MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result http_json(struct api_req *rq, unsigned status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	enum MHD_Result r;

	json_decref(body);
	if (!text) {
		static const char oom[] =
			"{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";

		return http_text(rq, 500, "application/json", oom, sizeof(oom) - 1);
	}
	r = http_text(rq, status, "application/json", text, strlen(text));
	free(text);
	return r;
}

enum MHD_Result http_error(struct api_req *rq, unsigned status, const char *code,
			   const char *fmt, ...)
{
	struct MHD_Response *resp;
	struct buf clean = BUF_INIT;
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
	/* The message may quote what the client sent: make it valid UTF-8,
	 * or jansson refuses it and the client gets a 500 for its own bad
	 * bytes. */
	if (utf8_sanitize(&clean, msg, strlen(msg)) < 0) {
		buf_release(&clean);
		return http_json(rq, status, NULL);
	}
	body = json_pack("{s:{s:s, s:s%}}", "error", "code", code, "message", clean.data,
			 clean.len);
	buf_release(&clean);
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return http_json(rq, status, NULL);
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (status == 401)
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

/* Compare in time that depends only on the lengths, not on where the
 * first difference is. */
static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
	unsigned char diff = (unsigned char)(la != lb);

	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)((i < la ? a[i] : 0) ^ (i < lb ? b[i] : 0));
	return diff == 0;
}

static bool authorized(struct api_req *rq)
{
	const char *h;
	bool ok = false;

	if (rq->cfg->napi_keys == 0)
		return true;
	h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	for (size_t i = 0; i < rq->cfg->napi_keys; i++)
		ok |= same_secret(h, rq->cfg->api_keys[i]);
	return ok;
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

static enum MHD_Result route(struct api_req *rq)
{
	const char *url = rq->url, *m = rq->method;

	if (!strcmp(url, "/healthz")) {
		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		return http_json(rq, 200, json_pack("{s:s, s:I}", "status", "ok", "sessions",
						    (json_int_t)smgr_count(rq->sm)));
	}
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
		return http_text(rq, 200, "application/json", openapi_json(), openapi_json_len());
	}
	if (!strcmp(url, "/mcp"))
		return handle_mcp(rq);
	if (!strcmp(url, "/v1/sessions"))
		return handle_sessions(rq);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_size, void **ctx)
{
	struct api_server *srv = cls;
	struct api_req *rq = *ctx;

	(void)version;
	if (!rq) {
		const char *cl;
		bool upload;

		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->srv = srv;
		rq->cfg = srv->cfg;
		rq->sm = srv->sm;
		rq->mcp = srv->mcp;
		rq->conn = conn;
		rq->method = method;
		rq->url = url;
		*ctx = rq;
		atomic_fetch_add(&srv->active, 1);
		rq->counted = true;
		if (atomic_load(&srv->quiescing))
			return http_error(rq, 503, "shutting_down", "the server is shutting down");
		/* Refuse what is too large before reading it (an upload has a
		 * limit of its own). */
		upload = files_upload_wanted(rq);
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
		if (!upload && cl && strtoull(cl, NULL, 10) > srv->cfg->max_body_bytes)
			return http_error(rq, 413, "too_large",
					  "the body is larger than the %llu MiB limit",
					  (unsigned long long)(srv->cfg->max_body_bytes >> 20));
		if (strcmp(url, "/healthz") && !authorized(rq)) {
			metrics_inc(M_REJECT_AUTH);
			return http_error(rq, 401, "unauthorized",
					  "a valid API key is required: Authorization: Bearer <key>");
		}
		return upload ? files_upload_start(rq) : MHD_YES;
	}
	if (*upload_size && rq->upload)
		return files_upload_chunk(rq, upload_data, upload_size);
	if (*upload_size) {
		if (!rq->too_large && rq->body.len + *upload_size > srv->cfg->max_body_bytes) {
			rq->too_large = true;
			buf_release(&rq->body);
		}
		if (!rq->too_large && buf_append(&rq->body, upload_data, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->too_large)
		return http_error(rq, 413, "too_large", "the body is larger than the %llu MiB limit",
				  (unsigned long long)(srv->cfg->max_body_bytes >> 20));
	if (atomic_load(&srv->quiescing))
		return http_error(rq, 503, "shutting_down", "the server is shutting down");
	return route(rq);
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
	    chmod(path, 0660) < 0 || listen(fd, 128) < 0) {
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

static int listen_tcp(struct api_server *srv, const char *listen_at, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE |
				  AI_NUMERICSERV }, *ai = NULL;
	char host[256], port[16], name[INET6_ADDRSTRLEN];
	const char *colon = strrchr(listen_at, ':');
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t n;
	int fd = -1, one = 1, r;

	if (!colon || colon == listen_at || strlen(colon + 1) >= sizeof(port) ||
	    (n = (size_t)(colon - listen_at)) >= sizeof(host)) {
		snprintf(err, errlen, "listen: expected HOST:PORT or unix:PATH, got '%s'", listen_at);
		return -EINVAL;
	}
	memcpy(host, listen_at, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	snprintf(port, sizeof(port), "%s", colon + 1);
	if ((r = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(err, errlen, "listen: cannot resolve '%s': %s", listen_at, gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;

		snprintf(err, errlen, "listen on %s: %s", listen_at, strerror(e));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -e;
	}
	freeaddrinfo(ai);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, name, sizeof(name));
		snprintf(srv->address, sizeof(srv->address), "[%s]:%u", name, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, name, sizeof(name));
		snprintf(srv->address, sizeof(srv->address), "%s:%u", name, ntohs(s4->sin_port));
	}
	return fd;
}

int api_start(const struct petri_config *cfg, struct smgr *sm,
	      struct api_server **out, char *err, size_t errlen)
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
	srv->sm = sm;
	if (mcp_registry_new(sm, cfg, &srv->mcp) < 0) {
		free(srv);
		return -ENOMEM;
	}
	fd = !strncmp(cfg->listen, "unix:", 5) ? listen_unix(srv, cfg->listen + 5, err, errlen) :
						 listen_tcp(srv, cfg->listen, err, errlen);
	if (fd < 0) {
		mcp_registry_free(srv->mcp);
		free(srv);
		return fd;
	}
	srv->listen_fd = fd;
	srv->daemon = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC |
		MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, srv,
		MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)(cfg->max_sessions * 2 + 64),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
		MHD_OPTION_END);
	if (!srv->daemon) {
		snprintf(err, errlen, "cannot start the HTTP server");
		close(fd);
		mcp_registry_free(srv->mcp);
		free(srv);
		return -EIO;
	}
	*out = srv;
	return 0;
}

void api_quiesce(struct api_server *srv)
{
	atomic_store(&srv->quiescing, true);
	MHD_quiesce_daemon(srv->daemon);
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
	/* Quiesced, MHD leaves the listening socket to us: close it once. */
	if (!atomic_load(&srv->quiescing))
		api_quiesce(srv);
	MHD_stop_daemon(srv->daemon);
	close(srv->listen_fd);
	if (srv->unix_path[0])
		unlink(srv->unix_path);
	mcp_registry_free(srv->mcp);
	free(srv);
}
