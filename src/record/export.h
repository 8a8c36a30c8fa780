/* export — the execution record as a document a person opens: a Jupyter
 * notebook (one code cell per execution, its outputs as Jupyter shows
 * them), a self-contained HTML page, or JSON Lines (the entries as
 * record_list() gives them).  docs/record.md describes the formats.
 *
 * What is exported: one session's executions, or the one-shot runs,
 * optionally those that started within [since, until); oldest first.
 *
 * Bounded cost, whatever the record holds: an export reads the record a
 * page of EXPORT_PAGE entries at a time and writes one entry at a time, so
 * it holds at most one page of entries (each at most ~2 RECORD_ENTRY_MAX
 * as stored) and one entry as written.  The record lists newest first, in
 * pages that end before a seq; an export reads it twice: export_begin()
 * walks it back to note where each page starts (a seq per page, and how
 * many entries are in range), export_step() then reads the pages again,
 * oldest first.  What was added after export_begin() is left out; what was
 * evicted meanwhile is missing; an entry is never written twice.
 *
 * Everything in the record came from a sandbox or a client: the HTML page
 * escapes every byte of it, shows an HTML result only inside an iframe
 * sandboxed without scripts, an image only when its data is base64, and
 * declares a Content-Security-Policy that forbids every script.
 *
 * Not thread-safe per export; exports of one record may run at once (the
 * record is).  Errors: 0 or -errno (-ENOMEM, -EIO when the record cannot
 * be read, or the sink's own). */
#ifndef PETRI_EXPORT_H
#define PETRI_EXPORT_H

#include <stdio.h>

#include "record/record.h"

#define EXPORT_PAGE 8		/* entries read from the record at a time */

enum export_format {
	EXPORT_IPYNB,		/* Jupyter notebook, nbformat 4.5 */
	EXPORT_HTML,		/* one page, no external resource, no script */
	EXPORT_JSONL,		/* one entry per line, as listed */
};

/* "ipynb", "html", "jsonl": true with *out set; false for anything else. */
bool export_format_from_name(const char *name, enum export_format *out);
const char *export_format_name(enum export_format f);
/* The media type of the format ("application/x-ipynb+json", ...). */
const char *export_content_type(enum export_format f);

struct export_query {
	const char *session;	/* its executions; NULL: the one-shot runs */
	double since, until;	/* started_at in [since, until); 0: no bound */
	/* Asked while export_begin() reads the record (as record_query's):
	 * true ends it with -ECANCELED.  NULL: never.  Not kept after. */
	bool (*gone)(void *arg);
	void *gone_arg;
};

/* Write data[0, len) somewhere: 0, or a negative errno that ends the export. */
typedef int (*export_sink)(void *arg, const char *data, size_t len);

struct export;

/* Start exporting what q selects (q is copied) as f: reads the record once
 * through (see above).  0 with *out set, or -ENOMEM / -EIO / -ECANCELED. */
int export_begin(struct record *rec, const struct export_query *q, enum export_format f,
		 struct export **out);
/* The entries in range when export_begin() read the record: 0 for a session
 * the record does not know. */
size_t export_count(const struct export *x);
/* Write the next piece to sink: the head, one entry, or the end.  1 while
 * more is to come, 0 once the end was written, or -errno (the export is
 * then over: export_free() it). */
int export_step(struct export *x, export_sink sink, void *arg);
void export_free(struct export *x);

/* The whole export into out (stdio's errors as -EIO). */
int export_to_file(struct export *x, FILE *out);

#endif
