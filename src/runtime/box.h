/* box — a sandbox with the runtime driver in it, and executions in it.
 *
 * box_start() spawns a jail whose main process is the Python driver
 * (docs/protocol.md) and waits for its "ready".  box_exec() sends one piece
 * of code, pumps stdout, stderr and frames until the driver says "done", a
 * limit fires or the sandbox dies, and fills a struct result: its files
 * written and the test reports among them (box_read_tests()) included.
 * A box that
 * died (crash, OOM, protocol violation, kill after a timeout) stays dead:
 * box_exec() then fails with -EPIPE and box_dead_reason() says why.
 *
 * A box is not thread-safe: one execution at a time, by one thread. */
#ifndef PETRI_BOX_H
#define PETRI_BOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/jail.h"
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
	/* driver, run.js, profile.R, fonts.conf, the cache's; a template's
	 * extension and petri-init */
	struct jail_file files[6 + CACHE_FILES_MAX];
	char fonts_conf[1024];
	const char *binds[BOX_BINDS_MAX + 1];
	char python_path[32 + BOX_PYTHON_PATH_MAX * 1024];	/* PETRI_PYTHON_PATH= */
	char find_links[32 + 1024];				/* PIP_FIND_LINKS= */
};

enum box_stream { BOX_STDOUT = 1, BOX_STDERR = 2 };

/* Called as output and results arrive (for streaming); any may be NULL. */
struct box_events {
	void *ctx;
	void (*output)(void *ctx, enum box_stream s, const char *data, size_t len);
	/* main: the bundle is the value of the code's last expression (as a
	 * notebook shows it), not something the code display()ed. */
	void (*rich)(void *ctx, const json_t *bundle, bool main);
	void (*error)(void *ctx, const json_t *error);
};

/* An archive to extract instead of code (session_unpack()): the driver
 * checks every entry and extracts it all or nothing (docs/api.md#archives,
 * docs/protocol.md).  archive: a name in /work that starts with
 * BOX_ARCHIVE_PREFIX, written there by the host and removed by the driver;
 * dest: a path in /work, checked with files_check_path() ("": /work). */
#define BOX_ARCHIVE_PREFIX ".petri-archive-"
#define BOX_ARCHIVE_NAME_LEN (sizeof(BOX_ARCHIVE_PREFIX) + 16)	/* its NUL too */
/* A new name for an archive: the prefix and 16 random hex digits.  0, or
 * -EIO when the kernel gives no random bytes. */
int box_archive_name(char out[BOX_ARCHIVE_NAME_LEN]);
struct box_unpack {
	const char *archive;
	const char *dest;
	uint64_t max_entries, max_bytes, max_ratio;
};

struct box_exec {
	const char *language;		/* a name of lang_table (no alias) */
	const char *code;
	double timeout_s;		/* wall clock; > 0 */
	double cpu_s;			/* CPU time of the whole sandbox; 0: none */
	size_t output_cap;		/* per stream; 0: default */
	size_t results_cap;		/* all rich results together; 0: default */
	bool one_shot;			/* on timeout kill at once (no interrupt) */
	double grace_s;			/* interrupt -> kill; 0: default */
	int cancel_fd;			/* readable = stop now (as a timeout); -1 */
	const char *const *env;		/* "NAME=value" for this execution only
					 * (the driver restores its environment
					 * after), NULL-terminated; NULL: none */
	/* Python's variables live in contexts of one interpreter: NULL is
	 * the session's own; another name (at most 64 printable ASCII
	 * characters) has its own, made when first named.  fresh: start the
	 * context empty.  cwd: where the code (and its programs) run, an
	 * absolute path; NULL: /work. */
	const char *context;
	bool fresh;
	const char *cwd;
	/* The JUnit XML report to read into the result's "tests" when the
	 * execution ends, relative to /work and checked (files_check_path);
	 * NULL: the reports among the files the execution wrote, if any. */
	const char *junit;
	const struct box_unpack *unpack;	/* NULL: run code */
	/* What the code reads from its standard input (Python's sys.stdin and
	 * input(), a program's fd 0), at most BOX_STDIN_MAX bytes of UTF-8
	 * without NUL; NULL: none, reading gives end of file at once. */
	const char *input;
	size_t input_len;
};

#define BOX_OUTPUT_CAP_DEFAULT	(1u << 20)
#define BOX_RESULTS_CAP_DEFAULT	(32u << 20)
#define BOX_CODE_MAX		(1u << 20)
#define BOX_STDIN_MAX		(1u << 20)
#define BOX_GRACE_DEFAULT	2.0

/* 0 or -errno with a message in err. */
int box_start(struct jail_host *host, const struct box_config *cfg,
	      struct box **out, char *err, size_t errlen);

/* Run one execution.  Returns 0 with *res filled (whatever the code did:
 * res->status tells), -EPIPE if the box was already dead, -EINVAL for a bad
 * request (unknown language, code too long), -ENOMEM. */
int box_exec(struct box *b, const struct box_exec *ex,
	     const struct box_events *ev, struct result *res);
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

/* A copy of a NULL-terminated "NAME=value" array (NULL: none), freed with
 * box_env_free(); NULL when out of memory. */
char **box_env_dup(const char *const *env);
void box_env_free(char **env);

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
