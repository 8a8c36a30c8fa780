/* request — what a client may ask for, checked in one place for every front
 * end: the HTTP API, MCP, petri run and petri ask, and any later one.
 *
 * A request arrives as JSON (the HTTP body, MCP's tool arguments) or as
 * command-line flags, which petri run turns into the same JSON; either way
 * these functions decide, with one set of rules and one set of messages:
 *   - a sandbox's limits: limit_rules' minimums, the configuration's
 *     [max_limits] as maximums (asking for more is an error, never a silent
 *     cap), the configuration's [limits] for what is not asked;
 *   - an execution: code, language (languages.h), a timeout within the
 *     limits of the sandbox it runs in, variables;
 *   - a session's variables and timeouts within the configuration's;
 *   - a one-shot's files in and the files it returns.
 * Nothing here touches a sandbox: the result is a struct the session layer
 * runs (session.h).  Messages quote at most a short piece of what the
 * client sent. */
#ifndef PETRI_REQUEST_H
#define PETRI_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "exec/exec.h"
#include "workspace/files.h"

#define REQUEST_ENV_MAX		64		/* variables per session or execution */
#define REQUEST_ENV_BYTES	(64u << 10)	/* all of them, as NAME=value */
#define REQUEST_FILES_MAX	100		/* a one-shot's files in */
#define REQUEST_PATTERNS_MAX	64		/* return_files globs */

/* Why a request was refused: a machine-readable code ("invalid_request",
 * "invalid_path") and a sentence for a person (or a model) to act on. */
struct request_error {
	const char *code;
	char message[1536];	/* room to name every language */
};

/* "limits": an object of limit_rules keys (NULL or null: none), over
 * cfg->defaults into *out. */
bool request_limits(const struct petri_config *cfg, const json_t *limits,
		    struct petri_limits *out, struct request_error *e);

/* "language": a name or alias of the table of languages; NULL or null keeps *name. */
bool request_language(const json_t *v, const char **name, struct request_error *e);

/* "env": {"NAME": "value"} (NULL or null: none) -> a NULL-terminated
 * "NAME=value" array to exec_env_free(); NULL with e when refused (or out of
 * memory: e->code "internal").  Names petri or the operator sets are
 * refused. */
char **request_env(const struct petri_config *cfg, const json_t *env,
		   struct request_error *e);

/* An execution from obj's "code", "language", "timeout_s", "env",
 * "tests" ("junit:PATH": the test report to read, PATH checked as a file's
 * path is) and "stdin" (at most EXEC_STDIN_MAX bytes, no NUL), to run in a sandbox with limits lim whose default language is
 * language: the timeout is at most lim's, the output capped by lim.  The
 * execution points into obj.  Release with request_exec_release()
 * whatever it returns. */
bool request_exec(const struct petri_config *cfg, const json_t *obj, const char *language,
		  const struct petri_limits *lim, struct exec_request *ex, struct request_error *e);
void request_exec_release(struct exec_request *ex);

/* "idle_timeout_s" and "max_lifetime_s" of obj: each absent (keeps *idle,
 * *life) or from 1 s to the configuration's value, which is also the
 * default. */
bool request_lifetime(const struct petri_config *cfg, const json_t *obj, double *idle,
		      double *life, struct request_error *e);

/* "network": what a session's code may reach, {"allow": [rules], "deny":
 * [rules]} (net/policy.h says what a rule is; an allow "*" is open; no
 * allow, or an empty one, is none).  NULL or null: *out NULL, the
 * operator's default.  Else a policy to free(), within what the operator
 * lets a client ask ([network] clients_may: the code "network_not_allowed"
 * when beyond). */
bool request_network(const struct petri_config *cfg, const json_t *v, struct net_policy **out,
		     struct request_error *e);
/* A policy as a session shows it: {"mode": "none"} (p NULL), or with its
 * "allow" and "deny" lists as a client would write them.  A new reference. */
json_t *request_network_json(const struct net_policy *p);

/* Stopping a session's process: its pid as the sandbox numbers it (v a
 * JSON integer, or a string of decimal digits as a URL path carries it),
 * from 1 to INT_MAX; and the signal sent, by name (v a string: "TERM",
 * "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", with or without "SIG",
 * any case; NULL or null: TERM), its number into *sig and its name (without
 * "SIG") into *name. */
bool request_pid(const json_t *v, int *pid, struct request_error *e);
bool request_signal(const json_t *v, int *sig, const char **name, struct request_error *e);

/* A one-shot: a fresh sandbox, files put in, one execution, the files it
 * wrote (optionally) returned, the sandbox gone. */
struct oneshot_file {
	char *path;			/* relative to /work, checked */
	unsigned char *data;
	size_t len;
};

struct oneshot {
	struct petri_limits limits;
	struct exec_request ex;
	/* An archive (tar, tar.gz, tar.bz2, tar.xz, zip) extracted into
	 * archive_dest ("" or NULL: /work) first, by the sandbox's driver, as
	 * POST /v1/sessions/{id}/archive does; NULL: none. */
	unsigned char *archive;
	size_t archive_len;
	char *archive_dest;
	struct oneshot_file *files;
	size_t nfiles;
	bool return_files;		/* the content of the files written */
	char **patterns;		/* ... only those matching one (fnmatch) */
	size_t npatterns;		/* 0: every file */
	/* Caps of the files returned: each and all together; 0: the
	 * configuration's max_return_file_kb and max_return_files_mb. */
	uint64_t return_file_max, return_total_max;
	bool internal;			/* petri's own (a probe): not recorded */
	int key;			/* as session_params.key */
};

/* POST /v1/execute's body (and MCP's, petri run's): "code", "language",
 * "limits", "timeout_s", "env", "tests", "stdin", "archive" {content_base64, path},
 * "files" [{path, content_base64}],
 * "return_files" (true, false or a list of globs).  Unknown keys are the
 * caller's business (http_only_keys).  Release with oneshot_release(). */
bool request_oneshot(const struct petri_config *cfg, const json_t *obj, struct oneshot *o,
		     struct request_error *e);
void oneshot_release(struct oneshot *o);

#define REQUEST_ARGS_MAX	256		/* a command's program and arguments */
#define REQUEST_TAG_MAX		256		/* a command's name, chosen by its client */
#define REQUEST_PTY_MAX		4096		/* a terminal's rows, its columns */
#define REQUEST_COMMAND_TIMEOUT_MAX 604800.0	/* a week: at most its session's life */

/* A command to start beside the interpreter (the API's commands, MCP's
 * start_process; the session layer runs it: session/commands.h): obj's
 * "command" (a string, run by /bin/bash -c) or "args" (the program, looked
 * up on PATH, and its arguments), "cwd" (a directory relative to /work, or
 * absolute; default /work), "env" (as an execution's), "stdin" (true:
 * kept open for input; default: end of file), "timeout_s" (killed after
 * it; absent: it lives with the session), "tag" (a client's name for it),
 * "pty" (a terminal: {"rows", "cols"}, each optional).  request_size()
 * checks a terminal's size alone (a resize).
 * Strings point into obj.  Unknown keys are the caller's business.
 * Release with request_command_release() whatever it returns. */
struct command_request {
	const char *command;		/* the shell's, or NULL: argv as asked */
	const char **argv;
	char **env;
	char cwd[FILES_PATH_MAX + 8];
	bool stdin;
	double timeout_s;		/* 0: none */
	const char *tag;
	/* "pty": {"rows", "cols"} (each 1 to REQUEST_PTY_MAX, default 24 x
	 * 80): on a terminal of the sandbox's, stdin kept open */
	bool pty;
	unsigned short rows, cols;
};
bool request_command(const struct petri_config *cfg, const json_t *obj,
		     struct command_request *c, struct request_error *e);
void request_command_release(struct command_request *c);
bool request_size(const json_t *obj, unsigned short *rows, unsigned short *cols,
		  struct request_error *e);

/* Input for a running process (the API's .../stdin, MCP's process_input):
 * obj's "input" (text) or "input_base64" (bytes), and/or "close" (true: end
 * of file after it), one of them at least.  data points into obj, or into
 * decoded; release with request_input_release() whatever it returns. */
struct input_request {
	const void *data;		/* NULL, len 0: none */
	size_t len;
	bool close;
	unsigned char *decoded;
};
bool request_input(const json_t *obj, struct input_request *in, struct request_error *e);
void request_input_release(struct input_request *in);
/* What c asked for, as shown back to its client (docs/api.md's Command,
 * "asked"): "command" or "args", "cwd", the names of "env" (never their
 * values), "stdin", "timeout_s", "tag"; each string cut at
 * REQUEST_SHOWN_MAX bytes and at most REQUEST_SHOWN_MAX bytes of args,
 * "truncated": true then.  NULL when out of memory. */
#define REQUEST_SHOWN_MAX 1024
json_t *request_command_json(const struct command_request *c);

#endif
