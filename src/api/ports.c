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
 * its headers but the hop's and its cookies, and its body, at most
 * PORT_ANSWER_MAX bytes; with a Content-Security-Policy that makes what it
 * serves an origin of its own in a browser (it could otherwise script
 * petri's web page, or its API).
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

/* Headers of one hop, never passed on (RFC 9110 7.6.1), and petri's own. */
static bool hop_header(const char *name)
{
	static const char *const hop[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Host", "Expect", "Authorization", "X-API-Key", "Cookie",
		"Set-Cookie", "Set-Cookie2",
		/* E2B's: the sandbox's tokens, and where it is */
		"X-Access-Token", "E2B-Traffic-Access-Token", "E2b-Sandbox-Id", "E2b-Sandbox-Port",
		NULL
	};

	for (size_t i = 0; hop[i]; i++)
		if (!strcasecmp(name, hop[i]))
			return true;
	return false;
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
	if (!hop_header(key) && buf_appendf(t->b, "%s: %s\r\n", key, value ? value : "") < 0)
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

/* The request as the sandbox's server gets it. */
static int request_text(struct api_req *rq, const char *prefix, const char *path,
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
	    buf_appendf(b, "Connection: close\r\nContent-Length: %zu\r\n\r\n", rq->body.len) < 0 ||
	    buf_append(b, rq->body.data ? rq->body.data : "", rq->body.len) < 0)
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

/* Send the request, read the whole answer into in (head and body, at most
 * PORT_HEAD_MAX + PORT_ANSWER_MAX). */
static int exchange(struct api_req *rq, int fd, const struct buf *out, struct buf *in,
		    double deadline)
{
	size_t sent = 0;
	int r, err = 0;
	socklen_t len = sizeof(err);

	if ((r = ready(rq, fd, POLLOUT, deadline)) < 0)
		return r;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		return -(err ? err : errno);
	while (sent < out->len) {
		ssize_t n = send(fd, out->data + sent, out->len - sent, MSG_NOSIGNAL);

		if (n > 0) {
			sent += (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			return -errno;
		} else if ((r = ready(rq, fd, POLLOUT, deadline)) < 0) {
			return r;
		}
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t n;

		if (in->len >= PORT_HEAD_MAX + PORT_ANSWER_MAX)
			return -EFBIG;
		if (buf_reserve(in, 65536) < 0)
			return -ENOMEM;
		n = recv(fd, in->data + in->len, in->cap - in->len < PORT_HEAD_MAX + PORT_ANSWER_MAX - in->len ?
			 in->cap - in->len : PORT_HEAD_MAX + PORT_ANSWER_MAX - in->len, 0);
		if (n > 0)
			in->len += (size_t)n;
		else if (n == 0)
			return 0;
		else if (errno != EAGAIN && errno != EINTR)
			return -errno;
		else if ((r = ready(rq, fd, POLLIN, deadline)) < 0)
			return r;
	}
}

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The answer in in (head, then body) as the client's: NULL when it is not
 * HTTP, with why. */
static struct MHD_Response *answer_of(struct api_req *rq, struct buf *in, unsigned *status,
				      const char **why)
{
	char *end = in->len ? memmem(in->data, in->len, "\r\n\r\n", 4) : NULL, *line, *next;
	struct MHD_Response *resp;
	size_t head, body, nheaders = 0;
	char *copy;

	*why = "the server's answer is not HTTP";
	if ((end && (size_t)(end - in->data) + 4 > PORT_HEAD_MAX) ||
	    (!end && in->len >= PORT_HEAD_MAX))
		*why = "the server's answer has more than 64 KiB of headers";
	if (!end || (size_t)(end - in->data) + 4 > PORT_HEAD_MAX)
		return NULL;
	head = (size_t)(end - in->data) + 4;
	body = in->len - head;
	if (body > PORT_ANSWER_MAX) {
		*why = "the server's answer is larger than 16 MiB";
		return NULL;
	}
	*end = '\0';
	if (strncmp(in->data, "HTTP/1.", 7) || (in->data[7] != '0' && in->data[7] != '1') ||
	    in->data[8] != ' ' || in->data[9] < '1' || in->data[9] > '5' ||
	    in->data[10] < '0' || in->data[10] > '9' || in->data[11] < '0' ||
	    in->data[11] > '9' || (in->data[12] != ' ' && in->data[12] != '\r'))
		return NULL;
	*status = (unsigned)((in->data[9] - '0') * 100 + (in->data[10] - '0') * 10 +
			     (in->data[11] - '0'));
	if (!(copy = malloc(body ? body : 1)))
		return NULL;
	memcpy(copy, in->data + head, body);
	if (!(resp = answers_response(rq->answers, &rq->tenant, copy, body)))
		return NULL;
	for (line = strstr(in->data, "\r\n"); line; line = next) {
		char *colon, *value;

		line += 2;
		next = strstr(line, "\r\n");
		if (next)
			*next = '\0';
		colon = strchr(line, ':');
		if (!colon || colon == line || ++nheaders > PORT_HEADERS_MAX)
			goto bad;
		for (char *c = line; c < colon; c++)
			if (!token_char(*c))
				goto bad;
		*colon = '\0';
		for (value = colon + 1; *value == ' ' || *value == '\t'; value++)
			;
		for (char *c = value; *c; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				goto bad;
		if (!hop_header(line) && strcasecmp(line, "Content-Security-Policy") &&
		    MHD_add_response_header(resp, line, value) != MHD_YES)
			goto bad;
	}
	/* An origin of its own in a browser: its scripts reach neither petri's
	 * web page nor, through the browser, petri's API. */
	if (MHD_add_response_header(resp, "Content-Security-Policy", "sandbox allow-scripts "
				    "allow-forms allow-popups allow-modals allow-downloads") != MHD_YES)
		goto bad;
	*why = NULL;
	return resp;
bad:
	*why = "the server's answer has a malformed header";
	MHD_destroy_response(resp);
	return NULL;
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
	char reason[256] = "";
	struct buf out = BUF_INIT, in = BUF_INIT;
	struct MHD_Response *resp = NULL;
	enum MHD_Result answered;
	unsigned status = 0;
	const char *why;
	enum sm_result r;
	int fd = -1, e;

	if (request_text(rq, prefix, path, port, &out) < 0) {
		buf_release(&out);
		return http_error(rq, 500, "internal", "out of memory");
	}
	if (!session_wait_begin(s)) {
		buf_release(&out);
		return http_error(rq, 429, "over_capacity", "too many requests to sessions' ports "
				  "and reads of commands are waiting already: retry when one "
				  "has ended");
	}
	r = session_connect(s, port, &fd, reason, sizeof(reason));
	if (r == SM_NO_PROCESS) {
		answered = http_error(rq, 502, "port_closed", "%s", reason);
	} else if (r != SM_OK) {
		answered = http_session_error(rq, r, reason);
	} else if ((e = exchange(rq, fd, &out, &in, clock_mono_s() + rq->cfg->http_timeout_s)) ==
		   -ETIMEDOUT) {
		answered = http_error(rq, 504, "port_timeout", "the server on port %u did not "
				      "answer within %g s", port, rq->cfg->http_timeout_s);
	} else if (e == -ECONNRESET && http_gone(rq)) {
		answered = MHD_NO;
	} else if (e == -ECONNREFUSED) {
		answered = http_error(rq, 502, "port_closed", "nothing listens on port %u in the "
				      "sandbox (a server must listen on 127.0.0.1 or 0.0.0.0 "
				      "there)", port);
	} else if (e == -EFBIG) {
		answered = http_error(rq, 502, "bad_gateway", "the server's answer is larger than "
				      "16 MiB");
	} else if (e < 0) {
		answered = http_error(rq, 502, "bad_gateway", "the server on port %u: %s", port,
				      strerror(-e));
	} else if (!(resp = answer_of(rq, &in, &status, &why))) {
		answered = http_error(rq, 502, "bad_gateway", "%s", why);
	} else {
		answered = http_queue(rq, status, resp);
	}
	if (fd >= 0)
		close(fd);
	session_wait_end(s);
	buf_release(&out);
	buf_release(&in);
	return answered;
}
