/* The API's commands: processes a client starts beside the interpreter and
 * comes back to (session/commands.h; docs/api.md, "Commands").
 *
 *   POST /v1/sessions/{id}/commands             start one (201)
 *   GET  /v1/sessions/{id}/commands             those kept, newest first
 *   GET  /v1/sessions/{id}/commands/{pid}       one, with its output
 *   POST /v1/sessions/{id}/commands/{pid}/stdin  input to it
 *
 * A signal to one is DELETE /v1/sessions/{id}/processes/{pid}: a command is
 * a process of the session's. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "exec/request.h"
#include "session/commands.h"

/* A query argument: absent (true, *out kept), or digits (at most INT64_MAX). */
static bool offset_arg(struct api_req *rq, const char *name, uint64_t *out)
{
	const char *v = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
	size_t n;

	if (!v)
		return true;
	n = strlen(v);
	if (!n || n > 19 || strspn(v, "0123456789") != n)
		return false;
	*out = strtoull(v, NULL, 10);
	return *out <= INT64_MAX;
}

/* "wait_s": a number from 0 to CMD_WAIT_MAX_S, in a query or a body. */
static bool wait_arg(const char *v, const json_t *j, double *out)
{
	char *end;
	double w;

	if (!v && (!j || json_is_null(j)))
		return true;
	if (v) {
		w = strtod(v, &end);
		if (end == v || *end)
			return false;
	} else if (json_is_number(j)) {
		w = json_number_value(j);
	} else {
		return false;
	}
	if (!(w >= 0 && w <= CMD_WAIT_MAX_S))
		return false;
	*out = w;
	return true;
}

static enum MHD_Result bad_wait(struct api_req *rq)
{
	return http_error(rq, 400, "invalid_request", "'wait_s' must be a number from 0 to %g",
			  CMD_WAIT_MAX_S);
}

/* POST .../commands: {command | args, cwd, env, stdin, timeout_s, tag,
 * wait_s}: started, then waited for up to wait_s (its end). */
static enum MHD_Result start(struct api_req *rq, struct session *s)
{
	static const char *const keys[] = {
		"command", "args", "cwd", "env", "stdin", "timeout_s", "tag", "wait_s", "pty", NULL
	};
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered), *out = NULL;
	struct command_read rd = { .until_end = true, .gone = http_gone, .gone_ctx = rq };
	struct command_request c;
	struct request_error e;
	char reason[512] = "";
	enum sm_result r;
	int pid;

	if (!body)
		return answered;
	memset(&c, 0, sizeof(c));
	if (!http_only_keys(rq, body, keys, &answered))
		goto out;
	if (!wait_arg(NULL, json_object_get(body, "wait_s"), &rd.wait_s)) {
		answered = bad_wait(rq);
		goto out;
	}
	if (!request_command(rq->cfg, body, &c, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	r = session_command_start(s, &c, &pid, reason, sizeof(reason));
	if (r != SM_OK) {
		answered = http_session_error(rq, r, reason);
		goto out;
	}
	/* Started: said whatever the wait is (none left: what there is now,
	 * which needs none; forgotten already: its pid). */
	if (session_command_read(s, pid, &rd, &out, reason, sizeof(reason)) == SM_CAPACITY) {
		rd.wait_s = 0;
		session_command_read(s, pid, &rd, &out, reason, sizeof(reason));
	}
	if (!out)
		out = json_pack("{s:i}", "pid", pid);
	answered = http_json(rq, 201, out);
out:
	request_command_release(&c);
	json_decref(body);
	return answered;
}

/* GET .../commands/{pid}?stdout_from=N&stderr_from=N&wait_s=S&wait_for=output|end */
static enum MHD_Result read_one(struct api_req *rq, struct session *s, int pid)
{
	const char *wait = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "wait_s");
	const char *until = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							"wait_for");
	struct command_read rd = { .gone = http_gone, .gone_ctx = rq };
	char reason[256] = "";
	enum sm_result r;
	json_t *out;

	if (!offset_arg(rq, "stdout_from", &rd.from[0]) ||
	    !offset_arg(rq, "stderr_from", &rd.from[1]))
		return http_error(rq, 400, "invalid_request", "'stdout_from' and 'stderr_from' "
				  "are byte offsets: what a read's stdout_next and stderr_next said");
	if (!wait_arg(wait, NULL, &rd.wait_s))
		return bad_wait(rq);
	if (until && strcmp(until, "output") && strcmp(until, "end"))
		return http_error(rq, 400, "invalid_request", "'wait_for' is 'output' (anything "
				  "new, or its end: the default) or 'end'");
	rd.until_end = until && !strcmp(until, "end");
	r = session_command_read(s, pid, &rd, &out, reason, sizeof(reason));
	return r == SM_OK ? http_json(rq, 200, out) : http_session_error(rq, r, reason);
}

/* POST .../commands/{pid}/stdin: {"input": text} or {"input_base64": b64},
 * and/or {"close": true} (end of file after it). */
static enum MHD_Result input(struct api_req *rq, struct session *s, int pid)
{
	static const char *const keys[] = { "input", "input_base64", "close", NULL };
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered);
	struct input_request in = { .data = NULL };
	struct request_error e;
	size_t written;
	int r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered))
		goto out;
	if (!request_input(body, &in, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	r = session_command_input(s, pid, in.data, in.len, in.close, &written);
	if (r == -E2BIG)
		answered = http_error(rq, 413, "too_large", "at most %u bytes of input a call",
				      PROC_INPUT_MAX);
	else if (r == -ESRCH)
		answered = http_error(rq, 404, "process_not_found", "the session runs no process "
				      "%d that petri started (a command, or E2B's): it ended, or "
				      "the code started it", pid);
	else if (r == -EPIPE)
		answered = http_error(rq, 409, "stdin_closed", "the command's standard input is "
				      "closed: it was started without 'stdin': true, or closed "
				      "since");
	else if (r == -ETIMEDOUT)
		answered = http_error(rq, 409, "stdin_full", "the command read %zu of the %zu bytes "
				      "in %g s: send the rest when it has read more", written, in.len,
				      CMD_INPUT_WAIT_S);
	else if (r < 0)
		answered = http_error(rq, 500, "internal", "cannot write to the command: %s",
				      strerror(-r));
	else
		answered = http_json(rq, 200, json_pack("{s:i, s:I, s:b}", "pid", pid, "written",
						       (json_int_t)written, "closed", in.close));
out:
	request_input_release(&in);
	json_decref(body);
	return answered;
}

/* POST .../commands/{pid}/resize: {"rows", "cols"} of its terminal. */
static enum MHD_Result resize(struct api_req *rq, struct session *s, int pid)
{
	static const char *const keys[] = { "rows", "cols", NULL };
	enum MHD_Result answered = MHD_NO;
	json_t *body = http_body_object(rq, &answered);
	unsigned short rows = 0, cols = 0;
	struct request_error e;
	struct proc *p = NULL;
	int r;

	if (!body)
		return answered;
	if (!http_only_keys(rq, body, keys, &answered))
		goto out;
	if (!json_object_get(body, "rows") || !json_object_get(body, "cols")) {
		answered = http_error(rq, 400, "invalid_request", "a resize says 'rows' and 'cols'");
		goto out;
	}
	if (!request_size(body, &rows, &cols, &e)) {
		answered = http_request_error(rq, &e);
		goto out;
	}
	if (!(p = session_proc_find(s, pid, NULL))) {
		answered = http_error(rq, 404, "process_not_found", "the session runs no process "
				      "%d that petri started", pid);
		goto out;
	}
	r = proc_resize(p, rows, cols);
	if (r == -ENOTTY)
		answered = http_error(rq, 409, "not_a_terminal", "process %d has no terminal: start "
				      "it with 'pty'", pid);
	else if (r < 0)
		answered = http_error(rq, 404, "process_not_found", "process %d ended", pid);
	else
		answered = http_json(rq, 200, json_pack("{s:i, s:i, s:i}", "pid", pid, "rows", rows,
						       "cols", cols));
	session_touch(s);
out:
	proc_put(p);
	json_decref(body);
	return answered;
}

enum MHD_Result handle_commands(struct api_req *rq, struct session *s, const char *rest)
{
	const char *m = rq->method, *slash;
	struct request_error e;
	char pid_text[16];
	json_t *pidv, *list;
	bool ok;
	int pid;

	if (!*rest) {
		if (!strcmp(m, "POST"))
			return start(rq, s);
		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET, POST");
		list = session_command_list(s);
		return list ? http_json(rq, 200, json_pack("{s:o}", "commands", list)) :
			      http_error(rq, 500, "internal", "out of memory");
	}
	/* An endpoint first, then its pid. */
	slash = strchr(rest, '/');
	if (slash && strcmp(slash, "/stdin") && strcmp(slash, "/resize"))
		return http_error(rq, 404, "not_found", "no such endpoint: %.200s", rq->url);
	if ((size_t)(slash ? slash - rest : (ptrdiff_t)strlen(rest)) >= sizeof(pid_text))
		return http_error(rq, 400, "invalid_request", "a command is named by its pid, a "
				  "number from 1 to %d", INT_MAX);
	snprintf(pid_text, sizeof(pid_text), "%.*s", (int)(slash ? slash - rest :
							   (ptrdiff_t)strlen(rest)), rest);
	if (!(pidv = http_string(pid_text)))
		return http_error(rq, 500, "internal", "out of memory");
	ok = request_pid(pidv, &pid, &e);
	json_decref(pidv);
	if (!ok)
		return http_request_error(rq, &e);
	if (!slash)
		return strcmp(m, "GET") ? http_not_allowed(rq, "GET") : read_one(rq, s, pid);
	if (strcmp(m, "POST"))
		return http_not_allowed(rq, "POST");
	return !strcmp(slash, "/stdin") ? input(rq, s, pid) : resize(rq, s, pid);
}
