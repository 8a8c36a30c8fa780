/* Endpoints for sessions, executions and one-shot runs (docs/api.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/events.h"
#include "api/http.h"
#include "exec/languages.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/timefmt.h"

/* ---- shared helpers --------------------------------------------------- */

const char *http_sm_code(enum sm_result r, int *status)
{
	static const int map[] = {
		[SM_OK] = 500,
		[SM_NOT_FOUND] = 404,
		[SM_GONE] = 410,
		[SM_BUSY] = 409,
		[SM_CAPACITY] = 429,
		[SM_STOPPING] = 503,
		[SM_START_FAILED] = 503,
		[SM_INVALID] = 400,
		[SM_TOO_LARGE] = 413,
		[SM_NO_MEMORY] = 500,
		[SM_NO_PROCESS] = 404,
		[SM_PROTECTED] = 403,
		[SM_HOST_FULL] = 429,
		[SM_KEY_SHARE] = 429,
		[SM_DRAINING] = 503,
	};

	if (status)
		*status = map[r];
	return sm_result_code(r);
}

const char *http_sm_message(enum sm_result r, const char *reason)
{
	/* A reason says more than the generic sentence where there is one
	 * (over capacity: which bound, when the session layer says); not
	 * found and busy have none. */
	bool own = r == SM_GONE || r == SM_START_FAILED || r == SM_INVALID || r == SM_TOO_LARGE ||
		   r == SM_NO_PROCESS || r == SM_PROTECTED || r == SM_CAPACITY;

	return own && reason && *reason ? reason : sm_result_message(r);
}

enum MHD_Result http_session_error(struct api_req *rq, enum sm_result r, const char *reason)
{
	int status;
	const char *code = http_sm_code(r, &status);

	return http_error(rq, status, code, "%s", http_sm_message(r, reason));
}

int http_request_status(const struct request_error *e)
{
	return !strcmp(e->code, "internal") ? 500 :
	       !strcmp(e->code, "network_not_allowed") ? 403 : 400;
}

enum MHD_Result http_request_error(struct api_req *rq, const struct request_error *e)
{
	return http_error(rq, http_request_status(e), e->code, "%s", e->message);
}

struct session *http_session(struct api_req *rq, const char *id, enum MHD_Result *answered)
{
	struct session *s;
	char reason[256] = "";
	enum sm_result r = smgr_lookup(rq->sm, id, &s, reason, sizeof(reason));

	if (r != SM_OK) {
		*answered = http_session_error(rq, r, reason);
		return NULL;
	}
	return s;
}

/* ---- /v1/sessions ----------------------------------------------------- */

static enum MHD_Result create_session(struct api_req *rq)
{
	static const char *const keys[] = {
		"language", "limits", "idle_timeout_s", "max_lifetime_s", "env", "network", NULL
	};
	enum MHD_Result answered = MHD_NO;
	struct net_policy *network = NULL;
	struct session_params p = {
		.language = lang_default(),
		.idle_timeout_s = rq->cfg->idle_timeout_s,
		.max_lifetime_s = rq->cfg->max_lifetime_s,
		.key = rq->key_index + 1,
	};
	struct request_error e;
	struct session *s = NULL;
	json_t *body = http_body_object(rq, &answered);
	char **env = NULL;
	char err[512] = "";
	enum sm_result r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered))
		goto out;
	if (!request_limits(rq->cfg, json_object_get(body, "limits"), &p.limits, &e) ||
	    !request_language(json_object_get(body, "language"), &p.language, &e) ||
	    !request_lifetime(rq->cfg, body, &p.idle_timeout_s, &p.max_lifetime_s, &e) ||
	    !(env = request_env(rq->cfg, json_object_get(body, "env"), &e)) ||
	    !request_network(rq->cfg, json_object_get(body, "network"), &network, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	p.env = (const char *const *)env;
	p.network = network;
	r = smgr_create(rq->sm, &p, &s, err, sizeof(err));
	if (r != SM_OK) {
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
	exec_env_free(env);
	free(network);
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
	static const char *const keys[] = {
		"code", "language", "timeout_s", "env", "tests", "stdin", NULL
	};
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered);
	struct exec_request ex = { .env = NULL };
	struct request_error e;
	struct result res;
	char reason[256] = "";
	enum sm_result r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered))
		goto out;
	if (!request_exec(rq->cfg, body, session_language(s), session_limits(s), &ex, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	if (http_wants_sse(rq)) {
		answered = stream_execute(rq, s, &ex);
		goto out;
	}
	if (result_init(&res) < 0) {
		answered = http_error(rq, 500, "internal", "out of memory");
		goto out;
	}
	r = session_exec(rq->sm, s, &ex, NULL, &res, reason, sizeof(reason));
	answered = r == SM_OK ? http_json(rq, 200, result_to_json(&res)) :
				http_session_error(rq, r, reason);
	result_release(&res);
out:
	request_exec_release(&ex);
	json_decref(body);
	return answered;
}

/* PATCH /v1/sessions/{id}: new timeouts, a new network policy, answered
 * with the session; and POST .../keepalive (keepalive: no body), which only
 * marks it used.  Both count as activity; neither runs anything in the
 * sandbox. */
static enum MHD_Result set_lifetime(struct api_req *rq, struct session *s, bool keepalive)
{
	static const char *const keys[] = { "idle_timeout_s", "max_lifetime_s", "network", NULL };
	enum MHD_Result answered = MHD_NO;
	json_t *body = keepalive ? NULL : http_body_object(rq, &answered);
	double idle = 0, life = 0;	/* 0: keep */
	struct net_policy *network = NULL;
	struct request_error e;
	char reason[512] = "";
	enum sm_result r;

	if (keepalive && rq->body.len)
		return http_error(rq, 400, "invalid_request", "keepalive takes no body (change "
				  "the timeouts with PATCH /v1/sessions/{id})");
	if (!keepalive && (!body || !http_only_keys(rq, body, keys, &answered)))
		goto out;
	if (!keepalive && (!request_lifetime(rq->cfg, body, &idle, &life, &e) ||
			   !request_network(rq->cfg, json_object_get(body, "network"), &network,
					    &e))) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	/* The network first: a change that cannot be made leaves the
	 * timeouts as they were too. */
	r = body && json_object_get(body, "network") ?
		session_set_network(s, network, reason, sizeof(reason)) : SM_OK;
	if (r == SM_OK)
		r = session_set_lifetime(s, idle, life, reason, sizeof(reason));
	if (r != SM_OK)
		answered = http_session_error(rq, r, reason);
	else
		answered = keepalive ? http_empty(rq, 204) : http_json(rq, 200, session_json(s));
out:
	free(network);
	json_decref(body);
	return answered;
}

/* POST /v1/sessions/{id}/interrupt: the execution in progress gets
 * SIGINT as at a timeout; answered at once with whether one was running
 * (its own request answers how it ended). */
static enum MHD_Result interrupt(struct api_req *rq, struct session *s)
{
	char reason[256] = "";
	enum sm_result r;
	bool running;

	if (rq->body.len)
		return http_error(rq, 400, "invalid_request", "interrupt takes no body");
	r = session_interrupt(s, &running, reason, sizeof(reason));
	return r == SM_OK ? http_json(rq, 200, json_pack("{s:b}", "interrupted", running)) :
			    http_session_error(rq, r, reason);
}

/* POST /v1/sessions/{id}/restart: a fresh runtime in the same sandbox,
 * answered with the session once it is ready. */
static enum MHD_Result restart(struct api_req *rq, struct session *s)
{
	char reason[256] = "";
	enum sm_result r;

	if (rq->body.len)
		return http_error(rq, 400, "invalid_request", "restart takes no body");
	r = session_restart(rq->sm, s, reason, sizeof(reason));
	return r == SM_OK ? http_json(rq, 200, session_json(s)) :
			    http_session_error(rq, r, reason);
}

/* GET /v1/sessions/{id}/executions: the record, also after the session
 * ended (then its tombstone or the record says it existed).  At most
 * RECORD_LIST_MAX bytes of entries whatever `limit` says; `truncated` tells
 * the client to ask for the older ones with `before`. */
static enum MHD_Result executions(struct api_req *rq, const char *id)
{
	struct record_query q = { .scope = RECORD_SESSION, .session = id };
	enum MHD_Result answered = MHD_NO;
	struct buf b = BUF_INIT;
	struct session *s;
	json_t *sid;
	char *quoted;
	size_t at;
	bool truncated;
	int r;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!http_list_args(rq, &q, &answered))
		return answered;
	/* The id is the client's, from the URL: written as JSON writes it. */
	sid = http_string(id);
	quoted = sid ? json_dumps(sid, JSON_ENCODE_ANY) : NULL;
	json_decref(sid);
	r = quoted ? buf_appendf(&b, "{\"session\":%s,\"executions\":", quoted) : -ENOMEM;
	free(quoted);
	if (r < 0)
		goto oom;
	at = b.len;
	if (!http_list(rq, &q, &b, &truncated, &answered))
		goto out;
	if (b.len - at == 2) {
		/* "[]", nothing recorded: a live session without executions
		 * yet, or no such session (404), or one that ended with none
		 * (410). */
		if (!(s = http_session(rq, id, &answered)))
			goto out;
		session_put(s);
	}
	if (buf_appendf(&b, ",\"truncated\":%s}", truncated ? "true" : "false") < 0)
		goto oom;
	return http_json_buf(rq, 200, &b);
oom:
	answered = http_error(rq, 500, "internal", "out of memory");
out:
	buf_release(&b);
	return answered;
}

/* GET /v1/sessions/{id}/processes: what the session's code left running;
 * DELETE .../processes/{pid}[?signal=NAME]: a signal to one of them (TERM
 * unless named), answered at once (202): the process may take its time to
 * end, or handle the signal.  pid is the sandbox's number. */
static enum MHD_Result processes(struct api_req *rq, struct session *s, const char *pid_arg)
{
	const char *sig_arg, *signame;
	struct request_error e;
	char reason[256] = "";
	json_t *list, *pidv, *sigv;
	enum MHD_Result answered;
	enum sm_result r;
	int pid, sig;

	if (!pid_arg) {
		if (strcmp(rq->method, "GET"))
			return http_not_allowed(rq, "GET");
		r = session_processes(s, &list, reason, sizeof(reason));
		return r == SM_OK ? http_json(rq, 200, list) : http_session_error(rq, r, reason);
	}
	if (strcmp(rq->method, "DELETE"))
		return http_not_allowed(rq, "DELETE");
	sig_arg = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "signal");
	pidv = http_string(pid_arg);
	sigv = sig_arg ? http_string(sig_arg) : NULL;
	if (!pidv || (sig_arg && !sigv)) {
		answered = http_error(rq, 500, "internal", "out of memory");
	} else if (!request_pid(pidv, &pid, &e) || !request_signal(sigv, &sig, &signame, &e)) {
		answered = http_request_error(rq, &e);
	} else {
		r = session_signal_process(s, pid, sig, reason, sizeof(reason));
		answered = r == SM_OK ? http_json(rq, 202, json_pack("{s:i, s:s}", "pid", pid,
								      "signal", signame)) :
					http_session_error(rq, r, reason);
	}
	json_decref(pidv);
	json_decref(sigv);
	return answered;
}

/* GET /v1/sessions/{id}/usage: what its sandbox uses now (not use of the
 * session: watching it does not keep it alive). */
static enum MHD_Result usage(struct api_req *rq, struct session *s)
{
	const struct petri_limits *l = session_limits(s);
	struct session_usage u;
	char when[TIMEFMT_LEN];
	int r;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (session_ended(s))
		return http_error(rq, 410, "session_gone", "the session has ended");
	if ((r = session_usage(s, &u)) < 0)
		return http_error(rq, 500, "internal", "cannot read the sandbox's use: %s",
				  strerror(-r));
	return http_json(rq, 200, json_pack("{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
		"at", timefmt_rfc3339(clock_wall_s(), when),
		"cpu_ms", (json_int_t)(u.cpu_ns / 1000000), "cpu_limit", l->cpu,
		"memory_bytes", (json_int_t)u.memory_bytes,
		"memory_limit_bytes", (json_int_t)l->memory_mb << 20,
		"work_used_bytes", (json_int_t)u.work_used_bytes,
		"work_total_bytes", (json_int_t)u.work_total_bytes,
		"network_sent_bytes", (json_int_t)u.net_sent_bytes,
		"network_received_bytes", (json_int_t)u.net_received_bytes));
}

enum MHD_Result handle_session(struct api_req *rq, const char *id, const char *rest)
{
	enum MHD_Result answered = MHD_NO;
	struct session *s;
	const char *m = rq->method;

	if (!*rest && !strcmp(m, "DELETE")) {
		if (smgr_delete(rq->sm, id) == SM_NOT_FOUND) {
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
	if (!strcmp(rest, "/export"))
		return handle_session_export(rq, id);
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
	} else if (!strcmp(rest, "/interrupt")) {
		answered = strcmp(m, "POST") ? http_not_allowed(rq, "POST") : interrupt(rq, s);
	} else if (!strcmp(rest, "/restart")) {
		answered = strcmp(m, "POST") ? http_not_allowed(rq, "POST") : restart(rq, s);
	} else if (!strcmp(rest, "/execute")) {
		answered = strcmp(m, "POST") ? http_not_allowed(rq, "POST") : execute(rq, s);
	} else if (!strcmp(rest, "/archive")) {
		answered = handle_archive(rq, s);
	} else if (!strcmp(rest, "/processes")) {
		answered = processes(rq, s, NULL);
	} else if (!strncmp(rest, "/processes/", 11)) {
		answered = processes(rq, s, rest + 11);
	} else if (!strcmp(rest, "/watch")) {
		answered = handle_watch(rq, s);
	} else if (!strcmp(rest, "/usage")) {
		answered = usage(rq, s);
	} else if (!strncmp(rest, "/ports/", 7)) {
		answered = handle_ports(rq, s, rest + 7);
	} else if (!strcmp(rest, "/commands")) {
		answered = handle_commands(rq, s, "");
	} else if (!strncmp(rest, "/commands/", 10) && rest[10]) {
		answered = handle_commands(rq, s, rest + 10);
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

enum MHD_Result handle_oneshot(struct api_req *rq)
{
	static const char *const keys[] = {
		"code", "language", "archive", "files", "limits", "timeout_s", "return_files", "env",
		"tests", "stdin", NULL
	};
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered);
	struct request_error e;
	struct oneshot o;
	struct result res;
	char err[512] = "";
	enum sm_result r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered)) {
		json_decref(body);
		return answered;
	}
	if (!request_oneshot(rq->cfg, body, &o, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	if (result_init(&res) < 0) {
		answered = http_error(rq, 500, "internal", "out of memory");
		goto out;
	}
	o.key = rq->key_index + 1;
	r = smgr_oneshot(rq->sm, &o, NULL, &res, err, sizeof(err));
	answered = r == SM_OK ? http_json(rq, 200, result_to_json(&res)) :
				http_session_error(rq, r, err);
	result_release(&res);
out:
	oneshot_release(&o);
	json_decref(body);
	return answered;
}
