/* A session's ports: a server its code runs (a dev server, an API it
 * builds), reached from outside through petri (docs/api.md, "Ports").
 *
 *   ANY /v1/sessions/{id}/ports/{port}[/path][?query]
 *
 * The request goes to 127.0.0.1:{port} in the session's sandbox, through a
 * connection made inside its network namespace (session_connect()), as
 * HTTP/1.0: one request per connection, the answer ending with it.  It
 * carries the client's method, path, query, body and headers, but for
 * those of the hop, the client's credentials for petri (Authorization,
 * X-API-Key) and its cookies (every session's server shares petri's
 * origin).  The answer comes back whole, within http_timeout_s: its status,
 * the headers that describe its content (an allow-list: none that tells a
 * browser or a proxy in front to act on petri's origin, nor its cookies)
 * and its body, at most PORT_ANSWER_MAX bytes; with a
 * Content-Security-Policy that makes what it serves an origin of its own in
 * a browser (it could otherwise script petri's web page, or its API).
 *
 * A proxied request waits on its worker as a read of a command does
 * (session_wait_begin()): at most half the spare workers at once, each
 * key its share. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/answers.h"
#include "api/http.h"
#include "util/buf.h"
#include "util/clock.h"

#define PORT_HEAD_MAX	(64u << 10)	/* the answer's status line and headers */
#define PORT_ANSWER_MAX	(16u << 20)	/* its body */
#define PORT_HEADERS_MAX 100

/* Headers of the request never passed to the sandbox's server: the hop's
 * (RFC 9110 7.6.1), the client's credentials for petri and E2B's, its
 * cookies, and what petri says itself (the framing, where it forwarded). */
static bool kept_back(const char *name)
{
	static const char *const names[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Host", "Expect", "Authorization", "X-API-Key", "Cookie",
		"X-Access-Token", "E2B-Traffic-Access-Token", "E2b-Sandbox-Id", "E2b-Sandbox-Port",
		"Forwarded", NULL
	};

	if (!strncasecmp(name, "X-Forwarded-", 12))
		return true;
	for (size_t i = 0; names[i]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* Headers of the answer passed to the client: those that describe its
 * content, and the server's own X-... but those a proxy in front acts on.
 * Everything else (cookies, caching, the hop's, Clear-Site-Data, Alt-Svc,
 * NEL, WWW-Authenticate, Strict-Transport-Security, its own CSP...) would
 * act on petri's origin, or on what stands in front of it. */
static bool passed_on(const char *name)
{
	static const char *const names[] = {
		"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
		"Content-Range", "Accept-Ranges", "Location", "ETag", "Last-Modified", "Vary",
		"Link", "Retry-After", NULL
	};

	if (!strncasecmp(name, "X-", 2))
		return strncasecmp(name, "X-Accel-", 8) && strcasecmp(name, "X-Sendfile") &&
		       strncasecmp(name, "X-Forwarded-", 12) && strcasecmp(name, "X-Petri-Error");
	for (size_t i = 0; names[i]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* A Location petri passes on: a path of the server's, not another site
 * (petri's origin is no open redirect). */
static bool local_location(const char *v)
{
	size_t scheme = strcspn(v, ":/?#");

	return !(v[scheme] == ':' || (v[0] == '/' && (v[1] == '/' || v[1] == '\\')) ||
		 v[0] == '\\');
}

struct request_text {
	struct buf *b;
	int failed;
	bool first;
};

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct request_text *t = cls;

	(void)kind;
	if (!kept_back(key) && buf_appendf(t->b, "%s: %s\r\n", key, value ? value : "") < 0)
		t->failed = -1;
	return MHD_YES;
}

/* Percent-encode s into b (the query's keys and values, as MHD decoded
 * them). */
static int encode(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char e[3] = { '%', hex[c >> 4], hex[c & 15] };

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~!$'()*,;:@/", c)) {
			if (buf_append(b, s, 1) < 0)
				return -1;
		} else if (buf_append(b, e, 3) < 0) {
			return -1;
		}
	}
	return 0;
}

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct request_text *t = cls;

	(void)kind;
	if (buf_append_str(t->b, t->first ? "?" : "&") < 0 || encode(t->b, key) < 0 ||
	    (value && (buf_append_str(t->b, "=") < 0 || encode(t->b, value) < 0)))
		t->failed = -1;
	t->first = false;
	return MHD_YES;
}

/* The request's head as the sandbox's server gets it (its body follows). */
static int request_head(struct api_req *rq, const char *prefix, const char *path,
			unsigned port, struct buf *b)
{
	struct request_text t = { b, 0, true };

	if (buf_appendf(b, "%s ", rq->method) < 0 || encode(b, *path ? path : "/") < 0)
		return -1;
	MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, add_query, &t);
	if (t.failed || buf_appendf(b, " HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n", port) < 0)
		return -1;
	MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, add_header, &t);
	if (t.failed || (*prefix && buf_appendf(b, "X-Forwarded-Prefix: %s\r\n", prefix) < 0) ||
	    buf_appendf(b, "Connection: close\r\nContent-Length: %zu\r\n\r\n", rq->body.len) < 0)
		return -1;
	return 0;
}

/* Wait for fd to be ready for events, until deadline: 0, -ETIMEDOUT, or
 * -ECONNRESET when the client went. */
static int ready(struct api_req *rq, int fd, short events, double deadline)
{
	for (;;) {
		double left = deadline - clock_mono_s();
		struct pollfd pfd = { .fd = fd, .events = events };
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (http_gone(rq))
			return -ECONNRESET;
		n = poll(&pfd, 1, left > 0.25 ? 250 : (int)(left * 1000) + 1);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_all(struct api_req *rq, int fd, const char *data, size_t len,
		    double deadline)
{
	size_t sent = 0;
	int r;

	while (sent < len) {
		ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);

		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		else if ((r = ready(rq, fd, POLLOUT, deadline)) < 0)
			return r;
	}
	return 0;
}

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* An answer as it arrives: its final head once whole, then its body. */
struct answer {
	struct buf in;			/* what arrived (interim answers dropped) */
	size_t head;			/* the final head's length; 0 until whole */
	size_t scanned;			/* of in, searched for the head's end */
	unsigned status;
	long long length;		/* Content-Length; -1: to the end */
	bool no_body;			/* HEAD, 204, 304 */
	const char *why;		/* why it is no answer to pass on */
};

/* The value of header name in head (its lines after the status line, NUL
 * ended), or NULL; *twice when it comes more than once. */
static const char *head_value(const char *head, const char *name, bool *twice)
{
	const char *found = NULL, *line = strstr(head, "\r\n");
	size_t n = strlen(name);

	*twice = false;
	for (; line; line = strstr(line, "\r\n")) {
		line += 2;
		if (!strncasecmp(line, name, n) && line[n] == ':') {
			*twice = found != NULL;
			found = line + n + 1;
		}
	}
	return found;
}

/* The head that ends at end (a "\r\n\r\n" at in->data + end) arrived:
 * 0, 1 (an interim answer, dropped: read on), or -1 with a->why. */
static int take_head(struct answer *a, size_t end, bool head_request)
{
	char *h = a->in.data, saved = h[end + 2];
	const char *cl, *te;
	bool twice, twice_te;
	char *stop;

	if (strncmp(h, "HTTP/1.", 7) || (h[7] != '0' && h[7] != '1') || h[8] != ' ' ||
	    h[9] < '1' || h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' ||
	    h[11] > '9' || (h[12] != ' ' && h[12] != '\r')) {
		a->why = "the server's answer is not HTTP";
		return -1;
	}
	a->status = (unsigned)((h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0'));
	if (a->status == 101) {
		a->why = "the server switched protocols (a WebSocket?): petri passes HTTP only";
		return -1;
	}
	if (a->status < 200) {	/* 100 Continue, 103 Early Hints: the answer follows */
		buf_consume(&a->in, end + 4);
		a->scanned = 0;
		return 1;
	}
	h[end + 2] = '\0';	/* the head's lines, each ending in "\r\n" */
	cl = head_value(h, "Content-Length", &twice);
	te = head_value(h, "Transfer-Encoding", &twice_te);
	h[end + 2] = saved;
	a->head = end + 4;
	a->length = -1;
	a->no_body = head_request || a->status == 204 || a->status == 304;
	if (te || twice) {
		a->why = "the server framed its answer in a way HTTP/1.0 has not (chunked, or two "
			 "Content-Lengths)";
		return -1;
	}
	if (cl) {
		while (*cl == ' ' || *cl == '\t')
			cl++;
		errno = 0;
		a->length = strtoll(cl, &stop, 10);
		if (stop == cl || errno || a->length < 0 || (*stop != '\r' && *stop != ' ' &&
							     *stop != '\t')) {
			a->why = "the server's answer has a malformed Content-Length";
			return -1;
		}
		if (a->length > (long long)PORT_ANSWER_MAX) {
			a->why = "the server's answer is larger than 16 MiB";
			return -1;
		}
	}
	return 0;
}

/* Is the answer whole?  (a->in past its end is cut off.) */
static bool whole(struct answer *a)
{
	if (!a->head)
		return false;
	if (a->no_body) {
		a->in.len = a->head;
		return true;
	}
	if (a->length >= 0 && a->in.len - a->head >= (size_t)a->length) {
		a->in.len = a->head + (size_t)a->length;
		return true;
	}
	return false;
}

/* Send the request; read the answer into a, until it is whole (its
 * Content-Length) or the server ends it.  0, or -errno (-ETIMEDOUT,
 * -ECONNRESET: the client went; -EPROTO: a->why). */
static int exchange(struct api_req *rq, int fd, const struct buf *head, struct answer *a,
		    double deadline)
{
	bool head_request = !strcmp(rq->method, "HEAD");
	int r, err = 0;
	socklen_t len = sizeof(err);

	if ((r = ready(rq, fd, POLLOUT, deadline)) < 0)
		return r;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		return -(err ? err : errno);
	if ((r = send_all(rq, fd, head->data, head->len, deadline)) < 0 ||
	    (r = send_all(rq, fd, rq->body.data ? rq->body.data : "", rq->body.len,
			  deadline)) < 0)
		return r;
	for (;;) {
		size_t room = PORT_HEAD_MAX + PORT_ANSWER_MAX - a->in.len;
		char *end;
		ssize_t n;

		if (!room) {
			a->why = "the server's answer is larger than 16 MiB";
			return -EPROTO;
		}
		if (buf_reserve(&a->in, 65536) < 0)
			return -ENOMEM;
		n = recv(fd, a->in.data + a->in.len, a->in.cap - a->in.len < room ?
			 a->in.cap - a->in.len : room, 0);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return -errno;
			if ((r = ready(rq, fd, POLLIN, deadline)) < 0)
				return r;
			continue;
		}
		a->in.len += (size_t)n;
		while (!a->head && (end = memmem(a->in.data + a->scanned, a->in.len - a->scanned,
						 "\r\n\r\n", 4))) {
			if ((size_t)(end - a->in.data) + 4 > PORT_HEAD_MAX)
				break;
			if ((r = take_head(a, (size_t)(end - a->in.data), head_request)) < 0)
				return -EPROTO;
		}
		if (!a->head) {
			a->scanned = a->in.len > 3 ? a->in.len - 3 : 0;
			if (a->in.len >= PORT_HEAD_MAX) {
				a->why = "the server's answer has more than 64 KiB of headers";
				return -EPROTO;
			}
		} else if (a->in.len - a->head > PORT_ANSWER_MAX) {
			a->why = "the server's answer is larger than 16 MiB";
			return -EPROTO;
		}
		if (whole(a))
			return 0;
	}
	if (!a->head) {
		a->why = a->in.len ? "the server's answer is not HTTP" :
			 "the server closed the connection without an answer";
		return -EPROTO;
	}
	if (a->length >= 0 && !whole(a)) {
		a->why = "the server's answer was cut short of its Content-Length";
		return -EPROTO;
	}
	return 0;
}

/* The answer's head into resp: its headers that pass (passed_on()), each
 * value checked, trimmed; an empty one dropped.  0, or -1 with why. */
static int answer_headers(struct MHD_Response *resp, char *head, const char **why)
{
	size_t nheaders = 0;
	char *line, *next;

	*why = "the server's answer has a malformed header";
	head[strstr(head, "\r\n\r\n") - head + 2] = '\0';
	for (line = strstr(head, "\r\n") + 2; *line; line = next + 2) {
		char *colon, *value, *end;

		next = strstr(line, "\r\n");
		*next = '\0';
		colon = strchr(line, ':');
		if (!colon || colon == line || ++nheaders > PORT_HEADERS_MAX)
			return -1;
		for (char *c = line; c < colon; c++)
			if (!token_char(*c))
				return -1;
		*colon = '\0';
		for (value = colon + 1; *value == ' ' || *value == '\t'; value++)
			;
		for (end = value; *end; end++)
			if ((unsigned char)*end < 0x20 && *end != '\t')
				return -1;
		while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*value || !passed_on(line) ||
		    (!strcasecmp(line, "Location") && !local_location(value)))
			continue;
		if (MHD_add_response_header(resp, line, value) != MHD_YES)
			return -1;
	}
	/* An origin of its own in a browser: its scripts reach neither petri's
	 * web page nor, through the browser, petri's API. */
	if (MHD_add_response_header(resp, "Content-Security-Policy", "sandbox allow-scripts "
				    "allow-forms allow-popups allow-modals allow-downloads") != MHD_YES)
		return -1;
	*why = NULL;
	return 0;
}

/* The whole answer in a, as the client's (a->in given to it). */
static struct MHD_Response *answer_of(struct api_req *rq, struct answer *a, const char **why)
{
	size_t body = a->in.len - a->head, len;
	char *head = malloc(a->head + 1), *text;
	struct MHD_Response *resp;

	*why = "out of memory";
	if (!head)
		return NULL;
	memcpy(head, a->in.data, a->head);
	head[a->head] = '\0';
	memmove(a->in.data, a->in.data + a->head, body);
	a->in.len = body;
	text = buf_detach(&a->in, &len);
	resp = answers_response(rq->answers, &rq->tenant, text ? text : strdup(""), body);
	if (resp && answer_headers(resp, head, why) < 0) {
		MHD_destroy_response(resp);
		resp = NULL;
	}
	free(head);
	return resp;
}

bool http_is_port(const char *url)
{
	const char *p;

	return !strncmp(url, "/v1/sessions/", 13) && (p = strchr(url + 13, '/')) &&
	       !strncmp(p, "/ports/", 7);
}

enum MHD_Result handle_ports(struct api_req *rq, struct session *s, const char *rest)
{
	const char *path = strchr(rest, '/');
	size_t digits = path ? (size_t)(path - rest) : strlen(rest);
	unsigned long port;
	char prefix[128];

	port = digits && digits <= 5 && strspn(rest, "0123456789") >= digits ?
	       strtoul(rest, NULL, 10) : 0;
	if (port < 1 || port > 65535)
		return http_error(rq, 400, "invalid_request", "a port is a number from 1 to 65535: "
				  "/v1/sessions/{id}/ports/{port}/{path}");
	snprintf(prefix, sizeof(prefix), "/v1/sessions/%s/ports/%lu", session_id(s), port);
	return http_port_request(rq, s, (unsigned short)port, path ? path : "/", prefix);
}

enum MHD_Result http_port_request(struct api_req *rq, struct session *s, unsigned short port,
				  const char *path, const char *prefix)
{
	struct answer a = { .in = BUF_INIT, .length = -1 };
	struct buf head = BUF_INIT;
	struct MHD_Response *resp;
	enum MHD_Result answered;
	char reason[256] = "";
	const char *why;
	enum sm_result r;
	int fd = -1, e;

	if (!session_wait_begin(s))
		return http_error(rq, 429, "over_capacity", "too many requests to sessions' ports "
				  "and reads of commands are waiting already: retry when one "
				  "has ended");
	if (request_head(rq, prefix, path, port, &head) < 0) {
		answered = http_error(rq, 500, "internal", "out of memory");
		goto out;
	}
	r = session_connect(s, port, &fd, reason, sizeof(reason));
	if (r == SM_NO_PROCESS) {
		answered = http_error(rq, 502, "port_closed", "%s", reason);
		goto out;
	}
	if (r != SM_OK) {
		answered = http_session_error(rq, r, reason);
		goto out;
	}
	e = exchange(rq, fd, &head, &a, clock_mono_s() + rq->cfg->http_timeout_s);
	if (e == -ETIMEDOUT)
		answered = http_error(rq, 504, "port_timeout", "the server on port %u did not "
				      "answer within %g s", port, rq->cfg->http_timeout_s);
	else if (e == -ECONNRESET && http_gone(rq))
		answered = MHD_NO;
	else if (e == -ECONNREFUSED)
		answered = http_error(rq, 502, "port_closed", "nothing listens on port %u in the "
				      "sandbox (a server must listen on 127.0.0.1 or 0.0.0.0 "
				      "there)", port);
	else if (e == -EPROTO)
		answered = http_error(rq, 502, "bad_gateway", "%s", a.why);
	else if (e < 0)
		answered = http_error(rq, 502, "bad_gateway", "the server on port %u: %s", port,
				      strerror(-e));
	else if (!(resp = answer_of(rq, &a, &why)))
		answered = http_error(rq, 502, "bad_gateway", "%s", why);
	else
		answered = http_queue(rq, a.status, resp);
out:
	if (fd >= 0)
		close(fd);
	session_wait_end(s);
	buf_release(&head);
	buf_release(&a.in);
	return answered;
}
