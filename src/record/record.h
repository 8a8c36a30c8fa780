/* record — the execution record: every execution petri serve ran, with its
 * code, language, limits, times and what came out, so that a person can
 * check exactly what ran behind an answer (GET /v1/sessions/{id}/executions
 * for one session, GET /v1/executions for all of it, one-shots included).
 *
 * SQLite: a file that outlives the daemon (by default in the state
 * directory, docs/record.md), or memory.  Outputs are stored as the result
 * object; images and returned files are kept up to `attachment_max` bytes of
 * base64 each (past it, a note says how large they were).
 *
 * Evidence, not only a log (src/record/chain.h): every entry carries the
 * digest of its content and the link of the chain through every entry
 * before it, and the head of the chain is signed with a key kept beside the
 * file.  record_verify() checks all of it.
 *
 * What a tenant can make the record hold is bounded three ways (docs/security.md):
 *   - an entry: its code and its result are each at most RECORD_ENTRY_MAX
 *     bytes as stored (besides the attachments), with a flag saying what
 *     was cut, whatever the execution returned;
 *   - the record: at most `max_entries` entries and `max_bytes` bytes, and
 *     none older than `keep_days`; past any, the oldest go, and the chain
 *     starts where they ended;
 *   - a session: at most 1/RECORD_SHARE of both; past it, the session's
 *     own oldest go first (each leaves a signed gap, so that the chain
 *     still verifies), so that one session cannot evict everyone's
 *     history.  One-shot runs (no session) share one such quota.
 * A listing is bounded by RECORD_LIST_MAX bytes and says when it stopped
 * early.  Thread-safe; several daemons may share one file. */
#ifndef PETRI_RECORD_H
#define PETRI_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record/chain.h"
#include "exec/result.h"
#include "util/buf.h"

#define RECORD_ENTRY_MAX (256u << 10)	/* bytes of code, of result, per entry */
/* What an entry holds besides code and result (its limits are dropped
 * past RECORD_LIMITS_MAX) and what SQLite spends on its row and index. */
#define RECORD_LIMITS_MAX 1024u
#define RECORD_ROW_OVERHEAD 256

#define RECORD_KEEP_MEMORY 1000		/* entries kept in memory */
/* The in-memory record lives in the daemon: about what two running
 * executions may hold (docs/security.md), and still 128 entries of the
 * largest size, thousands of ordinary ones. */
#define RECORD_BUDGET_MEMORY (64ull << 20)
#define RECORD_KEEP_FILE 100000
/* A file costs disk, not memory (SQLite's page cache stays at its default
 * 2 MiB): the bound is there so that one tenant cannot fill the disk. */
#define RECORD_BUDGET_FILE (4ull << 30)
#define RECORD_SHARE 4			/* a session holds at most 1/4 of the record */
/* The images and files one entry keeps, together, whatever each may be. */
#define RECORD_ATTACH_TOTAL (4u << 20)
#define RECORD_ATTACH_DEFAULT (1u << 20)	/* each, by default */

/* The entries of one listing, counted as the JSON they are sent as: what
 * one request makes the daemon build (the rows' text, then the answer in
 * its order, which the HTTP server sends without a copy), whatever
 * `limit` says. */
#define RECORD_LIST_MAX (8u << 20)

struct record;

struct record_options {
	const char *path;		/* a file; NULL or "": memory */
	/* Open what is there and change nothing (verify, export): no
	 * schema, no trimming, no key made. */
	bool readonly;
	/* The directory of path is made (0700) if missing: the default
	 * state directory. */
	bool make_dir;
	int64_t max_entries, max_bytes;	/* 0: RECORD_KEEP_*, RECORD_BUDGET_* */
	double keep_days;		/* 0: no bound by age */
	size_t attachment_max;		/* bytes of base64 of one image or file */
	const char *node;		/* the node's name, in every entry added
					 * (util/ids.h); NULL: ID_NODE_DEFAULT */
};

/* 0 or -errno with a message.  A file's head is logged when it opens and
 * when it closes (docs/record.md). */
int record_open(const struct record_options *o, struct record **out, char *err, size_t errlen);
void record_close(struct record *rec);

struct record_entry {
	const char *session;		/* session id, or NULL for a one-shot run */
	const char *language;
	const char *code;
	double started_at;		/* seconds since the epoch */
	json_t *limits;			/* borrowed; may be NULL */
	const struct result *result;
};

/* Add one execution, evicting what the bounds above say.  0 or -errno (the
 * execution itself is not affected). */
int record_add(struct record *rec, const struct record_entry *e);

/* A listing is an array of entries {"seq", "session" (null for a one-shot
 * run), "started_at", "language", "code", "code_truncated", "status",
 * "limits", "result", "engine", "node"}: seq orders the whole record, over
 * all sessions (engine and node are null in entries kept before a petri
 * recorded them).
 *
 * What one listing costs is bounded whatever the record holds: at most
 * `limit` rows (the API allows 1000) and RECORD_LIST_MAX bytes of JSON,
 * read through an index (record_explain() shows which), the stored result
 * and limits copied as the daemon wrote them rather than parsed and
 * written again, and the work stops as soon as nobody waits for it (`gone`
 * below). */

/* What a listing lists. */
enum record_scope {
	RECORD_SESSION,		/* one session's executions, OLDEST first */
	RECORD_ALL,		/* every execution: sessions' and one-shot runs', newest first */
	RECORD_ONESHOTS,	/* the one-shot runs only, newest first */
};

struct record_query {
	enum record_scope scope;
	const char *session;		/* with RECORD_SESSION */
	int limit;			/* at most this many entries (>= 1) */
	int64_t before;			/* only seqs below it; 0: no bound */
	/* Does anyone still wait for the answer?  Asked now and then while
	 * the rows are read (from the calling thread, under the record's
	 * lock: it must be quick and must not call the record); true ends
	 * the listing with -ECANCELED.  NULL: someone always does. */
	bool (*gone)(void *arg);
	void *gone_arg;
};

/* The listing q asks for, as the JSON text of an array, appended to out:
 * the most recent at most q->limit entries with seq < q->before and at
 * most RECORD_LIST_MAX bytes of them, in the scope's order.  *truncated
 * says whether the byte bound left older ones out: ask for them with
 * before = the seq of the oldest one listed.  0, or -ENOMEM, -EIO,
 * -ECANCELED (out is then as it was). */
int record_list_text(struct record *rec, const struct record_query *q, struct buf *out,
		     bool *truncated);

/* How SQLite reads the listing of a scope: the lines of EXPLAIN QUERY
 * PLAN of its statement, joined by "; ", into out (a test proves from it
 * that every listing reads an index, never the whole table).  0 or
 * -EIO. */
int record_explain(struct record *rec, enum record_scope scope, char *out, size_t len);

/* The same as a tree (new reference), or NULL when out of memory or the
 * record cannot be read: for callers that look inside the entries (an
 * export, petri ask).  One session's executions, oldest first. */
json_t *record_list(struct record *rec, const char *session, int limit, int64_t before,
		    bool *truncated);


/* The executions in scope (RECORD_ALL or RECORD_ONESHOTS), NEWEST first;
 * the older ones are had with before = the seq of the last one listed. */
json_t *record_list_all(struct record *rec, enum record_scope scope, int limit, int64_t before,
			bool *truncated);

/* What the record holds: all of it (session NULL, all = true), or one
 * session's share (all = false; NULL: the one-shot runs). */
struct record_usage {
	int64_t entries, bytes;
};
int record_usage(struct record *rec, bool all, const char *session, struct record_usage *out);

/* What record_verify() found. */
struct record_check {
	int64_t entries;		/* entries checked */
	int64_t gaps;			/* entries removed to make room, between them */
	int64_t first, last;		/* their seqs; first > last when none */
	int64_t start;			/* the seq the chain starts at */
	int64_t head_seq;
	/* 0: intact; else the seq of the first entry that is not what the
	 * chain says, and why. */
	int64_t broken;
	char why[256];
	char head[CHAIN_HEX_LEN];	/* the link of the last entry */
	char key[64];			/* the id of the key that signed the head */
	bool signature_checked;
};

/* Check the whole chain: every entry's digest and link in seq order, that
 * no seq is missing but in a gap the key signed, and the head and its
 * signature against key (NULL: the key beside the file).  With expect_seq > 0, also that the chain passed
 * through expect_link at that seq (a head from the log).  0 (see
 * out->broken) or -errno with a message in out->why. */
int record_verify(struct record *rec, const struct chain_key *key, int64_t expect_seq,
		  const unsigned char *expect_link, struct record_check *out);

/* What record_add() committed, for a watcher (record_on_add).  Borrowed
 * for the duration of the call. */
struct record_added {
	int64_t seq;
	const char *session;		/* NULL: a one-shot run */
	const char *language;
	const char *status;		/* the result's status name */
};
typedef void (*record_hook)(void *arg, const struct record_added *added);
/* Call fn(arg, ...) after each entry that record_add() committed (fn NULL:
 * no more).  fn runs on the adding thread under the record's lock: it must
 * not block nor call the record.  Once this returns, the previous hook is
 * not running and is not called again. */
void record_on_add(struct record *rec, record_hook fn, void *arg);

#endif
