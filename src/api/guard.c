/* guard — what a request's headers alone condemn, refused before any body
 * is read (docs/security.md, "The browser is an attacker too").
 *
 *   framing   two Content-Length headers, or one with Transfer-Encoding:
 *             a proxy in front may frame the request otherwise than we do
 *             (request smuggling): 400.
 *   Host      a browser page reaches a loopback server under a name of its
 *             own after DNS rebinding; it cannot choose the Host header,
 *             which names the page's host: 403 unless it is a name the
 *             server answers to.
 *   Origin    a page of another origin can send a "simple" POST (text/plain)
 *             that the browser does not preflight: 403 unless the Origin is
 *             the server's own or configured.  No Origin (curl, SDKs): fine.
 *             The web page's files under /ui/ (GET, HEAD) are served to any
 *             Origin: the result frames ask for theirs with Origin: null.
 *   Content-Type  a JSON route takes only application/json bodies, which a
 *             browser never sends cross-origin without a preflight: 415. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/http.h"

struct framing {
	unsigned content_length;
	unsigned transfer_encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct framing *f = cls;

	(void)kind;
	(void)value;
	if (!strcasecmp(key, "Content-Length"))
		f->content_length++;
	else if (!strcasecmp(key, "Transfer-Encoding"))
		f->transfer_encoding++;
	return MHD_YES;
}

static const char *header(struct api_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

static enum MHD_Result refuse(struct api_req *rq, unsigned status, const char *code,
			      const char *msg)
{
	if (!strcmp(rq->url, "/mcp"))
		return mcp_http_refuse(rq, status, msg);
	return http_error(rq, status, code, "%s", msg);
}

/* The host of "host", "host:port", "[v6]" or "[v6]:port", into out
 * (brackets dropped, lower case).  false if it does not fit. */
static bool host_part(const char *hostport, size_t n, char *out, size_t outlen)
{
	size_t len;

	if (n && hostport[0] == '[') {
		const char *close = memchr(hostport, ']', n);

		if (!close)
			return false;
		hostport++;
		len = (size_t)(close - hostport);
	} else {
		const char *colon = memchr(hostport, ':', n);

		len = colon ? (size_t)(colon - hostport) : n;
	}
	if (len == 0 || len >= outlen)
		return false;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)(hostport[i] >= 'A' && hostport[i] <= 'Z' ? hostport[i] + 32 :
				hostport[i]);
	out[len] = '\0';
	return true;
}

/* Names the server answers to: the configured list, else the loopback
 * names and the address it listens on.  listen_host "*": any (a wildcard
 * or unix listener, which browsers cannot rebind to a loopback). */
static bool host_allowed(struct api_req *rq, const char *host, const char *listen_host)
{
	static const char *const loopback[] = { "localhost", "127.0.0.1", "::1", NULL };
	const struct petri_config *cfg = rq->cfg;

	if (cfg->nallowed_hosts) {
		for (size_t i = 0; i < cfg->nallowed_hosts; i++)
			if (!strcmp(cfg->allowed_hosts[i], "*") ||
			    !strcasecmp(cfg->allowed_hosts[i], host))
				return true;
		return false;
	}
	if (!strcmp(listen_host, "*") || !strcasecmp(listen_host, host))
		return true;
	for (size_t i = 0; loopback[i]; i++)
		if (!strcmp(loopback[i], host))
			return true;
	return false;
}

/* Same origin: scheme http or https, and the authority is the Host the
 * request was sent to.  Else one of allowed_origins, exactly. */
static bool origin_allowed(struct api_req *rq, const char *origin, const char *host_header)
{
	const char *auth = NULL;

	for (size_t i = 0; i < rq->cfg->nallowed_origins; i++)
		if (!strcasecmp(rq->cfg->allowed_origins[i], origin))
			return true;
	if (!strncasecmp(origin, "http://", 7))
		auth = origin + 7;
	else if (!strncasecmp(origin, "https://", 8))
		auth = origin + 8;
	return auth && host_header && !strcasecmp(auth, host_header);
}

static bool is_json_type(const char *ctype)
{
	size_t n;

	if (!ctype)
		return false;
	n = strcspn(ctype, "; \t");
	return n == 16 && !strncasecmp(ctype, "application/json", 16);
}

/* The web page's files under /ui/ hold no data and run nothing on the
 * server: the result frames, opaque origins, ask for their page and
 * scripts with "Origin: null" (src/api/web.c).  Only to read them. */
static bool static_file(struct api_req *rq)
{
	return !strncmp(rq->url, "/ui/", 4) && web_is_asset(rq->url) &&
	       (!strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD"));
}

bool guard_request(struct api_req *rq, const char *listen_host, enum MHD_Result *answered)
{
	struct framing f = { 0, 0 };
	const char *host = header(rq, "Host"), *origin = header(rq, "Origin");
	const char *cl = header(rq, "Content-Length");
	char name[256];
	bool has_body;

	MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, count_framing, &f);
	if (f.content_length > 1 || (f.content_length && f.transfer_encoding) ||
	    f.transfer_encoding > 1) {
		*answered = refuse(rq, 400, "bad_framing", "Bad Request: send one Content-Length "
				   "or one Transfer-Encoding, never both or two");
		return false;
	}
	/* /healthz and /readyz answer load balancers and probes, whatever
	 * they call us. */
	if (http_is_probe(rq->url))
		return true;
	/* A Host naming a sandbox's server (E2B's getHost()) is not this
	 * server's name, and needs none: that sandbox's token opens it, which
	 * a page rebinding a name of its own to us does not have. */
	if (host && !rq->e2b_port_host && (!host_part(host, strlen(host), name, sizeof(name)) ||
					   !host_allowed(rq, name, listen_host))) {
		*answered = refuse(rq, 403, "forbidden_host", "Forbidden: this server does not "
				   "answer to that Host name (configure allowed_hosts)");
		return false;
	}
	if (origin && !static_file(rq) && !origin_allowed(rq, origin, host)) {
		*answered = refuse(rq, 403, "forbidden_origin", "Forbidden: requests from this "
				   "Origin are refused (configure allowed_origins)");
		return false;
	}
	has_body = f.transfer_encoding || (cl && strtoull(cl, NULL, 10) > 0);
	if (has_body && !rq->raw_upload && !rq->opaque_body &&
	    !is_json_type(header(rq, "Content-Type"))) {
		*answered = refuse(rq, 415, "unsupported_media_type", "Unsupported Media Type: "
				   "send Content-Type: application/json");
		return false;
	}
	return true;
}
