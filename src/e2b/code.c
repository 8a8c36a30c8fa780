/* The E2B code interpreter (port 49999; e2b.h, docs/e2b.md): POST /execute
 * streams one execution as NDJSON, the way @e2b/code-interpreter reads it;
 * /contexts creates, lists, restarts and removes code contexts.
 *
 * An execution is the session's, like any other: one at a time (a second,
 * or one while an envd command runs, is answered 409 before any byte of
 * the stream), the same request model (exec/request.h: code, timeout,
 * variables), the same jail.  A context is a namespace of the session's
 * one Python interpreter (exec_request.context), with its own cwd; bash and C
 * contexts only choose the language and the cwd, as their executions keep
 * no state between them anyway.  The default contexts ("python", "bash",
 * "c"; e2b.c makes them) are the session's own namespace. */
#include "e2b/e2b.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/languages.h"
#include "session/workspace.h"
#include "util/clock.h"
#include "util/jsoncost.h"
#include "util/timefmt.h"

/* An application/json representation is parsed into the result's "json"
 * object: JSON the sandboxed code wrote, so bounded before jansson sees it. */
static const struct jsoncost_limits json_repr_cost = { .max_nodes = 100000, .max_depth = 64 };

/* ---- the NDJSON wire ------------------------------------------------------ */

struct nd_state {
	json_t *error;			/* the execution's first error, sent at the end */
	unsigned count;			/* number_of_executions (0: not sent) */
};

/* One line.  ASCII only: the SDK decodes each chunk it reads with a new
 * TextDecoder, so a character cut across two reads would reach it as
 * U+FFFD; escaped as \uXXXX, none is cut.  json_dumps() escapes newlines
 * in strings, so a line is never blank nor broken. */
static int nd_line(struct buf *out, json_t *obj)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	int r = text && buf_append(out, text, strlen(text)) == 0 &&
		buf_append(out, "\n", 1) == 0 ? 0 : -ENOMEM;

	json_decref(obj);
	free(text);
	return r;
}

static int nd_text(void *state, struct buf *out, enum exec_stream s, const char *text,
		   size_t len)
{
	char ts[TIMEFMT_LEN];

	(void)state;
	return nd_line(out, json_pack("{s:s, s:s%, s:s}", "type",
				      s == EXEC_STDOUT ? "stdout" : "stderr", "text", text, len,
				      "timestamp", timefmt_rfc3339(clock_wall_s(), ts)));
}

/* petri's MIME types as E2B names them (its server's Result model). */
struct format {
	const char *mime, *key;
};

static const struct format formats[] = {
	{ "text/html", "html" }, { "text/markdown", "markdown" },
	{ "image/svg+xml", "svg" }, { "image/png", "png" }, { "image/jpeg", "jpeg" },
	{ "application/pdf", "pdf" }, { "text/latex", "latex" },
	{ "application/javascript", "javascript" },
};

/* ... and those whose text is JSON, which E2B sends as JSON: a value shown
 * as JSON, a chart's data, a DataFrame's columns (docs/api.md). */
static const struct format json_formats[] = {
	{ "application/json", "json" },
	{ "application/vnd.petri.chart+json", "chart" },
	{ "application/vnd.petri.dataframe+json", "data" },
};

/* text/plain as E2B gives it: its server drops one pair of quotes, single
 * or double, around the text (a str's repr 'abc' or "it's" becomes abc or
 * it's), and the SDKs' users read execution.text that way.  The driver
 * keeps the repr; the wire mimics E2B. */
static json_t *plain_text(const json_t *v)
{
	const char *t = json_string_value(v);
	size_t n = json_string_length(v);

	if (n >= 2 && (t[0] == '\'' || t[0] == '"') && t[n - 1] == t[0])
		return json_stringn(t + 1, n - 2);
	return json_stringn(t, n);
}

static json_t *json_repr(const json_t *v)
{
	const char *t = json_string_value(v);
	size_t n = json_string_length(v);

	if (!jsoncost_within(t, n, &json_repr_cost, NULL))
		return NULL;
	return json_loadb(t, n, JSON_DECODE_ANY, NULL);
}

static int nd_rich(void *state, struct buf *out, const json_t *bundle, bool main)
{
	json_t *o = json_pack("{s:s}", "type", "result"), *v;

	(void)state;
	if (!o)
		return -ENOMEM;
	/* The driver's bundles hold strings only; anything else is skipped. */
	if (json_is_string(v = json_object_get(bundle, "text/plain")))
		json_object_set_new(o, "text", plain_text(v));
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (json_is_string(v = json_object_get(bundle, formats[i].mime)))
			/* a string is never changed: share it, for the moment
			 * the line is written (a PNG can be megabytes) */
			json_object_set(o, formats[i].key, (json_t *)v);
	/* JSON carried as text: parsed (bounded in cost), as E2B's keys */
	for (size_t i = 0; i < sizeof(json_formats) / sizeof(json_formats[0]); i++)
		if (json_is_string(v = json_object_get(bundle, json_formats[i].mime)))
			json_object_set_new(o, json_formats[i].key, json_repr(v)); /* NULL: not set */
	json_object_set_new(o, "is_main_result", json_boolean(main));
	return nd_line(out, o);
}

/* Kept for the end: E2B reports one error per execution, and a timeout's
 * error (the interrupt's traceback) is told as the timeout it is. */
static int nd_error(void *state, struct buf *out, const json_t *error)
{
	struct nd_state *ns = state;

	(void)out;
	if (!ns->error)
		ns->error = json_deep_copy(error);
	return 0;
}

static int nd_dropped(void *state, struct buf *out, unsigned long long n)
{
	char text[160];
	int len = snprintf(text, sizeof(text), "[petri] %llu output or result events were "
			   "dropped here: the client read too slowly\n", n);

	return nd_text(state, out, EXEC_STDERR, text, (size_t)len);
}

static json_t *error_line(const char *name, const char *value, const char *traceback)
{
	return json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", name, "value",
			 value ? value : "", "traceback", traceback ? traceback : "");
}

static const char *error_field(const json_t *error, const char *key)
{
	return json_string_value(json_object_get(error, key));
}

/* The error line of an execution that ended, if any. */
static json_t *ended_error(const struct nd_state *ns, const struct result *res)
{
	const char *tb = error_field(ns->error, "traceback");
	char code[32];

	switch (res->status) {
	case RESULT_TIMEOUT:
		return error_line("TimeoutError", res->reason, tb);
	case RESULT_OOM:
		return error_line("MemoryError", res->reason, tb);
	case RESULT_KILLED:
		return error_line("SandboxKilled", res->reason, tb);
	default:
		break;
	}
	if (ns->error)
		return error_line(error_field(ns->error, "name") ? error_field(ns->error, "name") :
				  "Error", error_field(ns->error, "message"), tb);
	if (res->status == RESULT_ERROR) {	/* sys.exit(3): no exception reported */
		snprintf(code, sizeof(code), "%d", res->has_exit_code ? res->exit_code : 1);
		return error_line("SystemExit", code, "");
	}
	return NULL;
}

static int nd_done(void *state, struct buf *out, enum sm_result r, const char *reason,
		   const struct result *res)
{
	struct nd_state *ns = state;
	json_t *err;
	int rc = 0;

	err = res ? ended_error(ns, res) :
		    error_line("SandboxError", http_sm_message(r, reason), "");
	if (rc == 0 && err)
		rc = nd_line(out, err);
	else
		json_decref(err);
	if (rc == 0 && ns->count)
		rc = nd_line(out, json_pack("{s:s, s:i}", "type", "number_of_executions",
					    "execution_count", (int)ns->count));
	if (rc == 0)
		rc = buf_append_str(out, "{\"type\":\"end_of_execution\"}\n");
	return rc;
}

static void nd_release(void *state)
{
	json_decref(((struct nd_state *)state)->error);
}

/* Before the stream: the SDK shows only the status and its phrase for
 * anything but 404 and 502, so each status is picked to say what it can. */
static enum MHD_Result nd_refuse(struct api_req *rq, enum sm_result r, const char *reason)
{
	int status;

	switch (r) {
	case SM_BUSY:
		return e2b_error(rq, 409, "the sandbox is busy: petri runs one execution or "
				 "command at a time in a sandbox; retry when it is done");
	case SM_GONE:
		/* 502: what the SDK reads as a sandbox that timed out */
		return e2b_error(rq, 502, "the sandbox has ended%s%s", *reason ? ": " : "",
				 reason);
	default:
		http_sm_code(r, &status);
		return e2b_error(rq, (unsigned)status, "%s", http_sm_message(r, reason));
	}
}

static const struct stream_wire ndjson_wire = {
	.content_type = "application/x-ndjson",
	.state_size = sizeof(struct nd_state),
	.text = nd_text,
	.rich = nd_rich,
	.error = nd_error,
	.dropped = nd_dropped,
	.done = nd_done,
	/* ignored by the SDKs (an unknown type); E2B's server sends it too */
	.keepalive = "{\"type\":\"keepalive\"}\n",
	.refuse = nd_refuse,
	.release = nd_release,
	.cut_when_deleted = true,
};

/* ---- requests -------------------------------------------------------------- */

/* The body, a JSON object ({} when empty; already bounded in size and cost
 * by server.c).  The parser's message is not quoted: it may quote the body. */
static json_t *body_object(struct api_req *rq, enum MHD_Result *answered)
{
	json_error_t jerr;
	json_t *o;

	if (!rq->body.len)
		return json_object();
	o = json_loadb(rq->body.data, rq->body.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		*answered = e2b_error(rq, 400, "the body must be a JSON object (line %d, column "
				      "%d)", jerr.line, jerr.column);
		return NULL;
	}
	return o;
}

/* A string field of the body, or NULL when absent or null (E2B's SDKs drop
 * undefined ones).  false with the answer when it is something else. */
static bool opt_string(struct api_req *rq, json_t *body, const char *key, const char **out,
		       enum MHD_Result *answered)
{
	json_t *v = json_object_get(body, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
		*answered = e2b_error(rq, 400, "'%s' must be a string", key);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

/* A language as E2B's server reads it (case and surrounding spaces do not
 * matter), to petri's canonical name: as written, else in lower case.
 * E2B's js and ts are aliases of petri's javascript and typescript; E2B's
 * others (java...) are refused by name. */
static bool language_arg(struct api_req *rq, const char *v, const char **name,
			 enum MHD_Result *answered)
{
	const struct language *l = NULL;
	const char *t = v;
	char low[LANG_NAME_MAX + 1], msg[1536];
	size_t n;

	while (*t == ' ' || *t == '\t')
		t++;
	n = strlen(t);
	while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	if (n < sizeof(low)) {
		memcpy(low, t, n);
		low[n] = '\0';
		if (!(l = lang_find(low))) {
			for (size_t i = 0; i < n; i++)
				low[i] = (char)(t[i] >= 'A' && t[i] <= 'Z' ? t[i] + 32 : t[i]);
			l = lang_find(low);
		}
	}
	if (l) {
		*name = l->name;
		return true;
	}
	lang_unknown_message(msg, sizeof(msg), v);
	*answered = e2b_error(rq, 400, "%s", msg);
	return false;
}

/* A context id from the URL or the body: what e2b.c makes (hex) or the
 * default contexts' names (a language's: letters, digits, + - _ .);
 * anything else is no context, and is not echoed. */
static bool id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n >= sizeof(((struct e2b_context *)0)->id))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		      (id[i] >= '0' && id[i] <= '9') || strchr("+-_.", id[i])))
			return false;
	return true;
}

static enum MHD_Result no_context(struct api_req *rq, const char *id)
{
	if (id_ok(id))
		return e2b_error(rq, 404, "context %s not found", id);
	return e2b_error(rq, 404, "context not found");
}

/* POST /execute {code, context_id?, language?, env_vars?}; unknown keys
 * are ignored, as E2B's server does. */
static enum MHD_Result execute(struct api_req *rq, struct session *s)
{
	enum MHD_Result answered = MHD_NO;
	json_t *body = body_object(rq, &answered), *req = NULL;
	const char *context_id, *language, *lang = "python";
	struct nd_state init = { .count = 0 };
	struct exec_request ex = { .env = NULL };
	char **env = NULL;
	struct e2b_context c;
	struct request_error e;

	if (!body)
		return answered;
	if (!opt_string(rq, body, "context_id", &context_id, &answered) ||
	    !opt_string(rq, body, "language", &language, &answered))
		goto out;
	if (context_id && language) {
		answered = e2b_error(rq, 400, "only one of context_id and language may be given");
		goto out;
	}
	if (language && !language_arg(rq, language, &lang, &answered))
		goto out;
	/* A language names its default context, whose id is the language. */
	if (!context_id)
		context_id = lang;
	if (e2b_context_get(rq->e2b, session_id(s), context_id, &c) < 0) {
		answered = no_context(rq, context_id);
		goto out;
	}
	/* The request model's rules, under E2B's names (env_vars for env). */
	req = json_pack("{s:O?}", "code", json_object_get(body, "code"));
	if (!req) {
		answered = e2b_error(rq, 500, "out of memory");
		goto out;
	}
	if (!request_exec(rq->cfg, req, c.language, session_limits(s), &ex, &e) ||
	    !(env = request_env(rq->cfg, json_object_get(body, "env_vars"), &e))) {
		answered = e2b_error(rq, http_request_status(&e), "%s%s",
				     ex.code && !env ? "env_vars: " : "", e.message);
		goto out;
	}
	exec_env_free((char **)ex.env);	/* request_exec's, empty */
	ex.env = (const char *const *)env;
	ex.cwd = c.cwd;
	ex.context = !strcmp(c.language, "python") && !c.is_default ? c.id : NULL;
	/* Only Python has state to lose (fresh with no context empties the
	 * session's own namespace: not for a restarted bash context). */
	ex.fresh = c.fresh && !strcmp(c.language, "python");
	init.count = c.executions + 1;
	answered = stream_execute_with(rq, s, &ex, &ndjson_wire, &init);
	/* rq->after is set once the stream is queued: the execution will run
	 * (a refusal left it NULL, and the context as it was). */
	if (rq->after)
		e2b_context_ran(rq->e2b, session_id(s), c.id, c.fresh);
out:
	request_exec_release(&ex);
	json_decref(req);
	json_decref(body);
	return answered;
}

/* Where a context's code runs, in the canonical form ("/home/user/a/b")
 * into out: a path relative to the workspace (/home/user), or any absolute
 * one in the sandbox (E2B's tests use /root): the code chdirs there as the
 * sandbox's user, inside its jail, so the path opens nothing it could not.
 * Whether it exists is the execution's business (a missing one fails it
 * with FileNotFoundError). */
static bool cwd_arg(const char *in, char *out, size_t len, char *why, size_t whylen)
{
	bool home = in[0] != '/' || e2b_in_home(in);
	const char *root = home ? E2B_HOME : "";
	char rel[FILES_PATH_MAX + 1];
	int w;

	/* Elsewhere: "/" itself, or a clean path below it, by the same rule. */
	if (ws_path(home ? in : in + 1, home ? root : NULL, WS_PATH_ROOT | WS_PATH_SLASH, rel,
		    why, whylen) != WS_OK)
		return false;
	w = snprintf(out, len, "%s%s%s", root, *rel || !home ? "/" : "", rel);
	if (w < 0 || (size_t)w >= len) {
		snprintf(why, whylen, "the path is too long");
		return false;
	}
	return true;
}

static json_t *context_json(const struct e2b_context *c)
{
	return json_pack("{s:s, s:s, s:s}", "id", c->id, "language", c->language, "cwd", c->cwd);
}

/* POST /contexts {language?, cwd?} */
static enum MHD_Result create_context(struct api_req *rq, struct session *s)
{
	enum MHD_Result answered = MHD_NO;
	json_t *body = body_object(rq, &answered);
	const char *language, *cwd, *lang = "python";
	char where[sizeof(((struct e2b_context *)0)->cwd)], why[256];
	struct e2b_context c;
	int r;

	if (!body)
		return answered;
	if (!opt_string(rq, body, "language", &language, &answered) ||
	    !opt_string(rq, body, "cwd", &cwd, &answered) ||
	    (language && !language_arg(rq, language, &lang, &answered)))
		goto out;
	if (!cwd_arg(cwd ? cwd : E2B_HOME, where, sizeof(where), why, sizeof(why))) {
		answered = e2b_error(rq, 400, "'cwd' must be an absolute path, or one "
				     "relative to " E2B_HOME ": %s", why);
		goto out;
	}
	r = e2b_context_add(rq->e2b, session_id(s), lang, where, &c);
	if (r == -ENOSPC)
		answered = e2b_error(rq, 429, "a sandbox has at most %d code contexts; remove "
				     "one first", E2B_CONTEXTS_MAX);
	else if (r == -ENOENT)
		answered = e2b_error(rq, 502, "the sandbox has ended");
	else if (r < 0)
		answered = e2b_error(rq, 500, "cannot make a context id");
	else
		answered = http_json(rq, 200, context_json(&c));
out:
	json_decref(body);
	return answered;
}

/* DELETE /contexts/{id}, POST /contexts/{id}/restart */
static enum MHD_Result one_context(struct api_req *rq, struct session *s, const char *rest)
{
	const char *slash = strchr(rest, '/');
	char id[sizeof(((struct e2b_context *)0)->id)] = "";
	struct e2b_context c;
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);

	if (n < sizeof(id)) {
		memcpy(id, rest, n);
		id[n] = '\0';
	}
	if (!slash && strcmp(rq->method, "DELETE"))
		return e2b_error(rq, 405, "use DELETE to remove a context");
	if (slash && strcmp(slash, "/restart"))
		return e2b_error(rq, 404, "no such route: a context has only /restart");
	if (slash && strcmp(rq->method, "POST"))
		return e2b_error(rq, 405, "use POST to restart a context");
	if (!id_ok(id) || e2b_context_get(rq->e2b, session_id(s), id, &c) < 0)
		return no_context(rq, id_ok(id) ? id : "");
	if (slash) {
		/* The next execution in it starts empty (for a default context:
		 * the session's own namespace). */
		if (e2b_context_restart(rq->e2b, session_id(s), id) < 0)
			return no_context(rq, id);
		return http_empty(rq, 204);
	}
	if (c.is_default)
		return e2b_error(rq, 400, "the default %s context cannot be removed (restart it "
				 "to empty it)", c.language);
	if (e2b_context_remove(rq->e2b, session_id(s), id) < 0)
		return no_context(rq, id);
	return http_empty(rq, 204);
}

enum MHD_Result e2b_code(struct api_req *rq, struct session *s, const char *path)
{
	const char *m = rq->method, *p = path;

	if (!strcmp(p, "/execute")) {
		if (strcmp(m, "POST"))
			return e2b_error(rq, 405, "use POST /execute");
		return execute(rq, s);
	}
	if (!strcmp(p, "/contexts")) {
		if (!strcmp(m, "POST"))
			return create_context(rq, s);
		if (!strcmp(m, "GET")) {
			json_t *list = e2b_context_list(rq->e2b, session_id(s));

			return list ? http_json(rq, 200, list) :
				      e2b_error(rq, 500, "out of memory");
		}
		return e2b_error(rq, 405, "use GET or POST /contexts");
	}
	if (!strncmp(p, "/contexts/", 10))
		return one_context(rq, s, p + 10);
	if (!strcmp(p, "/health") && !strcmp(m, "GET"))
		return http_text(rq, 200, "application/json", "\"OK\"", 4);
	/* Not echoed: a URL may hold any byte. */
	return e2b_error(rq, 404, "the code interpreter has no such route (it has /execute "
			 "and /contexts)");
}
