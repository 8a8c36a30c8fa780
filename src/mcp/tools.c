#include "mcp/tools.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp/render.h"
#include "exec/exec.h"
#include "exec/languages.h"
#include "session/commands.h"
#include "session/workspace.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/utf8.h"

#define READ_TEXT_MAX	(100u << 10)	/* text shown by read_file */
#define READ_BLOB_MAX	(6u << 20)	/* images and binary files, raw bytes */
#define LIST_SHOWN_MAX	500		/* entries shown by list_files */

struct tools {
	struct smgr *sm;
	const struct petri_config *cfg;
	int key;			/* session_params.key of its session */
	pthread_mutex_t call;		/* one tool call at a time */
	pthread_mutex_t lock;		/* sid, used and closed */
	char sid[SESSION_ID_LEN + 1];	/* "" before first use */
	char used[SESSION_ID_LEN + 1];	/* where the last call ran, "" nowhere */
	bool closed;
	/* It had a sandbox once (call lock): the next is a new session, which
	 * a draining node refuses; the first is the MCP session's own. */
	bool had_sandbox;
	atomic_bool warmed;		/* tools_warm() was called */
};

/* The Python version of the runtime, learned from the first session any
 * client starts (the same runtime serves every session). */
static pthread_mutex_t version_lock = PTHREAD_MUTEX_INITIALIZER;
static char python_version[32];

/* ---- the tool table ---------------------------------------------------- */

/* ARG_LANGUAGE: a string, a name or alias of the table of languages.  ARG_ENV: an
 * object of string values.  ARG_PID: an integer, a process of the sandbox.
 * ARG_NUMBER: a timeout (0.1 to the sandbox's).  ARG_WAIT: seconds to wait,
 * 0 to CMD_WAIT_MAX_S.  Values are checked here for their type only; what
 * they may be is the request model's to say (exec/request.h). */
enum arg_type { ARG_STRING, ARG_NUMBER, ARG_LANGUAGE, ARG_ENV, ARG_PID, ARG_BOOL, ARG_WAIT,
		ARG_STRINGS };

struct arg {
	const char *name;
	enum arg_type type;
	bool required;
	const char *const *choices;	/* allowed strings, NULL-terminated */
	const char *description;
};

#define TOOL_ARGS_MAX 6

struct tool {
	const char *name;
	const char *title;
	struct arg args[TOOL_ARGS_MAX];
	bool read_only, destructive;
	json_t *(*run)(struct tools *t, struct session *s, json_t *args, int cancel_fd,
		       json_t **execution);
	/* Listed and callable only where the operator lets a client ask for a
	 * network ([network] clients_may). */
	bool network;
};

static const char *const encodings[] = { "utf-8", "base64", NULL };
static const char *const signals[] = { "TERM", "KILL", NULL };

static json_t *run_execute(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_write_file(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_read_file(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_list_files(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_upload_archive(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_download_archive(struct tools *, struct session *, json_t *, int,
				    json_t **);
static json_t *run_processes(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_start_process(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_process_output(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_process_input(struct tools *, struct session *, json_t *, int, json_t **);
static json_t *run_network(struct tools *, struct session *, json_t *, int, json_t **);

static const struct tool tool_table[] = {
	{ "execute", "Run code in the sandbox", {
		{ "code", ARG_STRING, true, NULL, "The code to run." },
		{ "language", ARG_LANGUAGE, false, NULL, NULL },	/* from the table of languages */
		{ "timeout_s", ARG_NUMBER, false, NULL,
		  "Wall-clock limit for this call, in seconds." },
		{ "env", ARG_ENV, false, NULL,
		  "Environment variables for this call only, as {\"NAME\": \"value\"}." },
		{ "tests", ARG_STRING, false, NULL,
		  "Read test results from the JUnit XML report the code writes, as "
		  "\"junit:PATH\" (relative to /work; e.g. after pytest --junitxml=report.xml, "
		  "\"junit:report.xml\"). Without it, reports among the files the code wrote are "
		  "found by themselves." },
		{ "stdin", ARG_STRING, false, NULL,
		  "What the code reads from its standard input (input(), sys.stdin, a program's "
		  "stdin), at most 1 MiB; without it, reading stdin gives end of file." },
	}, false, false, run_execute, false },
	{ "write_file", "Write a file into /work", {
		{ "path", ARG_STRING, true, NULL,
		  "Where to write, relative to /work (or starting with /work/); /tmp/... "
		  "writes the sandbox's /tmp." },
		{ "content", ARG_STRING, true, NULL, "The file's content." },
		{ "encoding", ARG_STRING, false, encodings,
		  "How content is encoded: utf-8 text (the default) or base64 for binary data." },
	}, false, false, run_write_file, false },
	{ "read_file", "Read a file from /work", {
		{ "path", ARG_STRING, true, NULL,
		  "The file, relative to /work (or starting with /work/), or in /tmp." },
	}, true, false, run_read_file, false },
	{ "list_files", "List files in /work", {
		{ "path", ARG_STRING, false, NULL,
		  "The directory, relative to /work (default: /work itself), or /tmp." },
	}, true, false, run_list_files, false },
	{ "upload_archive", "Extract an archive (a project) into /work", {
		{ "content", ARG_STRING, true, NULL,
		  "The archive, base64: tar, tar.gz, tar.bz2, tar.xz or zip." },
		{ "path", ARG_STRING, false, NULL,
		  "The directory to extract into, relative to /work (default: /work itself)." },
	}, false, false, run_upload_archive, false },
	{ "download_archive", "Download a directory of /work as a tar.gz", {
		{ "path", ARG_STRING, false, NULL,
		  "The directory, relative to /work (default: /work itself)." },
	}, true, false, run_download_archive, false },
	{ "processes", "List or stop background processes", {
		{ "stop", ARG_PID, false, NULL,
		  "The pid of a process to stop first (as the list shows it)." },
		{ "signal", ARG_STRING, false, signals,
		  "How to stop it: TERM (the default: it may clean up) or KILL." },
	}, false, false, run_processes, false },
	{ "start_process", "Start a command in the background", {
		{ "command", ARG_STRING, true, NULL,
		  "The command, run by bash -c (e.g. \"npm run dev\", \"python3 -m http.server "
		  "8000\", \"pytest -x\"). It runs beside your code: execute works on while it "
		  "runs, and reaches a server it starts at 127.0.0.1." },
		{ "cwd", ARG_STRING, false, NULL,
		  "Its working directory, relative to /work (the default) or absolute (/tmp)." },
		{ "env", ARG_ENV, false, NULL,
		  "Environment variables for it, as {\"NAME\": \"value\"}." },
		{ "stdin", ARG_BOOL, false, NULL,
		  "Keep its standard input open for process_input (default false: it reads end "
		  "of file)." },
		{ "wait_s", ARG_WAIT, false, NULL,
		  "Wait up to this long for it to end (default 2), then say what it printed so "
		  "far; it keeps running." },
	}, false, false, run_start_process, false },
	{ "process_output", "Read what a background command printed", {
		{ "pid", ARG_PID, true, NULL, "The command's pid, as start_process said." },
		{ "wait_s", ARG_WAIT, false, NULL,
		  "Wait up to this long for it to end (default 0), then say what it printed "
		  "since the last read." },
	}, false, false, run_process_output, false },
	{ "process_input", "Type into a background command", {
		{ "pid", ARG_PID, true, NULL, "The command's pid, as start_process said." },
		{ "input", ARG_STRING, false, NULL,
		  "Text to write to its standard input (end it with \"\\n\" to press Enter)." },
		{ "close", ARG_BOOL, false, NULL, "Close its input after: end of file." },
	}, false, false, run_process_input, false },
	{ "network", "Let the sandbox reach the network", {
		{ "allow", ARG_STRINGS, false, NULL,
		  "What the sandbox's code may reach from now on: domain names (that name "
		  "only, e.g. \"pypi.org\"), \"*.NAME\" (NAME's subdomains), IPv4 addresses and "
		  "ranges, or \"*\" for everything; [] or nothing: no network." },
		{ "deny", ARG_STRINGS, false, NULL,
		  "Rules of the same kind that win over allow." },
	}, false, false, run_network, true },
	{ "reset", "Restart the runtime (files kept)", { { .name = NULL } }, false, true, NULL,
	  false },
};

#define NTOOLS (sizeof(tool_table) / sizeof(tool_table[0]))

/* Does this server offer tl to t's client? */
static bool offered(const struct tools *t, const struct tool *tl)
{
	return !tl->network || (t->cfg && t->cfg->network.clients_may != NET_NONE);
}

static const struct tool *find_tool(const struct tools *t, const char *name)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (!strcmp(tool_table[i].name, name))
			return offered(t, &tool_table[i]) ? &tool_table[i] : NULL;
	return NULL;
}

bool tools_known(const struct tools *t, const char *name)
{
	return find_tool(t, name) != NULL;
}

/* ---- results ----------------------------------------------------------- */

static json_t *result_of(json_t *content, bool is_error)
{
	if (!content)
		return NULL;
	return json_pack("{s:o, s:b}", "content", content, "isError", is_error);
}

static json_t *vtext_result(bool is_error, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static json_t *vtext_result(bool is_error, const char *fmt, va_list ap)
{
	char *s = NULL;
	json_t *item;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	item = render_text_item(s, strlen(s));
	free(s);
	return item ? result_of(json_pack("[o]", item), is_error) : NULL;
}

static json_t *text_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *text_result(const char *fmt, ...)
{
	va_list ap;
	json_t *r;

	va_start(ap, fmt);
	r = vtext_result(false, fmt, ap);
	va_end(ap);
	return r;
}

static json_t *error_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *error_result(const char *fmt, ...)
{
	va_list ap;
	json_t *r;

	va_start(ap, fmt);
	r = vtext_result(true, fmt, ap);
	va_end(ap);
	return r;
}

/* ---- arguments --------------------------------------------------------- */

/* An MCP client's sandbox is a session with the configuration's default
 * limits, except that a call may run up to the most the configuration
 * allows: the timeout of one call is the client's to choose, within the
 * same rule as HTTP's (at most the session's timeout_s limit). */
static double timeout_max(const struct tools *t)
{
	return t->cfg->max.timeout_s;
}

/* Check args against the tool's table: NULL when fine, else an error
 * result naming what is wrong. */
static json_t *check_args(const struct tools *t, const struct tool *tl, json_t *args)
{
	const char *k;
	json_t *v;

	if (!json_is_object(args))
		return error_result("invalid arguments for %s: expected a JSON object", tl->name);
	json_object_foreach(args, k, v) {
		const struct arg *a = NULL;

		for (size_t i = 0; i < TOOL_ARGS_MAX && tl->args[i].name && !a; i++)
			if (!strcmp(tl->args[i].name, k))
				a = &tl->args[i];
		if (!a)
			return error_result("invalid arguments for %s: unknown argument '%.100s'",
					    tl->name, k);
		if (json_is_null(v) && !a->required)
			continue;
		if (a->type == ARG_LANGUAGE) {
			char why[256];

			if (!lang_from_json(v, why, sizeof(why)))
				return error_result("invalid arguments for %s: %s", tl->name, why);
		} else if (a->type == ARG_ENV) {
			if (!json_is_object(v))
				return error_result("invalid arguments for %s: '%s' must be an object",
						    tl->name, a->name);
		} else if (a->type == ARG_STRING) {
			if (!json_is_string(v))
				return error_result("invalid arguments for %s: '%s' must be a string",
						    tl->name, a->name);
			for (size_t i = 0; a->choices && a->choices[i]; i++)
				if (!strcmp(a->choices[i], json_string_value(v)))
					goto next;
			if (a->choices)
				return error_result("invalid arguments for %s: '%s' must be one of "
						    "%s%s%s", tl->name, a->name, a->choices[0],
						    a->choices[1] ? ", " : "",
						    a->choices[1] ? a->choices[1] : "");
		} else if (a->type == ARG_PID) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > INT_MAX)
				return error_result("invalid arguments for %s: '%s' must be a pid, "
						    "a whole number from 1", tl->name, a->name);
		} else if (a->type == ARG_STRINGS) {
			json_t *item;
			size_t n;

			if (!json_is_array(v))
				return error_result("invalid arguments for %s: '%s' must be an array "
						    "of strings", tl->name, a->name);
			json_array_foreach(v, n, item)
				if (!json_is_string(item))
					return error_result("invalid arguments for %s: '%s' must be an "
							    "array of strings", tl->name, a->name);
		} else if (a->type == ARG_BOOL) {
			if (!json_is_boolean(v))
				return error_result("invalid arguments for %s: '%s' must be true or "
						    "false", tl->name, a->name);
		} else if (a->type == ARG_WAIT) {
			if (!json_is_number(v) || !(json_number_value(v) >= 0 &&
						    json_number_value(v) <= CMD_WAIT_MAX_S))
				return error_result("invalid arguments for %s: '%s' must be a "
						    "number of seconds from 0 to %g", tl->name,
						    a->name, CMD_WAIT_MAX_S);
		} else if (!json_is_number(v)) {
			return error_result("invalid arguments for %s: '%s' must be a number",
					    tl->name, a->name);
		}
next:
		;
	}
	for (size_t i = 0; i < TOOL_ARGS_MAX && tl->args[i].name; i++)
		if (tl->args[i].required && !json_object_get(args, tl->args[i].name))
			return error_result("invalid arguments for %s: '%s' is required",
					    tl->name, tl->args[i].name);
	return NULL;
}

/* A path as models write it ("data.csv", "/work/data.csv", "./x") into
 * rel, relative to /work (ws_path()); false, with why, when refused.
 * dir: a directory, which may be /work itself or end in '/'. */
static bool work_path(const char *in, bool dir, char rel[FILES_PATH_MAX + 1], char *why,
		      size_t whylen)
{
	return ws_path(in, "/work", dir ? WS_PATH_ROOT | WS_PATH_SLASH : 0, rel, why,
		       whylen) == WS_OK;
}

/* A file the read, write and list tools reach: in /work, or on another of
 * the sandbox's own filesystems ("/tmp/x": session/workspace.h). */
struct file_path {
	char rel[FILES_PATH_MAX + 1];		/* as the session layer takes it */
	char shown[FILES_PATH_MAX + 8];		/* as a model reads it: "/work/x" */
};

static bool file_path(const char *in, bool dir, struct file_path *p, char *why, size_t whylen)
{
	unsigned flags = WS_PATH_ANYWHERE | (dir ? WS_PATH_ROOT | WS_PATH_SLASH : 0);

	if (ws_path(in, "/work", flags, p->rel, why, whylen) != WS_OK)
		return false;
	if (p->rel[0] == '/')
		snprintf(p->shown, sizeof(p->shown), "%s", p->rel);
	else
		snprintf(p->shown, sizeof(p->shown), "/work%s%s", p->rel[0] ? "/" : "", p->rel);
	return true;
}

/* What a workspace error (-errno, session/workspace.h) means, after "cannot read '/work/x': ". */
static const char *file_error(int err)
{
	enum ws_result r = ws_result_of(err);

	return r == WS_FAILED ? strerror(-err) : ws_result_message(r);
}

/* ---- the session ------------------------------------------------------- */

static void learn_version(struct session *s)
{
	json_t *j;

	pthread_mutex_lock(&version_lock);
	if (!python_version[0] && (j = session_json(s))) {
		const char *v = json_string_value(json_object_get(j, "python_version"));

		if (v && *v)
			snprintf(python_version, sizeof(python_version), "%s", v);
		json_decref(j);
	}
	pthread_mutex_unlock(&version_lock);
}

static json_t *start_error(enum sm_result r, const char *err)
{
	if (err && *err)
		return error_result("the sandbox could not be started: %s", err);
	if (r == SM_CAPACITY)
		return error_result("petri is at its limit of sandboxes; try again later");
	if (r == SM_HOST_FULL || r == SM_KEY_SHARE)
		return error_result("%s", sm_result_message(r));
	return error_result("the sandbox could not be started: %s", sm_result_message(r));
}

/* Start a session for t (call lock held): SM_OK, or what stopped it with
 * err (the connection was closed, the server has no sandboxes, the session
 * layer said no). */
static enum sm_result start(struct tools *t, struct session **out, char *err, size_t errlen)
{
	struct session_params p = {
		.language = lang_default(),
		.limits = t->cfg->defaults,
		.idle_timeout_s = t->cfg->idle_timeout_s,
		.max_lifetime_s = t->cfg->max_lifetime_s,
		.key = t->key,
		.continues = !t->had_sandbox,
	};
	enum sm_result r;
	bool closed;

	p.limits.timeout_s = timeout_max(t);	/* a call's default stays defaults' */
	*out = NULL;
	if (!t->sm) {
		/* A core without sandboxes (unit tests, fuzzing). */
		snprintf(err, errlen, "this server has no sandboxes");
		return SM_START_FAILED;
	}
	if ((r = smgr_create(t->sm, &p, out, err, errlen)) != SM_OK)
		return r;
	t->had_sandbox = true;
	pthread_mutex_lock(&t->lock);
	closed = t->closed;
	if (!closed)
		snprintf(t->sid, sizeof(t->sid), "%s", session_id(*out));
	pthread_mutex_unlock(&t->lock);
	if (closed)
		goto closed;
	learn_version(*out);
	log_debug("mcp: sandbox session %s started", session_id(*out));
	return SM_OK;
closed:
	if (*out) {
		smgr_delete(t->sm, session_id(*out));
		session_put(*out);
		*out = NULL;
	}
	snprintf(err, errlen, "this MCP connection has been closed");
	return SM_STOPPING;
}

/* The session to use (call lock held): SM_OK with *restarted when the one
 * before had ended and a new one was started (note says what happened),
 * or what start() says. */
static enum sm_result acquire(struct tools *t, struct session **s, bool *restarted,
			      char *note, size_t notelen, char *err, size_t errlen)
{
	char sid[SESSION_ID_LEN + 1], reason[256] = "";
	enum sm_result r;
	bool closed;

	*restarted = false;
	pthread_mutex_lock(&t->lock);
	closed = t->closed;
	memcpy(sid, t->sid, sizeof(sid));
	pthread_mutex_unlock(&t->lock);
	if (closed) {
		snprintf(err, errlen, "this MCP connection has been closed");
		return SM_STOPPING;
	}
	if (!sid[0])
		return start(t, s, err, errlen);
	r = smgr_lookup(t->sm, sid, s, reason, sizeof(reason));
	if (r == SM_OK)
		return SM_OK;
	if (r != SM_GONE || !reason[0])
		snprintf(reason, sizeof(reason), "it no longer exists");
	if ((r = start(t, s, err, errlen)) != SM_OK)
		return r;
	snprintf(note, notelen, "The sandbox session had ended: %s.  A new, empty sandbox was "
		 "started: variables, imports and files from before are gone.  Nothing was "
		 "run: call the tool again, re-creating what your code needs.", reason);
	*restarted = true;
	return SM_OK;
}

/* Is the session still alive after an execution?  If not, forget it and
 * say why in note (the next call then starts a new one quietly). */
static bool survived(struct tools *t, const char *sid, char *note, size_t notelen)
{
	struct session *s;
	char reason[256] = "";

	if (smgr_lookup(t->sm, sid, &s, reason, sizeof(reason)) == SM_OK) {
		session_put(s);
		return true;
	}
	pthread_mutex_lock(&t->lock);
	if (!strcmp(t->sid, sid))
		t->sid[0] = '\0';
	pthread_mutex_unlock(&t->lock);
	snprintf(note, notelen, "The sandbox ended with this execution (%s): the next call "
		 "starts a new, empty one; variables and files are gone.",
		 reason[0] ? reason : "it was stopped");
	return false;
}

/* ---- execute ----------------------------------------------------------- */

static const char *str_arg(json_t *args, const char *key, const char *dflt)
{
	const char *v = json_string_value(json_object_get(args, key));

	return v ? v : dflt;
}

static json_t *run_execute(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			   json_t **execution)
{
	char reason[256] = "", note[512] = "";
	struct request_error e;
	struct exec_request ex;
	struct result res;
	json_t *content, *out = NULL;
	enum sm_result r;
	bool is_error;

	if (!request_exec(t->cfg, args, session_language(s), session_limits(s), &ex, &e)) {
		out = error_result("invalid arguments for execute: %s", e.message);
		goto out;
	}
	if (!json_object_get(args, "timeout_s") && ex.timeout_s > t->cfg->defaults.timeout_s)
		ex.timeout_s = t->cfg->defaults.timeout_s;
	ex.cancel_fd = cancel_fd;
	if (result_init(&res) < 0)
		goto out;
	r = session_exec(t->sm, s, &ex, NULL, &res, reason, sizeof(reason));
	if (r != SM_OK) {
		result_release(&res);
		if (r == SM_CAPACITY)
			out = error_result("petri is running as many executions as it allows; "
					   "try again in a moment");
		else if (r == SM_BUSY)
			out = error_result("another execution is running in this sandbox");
		else if (r == SM_GONE && !survived(t, session_id(s), note, sizeof(note)))
			out = error_result("%s", note);
		else
			out = error_result("the execution could not run: %s",
					   reason[0] ? reason : sm_result_message(r));
		goto out;
	}
	content = render_execution(&res, &is_error);
	if (content && res.status != RESULT_OK && !survived(t, session_id(s), note, sizeof(note)))
		json_array_insert_new(content, 1, render_text_item(note, strlen(note)));
	if (execution)
		*execution = result_to_json(&res);
	out = result_of(content, is_error);
	result_release(&res);
out:
	request_exec_release(&ex);
	return out;
}

/* ---- files ------------------------------------------------------------- */

static json_t *run_write_file(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			      json_t **execution)
{
	json_t *content = json_object_get(args, "content");
	const char *encoding = str_arg(args, "encoding", "utf-8");
	struct file_path path;
	unsigned char *decoded = NULL;
	const void *data = json_string_value(content);
	size_t len = json_string_length(content);
	char why[160];
	json_t *out;
	int r;

	(void)cancel_fd;
	(void)execution;
	if (!file_path(str_arg(args, "path", ""), false, &path, why, sizeof(why)))
		return error_result("invalid path '%.300s': %s", str_arg(args, "path", ""), why);
	if (!strcmp(encoding, "base64")) {
		decoded = base64_decode(data, len, &len);
		if (!decoded)
			return error_result("'content' is not valid base64 (standard alphabet, "
					    "with padding)");
		data = decoded;
	}
	if (len > t->cfg->max_file_bytes) {
		free(decoded);
		return error_result("the file is larger than the %llu MiB limit",
				    (unsigned long long)(t->cfg->max_file_bytes >> 20));
	}
	r = session_file_write(s, path.rel, data, len);
	free(decoded);
	if (r < 0)
		return error_result("cannot write '%.300s': %s", path.shown, file_error(r));
	out = text_result("wrote %zu bytes to %s", len, path.shown);
	return out;
}

/* Read up to max bytes of fd into b.  0 or -errno. */
static int read_fd(int fd, struct buf *b, size_t max)
{
	char chunk[65536];

	while (b->len < max) {
		size_t want = max - b->len < sizeof(chunk) ? max - b->len : sizeof(chunk);
		ssize_t n = read(fd, chunk, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (buf_append(b, chunk, (size_t)n) < 0)
			return -ENOMEM;
	}
	return 0;
}

static bool is_image(const char *mime)
{
	return !strcmp(mime, "image/png") || !strcmp(mime, "image/jpeg") ||
	       !strcmp(mime, "image/gif") || !strcmp(mime, "image/webp");
}

static json_t *run_read_file(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			     json_t **execution)
{
	struct file_path path;
	struct session_file f;
	const char *mime;
	struct buf b = BUF_INIT;
	json_t *out = NULL;
	uint64_t size;
	const char *data;
	size_t shown;
	char why[160], *enc;
	int r;

	(void)cancel_fd;
	(void)execution;
	if (!file_path(str_arg(args, "path", ""), false, &path, why, sizeof(why)))
		return error_result("invalid path '%.300s': %s", str_arg(args, "path", ""), why);
	if ((r = session_file_open(s, path.rel, &f)) < 0)
		return error_result("cannot read '%.300s': %s", path.shown, file_error(r));
	mime = f.type;
	size = f.size;
	r = read_fd(f.fd, &b, READ_BLOB_MAX + 1);
	close(f.fd);
	if (r < 0) {
		out = error_result("cannot read '%.300s': %s", path.shown, strerror(-r));
		goto out;
	}
	data = b.data ? b.data : "";
	shown = utf8_cut(data, b.len < READ_TEXT_MAX ? b.len : READ_TEXT_MAX);
	if (!is_image(mime) && !memchr(data, '\0', b.len) && utf8_valid(data, shown)) {
		json_t *items = json_array();
		char note[256];

		if (!items || json_array_append_new(items, render_text_item(data, shown))) {
			json_decref(items);
			goto out;
		}
		snprintf(note, sizeof(note), "[showing the first %zu of %llu bytes of %.100s: "
			 "read the rest with execute]", shown, (unsigned long long)size, path.shown);
		if (shown < size)
			json_array_append_new(items, render_text_item(note, strlen(note)));
		out = result_of(items, false);
		goto out;
	}
	if (b.len > READ_BLOB_MAX) {
		out = error_result("'%.300s' is %llu bytes: larger than the %u MiB that "
				   "read_file returns for binary files; process it with execute "
				   "instead", path.shown, (unsigned long long)size, READ_BLOB_MAX >> 20);
		goto out;
	}
	enc = base64_encode(data, b.len, NULL);
	if (!enc)
		goto out;
	if (is_image(mime)) {
		out = result_of(json_pack("[{s:s, s:s, s:s}]", "type", "image", "data", enc,
					  "mimeType", mime), false);
	} else {
		char uri[FILES_PATH_MAX + 16], desc[512];
		json_t *item;

		snprintf(uri, sizeof(uri), "file://%s", path.shown);
		snprintf(desc, sizeof(desc), "%.300s is a binary file (%zu bytes, %s): its "
			 "content follows as a base64 resource", path.shown, b.len, mime);
		item = render_text_item(desc, strlen(desc));
		out = item ? result_of(json_pack("[o, {s:s, s:{s:s, s:s, s:s}}]", item, "type",
						 "resource", "resource", "uri", uri, "mimeType",
						 mime, "blob", enc), false) : NULL;
	}
	free(enc);
out:
	buf_release(&b);
	return out;
}

/* ---- archives (docs/api.md#archives) ------------------------------------ */

/* Extract an archive into dir of s's /work: written there under a name of
 * its own, then session_unpack().  0, or -1 with why in err. */
static int unpack_into(struct tools *t, struct session *s, const void *data, size_t len,
		       const char *dir, json_t **summary, char *err, size_t errlen)
{
	char name[EXEC_ARCHIVE_NAME_LEN];
	enum sm_result sr;
	int r;

	*summary = NULL;
	if (len > t->cfg->max_file_bytes) {
		snprintf(err, errlen, "the archive is larger than the %llu MiB limit",
			 (unsigned long long)(t->cfg->max_file_bytes >> 20));
		return -1;
	}
	if ((r = exec_archive_name(name)) == 0)
		r = session_file_write(s, name, data, len);
	if (r < 0) {
		snprintf(err, errlen, "cannot write the archive into /work: %s", file_error(r));
		return -1;
	}
	err[0] = '\0';
	sr = session_unpack(t->sm, s, name, dir, summary, err, errlen);
	if (sr == SM_OK)
		return 0;
	if (!err[0])
		snprintf(err, errlen, "%s", sm_result_message(sr));
	return -1;
}

/* Kill an archive's writer and reap it: it was killed, so this waits for a
 * death, not for the sandbox's pace. */
static void archiver_end(struct ws_archiver *aw)
{
	session_archive_cancel(aw);
	while (!session_archive_reap(aw)) {
		struct pollfd pfd = { .fd = session_archive_exit_fd(aw), .events = POLLIN };

		poll(&pfd, pfd.fd >= 0 ? 1 : 0, 100);
	}
}

/* dir of s's /work as a tar.gz into out, at most max bytes, made by a
 * writer charged to the session (session_archive_start(): its CPU and
 * memory are the session's).  0, or -1 with why in err. */
static int archive_of(struct tools *t, struct session *s, const char *dir, struct buf *out,
		      size_t max, char *err, size_t errlen)
{
	int step_ms = (int)(t->cfg->http_timeout_s * 1000);
	struct ws_archiver *aw;
	size_t entries;
	ssize_t n = 1;

	if (session_archive_start(s, dir, true, t->cfg->archive_max_entries,
				  t->cfg->http_timeout_s, &aw, &entries, err, errlen) < 0) {
		if (aw)
			archiver_end(aw);
		return -1;
	}
	while ((n > 0 || n == -EAGAIN || n == -EINPROGRESS) && out->len <= max &&
	       buf_reserve(out, 65536) == 0) {
		struct pollfd pfd = { .fd = session_archive_fd(aw), .events = POLLIN };

		n = session_archive_read(aw, out->data + out->len, 65536);
		if (n == -EINPROGRESS)	/* the pipe ended: wait for the exit */
			pfd.fd = session_archive_exit_fd(aw);
		if (n > 0)
			out->len += (size_t)n;
		else if ((n == -EAGAIN || n == -EINPROGRESS) && poll(&pfd, 1, step_ms) == 0)
			n = -ETIMEDOUT;
	}
	archiver_end(aw);
	if (n < 0)
		snprintf(err, errlen, "cannot archive '/work/%.300s': %s", dir, strerror((int)-n));
	else if (out->len > max)
		snprintf(err, errlen, "the archive of /work/%.300s is larger than %zu MiB",
			 dir, max >> 20);
	else if (n > 0)
		snprintf(err, errlen, "out of memory");
	return n == 0 && out->len <= max ? 0 : -1;
}

static json_t *run_upload_archive(struct tools *t, struct session *s, json_t *args,
				  int cancel_fd, json_t **execution)
{
	json_t *content = json_object_get(args, "content"), *summary, *out;
	char why[512];
	unsigned char *data;
	char dir[FILES_PATH_MAX + 1];
	size_t len;
	int r;

	(void)cancel_fd;
	(void)execution;
	if (!work_path(str_arg(args, "path", ""), true, dir, why, sizeof(why)))
		return error_result("invalid path '%.300s': %s", str_arg(args, "path", ""), why);
	data = base64_decode(json_string_value(content), json_string_length(content), &len);
	if (!data)
		return error_result("'content' is not valid base64 (standard alphabet, with "
				    "padding)");
	r = unpack_into(t, s, data, len, dir, &summary, why, sizeof(why));
	free(data);
	if (r < 0)
		return error_result("the archive was not extracted: %s", why);
	out = text_result("extracted %lld entries (%lld files, %lld directories, %lld links; "
			  "%lld bytes) from a %s archive into /work%s%s",
			  json_integer_value(json_object_get(summary, "entries")),
			  json_integer_value(json_object_get(summary, "files")),
			  json_integer_value(json_object_get(summary, "directories")),
			  json_integer_value(json_object_get(summary, "links")),
			  json_integer_value(json_object_get(summary, "bytes")),
			  json_string_value(json_object_get(summary, "format")), *dir ? "/" : "",
			  dir);
	json_decref(summary);
	return out;
}

static json_t *run_download_archive(struct tools *t, struct session *s, json_t *args,
				    int cancel_fd, json_t **execution)
{
	struct buf b = BUF_INIT;
	char why[512], uri[FILES_PATH_MAX + 32], *enc;
	char dir[FILES_PATH_MAX + 1];
	json_t *out = NULL;

	(void)cancel_fd;
	(void)execution;
	if (!work_path(str_arg(args, "path", ""), true, dir, why, sizeof(why)))
		return error_result("invalid path '%.300s': %s", str_arg(args, "path", ""), why);
	if (archive_of(t, s, dir, &b, READ_BLOB_MAX, why, sizeof(why)) < 0) {
		out = error_result("%s%s", why, b.len > READ_BLOB_MAX ? " (what a tool result "
				   "carries): archive a smaller directory, or leave out what the "
				   "next step does not need" : "");
	} else if ((enc = base64_encode(b.data ? b.data : "", b.len, NULL))) {
		snprintf(uri, sizeof(uri), "file:///work/%s%s", dir, *dir ? ".tar.gz"
								  : "workspace.tar.gz");
		snprintf(why, sizeof(why), "/work%s%.100s as a tar.gz (%zu bytes): a base64 "
			 "resource follows", *dir ? "/" : "", dir, b.len);
		out = result_of(json_pack("[o, {s:s, s:{s:s, s:s, s:s}}]",
					  render_text_item(why, strlen(why)), "type", "resource",
					  "resource", "uri", uri, "mimeType", "application/gzip",
					  "blob", enc), false);
		free(enc);
	}
	buf_release(&b);
	return out;
}

static json_t *run_list_files(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			      json_t **execution)
{
	struct buf b = BUF_INIT;
	json_t *list = NULL, *e, *out = NULL;
	struct file_path dir;
	bool truncated;
	char why[160];
	size_t i;
	int r;

	(void)cancel_fd;
	(void)execution;
	if (!file_path(str_arg(args, "path", ""), true, &dir, why, sizeof(why)))
		return error_result("invalid path '%.300s': %s", str_arg(args, "path", ""), why);
	if ((r = session_file_list(s, dir.rel, &list, &truncated)) < 0)
		return error_result("cannot list '%.300s': %s", dir.shown, file_error(r));
	if (buf_appendf(&b, "%s: %zu entr%s\n", dir.shown, json_array_size(list),
			json_array_size(list) == 1 ? "y" : "ies") < 0)
		goto out;
	json_array_foreach(list, i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *type = json_string_value(json_object_get(e, "type"));

		if (i == LIST_SHOWN_MAX) {
			if (buf_appendf(&b, "[... %zu more not shown]\n", json_array_size(list) - i) < 0)
				goto out;
			break;
		}
		if (!strcmp(type, "directory"))
			r = buf_appendf(&b, "%s/\n", p);
		else if (!strcmp(type, "file"))
			r = buf_appendf(&b, "%s  (%lld bytes)\n", p,
					(long long)json_integer_value(json_object_get(e, "size")));
		else
			r = buf_appendf(&b, "%s  (%s)\n", p, type);
		if (r < 0)
			goto out;
	}
	if (truncated && buf_appendf(&b, "[the directory has more than %d entries]\n",
				     FILES_LIST_MAX) < 0)
		goto out;
	out = text_result("%s", b.data);
out:
	buf_release(&b);
	json_decref(list);
	return out;
}

/* ---- processes ----------------------------------------------------------- */

static json_t *run_processes(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			     json_t **execution)
{
	json_t *stop = json_object_get(args, "stop"), *list = NULL, *out = NULL;
	struct request_error e;
	const char *signame;
	char reason[256] = "";
	struct buf b = BUF_INIT;
	enum sm_result r;
	int pid, sig;

	(void)cancel_fd;
	(void)execution;
	if (stop && !json_is_null(stop)) {
		if (!request_pid(stop, &pid, &e) ||
		    !request_signal(json_object_get(args, "signal"), &sig, &signame, &e))
			return error_result("invalid arguments for processes: %s", e.message);
		r = session_signal_process(s, pid, sig, reason, sizeof(reason));
		if (r != SM_OK)
			return error_result("cannot stop process %d: %s", pid,
					    reason[0] ? reason : sm_result_message(r));
		if (buf_appendf(&b, "Sent SIG%s to process %d: it may take a moment to end%s.\n\n",
				signame, pid, sig == SIGKILL ? "" : " (or handle the signal: "
				"stop it with signal KILL if it stays)") < 0)
			goto out;
	}
	r = session_processes(s, &list, reason, sizeof(reason));
	if (r != SM_OK) {
		out = error_result("cannot list the processes: %s",
				   reason[0] ? reason : sm_result_message(r));
		goto out;
	}
	if (render_processes(&b, list) == 0)
		out = text_result("%s", b.data);
out:
	json_decref(list);
	buf_release(&b);
	return out;
}

/* ---- commands in the background ---------------------------------------- */

/* The command pid read (rd), rendered, with how to go on. */
static json_t *command_result(struct session *s, int pid, const struct command_read *rd,
			      const char *head)
{
	char reason[256] = "";
	struct buf b = BUF_INIT;
	json_t *cmd = NULL, *out = NULL;
	enum sm_result r = session_command_read(s, pid, rd, &cmd, reason, sizeof(reason));

	if (r != SM_OK)
		return error_result("%s", reason[0] ? reason : sm_result_message(r));
	if (buf_append_str(&b, head) == 0 && render_command(&b, cmd) == 0 &&
	    (!json_is_true(json_object_get(cmd, "running")) ||
	     buf_appendf(&b, "\nRead more with process_output (pid %d)%s; stop it with "
			 "processes (stop %d).\n", pid,
			 json_is_true(json_object_get(json_object_get(cmd, "asked"), "stdin")) ?
			 ", type into it with process_input" : "", pid) == 0))
		out = text_result("%s", b.data);
	buf_release(&b);
	json_decref(cmd);
	return out;
}

static double wait_of(json_t *args, double otherwise)
{
	json_t *v = json_object_get(args, "wait_s");

	return json_is_number(v) ? json_number_value(v) : otherwise;
}

/* The MCP call is cancelled (its cancel_fd readable). */
static bool cancelled(void *ctx)
{
	struct pollfd pfd = { .fd = *(int *)ctx, .events = POLLIN };

	return pfd.fd >= 0 && poll(&pfd, 1, 0) > 0;
}

static json_t *run_start_process(struct tools *t, struct session *s, json_t *args,
				 int cancel_fd, json_t **execution)
{
	json_t *req = json_pack("{s:O, s:O, s:O, s:b}", "command", json_object_get(args, "command"),
				"cwd", json_object_get(args, "cwd") ? json_object_get(args, "cwd") :
				json_null(), "env", json_object_get(args, "env") ?
				json_object_get(args, "env") : json_null(), "stdin",
				json_is_true(json_object_get(args, "stdin")));
	json_t *out = NULL;
	struct command_read rd = { { CMD_UNREAD, CMD_UNREAD }, wait_of(args, 2), true, cancelled,
				   &cancel_fd };
	struct command_request c;
	struct request_error e;
	char reason[512] = "", head[64];
	enum sm_result r;
	int pid;

	(void)execution;
	memset(&c, 0, sizeof(c));
	if (!req)
		return NULL;
	if (!request_command(t->cfg, req, &c, &e)) {
		out = error_result("invalid arguments for start_process: %s", e.message);
		goto out;
	}
	r = session_command_start(s, &c, &pid, reason, sizeof(reason));
	if (r != SM_OK) {
		out = error_result("cannot start the command: %s",
				   reason[0] ? reason : sm_result_message(r));
		goto out;
	}
	snprintf(head, sizeof(head), "Started process %d.\n", pid);
	out = command_result(s, pid, &rd, head);
out:
	request_command_release(&c);
	json_decref(req);
	return out;
}

static json_t *run_process_output(struct tools *t, struct session *s, json_t *args,
				  int cancel_fd, json_t **execution)
{
	struct command_read rd = { { CMD_UNREAD, CMD_UNREAD }, wait_of(args, 0), true, cancelled,
				   &cancel_fd };

	(void)t;
	(void)execution;
	return command_result(s, (int)json_integer_value(json_object_get(args, "pid")), &rd, "");
}

/* The session's network policy anew, within what the operator lets a
 * client ask. */
static json_t *run_network(struct tools *t, struct session *s, json_t *args, int cancel_fd,
			   json_t **execution)
{
	json_t *ask = json_object(), *v, *now;
	struct net_policy *p = NULL;
	struct request_error e;
	char reason[512] = "", *text;
	enum sm_result r;
	json_t *out;

	(void)cancel_fd;
	(void)execution;
	if (!ask)
		return error_result("out of memory");
	/* Nothing to allow is none (not the operator's default): a model
	 * that calls this with nothing means to take the network away. */
	json_object_set_new(ask, "allow", (v = json_object_get(args, "allow")) && !json_is_null(v) ?
			    json_incref(v) : json_array());
	if ((v = json_object_get(args, "deny")) && !json_is_null(v))
		json_object_set(ask, "deny", v);
	if (!request_network(t->cfg, ask, &p, &e)) {
		json_decref(ask);
		return error_result("%s", e.message);
	}
	json_decref(ask);
	r = session_set_network(s, p, reason, sizeof(reason));
	free(p);
	if (r != SM_OK)
		return error_result("the network could not be changed: %s",
				    reason[0] ? reason : sm_result_message(r));
	v = session_json(s);
	now = json_object_get(v, "network");
	text = now ? json_dumps(now, JSON_COMPACT) : NULL;
	out = text_result("The sandbox's network is now %s.", text ? text : "changed");
	free(text);
	json_decref(v);
	return out;
}

static json_t *run_process_input(struct tools *t, struct session *s, json_t *args,
				 int cancel_fd, json_t **execution)
{
	int pid = (int)json_integer_value(json_object_get(args, "pid")), r;
	struct input_request in;
	struct request_error e;
	json_t *out;
	size_t written;

	(void)t;
	(void)cancel_fd;
	(void)execution;
	if (!json_string_length(json_object_get(args, "input")) &&
	    !json_is_true(json_object_get(args, "close")))
		return error_result("invalid arguments for process_input: send 'input', or "
				    "'close': true");
	if (!request_input(args, &in, &e)) {
		request_input_release(&in);
		return error_result("invalid arguments for process_input: %s", e.message);
	}
	r = session_command_input(s, pid, in.data, in.len, in.close, &written);
	if (r == -E2BIG)
		out = error_result("invalid arguments for process_input: at most %u bytes a "
				   "call", PROC_INPUT_MAX);
	else if (r == -ESRCH)
		out = error_result("no process %d is running that petri started (it ended: "
				   "process_output says how)", pid);
	else if (r == -EPIPE)
		out = error_result("process %d's input is closed: start it with stdin true to "
				   "type into it", pid);
	else if (r == -ETIMEDOUT)
		out = error_result("process %d read %zu of the %zu bytes: it is not reading; "
				   "send the rest later", pid, written, in.len);
	else if (r < 0)
		out = error_result("cannot write to process %d: %s", pid, strerror(-r));
	else
		out = text_result("Wrote %zu bytes to process %d%s. Read what it answers with "
				  "process_output (pid %d, wait_s a second or two).", written, pid,
				  in.close ? " and closed its input" : "", pid);
	request_input_release(&in);
	return out;
}

/* ---- public ------------------------------------------------------------ */

int tools_new(struct smgr *sm, const struct petri_config *cfg, struct tools **out)
{
	struct tools *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->sm = sm;
	t->cfg = cfg;
	pthread_mutex_init(&t->call, NULL);
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void tools_set_key(struct tools *t, int key)
{
	t->key = key;
}

void tools_warm(struct tools *t)
{
	bool started;

	if (!t->sm || atomic_exchange(&t->warmed, true))
		return;
	pthread_mutex_lock(&t->lock);
	started = t->sid[0] != '\0';
	pthread_mutex_unlock(&t->lock);
	/* A template serves a client's first sandbox; one that has its
	 * sandbox already (petri ask --file) would start one for nothing. */
	if (!started)
		smgr_warm_start(t->sm);
	json_decref(smgr_found(t->sm, 0));
}

void tools_close(struct tools *t)
{
	char sid[SESSION_ID_LEN + 1];

	pthread_mutex_lock(&t->lock);
	t->closed = true;
	memcpy(sid, t->sid, sizeof(sid));
	t->sid[0] = '\0';
	pthread_mutex_unlock(&t->lock);
	if (sid[0] && smgr_delete(t->sm, sid) == SM_OK)
		log_info("mcp: sandbox session %s ended with its client", sid);
}

void tools_free(struct tools *t)
{
	if (!t)
		return;
	tools_close(t);
	pthread_mutex_destroy(&t->call);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Note the session a call runs its tool in (tools_last_session()). */
static void set_used(struct tools *t, const char *sid)
{
	pthread_mutex_lock(&t->lock);
	snprintf(t->used, sizeof(t->used), "%s", sid);
	pthread_mutex_unlock(&t->lock);
}

/* A restart of the sandbox's runtime, as a notebook restarts its kernel
 * (session_restart()); a new sandbox when there is none alive to restart. */
static json_t *reset(struct tools *t)
{
	char sid[SESSION_ID_LEN + 1], err[512] = "";
	struct session *s = NULL;
	enum sm_result r;

	pthread_mutex_lock(&t->lock);
	memcpy(sid, t->sid, sizeof(sid));
	pthread_mutex_unlock(&t->lock);
	if (sid[0] && smgr_lookup(t->sm, sid, &s, err, sizeof(err)) == SM_OK) {
		r = session_restart(t->sm, s, err, sizeof(err));
		session_put(s);
		if (r == SM_OK)
			return text_result("The runtime was restarted: variables, imports and "
					   "background processes are gone; the files in /work are "
					   "kept.");
		if (r != SM_GONE)
			return error_result("the runtime could not be restarted: %s",
					    err[0] ? err : sm_result_message(r));
	}
	pthread_mutex_lock(&t->lock);
	if (!strcmp(t->sid, sid))
		t->sid[0] = '\0';
	pthread_mutex_unlock(&t->lock);
	if (sid[0])
		smgr_delete(t->sm, sid);
	if ((r = start(t, &s, err, sizeof(err))) != SM_OK)
		return start_error(r, err);
	session_put(s);
	return text_result("The sandbox had ended: a new, empty one is ready (no variables, "
			   "no imports, /work is empty).");
}

json_t *tools_call(struct tools *t, const char *name, json_t *args, int cancel_fd,
		   json_t **execution)
{
	const struct tool *tl = find_tool(t, name);
	char note[512] = "", err[512] = "";
	json_t *empty = NULL, *out;
	struct session *s;
	enum sm_result r;
	bool restarted;

	if (execution)
		*execution = NULL;
	if (!tl)
		return NULL;
	set_used(t, "");
	if (!args)
		args = empty = json_object();
	if ((out = check_args(t, tl, args)))
		goto done;
	tools_warm(t);
	pthread_mutex_lock(&t->call);
	if (!tl->run) {
		out = reset(t);
	} else if ((r = acquire(t, &s, &restarted, note, sizeof(note), err, sizeof(err))) !=
		   SM_OK) {
		out = start_error(r, err);
	} else if (restarted) {
		session_put(s);
		out = error_result("%s", note);
	} else {
		set_used(t, session_id(s));
		out = tl->run(t, s, args, cancel_fd, execution);
		session_put(s);
	}
	pthread_mutex_unlock(&t->call);
done:
	json_decref(empty);
	return out;
}

void tools_last_session(struct tools *t, char out[SESSION_ID_LEN + 1])
{
	pthread_mutex_lock(&t->lock);
	memcpy(out, t->used, SESSION_ID_LEN + 1);
	pthread_mutex_unlock(&t->lock);
}

/* ---- definitions ------------------------------------------------------- */

/* "Python packages installed: numpy 1.24.2, ...  Other languages: bash
 * (GNU bash, version 5.2.15...), ...  Command-line tools: git (git version
 * 2.39.5); ...  " from what the sandboxes were found to have (found: GET
 * /v1/languages's answer); "" when that is not known. */
static char *found_text(const json_t *found)
{
	json_t *v;
	json_t *packages = json_object_get(found, "packages");
	json_t *langs = json_object_get(found, "languages");
	json_t *tools = json_object_get(found, "tools");
	struct buf b = BUF_INIT;
	size_t i;
	int r = 0;

	if (json_array_size(packages)) {
		r = buf_append_str(&b, "Python packages installed: ");
		json_array_foreach(packages, i, v)
			if (r == 0)
				r = buf_appendf(&b, "%s%s %s", i ? ", " : "",
						json_string_value(json_object_get(v, "name")),
						json_string_value(json_object_get(v, "version")));
		if (r == 0)
			r = buf_append_str(&b, " (and the standard library).  Other languages "
					   "(the language argument):");
		json_array_foreach(langs, i, v) {
			const char *version = json_string_value(json_object_get(v, "version"));

			if (r == 0 && i > 0 && version)
				r = buf_appendf(&b, " %s (%s);",
						json_string_value(json_object_get(v, "name")), version);
		}
		if (r == 0)
			r = buf_append_str(&b, " all of them share the working directory /work.  ");
		if (r == 0 && json_array_size(tools))
			r = buf_append_str(&b, "Command-line tools (from bash):");
		json_array_foreach(tools, i, v) {
			const char *version = json_string_value(json_object_get(v, "version"));

			if (r == 0 && version)
				r = buf_appendf(&b, " %s (%s);",
						json_string_value(json_object_get(v, "name")), version);
		}
		if (r == 0 && json_array_size(tools))
			r = buf_append_str(&b, " git commits as 'sandbox' unless the code sets "
					   "user.name.  ");
	}
	if (r < 0 || !b.data) {
		buf_release(&b);
		return strdup("");
	}
	return b.data;
}

static char *describe(const struct tools *t, const struct tool *tl, const char *py,
		      const json_t *found_now)
{
	const struct petri_limits *d = &t->cfg->defaults;
	char *s = NULL, *found;
	int r = -1;

	if (!strcmp(tl->name, "execute") && (found = found_text(found_now))) {
		r = asprintf(&s,
			"Run code in a sandbox and return what it printed, the value of the last "
			"expression, charts and errors.  The sandbox persists between calls: Python "
			"%s runs in one long-lived interpreter, like a Jupyter kernel, so variables, "
			"imports and functions defined in one call are there in the next, and the "
			"value of a final expression is returned as in a notebook cell.  %s"
			"There is no network access%s.  "
			"Every open matplotlib figure comes back as a PNG image (use plt.show() or "
			"just leave figures open); an R plot comes back as a PNG too.  Files in the "
			"working directory /work persist between calls.  Limits: %g s per call "
			"by default (timeout_s: up to %g s), %u MB of memory, %u MB of disk in /work, "
			"%g CPU core(s).  What you see of stdout and stderr is cut to about %d KB "
			"each (head and tail): print summaries, not whole data sets.  A failure "
			"comes back as an error with the exception's name, message and traceback; "
			"fix the code and call again.",
			py, found, t->cfg->wheelhouse[0] ?
			": `%pip install NAME` (or pip from bash) installs only the packages the "
			"operator provides" : ", so nothing can be downloaded or pip-installed",
			d->timeout_s, timeout_max(t), d->memory_mb, d->disk_mb, d->cpu,
			RENDER_STREAM_MAX / 1000);
		free(found);
	} else if (!strcmp(tl->name, "write_file"))
		r = asprintf(&s,
			"Write a file into the sandbox's working directory /work (where code run by "
			"execute finds it), creating missing parent directories and replacing an "
			"existing file.  content is UTF-8 text, or base64 with encoding \"base64\" "
			"for binary data.  At most %llu MiB.",
			(unsigned long long)(t->cfg->max_file_bytes >> 20));
	else if (!strcmp(tl->name, "read_file"))
		r = asprintf(&s,
			"Read a file from the sandbox's /work: a text file comes back as text (the "
			"first %u KB), an image (PNG, JPEG, GIF, WebP) as an image, any other file "
			"as a base64 embedded resource (up to %u MiB).",
			READ_TEXT_MAX >> 10, READ_BLOB_MAX >> 20);
	else if (!strcmp(tl->name, "upload_archive"))
		r = asprintf(&s,
			"Put a whole project into the sandbox in one call: content is a tar, "
			"tar.gz, tar.bz2, tar.xz or zip archive in base64, extracted into path "
			"(a directory of /work, made if missing; default /work).  Files of the "
			"archive replace files of the same name; nothing is written if any entry "
			"is refused (absolute paths, '..', links out of /work, devices), or if it "
			"has more than %u entries, expands past the disk limit or more than %u "
			"times its size.  At most %llu MiB.",
			t->cfg->archive_max_entries, t->cfg->archive_max_ratio,
			(unsigned long long)(t->cfg->max_file_bytes >> 20));
	else if (!strcmp(tl->name, "download_archive"))
		r = asprintf(&s,
			"Take a directory of /work (default: all of it) out of the sandbox in one "
			"call, as a tar.gz: a base64 embedded resource, up to %u MiB.",
			READ_BLOB_MAX >> 20);
	else if (!strcmp(tl->name, "processes"))
		r = asprintf(&s,
			"List the processes running in the sandbox besides petri's own: servers "
			"and jobs that code started in the background (`cmd &` in bash, "
			"subprocess.Popen in Python) keep running between calls, and code of a "
			"later call reaches a server over 127.0.0.1.  One line each: pid, parent "
			"pid, state, age, memory and command line.  With stop, send that process "
			"a signal first (TERM by default, or KILL).  Everything ends when the "
			"sandbox does.");
	else if (!strcmp(tl->name, "list_files"))
		r = asprintf(&s,
			"List a directory of the sandbox's /work (by default /work itself): the "
			"name, size and type of each entry; directories end in '/'.");
	else if (!strcmp(tl->name, "start_process"))
		r = asprintf(&s,
			"Start a command in the background and come back to it: a dev server, a "
			"build, a test watcher, anything that runs for long or for ever.  It runs "
			"beside your code (execute keeps working, and reaches a server it starts "
			"at 127.0.0.1), as the code's own user with the same limits.  Waits up to "
			"wait_s (default 2 s) for it to end, then says whether it runs or how it "
			"ended, and what it printed.  Read the rest with process_output, type "
			"into it with process_input (start it with stdin true), stop it with "
			"processes (stop: its pid).  petri keeps the last 64 KiB of each of its "
			"streams; a reset of the runtime or the sandbox's end stops it.");
	else if (!strcmp(tl->name, "process_output"))
		r = asprintf(&s,
			"What a command started by start_process printed since the last read "
			"(stdout and stderr), and whether it still runs or how it ended (exit "
			"code, signal).  With wait_s, waits up to that long for it to end first "
			"(use it to let a build finish or a server start).  Ended commands stay "
			"readable until %d later ones have ended.", CMD_ENDED_KEPT);
	else if (!strcmp(tl->name, "process_input"))
		r = asprintf(&s,
			"Write text to the standard input of a command started by start_process "
			"with stdin true (a prompt, a REPL, a program reading lines); close sends "
			"end of file.  At most %u KiB a call.  Read its answer with "
			"process_output.", PROC_INPUT_MAX >> 10);
	else if (!strcmp(tl->name, "network"))
		r = asprintf(&s,
			"Give the sandbox network access, or take it away: by default its code "
			"reaches nothing but its own loopback (pip install, git clone and HTTP "
			"calls fail).  allow names what it may reach from now on (replacing what "
			"an earlier call allowed); a name that is not allowed does not resolve, "
			"an address that is not allowed refuses the connection.  The host, other "
			"sandboxes and cloud metadata addresses are never reachable, and this "
			"server lets a client ask for at most %s.",
			t->cfg->network.clients_may == NET_OPEN ? "everything (\"*\")" :
			"an allow-list (not \"*\")");
	else
		r = asprintf(&s,
			"Restart the runtime, as a notebook restarts its kernel: every variable "
			"and import is lost and background processes stop; the files in /work "
			"are kept.  Use it when the interpreter's state is broken beyond repair.");
	return r < 0 ? NULL : s;
}

/* The language argument, from the table of languages: the names as the enum, what each
 * does and its aliases in the description. */
static json_t *language_schema(void)
{
	struct buf d = BUF_INIT;
	json_t *e = json_array(), *p = NULL;
	int r = 0;

	for (size_t i = 0; i < lang_count() && r == 0; i++) {
		const struct language *l = lang_at(i);

		r = buf_appendf(&d, "%s%s%s: %s", i ? "; " : "", l->name,
				i ? "" : " (the default)", l->summary);
		for (size_t k = 0; l->aliases[k] && r == 0; k++)
			r = buf_appendf(&d, "%s%s", k ? ", " : " (also: ", l->aliases[k]);
		if (l->aliases[0] && r == 0)
			r = buf_append_str(&d, ")");
		json_array_append_new(e, json_string(l->name));
	}
	if (r == 0 && buf_append_str(&d, ".") == 0)
		p = json_pack("{s:s, s:s, s:o}", "type", "string", "description", d.data,
			      "enum", e);
	else
		json_decref(e);
	buf_release(&d);
	return p;
}

static json_t *schema(const struct tools *t, const struct tool *tl)
{
	json_t *props = json_object(), *req = json_array(), *sch;

	for (size_t i = 0; i < TOOL_ARGS_MAX && tl->args[i].name; i++) {
		const struct arg *a = &tl->args[i];
		json_t *p = a->type == ARG_LANGUAGE ? language_schema() :
			    json_pack("{s:s, s:s}", "type", a->type == ARG_STRING ? "string" :
				      a->type == ARG_ENV ? "object" :
				      a->type == ARG_STRINGS ? "array" :
				      a->type == ARG_PID ? "integer" :
				      a->type == ARG_BOOL ? "boolean" : "number", "description",
				      a->description);

		if (p && a->type == ARG_ENV)
			json_object_set_new(p, "additionalProperties",
					    json_pack("{s:s}", "type", "string"));
		if (p && a->type == ARG_STRINGS)
			json_object_set_new(p, "items", json_pack("{s:s}", "type", "string"));

		if (p && a->choices) {
			json_t *e = json_array();

			for (size_t k = 0; a->choices[k]; k++)
				json_array_append_new(e, json_string(a->choices[k]));
			json_object_set_new(p, "enum", e);
		}
		if (p && a->type == ARG_PID)
			json_object_set_new(p, "minimum", json_integer(1));
		if (p && a->type == ARG_WAIT) {
			json_object_set_new(p, "minimum", json_integer(0));
			json_object_set_new(p, "maximum", json_real(CMD_WAIT_MAX_S));
		}
		if (p && a->type == ARG_NUMBER) {
			json_object_set_new(p, "minimum", json_real(0.1));
			json_object_set_new(p, "maximum", json_real(timeout_max(t)));
			json_object_set_new(p, "default", json_real(t->cfg->defaults.timeout_s));
		}
		json_object_set_new(props, a->name, p);
		if (a->required)
			json_array_append_new(req, json_string(a->name));
	}
	sch = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
			"additionalProperties", false);
	if (sch && json_array_size(req))
		json_object_set(sch, "required", req);
	json_decref(req);
	return sch;
}

/* The default language's version as found (GET /v1/languages), or NULL. */
static const char *found_python(const json_t *found)
{
	size_t i;
	json_t *l;

	json_array_foreach(json_object_get(found, "languages"), i, l)
		if (json_is_true(json_object_get(l, "default")))
			return json_string_value(json_object_get(l, "version"));
	return NULL;
}

#define FOUND_WAIT_S 20.0	/* tools/list waits this long for a probe */

static json_t *definitions(struct tools *t, const char *const *only)
{
	/* What an earlier start found (the state directory's found.json)
	 * gives the packages and Python's version at once, starting nothing:
	 * no sandbox, no probe, no template (docs/mcp.md "Start-up").  Only
	 * when nothing is known (the first start on this host, or its
	 * packages or configuration changed) does it find out now and wait:
	 * most clients list the tools once, and a model told less than the
	 * sandbox has writes worse code. */
	json_t *found = t->sm ? smgr_found(t->sm, -1) : NULL;
	json_t *list = json_array();

	if (t->sm && !json_is_array(json_object_get(found, "packages"))) {
		json_decref(found);
		found = smgr_found(t->sm, FOUND_WAIT_S);
	}
	char py[32];

	pthread_mutex_lock(&version_lock);
	snprintf(py, sizeof(py), "%s", python_version[0] ? python_version :
		 found_python(found) ? found_python(found) : "3");
	pthread_mutex_unlock(&version_lock);

	for (size_t i = 0; list && i < NTOOLS; i++) {
		const struct tool *tl = &tool_table[i];
		bool wanted = !only;
		char *desc;
		json_t *def;

		for (size_t k = 0; only && only[k] && !wanted; k++)
			wanted = !strcmp(only[k], tl->name);
		if (!wanted || !offered(t, tl))
			continue;
		desc = describe(t, tl, py, found);
		def = desc ? json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}",
				       "name", tl->name, "title", tl->title, "description", desc,
				       "inputSchema", schema(t, tl),
				       "annotations", "title", tl->title,
				       "readOnlyHint", tl->read_only,
				       "destructiveHint", tl->destructive,
				       "idempotentHint", tl->read_only,
				       "openWorldHint", false) : NULL;
		free(desc);
		if (!def || json_array_append_new(list, def)) {
			json_decref(list);
			list = NULL;
			break;
		}
	}
	json_decref(found);
	return list;
}

json_t *tools_list(struct tools *t)
{
	return definitions(t, NULL);
}

json_t *tools_list_only(struct tools *t, const char *const *names)
{
	return definitions(t, names);
}

/* ---- for petri ask ----------------------------------------------------- */

int tools_upload(struct tools *t, const char *path, const void *data, size_t len,
		 char *err, size_t errlen)
{
	char rel[FILES_PATH_MAX + 1], note[512];
	struct session *s;
	bool restarted;
	int r = -EIO;

	if (ws_path(path, NULL, 0, rel, err, errlen) != WS_OK)
		return -EINVAL;
	pthread_mutex_lock(&t->call);
	if (acquire(t, &s, &restarted, note, sizeof(note), err, errlen) == SM_OK) {
		r = session_file_write(s, rel, data, len);
		if (r < 0)
			snprintf(err, errlen, "cannot write '/work/%s': %s", rel, file_error(r));
		session_put(s);
	}
	pthread_mutex_unlock(&t->call);
	return r < 0 ? r : 0;
}

int tools_unpack(struct tools *t, const void *data, size_t len, const char *dir,
		 json_t **summary, char *err, size_t errlen)
{
	char rel[FILES_PATH_MAX + 1], note[512];
	struct session *s;
	bool restarted;
	int r = -EIO;

	*summary = NULL;
	if (ws_path(dir, NULL, WS_PATH_ROOT, rel, err, errlen) != WS_OK)
		return -EINVAL;
	pthread_mutex_lock(&t->call);
	if (acquire(t, &s, &restarted, note, sizeof(note), err, errlen) == SM_OK) {
		r = unpack_into(t, s, data, len, rel, summary, err, errlen) < 0 ? -EINVAL : 0;
		session_put(s);
	}
	pthread_mutex_unlock(&t->call);
	return r;
}

int tools_archive(struct tools *t, const char *dir, struct buf *out, size_t max, char *err,
		  size_t errlen)
{
	char sid[SESSION_ID_LEN + 1];
	struct session *s;
	int r;

	pthread_mutex_lock(&t->lock);
	memcpy(sid, t->sid, sizeof(sid));
	pthread_mutex_unlock(&t->lock);
	if (!sid[0] || smgr_lookup(t->sm, sid, &s, err, errlen) != SM_OK) {
		if (!sid[0])
			snprintf(err, errlen, "no sandbox was started");
		return -ENOENT;
	}
	r = archive_of(t, s, dir, out, max, err, errlen) < 0 ? -EIO : 0;
	session_put(s);
	return r;
}

int tools_download(struct tools *t, const char *path, struct buf *out, size_t max)
{
	char sid[SESSION_ID_LEN + 1], reason[256];
	struct session_file f;
	struct session *s;
	int r;

	pthread_mutex_lock(&t->lock);
	memcpy(sid, t->sid, sizeof(sid));
	pthread_mutex_unlock(&t->lock);
	if (!sid[0] || smgr_lookup(t->sm, sid, &s, reason, sizeof(reason)) != SM_OK)
		return -ENOENT;
	r = session_file_open(s, path, &f);
	session_put(s);
	if (r < 0)
		return r;
	if (f.size > max) {
		close(f.fd);
		return -EFBIG;
	}
	r = read_fd(f.fd, out, max);
	close(f.fd);
	return r;
}
