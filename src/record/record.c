#include "record/record.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/timefmt.h"
#include "util/utf8.h"

struct record {
	sqlite3 *db;
	pthread_mutex_t lock;
	/* A listing: one session's; every execution; the one-shot runs'. */
	sqlite3_stmt *insert, *list, *list_all, *list_oneshots;
	/* (seq, bytes) oldest first and a cut, over the record and over one
	 * session; a session's usage. */
	sqlite3_stmt *scan_all, *cut_all, *scan_session, *cut_session, *usage_session;
	int64_t keep, budget;
	int64_t entries, bytes;		/* what it holds now */
	record_hook on_add;		/* record_on_add(), under lock */
	void *on_add_arg;
};

/* `bytes`: what the row costs (record_add), summed without reading the
 * rows: the index covers it. */
static const char schema[] =
	"PRAGMA journal_mode = WAL;"
	"PRAGMA synchronous = NORMAL;"
	"CREATE TABLE IF NOT EXISTS executions ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  session TEXT,"
	"  started_at REAL NOT NULL,"
	"  language TEXT NOT NULL,"
	"  code TEXT NOT NULL,"
	"  code_truncated INTEGER NOT NULL DEFAULT 0,"
	"  status TEXT NOT NULL,"
	"  limits TEXT,"
	"  result TEXT NOT NULL,"
	"  bytes INTEGER NOT NULL DEFAULT 0);";

#define STR_(x) #x
#define STR(x) STR_(x)

/* A file written before rows had a size: give them theirs. */
static const char add_bytes[] =
	"ALTER TABLE executions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
	"UPDATE executions SET bytes = length(CAST(code AS BLOB))"
	" + length(CAST(result AS BLOB)) + ifnull(length(CAST(limits AS BLOB)), 0)"
	" + length(CAST(language AS BLOB)) + ifnull(length(CAST(session AS BLOB)), 0)"
	" + " STR(RECORD_ROW_OVERHEAD) ";";

static const char indexes[] =
	"DROP INDEX IF EXISTS executions_session;"
	"CREATE INDEX IF NOT EXISTS executions_session_bytes"
	"  ON executions(session, seq, bytes);";

#define LIST_COLUMNS \
	"seq, started_at, language, code, status, limits, result, code_truncated, session"

static const struct {
	size_t off;
	const char *sql;
} statements[] = {
	{ offsetof(struct record, insert),
	  "INSERT INTO executions (session, started_at, language, code, status,"
	  " limits, result, code_truncated, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)" },
	/* The same parameters, each listing the columns row_json() reads:
	 * ?1 the session (where it is one), ?2 before, ?3 limit. */
	{ offsetof(struct record, list),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE session = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3" },
	{ offsetof(struct record, list_all),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE seq < ?2 ORDER BY seq DESC LIMIT ?3" },
	{ offsetof(struct record, list_oneshots),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE session IS NULL AND seq < ?2 ORDER BY seq DESC LIMIT ?3" },
	{ offsetof(struct record, scan_all), "SELECT seq, bytes FROM executions ORDER BY seq" },
	{ offsetof(struct record, cut_all), "DELETE FROM executions WHERE seq <= ?1" },
	{ offsetof(struct record, scan_session),
	  "SELECT seq, bytes FROM executions WHERE session IS ?1 ORDER BY seq" },
	{ offsetof(struct record, cut_session),
	  "DELETE FROM executions WHERE session IS ?1 AND seq <= ?2" },
	{ offsetof(struct record, usage_session),
	  "SELECT COUNT(*), TOTAL(bytes) FROM executions WHERE session IS ?1" },
};

#define STMT(rec, i) ((sqlite3_stmt **)((char *)(rec) + statements[i].off))

/* The entries and bytes of the whole record, from the file itself. */
static int load_totals(struct record *rec)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(rec->db, "SELECT COUNT(*), TOTAL(bytes) FROM executions",
				    -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rec->entries = sqlite3_column_int64(st, 0);
		rec->bytes = (int64_t)sqlite3_column_double(st, 1);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

static int evict(struct record *rec, sqlite3_stmt *scan, sqlite3_stmt *cut,
		 const char *session, int64_t entries, int64_t bytes, int64_t keep,
		 int64_t budget);

int record_open(const char *path, struct record **out, char *err, size_t errlen)
{
	struct record *rec = calloc(1, sizeof(*rec));
	bool file = path && *path;
	sqlite3_stmt *probe = NULL;
	int rc;

	*out = NULL;
	if (!rec)
		return -ENOMEM;
	pthread_mutex_init(&rec->lock, NULL);
	rec->keep = file ? RECORD_KEEP_FILE : RECORD_KEEP_MEMORY;
	rec->budget = file ? (int64_t)RECORD_BUDGET_FILE : (int64_t)RECORD_BUDGET_MEMORY;
	rc = sqlite3_open_v2(file ? path : ":memory:", &rec->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(rec->db, schema, NULL, NULL, NULL);
	if (rc == SQLITE_OK &&
	    sqlite3_prepare_v2(rec->db, "SELECT bytes FROM executions", -1, &probe,
			       NULL) != SQLITE_OK)
		rc = sqlite3_exec(rec->db, add_bytes, NULL, NULL, NULL);
	sqlite3_finalize(probe);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(rec->db, indexes, NULL, NULL, NULL);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(statements) / sizeof(statements[0]); i++)
		rc = sqlite3_prepare_v2(rec->db, statements[i].sql, -1, STMT(rec, i), NULL);
	if (rc == SQLITE_OK)
		rc = load_totals(rec);
	/* A file kept by an older petri, or under other bounds, may hold
	 * more than these: trim it now. */
	if (rc == SQLITE_OK &&
	    evict(rec, rec->scan_all, rec->cut_all, NULL, rec->entries, rec->bytes, rec->keep,
		  rec->budget) < 0)
		rc = SQLITE_ERROR;
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "the execution record '%s': %s", file ? path : ":memory:",
			 rec->db ? sqlite3_errmsg(rec->db) : "out of memory");
		record_close(rec);
		return -EIO;
	}
	*out = rec;
	return 0;
}

void record_close(struct record *rec)
{
	if (!rec)
		return;
	for (size_t i = 0; i < sizeof(statements) / sizeof(statements[0]); i++)
		sqlite3_finalize(*STMT(rec, i));
	sqlite3_close(rec->db);
	pthread_mutex_destroy(&rec->lock);
	free(rec);
}

/* About the bytes json_dumps() would write for j (strings and keys, not
 * escapes and punctuation): what tells, without writing it, whether it
 * may fit the record.  Cheap: the tree of a result is small, its strings
 * are what is large. */
static size_t text_size(const json_t *j)
{
	const char *k;
	size_t i, n = 0;
	json_t *v;

	if (json_is_string(j))
		return json_string_length(j);
	if (json_is_array(j))
		json_array_foreach(j, i, v)
			n += text_size(v) + 1;
	else if (json_is_object(j))
		json_object_foreach((json_t *)j, k, v)
			n += strlen(k) + text_size(v) + 4;
	else
		n = 24;
	return n;
}

/* Cut every string member of o longer than cap to its first cap bytes (on
 * a character boundary: jansson refuses a split one). */
static void cut_strings(json_t *o, size_t cap)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		if (s && n > cap)
			json_object_set_new(o, k, json_stringn(s, utf8_cut(s, cap)));
	}
}

/* Make j fit RECORD_ENTRY_MAX: drop the results, the files and the test
 * cases (their counts stay), cut the streams, the error's message and
 * traceback to cap, and note it.  What is left besides them is small and
 * made by the daemon. */
static void shrink(json_t *j, size_t cap)
{
	json_t *error = json_object_get(j, "error"), *tests = json_object_get(j, "tests");

	if (json_is_array(json_object_get(j, "results")))
		json_object_set_new(j, "results", json_array());
	if (json_is_array(json_object_get(j, "files")))
		json_object_set_new(j, "files", json_array());
	if (json_is_array(json_object_get(tests, "cases"))) {
		/* A copy: the client's result shares the original. */
		tests = json_copy(tests);
		if (tests) {
			json_object_set_new(tests, "cases", json_array());
			json_object_set_new(tests, "truncated", json_true());
		}
		json_object_set_new(j, "tests", tests ? tests : json_null());
	}
	cut_strings(j, cap);
	if (json_is_object(error))
		cut_strings(error, cap);
	json_object_set_new(j, "record_truncated", json_true());
}

/* The result as the record keeps it: images replaced by their size, and
 * at most RECORD_ENTRY_MAX bytes of JSON. */
static char *stored_result(const struct result *res)
{
	/* Each pass cuts what is left to cap: the first keeps the head of
	 * each stream; escapes (\u0001 is six bytes for one) may still
	 * overflow it, the second cannot (seven strings of 4 KiB, six times
	 * over, with room to spare); past them, a shape no result has, only
	 * the status is kept. */
	static const size_t caps[] = { RECORD_ENTRY_MAX / 8, RECORD_ENTRY_MAX / 64 };
	json_t *j = result_to_json(res), *results, *bundle;
	size_t i;
	char *text;

	if (!j)
		return NULL;
	/* result_to_json() shares the bundles with the result, which the
	 * client gets: change a copy. */
	results = json_deep_copy(json_object_get(j, "results"));
	json_object_set_new(j, "results", results ? results : json_array());
	json_array_foreach(results, i, bundle) {
		const char *k;
		json_t *v, *tmp;

		json_object_foreach_safe(bundle, tmp, k, v) {
			char note[96];

			if (strncmp(k, "image/", 6) != 0 || !json_is_string(v))
				continue;
			snprintf(note, sizeof(note), "[%zu bytes of base64, not recorded]",
				 json_string_length(v));
			json_object_set_new(bundle, k, json_string(note));
		}
	}
	/* The error is shared with the result too. */
	if (json_is_object(json_object_get(j, "error")))
		json_object_set_new(j, "error", json_copy(json_object_get(j, "error")));
	/* Writing 32 MiB of results only to find them too large would cost the
	 * daemon as much again as parsing them did. */
	text = text_size(j) <= RECORD_ENTRY_MAX ? json_dumps(j, JSON_COMPACT) : NULL;
	for (i = 0; (!text || strlen(text) > RECORD_ENTRY_MAX) && i < sizeof(caps) / sizeof(caps[0]);
	     i++) {
		free(text);
		shrink(j, caps[i]);
		text = json_dumps(j, JSON_COMPACT);
	}
	if (text && strlen(text) > RECORD_ENTRY_MAX) {
		free(text);
		text = NULL;
		json_decref(j);
		j = json_pack("{s:s, s:b}", "status", result_status_name(res->status),
			      "record_truncated", 1);
		if (j)
			text = json_dumps(j, JSON_COMPACT);
	}
	json_decref(j);
	return text;
}

/* Delete the oldest rows that scan yields (seq, bytes; for session if
 * cut takes one) until what is left, entries rows of bytes in all, is
 * within keep and budget.  Keeps rec's totals.  0 or -EIO. */
static int evict(struct record *rec, sqlite3_stmt *scan, sqlite3_stmt *cut,
		 const char *session, int64_t entries, int64_t bytes, int64_t keep,
		 int64_t budget)
{
	int64_t last = -1, gone = 0, freed = 0;
	int rc = SQLITE_OK, arg = 1;

	if (entries <= keep && bytes <= budget)
		return 0;
	sqlite3_reset(scan);
	if (scan == rec->scan_session)
		sqlite3_bind_text(scan, 1, session, -1, SQLITE_STATIC);
	while ((entries - gone > keep || bytes - freed > budget) &&
	       (rc = sqlite3_step(scan)) == SQLITE_ROW) {
		last = sqlite3_column_int64(scan, 0);
		freed += sqlite3_column_int64(scan, 1);
		gone++;
	}
	sqlite3_reset(scan);
	sqlite3_clear_bindings(scan);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE && rc != SQLITE_OK)
		return -EIO;
	if (last < 0)
		return 0;
	if (cut == rec->cut_session)
		sqlite3_bind_text(cut, arg++, session, -1, SQLITE_STATIC);
	sqlite3_bind_int64(cut, arg, last);
	rc = sqlite3_step(cut);
	sqlite3_reset(cut);
	sqlite3_clear_bindings(cut);
	if (rc != SQLITE_DONE)
		return -EIO;
	rec->entries -= gone;
	rec->bytes -= freed;
	return 0;
}

/* A session's (or the one-shots') entries and bytes.  0 or -EIO. */
static int usage_of(struct record *rec, const char *session, struct record_usage *u)
{
	sqlite3_stmt *st = rec->usage_session;
	int rc;

	sqlite3_reset(st);
	if (session)
		sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 1);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		u->entries = sqlite3_column_int64(st, 0);
		u->bytes = (int64_t)sqlite3_column_double(st, 1);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

/* Insert the row and make room: the session's own oldest first, then the
 * record's.  Under the lock, in a transaction (one commit, and a failure
 * leaves the record as it was). */
static int insert_locked(struct record *rec, const struct record_entry *e, const char *result,
			 const char *limits)
{
	sqlite3_stmt *st = rec->insert;
	size_t n = strlen(e->code), keep = n > RECORD_ENTRY_MAX ? utf8_cut(e->code, RECORD_ENTRY_MAX) : n;
	int64_t bytes = (int64_t)(keep + strlen(result) + (limits ? strlen(limits) : 0) +
				  strlen(e->language) + (e->session ? strlen(e->session) : 0) +
				  RECORD_ROW_OVERHEAD);
	struct record_usage mine;
	int rc;

	if (sqlite3_exec(rec->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_reset(st);
	if (e->session)
		sqlite3_bind_text(st, 1, e->session, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 1);
	sqlite3_bind_double(st, 2, e->started_at);
	sqlite3_bind_text(st, 3, e->language, -1, SQLITE_STATIC);
	/* Cut on a character boundary: the column is text. */
	sqlite3_bind_text(st, 4, e->code, (int)keep, SQLITE_STATIC);
	sqlite3_bind_int(st, 8, keep < n);
	sqlite3_bind_text(st, 5, result_status_name(e->result->status), -1, SQLITE_STATIC);
	if (limits)
		sqlite3_bind_text(st, 6, limits, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_text(st, 7, result, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, bytes);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_clear_bindings(st);
	sqlite3_reset(st);
	if (rc == 0) {
		rec->entries++;
		rec->bytes += bytes;
		rc = usage_of(rec, e->session, &mine);
	}
	if (rc == 0)
		rc = evict(rec, rec->scan_session, rec->cut_session, e->session, mine.entries,
			   mine.bytes, rec->keep / RECORD_SHARE, rec->budget / RECORD_SHARE);
	if (rc == 0)
		rc = evict(rec, rec->scan_all, rec->cut_all, NULL, rec->entries, rec->bytes,
			   rec->keep, rec->budget);
	if (rc == 0 && sqlite3_exec(rec->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = -EIO;
	if (rc < 0) {
		sqlite3_exec(rec->db, "ROLLBACK", NULL, NULL, NULL);
		load_totals(rec);
	}
	return rc;
}

int record_add(struct record *rec, const struct record_entry *e)
{
	char *result = stored_result(e->result);
	char *limits = e->limits ? json_dumps(e->limits, JSON_COMPACT) : NULL;
	int rc;

	if (!result) {
		free(limits);
		return -ENOMEM;
	}
	if (limits && strlen(limits) > RECORD_LIMITS_MAX) {
		free(limits);
		limits = NULL;
	}
	pthread_mutex_lock(&rec->lock);
	rc = insert_locked(rec, e, result, limits);
	if (rc == 0 && rec->on_add) {
		struct record_added added = {
			.seq = sqlite3_last_insert_rowid(rec->db), .session = e->session,
			.language = e->language, .status = result_status_name(e->result->status),
		};

		rec->on_add(rec->on_add_arg, &added);
	}
	pthread_mutex_unlock(&rec->lock);
	free(result);
	free(limits);
	return rc;
}

void record_on_add(struct record *rec, record_hook fn, void *arg)
{
	pthread_mutex_lock(&rec->lock);
	rec->on_add = fn;
	rec->on_add_arg = arg;
	pthread_mutex_unlock(&rec->lock);
}

/* The bytes json_dumps() writes for the string s (its quotes aside). */
static size_t json_escaped_len(const unsigned char *s, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		len += s[i] == '"' || s[i] == '\\' || s[i] == '\n' || s[i] == '\t' ||
		       s[i] == '\r' || s[i] == '\b' || s[i] == '\f' ? 2 : s[i] < 0x20 ? 6 : 1;
	return len;
}

static json_t *column_json(sqlite3_stmt *st, int col)
{
	const char *text = (const char *)sqlite3_column_text(st, col);

	return text ? json_loads(text, 0, NULL) : NULL;
}

/* One entry as it is listed, from a row of LIST_COLUMNS. */
static json_t *row_json(sqlite3_stmt *st)
{
	char when[TIMEFMT_LEN];
	json_t *limits = column_json(st, 5), *result = column_json(st, 6);
	const char *session = (const char *)sqlite3_column_text(st, 8);

	return json_pack("{s:I, s:o, s:o, s:s, s:s, s:b, s:s, s:o, s:o}",
			 "seq", (json_int_t)sqlite3_column_int64(st, 0),
			 "session", session ? json_string(session) : json_null(),
			 "started_at", json_string(timefmt_rfc3339(sqlite3_column_double(st, 1),
								    when)),
			 "language", (const char *)sqlite3_column_text(st, 2),
			 "code", (const char *)sqlite3_column_text(st, 3),
			 "code_truncated", sqlite3_column_int(st, 7) != 0,
			 "status", (const char *)sqlite3_column_text(st, 4),
			 "limits", limits ? limits : json_null(),
			 "result", result ? result : json_null());
}

/* The rows of a listing statement (session: its ?1, or NULL), newest
 * first, within limit and RECORD_LIST_MAX bytes.  New reference, or NULL
 * when out of memory. */
static json_t *list_newest(struct record *rec, sqlite3_stmt *st, const char *session, int limit,
			   int64_t before, bool *truncated)
{
	json_t *list = json_array();
	size_t used = 0;

	*truncated = false;
	if (!list)
		return NULL;
	pthread_mutex_lock(&rec->lock);
	sqlite3_reset(st);
	if (session)
		sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, before > 0 ? before : INT64_MAX);
	sqlite3_bind_int(st, 3, limit);
	/* Newest first, so that the bound keeps the most recent, as limit
	 * does; what each would cost is known before it is built.  The first
	 * always fits (an entry is far below the bound). */
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t cost = json_escaped_len(sqlite3_column_text(st, 3),
					       (size_t)sqlite3_column_bytes(st, 3)) +
			      (size_t)sqlite3_column_bytes(st, 5) +
			      (size_t)sqlite3_column_bytes(st, 6) +
			      (size_t)sqlite3_column_bytes(st, 8) + RECORD_ROW_OVERHEAD;

		if (used && used + cost > RECORD_LIST_MAX) {
			*truncated = true;
			break;
		}
		used += cost;
		json_array_append_new(list, row_json(st));
	}
	sqlite3_clear_bindings(st);
	sqlite3_reset(st);
	pthread_mutex_unlock(&rec->lock);
	return list;
}

json_t *record_list(struct record *rec, const char *session, int limit, int64_t before,
		    bool *truncated)
{
	json_t *newest = list_newest(rec, rec->list, session, limit, before, truncated);
	json_t *list = newest ? json_array() : NULL;
	size_t i;

	if (!list) {
		json_decref(newest);
		return NULL;
	}
	for (i = json_array_size(newest); i > 0; i--)
		json_array_append(list, json_array_get(newest, i - 1));
	json_decref(newest);
	return list;
}

json_t *record_list_all(struct record *rec, enum record_scope scope, int limit, int64_t before,
			bool *truncated)
{
	return list_newest(rec, scope == RECORD_ONESHOTS ? rec->list_oneshots : rec->list_all,
			   NULL, limit, before, truncated);
}

int record_usage(struct record *rec, bool all, const char *session, struct record_usage *out)
{
	int r = 0;

	pthread_mutex_lock(&rec->lock);
	if (all) {
		out->entries = rec->entries;
		out->bytes = rec->bytes;
	} else {
		r = usage_of(rec, session, out);
	}
	pthread_mutex_unlock(&rec->lock);
	return r;
}
