/* exec — what one execution is: the request a sandbox runs, the events it
 * streams while it runs, and the variables it runs with.
 *
 * Front ends build a struct exec_request (from JSON through request.h, or
 * by hand for the probe and petri check), the session layer runs it
 * (session.h), and the box translates it into a frame of the driver's
 * protocol (runtime/box.h, docs/protocol.md).  Nothing here touches a
 * sandbox, so a front end needs no header of runtime/ to ask for one.
 * What comes back is a struct result (result.h). */
#ifndef PETRI_EXEC_H
#define PETRI_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum exec_stream { EXEC_STDOUT = 1, EXEC_STDERR = 2 };

/* Called as output and results arrive (for streaming); any may be NULL. */
struct exec_events {
	void *ctx;
	void (*output)(void *ctx, enum exec_stream s, const char *data, size_t len);
	/* main: the bundle is the value of the code's last expression (as a
	 * notebook shows it), not something the code display()ed. */
	void (*rich)(void *ctx, const json_t *bundle, bool main);
	void (*error)(void *ctx, const json_t *error);
};

/* An archive to extract instead of code (session_unpack()): the driver
 * checks every entry and extracts it all or nothing (docs/api.md#archives,
 * docs/protocol.md).  archive: a name in /work that starts with
 * EXEC_ARCHIVE_PREFIX, written there by the host and removed by the driver;
 * dest: a path in /work, checked with files_check_path() ("": /work). */
#define EXEC_ARCHIVE_PREFIX ".petri-archive-"
#define EXEC_ARCHIVE_NAME_LEN (sizeof(EXEC_ARCHIVE_PREFIX) + 16)	/* its NUL too */
/* A new name for an archive: the prefix and 16 random hex digits.  0, or
 * -EIO when the kernel gives no random bytes. */
int exec_archive_name(char out[EXEC_ARCHIVE_NAME_LEN]);
struct exec_unpack {
	const char *archive;
	const char *dest;
	uint64_t max_entries, max_bytes, max_ratio;
};

struct exec_request {
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
	const struct exec_unpack *unpack;	/* NULL: run code */
	/* What the code reads from its standard input (Python's sys.stdin and
	 * input(), a program's fd 0), at most EXEC_STDIN_MAX bytes of UTF-8
	 * without NUL; NULL: none, reading gives end of file at once. */
	const char *input;
	size_t input_len;
};

#define EXEC_OUTPUT_CAP_DEFAULT		(1u << 20)
#define EXEC_RESULTS_CAP_DEFAULT	(32u << 20)
#define EXEC_CODE_MAX			(1u << 20)
#define EXEC_STDIN_MAX			(1u << 20)
#define EXEC_GRACE_DEFAULT		2.0

/* A copy of a NULL-terminated "NAME=value" array (NULL: an empty one), to
 * exec_env_free(); NULL when out of memory. */
char **exec_env_dup(const char *const *env);
void exec_env_free(char **env);

#endif
