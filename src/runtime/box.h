/* box — a sandbox with the runtime driver in it, and executions in it.
 *
 * box_start() spawns a jail whose main process is the Python driver
 * (docs/protocol.md) and waits for its "ready".  box_exec() translates one
 * struct exec_request (exec/exec.h: code to run, or an archive to unpack)
 * into the driver's "exec" frame, pumps stdout, stderr and frames until the
 * driver says "done", a limit fires or the sandbox dies, and fills a struct
 * result: its files written and the test reports among them
 * (box_read_tests()) included.  A box that died (crash, OOM, protocol
 * violation, kill after a timeout) stays dead: box_exec() then fails with
 * -EPIPE and box_dead_reason() says why.
 *
 * A box is not thread-safe: one execution at a time, by one thread. */
#ifndef PETRI_BOX_H
#define PETRI_BOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/jail.h"
#include "exec/exec.h"
#include "runtime/cache.h"
#include "exec/result.h"

struct box;

struct box_config {
	struct jail_limits limits;
	const char *const *env;		/* extra "NAME=value", NULL-terminated */
	const char *const *ro_binds;	/* extra read-only host paths */
	/* Host directories on sys.path (after the standard library and the
	 * session's own installs, before Debian's packages), NULL-terminated;
	 * and the directory of wheels pip installs from (NULL: none).  Both
	 * are bound read-only at the same place, like ro_binds, and checked
	 * as they are (jail_bind_check()); their names hold no ':' and no
	 * whitespace. */
	const char *const *python_path;
	const char *wheelhouse;
	/* What the libraries build on first use, built once (cache_prepare(),
	 * src/runtime/cache.h): files of the read-only root under
	 * CACHE_SANDBOX_DIR, the caller's (alive while sandboxes start). */
	const struct jail_file *cache_files;
	size_t ncache_files;
};

/* Where pip installs inside (a --user install: PYTHONUSERBASE), in the
 * workspace, so that the session's disk limit counts it; the driver puts
 * its site-packages on sys.path itself (it runs with -I). */
#define BOX_USER_BASE JAIL_WORKDIR "/.local"

#define BOX_ENV_MAX 192		/* base + operator (64) + session (64) + room */
#define BOX_BINDS_MAX 96
#define BOX_PYTHON_PATH_MAX 16

/* The storage of the jail_config that box_jail_config() makes: the
 * caller's, alive until jail_spawn() returns. */
struct box_jail_parts {
	const char *env[BOX_ENV_MAX];
	/* driver, run.js, profile.R, python and sudo, fonts.conf, the cache's;
	 * a template's extension and petri-init */
	struct jail_file files[9 + CACHE_FILES_MAX];
	char fonts_conf[1024];
	const char *binds[BOX_BINDS_MAX + 1];
	char python_path[32 + BOX_PYTHON_PATH_MAX * 1024];	/* PETRI_PYTHON_PATH= */
	char find_links[32 + 1024];				/* PIP_FIND_LINKS= */
};


/* 0 or -errno with a message in err. */
int box_start(struct jail_host *host, const struct box_config *cfg,
	      struct box **out, char *err, size_t errlen);

/* Run one execution.  Returns 0 with *res filled (whatever the code did:
 * res->status tells), -EPIPE if the box was already dead, -EINVAL for a bad
 * request (unknown language, code too long), -ENOMEM. */
int box_exec(struct box *b, const struct exec_request *ex,
	     const struct exec_events *ev, struct result *res);
/* What -EINVAL from box_exec() means, for a client. */
#define BOX_EINVAL_REASON "the code, its stdin or a variable is not valid UTF-8, or the " \
	"code or stdin is longer than 1 MiB"

/* Take over a jail whose main process is the driver (e.g. one forked from a
 * template) and wait for its "ready".  The box owns j from now on, even on
 * failure. */
int box_adopt(struct jail *j, struct box **out, char *err, size_t errlen);

/* The jail configuration that runs the driver: argv, environment (base,
 * then what cfg->python_path and cfg->wheelhouse need, then cfg->env), the
 * files it needs, the binds (cfg->ro_binds, python_path, wheelhouse), all
 * stored in parts: the driver and the helpers of the JavaScript and R
 * entries of the table of languages.  With with_extension, the template's:
 * the driver in --zygote mode and the C extension.  -E2BIG when the environment, the
 * binds or the path do not fit. */
int box_jail_config(const struct box_config *cfg, struct jail_config *jc,
		    struct box_jail_parts *parts, bool with_extension);

/* Set variables in the driver's environment ("NAME=value", NULL-terminated),
 * for every execution after this.  0 or -errno. */
int box_send_env(struct box *b, const char *const *env);

/* A process beside the interpreter (any thread, while code runs too):
 * the keeper starts argv (argv[0] looked up on PATH) in cwd with the
 * sandbox's environment and env ("NAME=value"), as the sandbox's code
 * would, in a session of its own (docs/protocol.md: "spawn").  *out gets
 * its pid as the sandbox numbers it and the daemon's ends of its pipes,
 * each non-blocking: in (its stdin), out, err, and status, on which the
 * keeper says "exit STATUS" (waitpid's) when it reaped it, or nothing (end
 * of file) when the sandbox ended first.  0; -EINVAL (a string not UTF-8),
 * -ENOENT (no such cwd), -EAGAIN (the keeper's or the sandbox's process
 * limit), -EPIPE (the sandbox is gone), -ETIMEDOUT, -EPROTO (the keeper's
 * answer made no sense), -errno. */
#define BOX_SPAWN_FDS 4
struct box_spawn {
	const char *const *argv;	/* NULL-terminated, at least one */
	const char *const *env;		/* NULL-terminated */
	const char *cwd;		/* absolute */
	/* A terminal's slave (jail_open_pty()) for its stdin, stdout and
	 * stderr, its controlling terminal; -1: pipes.  With one, *out's in,
	 * out and err are -1: the caller holds the master. */
	int tty;
};
struct box_proc {
	int pid;
	int in, out, err, status;
};
int box_spawn(struct box *b, const struct box_spawn *sp, struct box_proc *out);

/* Put the content of the files an execution wrote (files: its result's
 * array of {"path", "size"}) inline: those whose path matches one of the
 * patterns (fnmatch(3) without flags, relative to /work; NULL: every file)
 * gain "content_base64" and "truncated": false; one over per_file bytes,
 * past total with the others, or unreadable gains "truncated": true and a
 * "reason" instead.  0 or -ENOMEM. */
int box_files_inline(struct box *b, json_t *files, const char *const *patterns,
		     size_t npatterns, uint64_t per_file, uint64_t total);

/* The test results an execution left (exec/junit.h), into res->tests:
 * the report at path (relative to /work), or with path NULL the reports
 * among res->files (the first JUNIT_FILES_MAX whose name ends in .xml and
 * that are reports), each read as the sandbox's user, at most
 * JUNIT_FILE_MAX bytes each and JUNIT_BYTES_MAX together.  res->tests
 * stays NULL when no report was asked for or found; a report asked for
 * that cannot be read, or the first found that is malformed, is named in
 * its "error".  Called by box_exec(), after the files; 0 or -ENOMEM. */
int box_read_tests(struct box *b, const char *path, struct result *res);

/* The host just wrote files into /work (an upload): the next execution's
 * "files" must not list them (unless the code changes them). */
void box_note_host_write(struct box *b);

/* Interrupt the execution in progress (from any thread), as at a timeout:
 * within a tick (0.1 s) the driver gets SIGINT; code that ends within the
 * grace gives its own result (Python: a KeyboardInterrupt error) with the
 * reason "interrupted; ...", and the box lives on; code that does not is
 * killed with the sandbox (status killed).  A request made while no
 * execution runs holds for the next one until withdrawn: the caller, which
 * knows when none runs (session.c, under the lock of its busy flag),
 * withdraws it then; box_exec() withdraws it when it returns. */
void box_interrupt(struct box *b);
void box_interrupt_withdraw(struct box *b);

/* Restart the runtime between executions (not thread-safe: by the one
 * thread that executes): the driver becomes a fresh interpreter in its own
 * process (execve: its pid, and so pid 1's main process, stay), which kills
 * every other process of the sandbox before it says "ready"; /work and
 * /tmp stay, the jail stays as it is.  What was in the pipes is dropped.
 * 0; -EPIPE with the reason in err when the box was dead or the runtime did
 * not come back (then the box is dead: killed); -ENOMEM. */
int box_restart(struct box *b, char *err, size_t errlen);

/* Kill the sandbox now (from any thread); an execution in progress ends as
 * killed with reason.  The first reason given is kept. */
void box_stop(struct box *b, const char *reason);

bool box_alive(const struct box *b);
const char *box_dead_reason(const struct box *b);
/* The sandbox under the box, for file transfers and stats. */
struct jail *box_jail(struct box *b);
/* Python version the driver reported, e.g. "3.11.2". */
const char *box_python_version(const struct box *b);

/* Kill and free.  NULL allowed. */
void box_free(struct box *b);

#endif
