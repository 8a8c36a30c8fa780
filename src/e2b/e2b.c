/* The E2B front end: routing, tokens, the registry of E2B sandboxes and the
 * control plane (e2b.h, docs/e2b.md).  The data plane is e2b_envd.c and
 * e2b_code.c. */
#include "e2b/e2b.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "exec/languages.h"
#include "util/base64.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/num.h"
#include "util/timefmt.h"

#define PREFIX "/e2b"			/* an optional path prefix of every route */
#define METADATA_MAX (16u << 10)	/* bytes of a sandbox's metadata, as JSON */
#define TEMPLATE_DEFAULT "code-interpreter-v1"

/* Templates are images in E2B; petri has one sandbox, which is both. */
static const char *const templates[] = { "base", TEMPLATE_DEFAULT, NULL };

struct e2b_sandbox {
	char sid[SESSION_ID_LEN + 1];
	char token[E2B_TOKEN_LEN + 1];
	char template_id[32];
	int key_index;			/* the API key that made it: its data
					 * plane's requests are that key's */
	json_t *metadata;		/* an object */
	double sampled_at;		/* monotonic, of the last metrics asked for */
	uint64_t sampled_cpu_ns;	/* the sandbox's CPU time then */
	struct e2b_context contexts[E2B_CONTEXTS_MAX];
	size_t ncontexts;
};

/* A sandbox that ended, remembered for a while so that a client that holds
 * its token hears 502 (gone) rather than 401 (wrong token): E2B's SDKs
 * tell a killed sandbox from a dropped connection by that.  Only the
 * holder of the token learns anything from it. */
#define ENDED_MAX 1024			/* sandboxes remembered, the newest */
#define ENDED_KEEP_S 3600.0		/* for at most this long */

struct e2b_ended {
	char sid[SESSION_ID_LEN + 1];
	char token[E2B_TOKEN_LEN + 1];
	double at;			/* monotonic; 0: an empty slot */
};

struct e2b {
	pthread_mutex_t lock;
	struct e2b_sandbox **v;
	size_t n, cap;
	struct e2b_ended ended[ENDED_MAX];	/* a ring */
	size_t ended_next;
};

int e2b_new(struct e2b **out)
{
	struct e2b *e = calloc(1, sizeof(*e));

	*out = e;
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	return 0;
}

static void sandbox_free(struct e2b_sandbox *b)
{
	json_decref(b->metadata);
	free(b);
}

void e2b_free(struct e2b *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		sandbox_free(e->v[i]);
	free(e->v);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/* ---- the registry (e->lock held) ----------------------------------------- */

static ssize_t find(struct e2b *e, const char *sid)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->v[i]->sid, sid))
			return (ssize_t)i;
	return -1;
}

static void drop(struct e2b *e, size_t i)
{
	struct e2b_ended *d = &e->ended[e->ended_next++ % ENDED_MAX];

	memcpy(d->sid, e->v[i]->sid, sizeof(d->sid));
	memcpy(d->token, e->v[i]->token, sizeof(d->token));
	d->at = clock_mono_s();
	sandbox_free(e->v[i]);
	e->v[i] = e->v[--e->n];
}

static int add(struct e2b *e, struct e2b_sandbox *b)
{
	int r = 0;

	pthread_mutex_lock(&e->lock);
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		struct e2b_sandbox **v = realloc(e->v, cap * sizeof(*v));

		if (v) {
			e->v = v;
			e->cap = cap;
		} else {
			r = -ENOMEM;
		}
	}
	if (r == 0)
		e->v[e->n++] = b;
	pthread_mutex_unlock(&e->lock);
	return r;
}

static void forget(struct e2b *e, const char *sid)
{
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0)
		drop(e, (size_t)i);
	pthread_mutex_unlock(&e->lock);
}

/* The ids of every sandbox the registry holds, into *out (free it): their
 * count, or -ENOMEM. */
typedef char sandbox_id[SESSION_ID_LEN + 1];

static ssize_t ids_of(struct e2b *e, sandbox_id **out)
{
	ssize_t n;

	pthread_mutex_lock(&e->lock);
	n = (ssize_t)e->n;
	*out = malloc((e->n ? e->n : 1) * sizeof(**out));
	for (size_t i = 0; *out && i < e->n; i++)
		memcpy((*out)[i], e->v[i]->sid, sizeof(sandbox_id));
	pthread_mutex_unlock(&e->lock);
	return *out ? n : -ENOMEM;
}

/* Forget the sandboxes whose sessions ended (deleted through the native
 * API, expired, died): the registry never holds more than the live
 * sessions and those of the last sweep.  The sessions are looked at with
 * the registry's lock dropped: it is a leaf (e2b.h). */
static void sweep(struct e2b *e, struct smgr *sm)
{
	sandbox_id *ids;
	ssize_t n = ids_of(e, &ids);

	for (ssize_t i = 0; i < n; i++) {
		struct session *s;
		char why[8];
		bool ended = true;

		if (smgr_lookup(sm, ids[i], &s, why, sizeof(why)) == SM_OK) {
			ended = session_ended(s);
			session_put(s);
		}
		if (ended)
			forget(e, ids[i]);
	}
	free(ids);
}

/* Is token the sandbox sid's?  Then *key_index is the key that made it.
 * Unknown ids and wrong tokens alike: false. */
static bool token_ok(struct e2b *e, const char *sid, const char *token, int *key_index)
{
	ssize_t i;
	bool ok = false;

	if (!token)
		return false;
	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0 && (ok = http_same_secret(token, e->v[i]->token)))
		*key_index = e->v[i]->key_index;
	pthread_mutex_unlock(&e->lock);
	return ok;
}

/* Was token that of sid, a sandbox that ended within ENDED_KEEP_S? */
static bool token_ended(struct e2b *e, const char *sid, const char *token)
{
	double now = clock_mono_s();
	bool ended = false;

	if (!token)
		return false;
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < ENDED_MAX && !ended; i++)
		ended = e->ended[i].at > 0 && now - e->ended[i].at < ENDED_KEEP_S &&
			!strcmp(e->ended[i].sid, sid) && http_same_secret(token, e->ended[i].token);
	pthread_mutex_unlock(&e->lock);
	return ended;
}

/* ---- contexts ----------------------------------------------------------- */

int e2b_context_add(struct e2b *e, const char *sid, const char *language, const char *cwd,
		    struct e2b_context *out)
{
	struct e2b_context c = { .is_default = false };
	ssize_t i;
	int r = 0;

	snprintf(c.language, sizeof(c.language), "%s", language);
	snprintf(c.cwd, sizeof(c.cwd), "%s", cwd);
	if (id_random_hex(c.id, 32) < 0)
		return -EIO;
	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) < 0)
		r = -ENOENT;
	else if (e->v[i]->ncontexts >= E2B_CONTEXTS_MAX)
		r = -ENOSPC;
	else
		e->v[i]->contexts[e->v[i]->ncontexts++] = c;
	pthread_mutex_unlock(&e->lock);
	if (r == 0)
		*out = c;
	return r;
}

static struct e2b_context *context_find(struct e2b_sandbox *b, const char *id)
{
	for (size_t i = 0; i < b->ncontexts; i++)
		if (!strcmp(b->contexts[i].id, id))
			return &b->contexts[i];
	return NULL;
}

int e2b_context_get(struct e2b *e, const char *sid, const char *id, struct e2b_context *out)
{
	struct e2b_context *c = NULL;
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0 && (c = context_find(e->v[i], id)))
		*out = *c;
	pthread_mutex_unlock(&e->lock);
	return c ? 0 : -ENOENT;
}

void e2b_context_ran(struct e2b *e, const char *sid, const char *id, bool was_fresh)
{
	struct e2b_context *c;
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0 && (c = context_find(e->v[i], id))) {
		c->executions++;
		if (was_fresh)
			c->fresh = false;
	}
	pthread_mutex_unlock(&e->lock);
}

int e2b_context_remove(struct e2b *e, const char *sid, const char *id)
{
	struct e2b_context *c = NULL;
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0 && (c = context_find(e->v[i], id)) && !c->is_default) {
		struct e2b_sandbox *b = e->v[i];

		*c = b->contexts[--b->ncontexts];
	} else {
		c = NULL;
	}
	pthread_mutex_unlock(&e->lock);
	return c ? 0 : -ENOENT;
}

int e2b_context_restart(struct e2b *e, const char *sid, const char *id)
{
	struct e2b_context *c = NULL;
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if ((i = find(e, sid)) >= 0 && (c = context_find(e->v[i], id)))
		c->fresh = true;
	pthread_mutex_unlock(&e->lock);
	return c ? 0 : -ENOENT;
}

json_t *e2b_context_list(struct e2b *e, const char *sid)
{
	json_t *list = json_array();
	ssize_t i;

	pthread_mutex_lock(&e->lock);
	if (list && (i = find(e, sid)) >= 0)
		for (size_t k = 0; k < e->v[i]->ncontexts; k++) {
			const struct e2b_context *c = &e->v[i]->contexts[k];

			json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "id", c->id,
							      "language", c->language, "cwd",
							      c->cwd));
		}
	pthread_mutex_unlock(&e->lock);
	return list;
}

/* ---- answers ------------------------------------------------------------ */

enum MHD_Result e2b_error(struct api_req *rq, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* http_error() answers an E2B request in E2B's words, {"code": status,
	 * "message"}, with what every error gets: the message made valid
	 * UTF-8 (it may quote a path or an id the client sent), Retry-After on
	 * 429 and 503, the reject metrics. */
	return http_error(rq, status, "e2b", "%s", msg);
}

static enum MHD_Result session_error(struct api_req *rq, enum sm_result r, const char *reason,
				     const char *sid)
{
	int status;

	if (r == SM_NOT_FOUND || r == SM_GONE)
		return e2b_error(rq, 404, "sandbox %.64s not found%s%s", sid,
				 reason && *reason ? ": " : "", reason ? reason : "");
	/* 429 carries an integer Retry-After, which the SDK waits and retries. */
	http_sm_code(r, &status);
	return e2b_error(rq, (unsigned)status, "%s", http_sm_message(r, reason));
}

/* ---- paths -------------------------------------------------------------- */

const char *e2b_route_path(const struct api_req *rq, char *buf, size_t len)
{
	const char *p = rq->url;

	if (!strncmp(p, PREFIX "/", sizeof(PREFIX)) || !strcmp(p, PREFIX))
		p += sizeof(PREFIX) - 1;
	snprintf(buf, len, "%s", *p ? p : "/");
	return buf;
}

bool e2b_in_home(const char *path)
{
	size_t n = sizeof(E2B_HOME) - 1;

	return !strncmp(path, E2B_HOME, n) && (path[n] == '\0' || path[n] == '/');
}

void e2b_sdk_path(const char *rel, char *out, size_t len)
{
	if (rel[0] == '/')	/* on another filesystem of the sandbox's: as it is */
		snprintf(out, len, "%s", rel);
	else
		snprintf(out, len, "%s%s%s", E2B_HOME, *rel ? "/" : "", rel);
}

/* ---- what a request is ------------------------------------------------------ */

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static const char *query(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

static bool is_control_path(const char *p)
{
	if (!strncmp(p, PREFIX "/", sizeof(PREFIX)))
		p += sizeof(PREFIX) - 1;
	if (!strncmp(p, "/v2/", 4))
		p += 3;
	return !strcmp(p, "/sandboxes") || !strncmp(p, "/sandboxes/", 11) ||
	       !strcmp(p, "/snapshots") || !strncmp(p, "/templates", 10) ||
	       !strncmp(p, "/volumes", 8);
}

/* e2b 2.14 sends envd's REST calls (/health, /files) with X-Access-Token
 * but without the E2b-Sandbox-* headers (its Connect calls have them):
 * there the token alone names the sandbox. */
static bool is_envd_rest_path(const char *p)
{
	if (!strncmp(p, PREFIX "/", sizeof(PREFIX)))
		p += sizeof(PREFIX) - 1;
	return !strcmp(p, "/health") || !strcmp(p, "/files");
}

/* A Host that getHost() names: "PORT-SANDBOXID.DOMAIN[:N]", with the port
 * (1 to 65535) and the sandbox's id (a session's: "ses_...") into sid
 * (SESSION_ID_LEN + 1 bytes). */
static bool port_host(const char *host, uint32_t *port, char *sid)
{
	const char *dash = host ? strchr(host, '-') : NULL, *dot;
	char digits[6];

	if (!dash || dash == host || dash - host > 5)
		return false;
	memcpy(digits, host, (size_t)(dash - host));
	digits[dash - host] = '\0';
	dot = strchr(dash + 1, '.');
	if (!num_u32(digits, 1, 65535, port) || !dot || (size_t)(dot - dash - 1) > SESSION_ID_LEN ||
	    strncmp(dash + 1, "ses_", 4))
		return false;
	memcpy(sid, dash + 1, (size_t)(dot - dash - 1));
	sid[dot - dash - 1] = '\0';
	return true;
}

/* The sandbox a data-plane request is for: its E2b-Sandbox-Id, or the one
 * whose token it brings (each token compared in constant time), into sid
 * (at least SESSION_ID_LEN + 1 bytes); false when neither. */
static bool data_sid(struct api_req *rq, char *sid)
{
	const char *id = header(rq->conn, "E2b-Sandbox-Id");
	const char *token = header(rq->conn, "X-Access-Token");
	bool found = false;
	uint32_t port;

	if (rq->e2b_port_host)
		return port_host(header(rq->conn, "Host"), &port, sid);
	if (id) {
		if (strlen(id) > SESSION_ID_LEN)
			return false;
		memcpy(sid, id, strlen(id) + 1);
		return true;
	}
	if (!token)
		return false;
	pthread_mutex_lock(&rq->e2b->lock);
	for (size_t i = 0; i < rq->e2b->n; i++)
		if (http_same_secret(token, rq->e2b->v[i]->token) && !found) {
			memcpy(sid, rq->e2b->v[i]->sid, SESSION_ID_LEN + 1);
			found = true;
		}
	pthread_mutex_unlock(&rq->e2b->lock);
	return found;
}

/* The native API's routes: theirs whatever E2B headers come with them, so
 * that its key guards them (a sandbox's token, or a data-plane port petri
 * does not serve, must not open /metrics). */
static bool is_native_path(const char *p)
{
	return http_is_probe(p) || !strcmp(p, "/metrics") || !strcmp(p, "/mcp") ||
	       !strcmp(p, "/v1") || !strncmp(p, "/v1/", 4);
}

enum e2b_kind e2b_kind_of(struct MHD_Connection *conn, const char *url, bool *by_host)
{
	const char *port = header(conn, "E2b-Sandbox-Port");
	char sid[SESSION_ID_LEN + 1];
	uint32_t n;

	*by_host = port_host(header(conn, "Host"), &n, sid);
	if (*by_host)
		return E2B_PORT;
	if (is_native_path(url))
		return E2B_NONE;
	if (!header(conn, "E2b-Sandbox-Id") && (header(conn, "X-Access-Token") ||
						 query(conn, "signature")) &&
	    is_envd_rest_path(url))
		return E2B_ENVD;
	if (header(conn, "E2b-Sandbox-Id")) {
		if (!port || !num_u32(port, 1, 65535, &n))
			return E2B_BAD_PORT;
		return n == E2B_ENVD_PORT ? E2B_ENVD : n == E2B_CODE_PORT ? E2B_CODE : E2B_PORT;
	}
	return is_control_path(url) ? E2B_CONTROL : E2B_NONE;
}

/* ---- signed file URLs ------------------------------------------------------ */

/* An optional query argument of whole seconds since the epoch into *out;
 * false when it is there and is not one. */
static bool epoch_arg(struct api_req *rq, const char *name, long long *out)
{
	const char *v = query(rq->conn, name);
	char *end;

	if (!v)
		return true;
	errno = 0;
	*out = strtoll(v, &end, 10);
	return !errno && end != v && !*end;
}

/* Is sig what E2B's SDKs put in a file URL (downloadUrl, uploadUrl) for the
 * sandbox whose token is token: "v1_" and the unpadded base64 of the
 * SHA-256 of "path:operation:user:token[:expiration]"? */
static bool signature_is(const char *sig, const char *path, const char *operation,
			 const char *user, const char *token, const char *expiration)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	char *text = NULL, *b64 = NULL;
	bool ok = false;
	int n;

	n = expiration ? asprintf(&text, "%s:%s:%s:%s:%s", path, operation, user, token,
				  expiration) :
			 asprintf(&text, "%s:%s:%s:%s", path, operation, user, token);
	if (n >= 0 && EVP_Digest(text, (size_t)n, digest, &dlen, EVP_sha256(), NULL) == 1 &&
	    (b64 = base64_encode(digest, dlen, NULL))) {
		b64[strcspn(b64, "=")] = '\0';
		ok = !strncmp(sig, "v1_", 3) && http_same_secret(sig + 3, b64);
	}
	if (n >= 0)
		free(text);
	free(b64);
	return ok;
}

/* GET or POST /files?path=&signature=[&signature_expiration=&username=]
 * without a token: the sandbox is the one whose token signed it (each
 * sandbox's token tried: as many hashes as there are sandboxes).  True
 * with rq->e2b_sid and the key set; else answered (401). */
static bool signed_request(struct api_req *rq, enum MHD_Result *answered)
{
	const char *sig = query(rq->conn, "signature"), *path = query(rq->conn, "path");
	const char *user = query(rq->conn, "username"), *exp = query(rq->conn, "signature_expiration");
	const char *operation = !strcmp(rq->method, "GET") ? "read" : "write";
	struct e2b *e = rq->e2b;
	struct { sandbox_id sid; char token[E2B_TOKEN_LEN + 1]; int key; } *v = NULL;
	size_t n = 0;
	ssize_t found = -1;
	long long until = 0;

	pthread_mutex_lock(&e->lock);
	if (e->n && (v = calloc(e->n, sizeof(*v))))
		for (n = 0; n < e->n; n++) {
			memcpy(v[n].sid, e->v[n]->sid, sizeof(v[n].sid));
			memcpy(v[n].token, e->v[n]->token, sizeof(v[n].token));
			v[n].key = e->v[n]->key_index;
		}
	pthread_mutex_unlock(&e->lock);
	for (size_t i = 0; path && (!strcmp(rq->method, "GET") || !strcmp(rq->method, "POST")) &&
			   i < n && found < 0; i++)
		if (signature_is(sig, path, operation, user ? user : "", v[i].token, exp))
			found = (ssize_t)i;
	if (found >= 0) {
		memcpy(rq->e2b_sid, v[found].sid, sizeof(v[found].sid));
		rq->key_index = v[found].key;
	}
	explicit_bzero(v, n * sizeof(*v));
	free(v);
	if (found < 0) {
		metrics_inc(M_REJECT_AUTH);
		*answered = e2b_error(rq, 401, "invalid signature");
		return false;
	}
	if (!epoch_arg(rq, "signature_expiration", &until) ||
	    (exp && until < (long long)clock_wall_s())) {
		metrics_inc(M_REJECT_AUTH);
		*answered = e2b_error(rq, 401, "signature is already expired");
		return false;
	}
	return true;
}

bool e2b_authorize(struct api_req *rq, enum MHD_Result *answered)
{
	const char *key, *token = header(rq->conn, "X-Access-Token");
	const char *traffic = header(rq->conn, "E2B-Traffic-Access-Token");

	if (rq->e2b_kind == E2B_CONTROL) {
		/* X-API-KEY as the SDKs send it, or the native API's Bearer. */
		key = header(rq->conn, "X-API-KEY");
		if (!key) {
			const char *a = header(rq->conn, "Authorization");

			key = a && !strncasecmp(a, "Bearer ", 7) ? a + 7 : NULL;
		}
		if (http_key_find(rq->cfg, key, &rq->key_index))
			return true;
		metrics_inc(M_REJECT_AUTH);
		*answered = e2b_error(rq, 401, "a valid API key is required (E2B_API_KEY, sent "
				      "as X-API-KEY)");
		return false;
	}
	if (rq->e2b_kind == E2B_BAD_PORT) {
		/* Nothing to authorize it for: answered now, before its body. */
		const char *port = header(rq->conn, "E2b-Sandbox-Port");

		metrics_inc(M_REJECT_NOT_FOUND);
		*answered = e2b_error(rq, 404, "E2b-Sandbox-Port must be a port, a number from 1 "
				      "to 65535, not %.10s", port ? port : "(none)");
		return false;
	}
	if (rq->e2b_kind != E2B_PORT && !header(rq->conn, "E2b-Sandbox-Id") && !token &&
	    query(rq->conn, "signature"))
		return signed_request(rq, answered);
	/* The sandbox is named here, once: the body may take long to come, and
	 * by then the token may name no sandbox (killed), not another. */
	if (data_sid(rq, rq->e2b_sid) &&
	    (token_ok(rq->e2b, rq->e2b_sid, token, &rq->key_index) ||
	     token_ok(rq->e2b, rq->e2b_sid, traffic, &rq->key_index)))
		return true;
	if (*rq->e2b_sid && (token_ended(rq->e2b, rq->e2b_sid, token) ||
			     token_ended(rq->e2b, rq->e2b_sid, traffic))) {
		/* 502: what the SDKs read as a sandbox killed or timed out */
		metrics_inc(M_REJECT_NOT_FOUND);
		*answered = e2b_error(rq, 502, "the sandbox %s was killed or reached its end of "
				      "life", rq->e2b_sid);
		return false;
	}
	metrics_inc(M_REJECT_AUTH);
	*answered = e2b_error(rq, 401, "this sandbox does not exist or the access token is "
			      "wrong (X-Access-Token)");
	return false;
}

/* ---- the control plane -------------------------------------------------------- */

static json_t *time_json(double t)
{
	char s[TIMEFMT_LEN];

	return json_string(timefmt_rfc3339(t, s));
}

/* A sandbox as create, connect, info and list describe it. */
static json_t *sandbox_json(struct api_req *rq, struct session *s, bool tokens)
{
	const struct petri_limits *l = session_limits(s);
	char template_id[32] = TEMPLATE_DEFAULT, token[E2B_TOKEN_LEN + 1] = "";
	double created, used, idle, life;
	json_t *meta = NULL, *j;
	ssize_t i;

	pthread_mutex_lock(&rq->e2b->lock);
	if ((i = find(rq->e2b, session_id(s))) >= 0) {
		snprintf(template_id, sizeof(template_id), "%s", rq->e2b->v[i]->template_id);
		snprintf(token, sizeof(token), "%s", rq->e2b->v[i]->token);
		meta = json_deep_copy(rq->e2b->v[i]->metadata);
	}
	pthread_mutex_unlock(&rq->e2b->lock);
	session_times(s, &created, &used, &idle, &life);
	j = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:i, s:i, s:i, s:o, s:n}",
		      "sandboxID", session_id(s), "templateID", template_id, "clientID", "petri",
		      "envdVersion", E2B_ENVD_VERSION, "startedAt", time_json(created),
		      "endAt", time_json(created + life), "state", "running",
		      "cpuCount", (int)ceil(l->cpu), "memoryMB", (int)l->memory_mb,
		      "diskSizeMB", (int)l->disk_mb, "metadata", meta ? meta : json_object(),
		      "domain");
	if (j && tokens) {
		json_object_set_new(j, "envdAccessToken", json_string(token));
		json_object_set_new(j, "trafficAccessToken", json_string(token));
	}
	return j;
}

/* A timeout in seconds (the SDKs send integers), from 1 to the most a
 * session may live. */
static bool timeout_arg(struct api_req *rq, json_t *body, double *out, enum MHD_Result *answered)
{
	json_t *t = json_object_get(body, "timeout");

	if (!t || json_is_null(t))
		return true;
	if (!json_is_number(t) || !isfinite(json_number_value(t)) || json_number_value(t) < 1 ||
	    json_number_value(t) > rq->cfg->max_lifetime_s) {
		*answered = e2b_error(rq, 400, "'timeout' must be from 1 to %g seconds (this "
				      "server's max_lifetime_s)", rq->cfg->max_lifetime_s);
		return false;
	}
	*out = json_number_value(t);
	return true;
}

/* What petri cannot do, refused by name rather than silently ignored. */
static bool refuse_unsupported(struct api_req *rq, json_t *body, enum MHD_Result *answered)
{
	json_t *v;

	if (json_is_true(json_object_get(body, "autoPause"))) {
		*answered = e2b_error(rq, 400, "petri does not pause sandboxes (autoPause)");
		return true;
	}
	v = json_object_get(body, "volumeMounts");
	if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0)) {
		*answered = e2b_error(rq, 400, "petri has no volumes (volumeMounts)");
		return true;
	}
	return false;
}

static struct session *lookup(struct api_req *rq, const char *sid, enum MHD_Result *answered);

/* E2B's egress options as a petri policy (docs/e2b.md, "The network"):
 * allow_internet_access, network.allowOut and network.denyOut.  E2B lets a
 * sandbox out by default; here nothing said is the operator's default
 * (*out NULL), and so is allow_internet_access alone where a client may
 * not ask for open.  Internet off, or "0.0.0.0/0" denied: an
 * allow-list of allowOut; else open, less denyOut (E2B's allowed entries
 * win over its denied ones: a denied entry also allowed is dropped).  What
 * petri cannot do (an egress proxy, request transforms) is refused.  true,
 * or false with the answer made. */
static bool network_arg(struct api_req *rq, json_t *body, struct net_policy **out,
			enum MHD_Result *answered)
{
	json_t *aia = json_object_get(body, "allow_internet_access");
	json_t *net = json_object_get(body, "network"), *allow = NULL, *deny = NULL, *v;
	json_t *policy = NULL, *al, *dl;
	struct request_error e;
	bool all_denied, ok = false;
	size_t i;

	*out = NULL;
	if (aia && !json_is_null(aia) && !json_is_boolean(aia)) {
		*answered = e2b_error(rq, 400, "'allow_internet_access' must be a boolean");
		return false;
	}
	if (net && !json_is_null(net)) {
		if (!json_is_object(net)) {
			*answered = e2b_error(rq, 400, "'network' must be an object");
			return false;
		}
		v = json_object_get(net, "egressProxy");
		if (v && !json_is_null(v)) {
			*answered = e2b_error(rq, 400, "petri has no egress proxy (network.egressProxy)");
			return false;
		}
		v = json_object_get(net, "rules");
		if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0)) {
			*answered = e2b_error(rq, 400, "petri does not transform requests "
					      "(network.rules)");
			return false;
		}
		allow = json_object_get(net, "allowOut");
		deny = json_object_get(net, "denyOut");
		if ((allow && !json_is_null(allow) && !json_is_array(allow)) ||
		    (deny && !json_is_null(deny) && !json_is_array(deny))) {
			*answered = e2b_error(rq, 400, "network.allowOut and network.denyOut must be "
					      "arrays of strings");
			return false;
		}
	}
	allow = json_is_array(allow) ? allow : NULL;
	deny = json_is_array(deny) ? deny : NULL;
	/* Some SDKs send allow_internet_access: true whether their user said
	 * so or not (E2B's default): it asks for the internet as far as this
	 * server gives one, open where a client may ask for it, else the
	 * operator's default; never an error. */
	if (json_is_true(aia) && !allow && !deny && rq->cfg->network.clients_may != NET_OPEN)
		return true;
	if (!json_is_boolean(aia) && !allow && !deny)
		return true;
	all_denied = json_is_false(aia);
	json_array_foreach(deny, i, v)
		all_denied |= json_is_string(v) && !strcmp(json_string_value(v), "0.0.0.0/0");
	policy = json_object();
	al = json_array();
	dl = json_array();
	if (!policy || !al || !dl)
		goto oom;
	if (!all_denied)
		json_array_append_new(al, json_string("*"));
	else
		json_array_foreach(allow, i, v)
			json_array_append(al, json_is_string(v) &&
				!strcmp(json_string_value(v), "0.0.0.0/0") ? json_string("*") : v);
	if (!all_denied)
		json_array_foreach(deny, i, v) {
			bool also_allowed = false;
			json_t *w;
			size_t j;

			json_array_foreach(allow, j, w)
				also_allowed |= json_equal(v, w);
			if (!also_allowed)
				json_array_append(dl, v);
		}
	json_object_set(policy, "allow", al);
	json_object_set(policy, "deny", dl);
	if (!request_network(rq->cfg, policy, out, &e)) {
		*answered = e2b_error(rq, http_request_status(&e), "%s", e.message);
		goto done;
	}
	ok = true;
	goto done;
oom:
	*answered = e2b_error(rq, 500, "out of memory");
done:
	json_decref(al);
	json_decref(dl);
	json_decref(policy);
	return ok;
}

/* PUT /sandboxes/{id}/network: E2B's egress options anew, as one object
 * ({allowOut, denyOut, allow_internet_access, ...}: creation's "network"
 * with allow_internet_access beside its fields); what it omits is cleared
 * (the operator's default). */
static enum MHD_Result update_network(struct api_req *rq, const char *sid)
{
	enum MHD_Result answered = MHD_NO;
	json_t *body = rq->body.len ? http_body_object(rq, &answered) : json_object();
	json_t *asked = NULL, *net;
	struct net_policy *policy = NULL;
	struct session *s = NULL;
	char reason[512] = "";
	enum sm_result r;

	if (!body)
		return answered;
	net = json_deep_copy(body);
	asked = net ? json_pack("{s:O?, s:o}", "allow_internet_access",
				json_object_get(body, "allow_internet_access"), "network", net) : NULL;
	if (!asked) {
		answered = e2b_error(rq, 500, "out of memory");
		goto out;
	}
	json_object_del(net, "allow_internet_access");
	if (!(s = lookup(rq, sid, &answered)) || !network_arg(rq, asked, &policy, &answered))
		goto out;
	r = session_set_network(s, policy, reason, sizeof(reason));
	answered = r == SM_OK ? http_empty(rq, 204) : session_error(rq, r, reason, "");
out:
	session_put(s);
	free(policy);
	json_decref(asked);
	json_decref(body);
	return answered;
}

static enum MHD_Result create(struct api_req *rq)
{
	enum MHD_Result answered = MHD_NO;
	json_t *body = rq->body.len ? http_body_object(rq, &answered) : json_object();
	struct session_params p = {
		.language = lang_default(),
		.limits = rq->cfg->defaults,
		.idle_timeout_s = rq->cfg->idle_timeout_s,
		.max_lifetime_s = 300,	/* E2B's default */
		.key = rq->key_index + 1,
	};
	struct e2b_sandbox *b = NULL;
	struct request_error e;
	struct session *s = NULL;
	struct net_policy *network = NULL;
	const char *tmpl;
	char **env = NULL, err[512] = "";
	json_t *meta;
	enum sm_result r;

	if (!body)
		return answered;
	if (p.max_lifetime_s > rq->cfg->max_lifetime_s)
		p.max_lifetime_s = rq->cfg->max_lifetime_s;
	tmpl = json_string_value(json_object_get(body, "templateID"));
	if (!tmpl)
		tmpl = TEMPLATE_DEFAULT;
	for (size_t i = 0; templates[i]; i++)
		if (!strcmp(tmpl, templates[i]))
			goto known;
	answered = e2b_error(rq, 400, "petri has only the templates base and "
			     TEMPLATE_DEFAULT " (one sandbox with Python, bash and C), not "
			     "'%.64s'", tmpl);
	goto out;
known:
	meta = json_object_get(body, "metadata");
	if (meta && !json_is_null(meta) && !json_is_object(meta)) {
		answered = e2b_error(rq, 400, "'metadata' must be an object of strings");
		goto out;
	}
	if (meta && json_is_object(meta)) {
		char *text = json_dumps(meta, JSON_COMPACT);
		bool big = !text || strlen(text) > METADATA_MAX;

		free(text);
		if (big) {
			answered = e2b_error(rq, 400, "'metadata' may take at most %u KiB",
					     METADATA_MAX >> 10);
			goto out;
		}
	}
	if (refuse_unsupported(rq, body, &answered) ||
	    !timeout_arg(rq, body, &p.max_lifetime_s, &answered) ||
	    !network_arg(rq, body, &network, &answered))
		goto out;
	p.network = network;
	if (!(env = request_env(rq->cfg, json_object_get(body, "envVars"), &e))) {
		answered = e2b_error(rq, http_request_status(&e), "%s", e.message);
		goto out;
	}
	p.env = (const char *const *)env;
	if (!(b = calloc(1, sizeof(*b))) || id_make(b->token, sizeof(b->token), "tok", rq->cfg->node, 64) < 0) {
		answered = e2b_error(rq, 500, "out of memory");
		goto out;
	}
	snprintf(b->template_id, sizeof(b->template_id), "%s", tmpl);
	b->key_index = rq->key_index;
	b->metadata = json_is_object(meta) ? json_deep_copy(meta) : json_object();
	/* The default contexts, as the code interpreter lists them: one per
	 * language, its id the language's name. */
	for (size_t i = 0; i < lang_count() && i < E2B_CONTEXTS_MAX / 2; i++) {
		struct e2b_context *c = &b->contexts[b->ncontexts++];

		*c = (struct e2b_context){ .cwd = E2B_HOME, .is_default = true };
		snprintf(c->id, sizeof(c->id), "%s", lang_at(i)->name);
		snprintf(c->language, sizeof(c->language), "%s", lang_at(i)->name);
	}
	sweep(rq->e2b, rq->sm);
	if ((r = smgr_create(rq->sm, &p, &s, err, sizeof(err))) != SM_OK) {
		answered = session_error(rq, r, err, "");
		goto out;
	}
	snprintf(b->sid, sizeof(b->sid), "%s", session_id(s));
	if (add(rq->e2b, b) < 0) {
		smgr_delete(rq->sm, session_id(s));
		answered = e2b_error(rq, 500, "out of memory");
		goto out;
	}
	b = NULL;
	log_info("e2b: sandbox %s created", session_id(s));
	answered = http_json(rq, 201, sandbox_json(rq, s, true));
out:
	if (b)
		sandbox_free(b);
	session_put(s);
	exec_env_free(env);
	free(network);
	json_decref(body);
	return answered;
}

/* The E2B sandbox id, for the control plane: a live session the registry
 * knows.  NULL with the 404 answered. */
static struct session *lookup(struct api_req *rq, const char *sid, enum MHD_Result *answered)
{
	struct session *s = NULL;
	char reason[256] = "";
	enum sm_result r;
	bool known;

	pthread_mutex_lock(&rq->e2b->lock);
	known = find(rq->e2b, sid) >= 0;
	pthread_mutex_unlock(&rq->e2b->lock);
	r = known ? smgr_lookup(rq->sm, sid, &s, reason, sizeof(reason)) : SM_NOT_FOUND;
	if (r == SM_OK && session_ended(s))
		r = SM_GONE;
	if (r != SM_OK) {
		session_put(s);
		if (known)
			forget(rq->e2b, sid);
		*answered = session_error(rq, r, reason, sid);
		return NULL;
	}
	return s;
}

/* E2B counts a timeout from now; petri's lifetime from the creation.  keep
 * the later end (connect), or set it (setTimeout). */
static enum MHD_Result set_timeout(struct api_req *rq, struct session *s, double timeout,
				   bool only_extend, bool answer_sandbox)
{
	double created, used, idle, life, now = clock_wall_s(), want;
	char reason[256] = "";
	enum sm_result r;

	session_times(s, &created, &used, &idle, &life);
	want = now - created + timeout;
	if (only_extend && want < life)
		want = life;
	if (want > rq->cfg->max_lifetime_s)
		return e2b_error(rq, 400, "the sandbox would live past this server's "
				 "max_lifetime_s (%g s from its start)", rq->cfg->max_lifetime_s);
	if ((r = session_set_lifetime(s, 0, want, reason, sizeof(reason))) != SM_OK)
		return session_error(rq, r, reason, session_id(s));
	return answer_sandbox ? http_json(rq, 200, sandbox_json(rq, s, true)) :
				http_empty(rq, 204);
}

/* ---- metrics ---------------------------------------------------------------- */

/* GET /sandboxes/{id}/metrics[?start=&end=]: the sandbox as it is now, one
 * sample taken when asked (petri keeps no history of it), in the range
 * when one is given.  CPU is the share of the sandbox's CPUs used since
 * the last time anyone asked (or since its start). */
static enum MHD_Result metrics(struct api_req *rq, struct session *s)
{
	const struct petri_limits *l = session_limits(s);
	double now = clock_wall_s(), mono = clock_mono_s(), created, used, idle, life, since;
	double cpus = ceil(l->cpu) >= 1 ? ceil(l->cpu) : 1, pct;
	long long from = LLONG_MIN, to = LLONG_MAX;
	uint64_t cpu_before = 0;
	struct session_usage u;
	char when[TIMEFMT_LEN];
	json_t *out = json_array();
	ssize_t i;
	int r;

	if (!epoch_arg(rq, "start", &from) || !epoch_arg(rq, "end", &to)) {
		json_decref(out);
		return e2b_error(rq, 400, "'start' and 'end' are seconds since the epoch");
	}
	if ((r = session_usage(s, &u)) < 0) {
		json_decref(out);
		return e2b_error(rq, 500, "the sandbox's usage cannot be read: %s", strerror(-r));
	}
	session_times(s, &created, &used, &idle, &life);
	since = now - created;
	pthread_mutex_lock(&rq->e2b->lock);
	if ((i = find(rq->e2b, session_id(s))) >= 0) {
		struct e2b_sandbox *b = rq->e2b->v[i];

		if (b->sampled_at > 0 && u.cpu_ns >= b->sampled_cpu_ns) {
			since = mono - b->sampled_at;
			cpu_before = b->sampled_cpu_ns;
		}
		b->sampled_at = mono;
		b->sampled_cpu_ns = u.cpu_ns;
	}
	pthread_mutex_unlock(&rq->e2b->lock);
	pct = since > 0 ? 100.0 * (double)(u.cpu_ns - cpu_before) / 1e9 / since / cpus : 0;
	if (out && (double)from <= now + 1 && now <= (double)to + 1)
		json_array_append_new(out, json_pack(
			"{s:s, s:I, s:f, s:i, s:I, s:I, s:I, s:I}", "timestamp",
			timefmt_rfc3339(now, when), "timestampUnix", (json_int_t)now, "cpuUsedPct",
			round(fmin(pct, 100.0) * 100) / 100, "cpuCount", (int)cpus, "memUsed",
			(json_int_t)u.memory_bytes, "memTotal", (json_int_t)l->memory_mb << 20,
			"diskUsed", (json_int_t)u.work_used_bytes, "diskTotal",
			(json_int_t)u.work_total_bytes));
	return out ? http_json(rq, 200, out) : e2b_error(rq, 500, "out of memory");
}

/* ---- listing ---------------------------------------------------------------- */

#define LIST_LIMIT_MAX 1000	/* sandboxes one page of a listing takes */

/* What GET /v2/sandboxes was asked for (its query). */
struct list_query {
	json_t *metadata;		/* key: value, every one to match; NULL: any */
	bool running;			/* "running" among them */
	bool states;			/* a state was asked for */
	size_t limit;			/* 0: every one */
	bool after;			/* from nextToken: only those listed after */
	long long after_us;
	char after_sid[SESSION_ID_LEN + 1];
	char bad[160];			/* why the query is refused ("": it is not) */
};

/* A form value decoded in place: '+' is a space, then %XX. */
static void form_unescape(char *v)
{
	for (char *p = v; *p; p++)
		if (*p == '+')
			*p = ' ';
	MHD_http_unescape(v);
}

/* The metadata filter: a query string of its own (key=value&...), each key
 * and value encoded once more (the SDKs encode each pair, then the whole).
 * Decoded as E2B's API decodes it. */
static bool metadata_filter(const char *in, json_t **out)
{
	char *copy = strdup(in), *save = NULL;
	json_t *m = json_object();
	bool ok = copy && m;

	for (char *pair = ok ? strtok_r(copy, "&", &save) : NULL; ok && pair;
	     pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '='), *value = pair + strlen(pair);

		if (eq) {
			*eq = '\0';
			value = eq + 1;
		}
		for (int twice = 0; twice < 2; twice++) {
			form_unescape(pair);
			form_unescape(value);
		}
		ok = *pair && json_object_set_new(m, pair, http_string(value)) == 0;
	}
	free(copy);
	if (!ok)
		json_decref(m);
	*out = ok ? m : NULL;
	return ok;
}

/* A page's nextToken: the last sandbox listed, by its start (in
 * microseconds) and its id: "<us>.<id>". */
static bool next_token(const char *in, struct list_query *q)
{
	char *end;
	size_t len;

	errno = 0;
	q->after_us = strtoll(in, &end, 10);
	if (errno || end == in || *end != '.')
		return false;
	len = strlen(++end);
	if (len == 0 || len > SESSION_ID_LEN || strspn(end, "abcdefghijklmnopqrstuvwxyz"
						       "0123456789_-") != len)
		return false;
	memcpy(q->after_sid, end, len + 1);
	return q->after = true;
}

static enum MHD_Result list_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	struct list_query *q = cls;
	uint32_t n;

	(void)kind;
	if (*q->bad || !value)
		return MHD_YES;
	if (!strcmp(key, "metadata")) {
		json_decref(q->metadata);
		if (!metadata_filter(value, &q->metadata))
			snprintf(q->bad, sizeof(q->bad), "'metadata' must be key=value pairs");
	} else if (!strcmp(key, "state")) {
		/* A list: the parameter repeated, or its values with commas. */
		for (const char *p = value;; p++) {
			size_t len = strcspn(p, ",");

			q->states = true;
			if (len == 7 && !strncmp(p, "running", 7))
				q->running = true;
			else if (!(len == 6 && !strncmp(p, "paused", 6)))
				snprintf(q->bad, sizeof(q->bad), "'state' takes running and paused");
			if (!p[len])
				break;
			p += len;
		}
	} else if (!strcmp(key, "limit")) {
		if (!num_u32(value, 1, LIST_LIMIT_MAX, &n))
			snprintf(q->bad, sizeof(q->bad), "'limit' must be from 1 to %d",
				 LIST_LIMIT_MAX);
		else
			q->limit = n;
	} else if (!strcmp(key, "nextToken")) {
		if (!next_token(value, q))
			snprintf(q->bad, sizeof(q->bad), "'nextToken' is not one this server gave");
	}
	return MHD_YES;
}

/* Does the sandbox j (as sandbox_json() gives it) match the query? */
static bool list_match(const struct list_query *q, json_t *j)
{
	json_t *meta = json_object_get(j, "metadata"), *want;
	const char *key;

	if (q->states && !q->running)	/* petri's sandboxes are never paused */
		return false;
	json_object_foreach(q->metadata, key, want)
		if (!json_equal(json_object_get(meta, key), want))
			return false;
	return true;
}

struct listed {
	json_t *j;
	long long started_us;
	const char *sid;
};

/* Newest first, as E2B lists them; by id where two started together. */
static int listed_cmp(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;

	if (x->started_us != y->started_us)
		return x->started_us < y->started_us ? 1 : -1;
	return -strcmp(x->sid, y->sid);
}

static bool after_token(const struct list_query *q, const struct listed *l)
{
	const struct listed cursor = { .started_us = q->after_us, .sid = q->after_sid };

	return !q->after || listed_cmp(l, &cursor) > 0;
}

/* GET /v2/sandboxes[?metadata=&state=&limit=&nextToken=]: one page, and
 * X-Next-Token when there is another. */
static enum MHD_Result list(struct api_req *rq)
{
	struct list_query q = { .metadata = NULL };
	struct listed *v = NULL;
	json_t *out = json_array();
	sandbox_id *ids = NULL;
	char token[48 + SESSION_ID_LEN];
	size_t count = 0, shown = 0;
	ssize_t n;

	MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, list_arg, &q);
	if (*q.bad) {
		json_decref(q.metadata);
		json_decref(out);
		return e2b_error(rq, 400, "%s", q.bad);
	}
	sweep(rq->e2b, rq->sm);
	n = ids_of(rq->e2b, &ids);
	if (n > 0)
		v = calloc((size_t)n, sizeof(*v));
	for (ssize_t i = 0; v && i < n; i++) {
		struct session *s;
		double created, used, idle, life;
		char why[8];
		json_t *j;

		if (smgr_lookup(rq->sm, ids[i], &s, why, sizeof(why)) != SM_OK)
			continue;
		session_times(s, &created, &used, &idle, &life);
		j = sandbox_json(rq, s, false);
		session_put(s);
		if (j && list_match(&q, j)) {
			v[count] = (struct listed){ .j = j, .started_us = (long long)(created * 1e6),
						    .sid = json_string_value(json_object_get(j,
									"sandboxID")) };
			if (v[count].sid && after_token(&q, &v[count]))
				count++;
			else
				json_decref(j);
		} else {
			json_decref(j);
		}
	}
	if (count)
		qsort(v, count, sizeof(*v), listed_cmp);
	*token = '\0';
	for (size_t i = 0; i < count; i++) {
		if (q.limit && shown == q.limit) {
			snprintf(token, sizeof(token), "%lld.%s", v[shown - 1].started_us,
				 v[shown - 1].sid);
			break;
		}
		if (out && json_array_append(out, v[i].j) == 0)
			shown++;
	}
	for (size_t i = 0; i < count; i++)
		json_decref(v[i].j);
	free(v);
	free(ids);
	json_decref(q.metadata);
	if (!out || n < 0 || (n > 0 && !v)) {
		json_decref(out);
		return e2b_error(rq, 500, "out of memory");
	}
	return http_json_header(rq, 200, out, *token ? "X-Next-Token" : NULL, token);
}

/* A lifecycle call petri has not (pause, resume, snapshots, fork, network
 * rules): answered as E2B's API answers what precedes its work, then 501.
 * A fork of fewer than one sandbox is a bad request whatever the sandbox
 * (400, the SDK's InvalidArgumentError); an unknown or ended sandbox is not
 * found (404, SandboxNotFoundError), as for every other call. */
static enum MHD_Result unsupported(struct api_req *rq, const char *sid, const char *what)
{
	enum MHD_Result answered;
	struct session *s;
	json_t *body, *count;

	if (!strcmp(what, "fork") && rq->body.len) {
		if (!(body = http_body_object(rq, &answered)))
			return answered;
		count = json_object_get(body, "count");
		answered = count && (!json_is_integer(count) || json_integer_value(count) < 1);
		json_decref(body);
		if (answered)
			return e2b_error(rq, 400, "'count' must be an integer of at least 1");
	}
	if (!(s = lookup(rq, sid, &answered)))
		return answered;
	session_put(s);
	return e2b_error(rq, 501, "petri does not support %s: its sandboxes run until they are "
			 "killed or time out", what);
}

static enum MHD_Result control(struct api_req *rq, const char *path)
{
	const char *m = rq->method, *rest;
	char sid[SESSION_ID_LEN + 1];
	enum MHD_Result answered = MHD_NO;
	struct session *s;
	json_t *body;
	double timeout = 300;
	size_t n;

	if (!strncmp(path, "/v2/", 4))
		path += 3;
	if (!strcmp(path, "/sandboxes")) {
		if (!strcmp(m, "POST"))
			return create(rq);
		if (!strcmp(m, "GET"))
			return list(rq);
		return e2b_error(rq, 405, "use GET or POST");
	}
	if (strncmp(path, "/sandboxes/", 11))
		return e2b_error(rq, 501, "petri does not offer %.100s (templates, snapshots and "
				 "volumes are E2B's; petri has one sandbox image)", path);
	path += 11;
	rest = strchr(path, '/');
	n = rest ? (size_t)(rest - path) : strlen(path);
	if (n == 0 || n > SESSION_ID_LEN)
		return e2b_error(rq, 404, "sandbox not found");
	memcpy(sid, path, n);
	sid[n] = '\0';
	rest = rest ? rest : "";
	if (!strcmp(rest, "/network"))
		return !strcmp(m, "PUT") ? update_network(rq, sid) : e2b_error(rq, 405, "use PUT");
	if (!strcmp(rest, "/pause") || !strcmp(rest, "/resume") || !strcmp(rest, "/snapshots") ||
	    !strcmp(rest, "/fork"))
		return unsupported(rq, sid, rest + 1);
	if (!strcmp(rest, "") && !strcmp(m, "DELETE")) {
		if (!(s = lookup(rq, sid, &answered)))
			return answered;
		session_put(s);
		smgr_delete(rq->sm, sid);
		forget(rq->e2b, sid);
		log_info("e2b: sandbox %s killed", sid);
		return http_empty(rq, 204);
	}
	if (!(s = lookup(rq, sid, &answered)))
		return answered;
	if (!strcmp(rest, "") && !strcmp(m, "GET")) {
		answered = http_json(rq, 200, sandbox_json(rq, s, false));
	} else if (!strcmp(rest, "/metrics") && !strcmp(m, "GET")) {
		answered = metrics(rq, s);
	} else if ((!strcmp(rest, "/connect") || !strcmp(rest, "/timeout")) &&
		   !strcmp(m, "POST")) {
		body = rq->body.len ? http_body_object(rq, &answered) : json_object();
		if (body && timeout_arg(rq, body, &timeout, &answered))
			answered = !strcmp(rest, "/connect") ?
				   set_timeout(rq, s, timeout, true, true) :
				   set_timeout(rq, s, timeout, false, false);
		json_decref(body);
	} else {
		answered = e2b_error(rq, 404, "no such route: %.10s %.200s", m, rq->url);
	}
	session_put(s);
	return answered;
}

/* ---- routing ---------------------------------------------------------------- */

/* The port a request of E2B_PORT is for. */
static unsigned short e2b_port(struct api_req *rq)
{
	char sid[SESSION_ID_LEN + 1];
	uint32_t n = 0;

	if (rq->e2b_port_host)
		port_host(header(rq->conn, "Host"), &n, sid);
	else
		num_u32(header(rq->conn, "E2b-Sandbox-Port"), 1, 65535, &n);
	return (unsigned short)n;
}

enum MHD_Result e2b_route(struct api_req *rq)
{
	const char *sid = rq->e2b_sid;
	char path[512];
	enum MHD_Result answered = MHD_NO;
	struct session *s;
	char reason[256] = "";
	enum sm_result r;

	e2b_route_path(rq, path, sizeof(path));
	switch (rq->e2b_kind) {
	case E2B_CONTROL:
		return control(rq, path);
	case E2B_ENVD:
	case E2B_CODE:
	case E2B_PORT:
		break;
	default:
		return e2b_error(rq, 404, "not an E2B route");
	}
	/* e2b_authorize() checked the token: the sandbox was E2B's then (it
	 * may have been killed since the headers came). */
	r = smgr_lookup(rq->sm, sid, &s, reason, sizeof(reason));
	if (r == SM_OK && session_ended(s)) {
		session_put(s);
		r = SM_GONE;
	}
	if (r != SM_OK) {
		forget(rq->e2b, sid);
		/* 502: what the SDKs read as "the sandbox timed out or was
		 * killed" (isRunning() is false). */
		return e2b_error(rq, 502, "the sandbox has ended%s%s", *reason ? ": " : "",
				 reason);
	}
	answered = rq->e2b_kind == E2B_ENVD ? e2b_envd(rq, s, path) :
		   rq->e2b_kind == E2B_CODE ? e2b_code(rq, s, path) :
		   http_port_request(rq, s, e2b_port(rq), rq->url, "");
	session_put(s);
	return answered;
}
