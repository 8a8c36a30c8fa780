/* record — the execution record: every execution petri serve ran, with its
 * code, language, limits, times and what came out, so that a person can
 * check exactly what ran behind an answer (GET /v1/sessions/{id}/executions).
 *
 * SQLite: in memory by default (the last RECORD_KEEP_MEMORY executions), or
 * a file that outlives the daemon ([server] record = PATH, the last
 * RECORD_KEEP_FILE).  Outputs are stored as the result object without image
 * data (a note says how large it was); code and result are each capped at
 * RECORD_ENTRY_MAX, with a flag saying so.  Thread-safe. */
#ifndef PETRI_RECORD_H
#define PETRI_RECORD_H

#include <jansson.h>
#include <stddef.h>

#include "runtime/result.h"

#define RECORD_KEEP_MEMORY 1000		/* entries kept; the oldest go first */
#define RECORD_KEEP_FILE 100000
#define RECORD_ENTRY_MAX (256u << 10)	/* bytes of code, of result, per entry */

struct record;

/* path: a file, or NULL/"" for memory.  0 or -errno with a message. */
int record_open(const char *path, struct record **out, char *err, size_t errlen);
void record_close(struct record *rec);

struct record_entry {
	const char *session;		/* session id, or NULL for a one-shot run */
	const char *language;
	const char *code;
	double started_at;		/* seconds since the epoch */
	json_t *limits;			/* borrowed; may be NULL */
	const struct result *result;
};

/* Add one execution.  0 or -errno (the execution itself is not affected). */
int record_add(struct record *rec, const struct record_entry *e);

/* The executions of a session, oldest first, at most limit (new
 * reference), or NULL when out of memory. */
json_t *record_list(struct record *rec, const char *session, int limit);

#endif
