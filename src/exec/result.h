/* result — what one execution produced.  The same object serves every
 * interface: `petri run --json`, the HTTP API and MCP (docs/api.md).
 *
 * Ownership: a result owns its buffers and JSON values; result_release()
 * frees them.  result_to_json() returns a new reference. */
#ifndef PETRI_RESULT_H
#define PETRI_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"

enum result_status {
	RESULT_OK,
	RESULT_ERROR,		/* the code failed: exception, non-zero exit */
	RESULT_TIMEOUT,		/* wall-clock or CPU time limit */
	RESULT_OOM,		/* killed by the memory limit */
	RESULT_KILLED,		/* killed otherwise: signal, crash, protocol */
};

struct result_stream {
	struct buf data;	/* what was kept, at most the cap */
	uint64_t total;		/* bytes the program wrote (at least, if stopped) */
	bool stopped;		/* past the cap no longer read: its writer blocks */
	bool truncated;
};

struct result {
	enum result_status status;
	bool has_exit_code;
	int exit_code;
	int signal;		/* 0: none */
	struct result_stream out, err;
	json_t *results;	/* array of MIME bundles */
	int main_result;	/* index in results of the last expression's value; -1 */
	uint64_t results_bytes;
	json_t *error;		/* {"name","message","traceback"} or NULL */
	json_t *files;		/* array of {"path","size"} */
	json_t *tests;		/* the test reports read (box_exec()), or NULL */
	/* What a session with a network reached and was refused during the
	 * execution (net_seen(): src/net/router.h), or NULL (no network). */
	json_t *network;
	uint64_t duration_ms, cpu_ms, memory_peak_bytes;
	bool restarted;		/* a fresh interpreter took the old one's place */
	char reason[256];	/* why a limit status, or "" */
};

/* 0 or -ENOMEM. */
int result_init(struct result *r);
void result_release(struct result *r);

const char *result_status_name(enum result_status s);

/* Keep up to cap bytes of a stream; the cut never splits a UTF-8
 * character.  Returns how many of the len bytes were kept. */
size_t result_stream_add(struct result_stream *s, const char *data, size_t len,
			 size_t cap);

/* Set the error object (steals the reference). */
void result_set_error(struct result *r, json_t *error);
/* Convenience: an error made of C strings. */
int result_set_error_str(struct result *r, const char *name, const char *message,
			 const char *traceback);

/* The JSON form.  Text that is not valid UTF-8 is sent with U+FFFD in
 * "stdout" and the exact bytes in "stdout_base64". */
json_t *result_to_json(const struct result *r);

/* The exit code `petri run` gives for this result: the program's own, 124
 * for a timeout, 137 for oom, 128+N for a signal, 125 for petri's failure. */
int result_cli_exit_code(const struct result *r);

#endif
