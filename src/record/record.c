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
	sqlite3_stmt *insert, *list, *trim;
	int keep;
};

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
	"  result TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS executions_session ON executions(session, seq);";

int record_open(const char *path, struct record **out, char *err, size_t errlen)
{
	struct record *rec = calloc(1, sizeof(*rec));
	int rc;

	*out = NULL;
	if (!rec)
		return -ENOMEM;
	pthread_mutex_init(&rec->lock, NULL);
	rec->keep = path && *path ? RECORD_KEEP_FILE : RECORD_KEEP_MEMORY;
	rc = sqlite3_open_v2(path && *path ? path : ":memory:", &rec->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(rec->db, schema, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(rec->db,
			"INSERT INTO executions (session, started_at, language, code, status,"
			" limits, result, code_truncated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1,
			&rec->insert, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(rec->db,
			"SELECT seq, started_at, language, code, status, limits, result,"
			" code_truncated FROM"
			" (SELECT * FROM executions WHERE session = ? ORDER BY seq DESC LIMIT ?)"
			" ORDER BY seq", -1, &rec->list, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(rec->db,
			"DELETE FROM executions WHERE seq <= (SELECT MAX(seq) FROM executions) - ?",
			-1, &rec->trim, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "the execution record '%s': %s",
			 path && *path ? path : ":memory:",
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
	sqlite3_finalize(rec->insert);
	sqlite3_finalize(rec->list);
	sqlite3_finalize(rec->trim);
	sqlite3_close(rec->db);
	pthread_mutex_destroy(&rec->lock);
	free(rec);
}

/* About the bytes json_dumps() would write for j (strings and keys, not
 * escapes and punctuation): what tells, without writing it, whether it
 * fits the record.  Cheap: the tree of a result is small, its strings are
 * what is large. */
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

/* The result as the record keeps it: images replaced by their size, and
 * cut to RECORD_ENTRY_MAX by dropping what is largest. */
static char *stored_result(const struct result *res)
{
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
	/* Writing 32 MiB of results only to find them too large would cost the
	 * daemon as much again as parsing them did. */
	text = text_size(j) <= RECORD_ENTRY_MAX ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!text || strlen(text) > RECORD_ENTRY_MAX) {
		/* Too large: keep the status, the error, the reason and the head
		 * of each stream. */
		static const char *const big[] = { "stdout", "stderr", "stdout_base64",
						   "stderr_base64", "results", "files" };

		free(text);
		for (i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
			json_t *v = json_object_get(j, big[i]);

			if (json_is_string(v) && json_string_length(v) > RECORD_ENTRY_MAX / 8)
				json_object_set_new(j, big[i], json_stringn(json_string_value(v),
									    RECORD_ENTRY_MAX / 8));
			else if (json_is_array(v))
				json_object_set_new(j, big[i], json_array());
		}
		json_object_set_new(j, "record_truncated", json_true());
		text = json_dumps(j, JSON_COMPACT);
	}
	json_decref(j);
	return text;
}

int record_add(struct record *rec, const struct record_entry *e)
{
	char *result = stored_result(e->result);
	char *limits = e->limits ? json_dumps(e->limits, JSON_COMPACT) : NULL;
	sqlite3_stmt *st = rec->insert;
	int rc;

	if (!result) {
		free(limits);
		return -ENOMEM;
	}
	pthread_mutex_lock(&rec->lock);
	sqlite3_reset(st);
	if (e->session)
		sqlite3_bind_text(st, 1, e->session, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 1);
	sqlite3_bind_double(st, 2, e->started_at);
	sqlite3_bind_text(st, 3, e->language, -1, SQLITE_STATIC);
	{
		/* Cut on a character boundary: the column is text. */
		size_t n = strlen(e->code), keep = n > RECORD_ENTRY_MAX ?
			   utf8_cut(e->code, RECORD_ENTRY_MAX) : n;

		sqlite3_bind_text(st, 4, e->code, (int)keep, SQLITE_STATIC);
		sqlite3_bind_int(st, 8, keep < n);
	}
	sqlite3_bind_text(st, 5, result_status_name(e->result->status), -1, SQLITE_STATIC);
	if (limits)
		sqlite3_bind_text(st, 6, limits, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_text(st, 7, result, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_clear_bindings(st);
	sqlite3_reset(st);
	if (rc == SQLITE_DONE) {
		sqlite3_bind_int(rec->trim, 1, rec->keep);
		sqlite3_step(rec->trim);
		sqlite3_reset(rec->trim);
	}
	pthread_mutex_unlock(&rec->lock);
	free(result);
	free(limits);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static json_t *column_json(sqlite3_stmt *st, int col)
{
	const char *text = (const char *)sqlite3_column_text(st, col);

	return text ? json_loads(text, 0, NULL) : NULL;
}

json_t *record_list(struct record *rec, const char *session, int limit)
{
	json_t *list = json_array();
	sqlite3_stmt *st = rec->list;

	if (!list)
		return NULL;
	pthread_mutex_lock(&rec->lock);
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, limit);
	while (sqlite3_step(st) == SQLITE_ROW) {
		char when[TIMEFMT_LEN];
		json_t *limits = column_json(st, 5), *result = column_json(st, 6);
		json_t *e = json_pack("{s:I, s:o, s:s, s:s, s:b, s:s, s:o, s:o}",
				      "seq", (json_int_t)sqlite3_column_int64(st, 0),
				      "started_at", json_string(timefmt_rfc3339(
						      sqlite3_column_double(st, 1), when)),
				      "language", (const char *)sqlite3_column_text(st, 2),
				      "code", (const char *)sqlite3_column_text(st, 3),
				      "code_truncated", sqlite3_column_int(st, 7) != 0,
				      "status", (const char *)sqlite3_column_text(st, 4),
				      "limits", limits ? limits : json_null(),
				      "result", result ? result : json_null());

		if (e)
			json_array_append_new(list, e);
	}
	sqlite3_clear_bindings(st);
	sqlite3_reset(st);
	pthread_mutex_unlock(&rec->lock);
	return list;
}
