/* Endpoints for sessions, executions and one-shot runs (docs/api.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "runtime/box.h"
#include "runtime/files.h"
#include "runtime/languages.h"
#include "util/base64.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/num.h"

#define MAX_ENV_VARS 64
#define MAX_ENV_BYTES (64u << 10)
#define MAX_ONESHOT_FILES 100

/* ---- shared helpers --------------------------------------------------- */

enum MHD_Result http_session_error(struct api_req *rq, int err, const char *reason)
{
	switch (err) {
	case SM_ENOTFOUND:
		return http_error(rq, 404, "session_not_found", "no such session");
	case SM_EGONE:
		return http_error(rq, 410, "session_gone", "%s", reason && *reason ? reason :
				  "the session has ended");
	case SM_EBUSY:
		return http_error(rq, 409, "session_busy", "an execution is already running in "
				  "this session; wait for it to finish (one at a time per session)");
	case SM_ECAPACITY:
		return http_error(rq, 429, "over_capacity", "the server is at its limit of "
				  "sessions or concurrent executions; retry later");
	case SM_ESTOPPING:
		return http_error(rq, 503, "shutting_down", "the server is shutting down");
	case -EIO:
		return http_error(rq, 503, "sandbox_failed", "%s", reason && *reason ? reason :
				  "the sandbox could not be started");
	default:
		return http_error(rq, 500, "internal", "%s", strerror(-err));
	}
}

struct session *http_session(struct api_req *rq, const char *id, enum MHD_Result *answered)
{
	struct session *s;
	char reason[256] = "";
	int r = smgr_lookup(rq->sm, id, &s, reason, sizeof(reason));

	if (r < 0) {
		*answered = http_session_error(rq, r, reason);
		return NULL;
	}
	return s;
}

/* A number field: absent keeps *out; present must be a number in range.
 * prefix names the enclosing object in messages ("limits." or ""). */
static bool get_number(struct api_req *rq, json_t *obj, const char *prefix, const char *key,
		       double min, double max, double *out, enum MHD_Result *answered)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return true;
	if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
	    json_number_value(v) < min || json_number_value(v) > max) {
		*answered = http_error(rq, 400, "invalid_request",
				       "'%s%s' must be a number from %g to %g", prefix, key, min, max);
		return false;
	}
	*out = json_number_value(v);
	return true;
}

static bool get_limit_u32(struct api_req *rq, json_t *obj, const char *key, uint32_t min,
			  uint32_t max, uint32_t *out, enum MHD_Result *answered)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		*answered = http_error(rq, 400, "invalid_request",
				       "'limits.%s' must be an integer from %u to %u", key, min, max);
		return false;
	}
	*out = (uint32_t)json_integer_value(v);
	return true;
}

/* "limits": {...} over the operator's defaults, never above the maximum. */
static bool parse_limits(struct api_req *rq, json_t *obj, struct petri_limits *lim,
			 enum MHD_Result *answered)
{
	static const char *const keys[] = {
		"memory_mb", "cpu_quota", "cpu", "pids", "disk_mb", "timeout_s", "output_kb", NULL
	};
	const struct petri_limits *max = &rq->cfg->max;
	json_t *l = json_object_get(obj, "limits");

	*lim = rq->cfg->defaults;
	if (!l || json_is_null(l))
		return true;
	if (!json_is_object(l)) {
		*answered = http_error(rq, 400, "invalid_request", "'limits' must be an object");
		return false;
	}
	if (!http_only_keys(rq, l, keys, answered))
		return false;
	/* Asking for more than the operator allows is an error, not a silent
	 * cap: the client should know what it gets. */
	if (!get_limit_u32(rq, l, "memory_mb", 32, max->memory_mb, &lim->memory_mb, answered) ||
	    !get_limit_u32(rq, l, "pids", 8, max->pids, &lim->pids, answered) ||
	    !get_limit_u32(rq, l, "disk_mb", 1, max->disk_mb, &lim->disk_mb, answered) ||
	    !get_limit_u32(rq, l, "output_kb", 1, max->output_kb, &lim->output_kb, answered) ||
	    !get_number(rq, l, "limits.", "cpu_quota", 0.01, max->cpu, &lim->cpu, answered) ||
	    !get_number(rq, l, "limits.", "cpu", 0.01, max->cpu, &lim->cpu, answered) ||
	    !get_number(rq, l, "limits.", "timeout_s", 0.1, max->timeout_s, &lim->timeout_s,
			answered))
		return false;
	return true;
}

static bool env_name_ok(const char *k)
{
	if (!*k || strlen(k) > 128 || (*k >= '0' && *k <= '9'))
		return false;
	for (; *k; k++)
		if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

/* Set by petri in every sandbox, or by the operator: a session may not
 * change them. */
static bool env_reserved(struct api_req *rq, const char *name)
{
	static const char *const fixed[] = {
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "MPLCONFIGDIR",
		"XDG_CACHE_HOME", NULL
	};
	size_t n = strlen(name);

	for (size_t i = 0; fixed[i]; i++)
		if (!strcmp(name, fixed[i]))
			return true;
	for (size_t i = 0; i < rq->cfg->nenv; i++)
		if (!strncmp(rq->cfg->env[i], name, n) && rq->cfg->env[i][n] == '=')
			return true;
	return false;
}

/* "env": {"NAME": "value"} -> a NULL-terminated "NAME=value" array. */
static char **parse_env(struct api_req *rq, json_t *obj, enum MHD_Result *answered)
{
	json_t *e = json_object_get(obj, "env"), *v;
	size_t n = 0, bytes = 0;
	const char *k;
	char **out;

	if (!e || json_is_null(e))
		return calloc(1, sizeof(char *));
	if (!json_is_object(e) || json_object_size(e) > MAX_ENV_VARS) {
		*answered = http_error(rq, 400, "invalid_request", "'env' must be an object of at "
				       "most %d string values", MAX_ENV_VARS);
		return NULL;
	}
	out = calloc(json_object_size(e) + 1, sizeof(*out));
	if (!out)
		return NULL;
	json_object_foreach(e, k, v) {
		const char *why = NULL;

		bytes += strlen(k) + json_string_length(v) + 2;
		if (!env_name_ok(k))
			why = "names are [A-Za-z_][A-Za-z0-9_]*";
		else if (!json_is_string(v) ||
			 memchr(json_string_value(v), '\0', json_string_length(v)))
			why = "values are strings without NUL";
		else if (env_reserved(rq, k))
			why = "it is set by petri (PATH, HOME, USER, LOGNAME, SHELL, TMPDIR, "
			      "MPLCONFIGDIR, XDG_CACHE_HOME) or by the operator";
		else if (bytes > MAX_ENV_BYTES)
			why = "all variables together may take 64 KiB";
		if (why) {
			*answered = http_error(rq, 400, "invalid_request", "env '%.100s': %s", k, why);
			for (size_t i = 0; i < n; i++)
				free(out[i]);
			free(out);
			return NULL;
		}
		if (asprintf(&out[n], "%s=%s", k, json_string_value(v)) < 0)
			break;
		n++;
	}
	return out;
}

bool http_exec_request(struct api_req *rq, json_t *obj, const char *default_language,
		       const struct petri_limits *lim, struct box_exec *ex,
		       enum MHD_Result *answered)
{
	json_t *code = json_object_get(obj, "code"), *lang = json_object_get(obj, "language");
	const struct language *l = NULL;
	double timeout = lim->timeout_s;
	char why[256];
	char **env;

	memset(ex, 0, sizeof(*ex));
	ex->cancel_fd = -1;
	if (!json_is_string(code)) {
		*answered = http_error(rq, 400, "invalid_request", "'code' (a string) is required");
		return false;
	}
	if (json_string_length(code) > BOX_CODE_MAX ||
	    memchr(json_string_value(code), '\0', json_string_length(code))) {
		*answered = http_error(rq, 400, "invalid_request", "'code' must be at most %u bytes "
				       "and contain no NUL", BOX_CODE_MAX);
		return false;
	}
	if (lang && !json_is_null(lang) && !(l = lang_from_json(lang, why, sizeof(why)))) {
		*answered = http_error(rq, 400, "invalid_request", "%s", why);
		return false;
	}
	if (!get_number(rq, obj, "", "timeout_s", 0.1, lim->timeout_s, &timeout, answered))
		return false;
	/* Last: nothing fails after it, so a failure leaves no env behind. */
	if (!(env = parse_env(rq, obj, answered)))
		return false;
	ex->language = l ? l->name : default_language;
	ex->code = json_string_value(code);
	ex->timeout_s = timeout;
	ex->output_cap = (size_t)lim->output_kb << 10;
	ex->env = (const char *const *)env;
	return true;
}

void http_exec_request_release(struct box_exec *ex)
{
	box_env_free((char **)ex->env);
	ex->env = NULL;
}

/* ---- /v1/sessions ----------------------------------------------------- */

/* "idle_timeout_s" and "max_lifetime_s", each absent (keeps *idle, *life)
 * or within the configuration's maxima (the defaults are the maxima). */
static bool parse_lifetime(struct api_req *rq, json_t *obj, double *idle, double *life,
			   enum MHD_Result *answered)
{
	return get_number(rq, obj, "", "idle_timeout_s", 1, rq->cfg->idle_timeout_s, idle,
			  answered) &&
	       get_number(rq, obj, "", "max_lifetime_s", 1, rq->cfg->max_lifetime_s, life,
			  answered);
}

static enum MHD_Result create_session(struct api_req *rq)
{
	static const char *const keys[] = {
		"language", "limits", "idle_timeout_s", "max_lifetime_s", "env", NULL
	};
	enum MHD_Result answered = MHD_NO;
	struct session_params p = { .language = "python" };
	struct session *s = NULL;
	json_t *body = http_body_object(rq, &answered), *lang;
	char **env = NULL;
	char err[512] = "";
	int r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered) ||
	    !parse_limits(rq, body, &p.limits, &answered))
		goto out;
	lang = json_object_get(body, "language");
	if (lang && !json_is_null(lang)) {
		const struct language *l = lang_from_json(lang, err, sizeof(err));

		if (!l) {
			answered = http_error(rq, 400, "invalid_request", "%s", err);
			goto out;
		}
		p.language = l->name;
	}
	p.idle_timeout_s = rq->cfg->idle_timeout_s;
	p.max_lifetime_s = rq->cfg->max_lifetime_s;
	if (!parse_lifetime(rq, body, &p.idle_timeout_s, &p.max_lifetime_s, &answered))
		goto out;
	if (!(env = parse_env(rq, body, &answered)))
		goto out;
	p.env = (const char *const *)env;
	r = smgr_create(rq->sm, &p, &s, err, sizeof(err));
	if (r < 0) {
		answered = http_session_error(rq, r, err);
		goto out;
	}
	{
		json_t *j = session_json(s);
		char location[64];
		char *text;
		struct MHD_Response *resp;

		snprintf(location, sizeof(location), "/v1/sessions/%s", session_id(s));
		text = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		resp = text ? MHD_create_response_from_buffer(strlen(text), text,
							      MHD_RESPMEM_MUST_FREE) : NULL;
		if (!resp) {
			free(text);
			answered = http_error(rq, 500, "internal", "out of memory");
			goto out;
		}
		MHD_add_response_header(resp, "Content-Type", "application/json");
		MHD_add_response_header(resp, "Location", location);
		answered = http_queue(rq, 201, resp);
	}
out:
	session_put(s);
	box_env_free(env);
	json_decref(body);
	return answered;
}

enum MHD_Result handle_sessions(struct api_req *rq)
{
	if (!strcmp(rq->method, "POST"))
		return create_session(rq);
	if (!strcmp(rq->method, "GET")) {
		json_t *list = smgr_list_json(rq->sm);

		return http_json(rq, 200, json_pack("{s:o}", "sessions", list ? list : json_array()));
	}
	return http_not_allowed(rq, "GET, POST");
}

static enum MHD_Result execute(struct api_req *rq, struct session *s)
{
	static const char *const keys[] = { "code", "language", "timeout_s", "env", NULL };
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered);
	struct box_exec ex = { .env = NULL };
	struct result res;
	char reason[256] = "";
	int r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered) ||
	    !http_exec_request(rq, body, session_language(s), session_limits(s), &ex, &answered))
		goto out;
	if (http_wants_sse(rq)) {
		answered = stream_execute(rq, s, &ex);
		goto out;
	}
	if (result_init(&res) < 0) {
		answered = http_error(rq, 500, "internal", "out of memory");
		goto out;
	}
	r = session_exec(rq->sm, s, &ex, NULL, &res, reason, sizeof(reason));
	if (r == -EINVAL) {
		answered = http_error(rq, 400, "invalid_request", "'code' is not valid");
	} else if (r == -EPIPE) {
		/* The sandbox died between the lookup and now: say why. */
		struct session *again = http_session(rq, session_id(s), &answered);

		if (again) {
			session_put(again);
			answered = http_error(rq, 410, "session_gone", "the session has ended");
		}
	} else if (r < 0)
		answered = http_session_error(rq, r, reason);
	else
		answered = http_json(rq, 200, result_to_json(&res));
	result_release(&res);
out:
	http_exec_request_release(&ex);
	json_decref(body);
	return answered;
}

/* PATCH /v1/sessions/{id}: new timeouts, answered with the session; and
 * POST .../keepalive (keepalive: no body), which only marks it used.  Both
 * count as activity; neither runs anything in the sandbox. */
static enum MHD_Result set_lifetime(struct api_req *rq, struct session *s, bool keepalive)
{
	static const char *const keys[] = { "idle_timeout_s", "max_lifetime_s", NULL };
	enum MHD_Result answered = MHD_NO;
	json_t *body = keepalive ? NULL : http_body_object(rq, &answered);
	double idle = 0, life = 0;	/* 0: keep */
	char reason[256] = "";
	int r;

	if (keepalive && rq->body.len)
		return http_error(rq, 400, "invalid_request", "keepalive takes no body (change "
				  "the timeouts with PATCH /v1/sessions/{id})");
	if (!keepalive && (!body || !http_only_keys(rq, body, keys, &answered) ||
			   !parse_lifetime(rq, body, &idle, &life, &answered)))
		goto out;
	r = session_set_lifetime(s, idle, life, reason, sizeof(reason));
	if (r < 0)
		answered = http_session_error(rq, r, reason);
	else
		answered = keepalive ? http_empty(rq, 204) : http_json(rq, 200, session_json(s));
out:
	json_decref(body);
	return answered;
}

/* GET /v1/sessions/{id}/executions: the record, also after the session
 * ended (then its tombstone or the record says it existed).  At most
 * RECORD_LIST_MAX bytes of entries whatever `limit` says; `truncated` tells
 * the client to ask for the older ones with `before`. */
static enum MHD_Result executions(struct api_req *rq, const char *id)
{
	enum MHD_Result answered = MHD_NO;
	struct session *s;
	json_t *list;
	uint32_t limit, before;
	bool truncated;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!http_list_args(rq, &limit, &before, &answered))
		return answered;
	list = smgr_executions(rq->sm, id, (int)limit, before, &truncated);
	if (!list)
		return http_error(rq, 500, "internal", "out of memory");
	if (json_array_size(list) == 0) {
		/* Nothing recorded: a live session without executions yet, or
		 * no such session (404), or one that ended with none (410). */
		s = http_session(rq, id, &answered);
		if (!s) {
			json_decref(list);
			return answered;
		}
		session_put(s);
	}
	return http_json(rq, 200, json_pack("{s:s, s:o, s:b}", "session", id, "executions", list,
					    "truncated", truncated));
}

enum MHD_Result handle_session(struct api_req *rq, const char *id, const char *rest)
{
	enum MHD_Result answered = MHD_NO;
	struct session *s;
	const char *m = rq->method;

	if (!*rest && !strcmp(m, "DELETE")) {
		int r = smgr_delete(rq->sm, id);

		if (r == SM_ENOTFOUND) {
			/* An expired or dead session is deleted already: say why. */
			s = http_session(rq, id, &answered);
			if (!s)
				return answered;
			session_put(s);
			return http_error(rq, 500, "internal", "the session could not be deleted");
		}
		return http_empty(rq, 204);
	}
	if (!strcmp(rest, "/executions"))
		return executions(rq, id);
	s = http_session(rq, id, &answered);
	if (!s)
		return answered;
	if (!*rest && !strcmp(m, "PATCH")) {
		answered = set_lifetime(rq, s, false);
	} else if (!*rest) {
		answered = strcmp(m, "GET") ? http_not_allowed(rq, "GET, PATCH, DELETE") :
					      http_json(rq, 200, session_json(s));
	} else if (!strcmp(rest, "/keepalive")) {
		answered = strcmp(m, "POST") ? http_not_allowed(rq, "POST") :
					       set_lifetime(rq, s, true);
	} else if (!strcmp(rest, "/execute")) {
		answered = strcmp(m, "POST") ? http_not_allowed(rq, "POST") : execute(rq, s);
	} else if (!strcmp(rest, "/files") || !strcmp(rest, "/files/")) {
		answered = handle_files(rq, s, "", true);
	} else if (!strncmp(rest, "/files/", 7)) {
		answered = handle_files(rq, s, rest + 7, false);
	} else {
		answered = http_error(rq, 404, "not_found", "no such endpoint: %.200s", rq->url);
	}
	session_put(s);
	return answered;
}

/* ---- POST /v1/execute: one sandbox, one execution ---------------------- */

struct upload {
	const char *path;	/* borrowed from the request */
	unsigned char *data;
	size_t len;
};

static void free_uploads(struct upload *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].data);
	free(v);
}

/* Check and decode the request's files before anything is spent on it. */
static struct upload *decode_uploads(struct api_req *rq, json_t *files, size_t *count,
				     enum MHD_Result *answered)
{
	static const char *const keys[] = { "path", "content_base64", NULL };
	size_t n = json_array_size(files), i;
	struct upload *v = calloc(n ? n : 1, sizeof(*v));
	json_t *f;

	*count = 0;
	if (!v) {
		*answered = http_error(rq, 500, "internal", "out of memory");
		return NULL;
	}
	json_array_foreach(files, i, f) {
		json_t *path = json_object_get(f, "path"), *data = json_object_get(f, "content_base64");
		char why[160], bad[128];
		const char *k;
		json_t *unused;

		if (!json_is_object(f) || !json_is_string(path) || !json_is_string(data)) {
			*answered = http_error(rq, 400, "invalid_request", "files[%zu] needs string "
					       "'path' and 'content_base64'", i);
			goto fail;
		}
		json_object_foreach(f, k, unused) {
			bool known = !strcmp(k, keys[0]) || !strcmp(k, keys[1]);

			if (!known) {
				snprintf(bad, sizeof(bad), "%.100s", k);
				*answered = http_error(rq, 400, "invalid_request",
						       "files[%zu]: unknown field '%s'", i, bad);
				goto fail;
			}
		}
		if (files_check_path(json_string_value(path), false, why, sizeof(why)) < 0) {
			*answered = http_error(rq, 400, "invalid_path", "files[%zu]: %s", i, why);
			goto fail;
		}
		v[i].path = json_string_value(path);
		v[i].data = base64_decode(json_string_value(data), json_string_length(data),
					  &v[i].len);
		*count = i + 1;
		if (!v[i].data) {
			*answered = http_error(rq, 400, "invalid_request",
					       "files[%zu].content_base64 is not valid base64", i);
			goto fail;
		}
	}
	return v;
fail:
	free_uploads(v, *count);
	*count = 0;
	return NULL;
}

/* Write the decoded files into the fresh sandbox. */
static bool write_uploads(struct api_req *rq, const struct upload *v, size_t n,
			  struct box *box, enum MHD_Result *answered)
{
	struct files_user u;

	jail_owner(box_jail(box), &u.uid, &u.gid);
	for (size_t i = 0; i < n; i++) {
		int r = files_write(&u, jail_work_fd(box_jail(box)), v[i].path, v[i].data,
				    v[i].len);
		bool full = r == -ENOSPC || r == -EDQUOT || r == -EFBIG;

		box_note_host_write(box);
		if (r < 0) {
			*answered = http_error(rq, full ? 413 : 400, full ? "too_large" :
					       "invalid_path", "files[%zu]: cannot write '%.200s': %s",
					       i, v[i].path, strerror(-r));
			return false;
		}
	}
	return true;
}

#define MAX_RETURN_PATTERNS 64

/* "return_files": true (every file written), false, or a list of fnmatch
 * patterns: *all and *patterns (a borrowed array of n) for
 * smgr_oneshot_files(). */
static bool parse_return_files(struct api_req *rq, json_t *v, bool *want,
			       const char ***patterns, size_t *n, enum MHD_Result *answered)
{
	size_t i;
	json_t *p;

	*want = false;
	*patterns = NULL;
	*n = 0;
	if (!v || json_is_false(v) || json_is_null(v))
		return true;
	*want = true;
	if (json_is_true(v))
		return true;
	if (!json_is_array(v) || json_array_size(v) > MAX_RETURN_PATTERNS)
		goto bad;
	if (!(*patterns = calloc(json_array_size(v) + 1, sizeof(**patterns)))) {
		*answered = http_error(rq, 500, "internal", "out of memory");
		return false;
	}
	json_array_foreach(v, i, p) {
		if (!json_is_string(p) || json_string_length(p) > 1024 ||
		    strlen(json_string_value(p)) != json_string_length(p))
			goto bad;
		(*patterns)[(*n)++] = json_string_value(p);
	}
	return true;
bad:
	free(*patterns);
	*patterns = NULL;
	*answered = http_error(rq, 400, "invalid_request", "'return_files' must be true, false "
			       "or an array of at most %d glob patterns (strings)",
			       MAX_RETURN_PATTERNS);
	return false;
}

enum MHD_Result handle_oneshot(struct api_req *rq)
{
	static const char *const keys[] = {
		"code", "language", "files", "limits", "timeout_s", "return_files", "env", NULL
	};
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered), *files;
	struct upload *uploads = NULL;
	size_t nuploads = 0, npatterns = 0;
	const char **patterns = NULL;
	bool return_files = false;
	struct petri_limits lim;
	struct box_exec ex = { .env = NULL };
	struct box *box = NULL;
	struct result res;
	bool slot = false;
	char err[512] = "";
	double started_at;
	int r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered) ||
	    !parse_limits(rq, body, &lim, &answered) ||
	    !http_exec_request(rq, body, "python", &lim, &ex, &answered) ||
	    !parse_return_files(rq, json_object_get(body, "return_files"), &return_files,
				&patterns, &npatterns, &answered))
		goto out;
	files = json_object_get(body, "files");
	if (files && !json_is_null(files) &&
	    (!json_is_array(files) || json_array_size(files) > MAX_ONESHOT_FILES)) {
		answered = http_error(rq, 400, "invalid_request", "'files' must be an array of at "
				      "most %d objects", MAX_ONESHOT_FILES);
		goto out;
	}
	if (json_is_array(files) && !(uploads = decode_uploads(rq, files, &nuploads, &answered)))
		goto out;
	if ((r = smgr_exec_slot_take(rq->sm)) < 0) {
		answered = http_session_error(rq, r, NULL);
		goto out;
	}
	slot = true;
	if ((r = smgr_oneshot_begin(rq->sm, &lim, &box, err, sizeof(err))) < 0) {
		answered = http_session_error(rq, r, err);
		goto out;
	}
	if (!write_uploads(rq, uploads, nuploads, box, &answered))
		goto out;
	ex.one_shot = true;
	if (result_init(&res) < 0) {
		answered = http_error(rq, 500, "internal", "out of memory");
		goto out;
	}
	started_at = clock_wall_s();
	r = box_exec(box, &ex, NULL, &res);
	if (r < 0) {
		answered = http_error(rq, r == -EINVAL ? 400 : 500, r == -EINVAL ?
				      "invalid_request" : "internal", "the execution failed: %s",
				      strerror(-r));
	} else {
		smgr_finished(rq->sm, NULL, &ex, &lim, started_at, &res);
		/* After the record took its copy: file contents are the
		 * client's, not the record's. */
		if (return_files && smgr_oneshot_files(rq->sm, box, res.files, patterns,
						       npatterns) < 0)
			answered = http_error(rq, 500, "internal", "out of memory");
		else
			answered = http_json(rq, 200, result_to_json(&res));
	}
	result_release(&res);
out:
	if (box)
		smgr_oneshot_end(rq->sm, box);
	if (slot)
		smgr_exec_slot_give(rq->sm);
	free_uploads(uploads, nuploads);
	free(patterns);
	http_exec_request_release(&ex);
	json_decref(body);
	return answered;
}
