/* The execution record's bounds (record.h): the record's byte budget, a
 * session's share of it, an entry's size whatever its result holds, and a
 * listing's size whatever `limit` says, for a session and for the whole
 * record (newest first, one-shots included); a file of an older petri
 * opens. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/record.h"
#include "util/buf.h"
#include "util/ids.h"
#include "util/version.h"
#include "unit.h"

#define KIB 1024u

/* A record in memory bounded by max_entries and max_bytes (0: the
 * defaults, RECORD_KEEP_MEMORY and RECORD_BUDGET_MEMORY). */
static struct record *open_bounded(int64_t max_entries, int64_t max_bytes)
{
	struct record_options o = { .max_entries = max_entries, .max_bytes = max_bytes };
	struct record *rec;
	char err[256];

	ck_assert_int_eq(record_open(&o, &rec, err, sizeof(err)), 0);
	return rec;
}

static struct record *open_memory(void)
{
	return open_bounded(0, 0);
}

/* n bytes of c, as a string. */
static char *filled(size_t n, char c)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = 0;
	return s;
}

/* One execution of session with code_len bytes of code and out_len of
 * stdout (c each: 0x01 is six bytes as JSON). */
static void add(struct record *rec, const char *session, size_t code_len, size_t out_len, char c)
{
	char *code = filled(code_len, c), *out = filled(out_len, c);
	struct result res;
	struct record_entry e = { .session = session, .language = "python", .code = code,
				  .started_at = 1.0e9, .result = &res };

	ck_assert_int_eq(result_init(&res), 0);
	result_stream_add(&res.out, out, out_len, out_len);
	ck_assert_int_eq(record_add(rec, &e), 0);
	result_release(&res);
	free(code);
	free(out);
}

static struct record_usage usage(struct record *rec, bool all, const char *session)
{
	struct record_usage u;

	ck_assert_int_eq(record_usage(rec, all, session, &u), 0);
	return u;
}

/* A page of a listing as the API writes it: the tree, and its text's
 * length in *len (the bound is on the text). */
static json_t *page(struct record *rec, const struct record_query *q, bool *truncated,
		    size_t *len)
{
	struct buf text = BUF_INIT;
	json_t *l;

	ck_assert_int_eq(record_list_text(rec, q, &text, truncated), 0);
	*len = text.len;
	l = json_loadb(text.data, text.len, 0, NULL);
	ck_assert_ptr_nonnull(l);
	buf_release(&text);
	return l;
}

static json_t *list(struct record *rec, const char *session, int64_t before, bool *truncated)
{
	json_t *l = record_list(rec, session, 1000, before, truncated);

	ck_assert_ptr_nonnull(l);
	return l;
}

static size_t entries_of(struct record *rec, const char *session)
{
	bool truncated;
	json_t *l = list(rec, session, 0, &truncated);
	size_t n = json_array_size(l);

	json_decref(l);
	return n;
}

/* The budget tests fill a record of 8 MiB, not the default 64: the rule is
 * the same, and under memcheck the smaller fill takes seconds, not half a
 * minute (the API tier fills the default one). */
#define BUDGET (8ll << 20)
#define ENTRY_HALF (BUDGET / 256)		/* code and output: 1/128 of it */

START_TEST(test_budget_bounds_the_record)
{
	struct record *rec = open_bounded(0, BUDGET);
	char id[16];

	/* 12 sessions of 12 entries of 1/128 of the budget: 9/8 of it, each
	 * session within its share. */
	for (int s = 0; s < 12; s++)
		for (int i = 0; i < 12; i++) {
			snprintf(id, sizeof(id), "ses_%d", s);
			add(rec, id, ENTRY_HALF, ENTRY_HALF, 'a');
		}
	ck_assert_int_le(usage(rec, true, NULL).bytes, BUDGET);
	ck_assert_int_ge(usage(rec, true, NULL).bytes, BUDGET - 8 * ENTRY_HALF);
	/* The oldest went: the first session's, not the last one's. */
	ck_assert_uint_eq(entries_of(rec, "ses_0"), 0);
	ck_assert_uint_eq(entries_of(rec, "ses_11"), 12);
	record_close(rec);
}
END_TEST

START_TEST(test_a_session_evicts_its_own_first)
{
	const int64_t keep = 200;
	struct record *rec = open_bounded(keep, BUDGET);
	struct record_usage hog;

	for (int i = 0; i < 3; i++)
		add(rec, "quiet", 10, 10, 'q');
	add(rec, NULL, 10, 10, 'o');
	/* Bytes: 40 entries of 1/128 of the budget, past a session's 1/4. */
	for (int i = 0; i < 40; i++)
		add(rec, "hog", ENTRY_HALF, ENTRY_HALF, 'h');
	hog = usage(rec, false, "hog");
	ck_assert_int_le(hog.bytes, BUDGET / RECORD_SHARE);
	ck_assert_int_ge(hog.bytes, BUDGET / RECORD_SHARE - 4 * ENTRY_HALF);
	/* Entries: more tiny ones than the record keeps. */
	for (int i = 0; i < keep + 100; i++)
		add(rec, "hog", 1, 1, 'h');
	hog = usage(rec, false, "hog");
	ck_assert_int_eq(hog.entries, keep / RECORD_SHARE);
	ck_assert_uint_eq(entries_of(rec, "quiet"), 3);
	ck_assert_int_eq(usage(rec, false, NULL).entries, 1);	/* the one-shot */
	record_close(rec);
}
END_TEST

static size_t dumped_len(json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	size_t n;

	ck_assert_ptr_nonnull(text);
	n = strlen(text);
	free(text);
	return n;
}

static json_t *only_entry(struct record *rec, const char *session)
{
	bool truncated;
	json_t *l = list(rec, session, 0, &truncated), *e;

	ck_assert_uint_eq(json_array_size(l), 1);
	e = json_incref(json_array_get(l, 0));
	json_decref(l);
	return e;
}

START_TEST(test_an_entry_is_bounded_whatever_it_holds)
{
	struct record *rec = open_memory();
	size_t big = 256 * KIB;
	char *ctl = filled(big, '\x01'), *code = filled(300 * KIB, '\x01');
	char *msg = filled(64 * KIB, '\x01');
	struct result res;
	struct record_entry e = { .session = "ses", .language = "python", .code = code,
				  .result = &res };
	json_t *got, *result, *error;

	/* Every string at its cap, all of it escaped six times over: the
	 * streams, the error's message and traceback. */
	ck_assert_int_eq(result_init(&res), 0);
	res.status = RESULT_ERROR;
	result_stream_add(&res.out, ctl, big, big);
	result_stream_add(&res.err, ctl, big, big);
	ck_assert_int_eq(result_set_error_str(&res, "Boom", msg, ctl), 0);
	ck_assert_int_eq(record_add(rec, &e), 0);
	got = only_entry(rec, "ses");
	result = json_object_get(got, "result");
	ck_assert_uint_le(dumped_len(result), RECORD_ENTRY_MAX);
	ck_assert(json_is_true(json_object_get(result, "record_truncated")));
	ck_assert(json_is_true(json_object_get(got, "code_truncated")));
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(got, "code"))), RECORD_ENTRY_MAX);
	error = json_object_get(result, "error");
	ck_assert_str_eq(json_string_value(json_object_get(error, "name")), "Boom");
	ck_assert_uint_gt(json_string_length(json_object_get(error, "traceback")), 0);
	ck_assert_uint_lt(json_string_length(json_object_get(error, "traceback")), big);
	ck_assert_str_eq(json_string_value(json_object_get(result, "status")), "error");
	/* The result the client got is not changed by the record. */
	ck_assert_uint_eq(json_string_length(json_object_get(res.error, "traceback")), big);
	json_decref(got);
	result_release(&res);
	free(ctl);
	free(code);
	free(msg);
	record_close(rec);
}
END_TEST

/* A result with a megabyte of test cases: the record keeps their counts,
 * not the cases, and the client's result keeps them all. */
START_TEST(test_test_cases_give_way_to_their_counts)
{
	struct record *rec = open_memory();
	char *msg = filled(2000, 'm');
	struct result res;
	struct record_entry e = { .session = "ses", .language = "bash", .code = "pytest",
				  .result = &res };
	json_t *cases = json_array(), *got, *tests;

	ck_assert_int_eq(result_init(&res), 0);
	for (int i = 0; i < 500; i++)
		json_array_append_new(cases, json_pack("{s:s, s:s, s:s}", "name", "t",
						       "status", "failed", "message", msg));
	res.tests = json_pack("{s:i, s:i, s:i, s:i, s:o, s:b, s:[s]}", "passed", 7, "failed",
			      500, "errors", 0, "skipped", 0, "cases", cases, "truncated", 0,
			      "reports", "report.xml");
	ck_assert_int_eq(record_add(rec, &e), 0);
	got = only_entry(rec, "ses");
	tests = json_object_get(json_object_get(got, "result"), "tests");
	ck_assert_int_eq(json_integer_value(json_object_get(tests, "passed")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(tests, "failed")), 500);
	ck_assert_uint_eq(json_array_size(json_object_get(tests, "cases")), 0);
	ck_assert(json_is_true(json_object_get(tests, "truncated")));
	ck_assert_uint_eq(json_array_size(json_object_get(res.tests, "cases")), 500);
	ck_assert(json_is_false(json_object_get(res.tests, "truncated")));
	json_decref(got);
	result_release(&res);
	free(msg);
	record_close(rec);
}
END_TEST

START_TEST(test_a_long_stream_is_cut_on_a_character)
{
	struct record *rec = open_memory();
	size_t n = 1 + 2 * 200000;		/* "x" then é: the cut lands inside one */
	char *out = malloc(n + 1);
	struct result res;
	struct record_entry e = { .session = "ses", .language = "python", .code = "print()",
				  .result = &res };
	json_t *got, *result;
	const char *kept;

	ck_assert_ptr_nonnull(out);
	out[0] = 'x';
	for (size_t i = 1; i < n; i += 2)
		memcpy(out + i, "\xc3\xa9", 2);
	out[n] = 0;
	ck_assert_int_eq(result_init(&res), 0);
	result_stream_add(&res.out, out, n, n);
	ck_assert_int_eq(record_add(rec, &e), 0);
	got = only_entry(rec, "ses");
	result = json_object_get(got, "result");
	ck_assert_uint_le(dumped_len(result), RECORD_ENTRY_MAX);
	kept = json_string_value(json_object_get(result, "stdout"));
	ck_assert_ptr_nonnull(kept);
	ck_assert_uint_lt(strlen(kept), n);
	ck_assert_int_eq(strncmp(kept, out, strlen(kept)), 0);
	json_decref(got);
	result_release(&res);
	free(out);
	record_close(rec);
}
END_TEST

START_TEST(test_a_listing_is_bounded_and_pages)
{
	struct record *rec = open_memory();
	int64_t before = 0, last_seq = INT64_MAX;
	size_t total = 0, pages = 0;
	bool truncated = true;

	/* 30 entries of 250 KiB of code that is 1.5 MiB as JSON: 45 MiB. */
	for (int i = 0; i < 30; i++)
		add(rec, "ses", 250 * KIB, 10, '\x01');
	while (truncated) {
		struct record_query q = { .scope = RECORD_SESSION, .session = "ses",
					  .limit = 1000, .before = before };
		size_t i, len;
		json_t *l = page(rec, &q, &truncated, &len), *e;

		ck_assert_uint_gt(json_array_size(l), 0);
		ck_assert_uint_le(len, RECORD_LIST_MAX);
		/* Oldest first within a page; each page older than the last. */
		json_array_foreach(l, i, e) {
			int64_t seq = json_integer_value(json_object_get(e, "seq"));

			if (i == 0)
				before = seq;
			ck_assert_int_lt(seq, last_seq);
		}
		last_seq = before;
		total += json_array_size(l);
		pages++;
		json_decref(l);
	}
	ck_assert_uint_eq(total, 30);
	ck_assert_uint_ge(pages, 6);
	/* The first page is the most recent ones, as limit keeps them. */
	{
		json_t *l = list(rec, "ses", 0, &truncated);
		json_t *newest = json_array_get(l, json_array_size(l) - 1);

		ck_assert(truncated);
		ck_assert_int_eq(json_integer_value(json_object_get(newest, "seq")), 30);
		json_decref(l);
	}
	record_close(rec);
}
END_TEST

static int64_t seq_of(json_t *entry)
{
	return json_integer_value(json_object_get(entry, "seq"));
}

/* The session an entry names, "-" for a one-shot (null). */
static const char *session_of(json_t *entry)
{
	json_t *s = json_object_get(entry, "session");

	ck_assert(json_is_string(s) || json_is_null(s));
	return json_is_null(s) ? "-" : json_string_value(s);
}

START_TEST(test_the_whole_record_lists_newest_first_with_one_shots)
{
	static const char *const order[] = { "a", NULL, "b", NULL, "a" };
	struct record *rec = open_memory();
	bool truncated;
	json_t *l, *e;
	size_t i;

	for (i = 0; i < 5; i++)
		add(rec, order[i], 10, 10, 'x');
	l = record_list_all(rec, RECORD_ALL, 1000, 0, &truncated);
	ck_assert_ptr_nonnull(l);
	ck_assert(!truncated);
	ck_assert_uint_eq(json_array_size(l), 5);
	json_array_foreach(l, i, e) {
		const char *when = json_string_value(json_object_get(e, "started_at"));

		ck_assert_int_eq(seq_of(e), 5 - (int64_t)i);
		ck_assert_str_eq(session_of(e), order[4 - i] ? order[4 - i] : "-");
		ck_assert_ptr_nonnull(when);
		ck_assert_int_eq(strncmp(when, "2001-09-09T01:46:40", 19), 0);
	}
	json_decref(l);
	/* limit keeps the newest; before pages back from the last listed. */
	l = record_list_all(rec, RECORD_ALL, 2, 0, &truncated);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_int_eq(seq_of(json_array_get(l, 1)), 4);
	json_decref(l);
	l = record_list_all(rec, RECORD_ALL, 2, 4, &truncated);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_int_eq(seq_of(json_array_get(l, 0)), 3);
	ck_assert_int_eq(seq_of(json_array_get(l, 1)), 2);
	json_decref(l);
	/* Only the one-shots, newest first. */
	l = record_list_all(rec, RECORD_ONESHOTS, 1000, 0, &truncated);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_int_eq(seq_of(json_array_get(l, 0)), 4);
	ck_assert_int_eq(seq_of(json_array_get(l, 1)), 2);
	ck_assert_str_eq(session_of(json_array_get(l, 0)), "-");
	json_decref(l);
	/* A session's listing names it too, oldest first. */
	l = list(rec, "a", 0, &truncated);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_int_eq(seq_of(json_array_get(l, 0)), 1);
	ck_assert_str_eq(session_of(json_array_get(l, 0)), "a");
	json_decref(l);
	record_close(rec);
}
END_TEST

START_TEST(test_the_whole_record_is_bounded_and_pages)
{
	struct record *rec = open_memory();
	int64_t before = 0;
	size_t total = 0, pages = 0;
	bool truncated = true;

	/* 1.5 MiB of JSON each, sessions and one-shots taking turns, each
	 * within its share. */
	for (int i = 0; i < 20; i++)
		add(rec, i % 2 ? "ses" : NULL, 250 * KIB, 10, '\x01');
	while (truncated) {
		struct record_query q = { .scope = RECORD_ALL, .limit = 1000, .before = before };
		size_t i, len;
		json_t *l = page(rec, &q, &truncated, &len), *e;

		ck_assert_uint_gt(json_array_size(l), 0);
		ck_assert_uint_le(len, RECORD_LIST_MAX);
		json_array_foreach(l, i, e) {
			ck_assert(before == 0 || seq_of(e) < before);
			ck_assert(i == 0 || seq_of(e) < seq_of(json_array_get(l, i - 1)));
		}
		before = seq_of(json_array_get(l, json_array_size(l) - 1));
		total += json_array_size(l);
		pages++;
		json_decref(l);
	}
	ck_assert_uint_eq(total, 20);
	ck_assert_uint_ge(pages, 4);
	ck_assert_int_eq(before, 1);
	record_close(rec);
}
END_TEST

START_TEST(test_a_file_of_an_older_petri_opens)
{
	char dir[] = "/tmp/petri-record-XXXXXX", path[64], err[256];
	struct record_check check;
	struct record *rec;
	sqlite3 *db;
	bool truncated;
	json_t *l;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/record.sqlite", dir);
	/* The schema before rows had a size. */
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db,
		"CREATE TABLE executions (seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT,"
		" started_at REAL NOT NULL, language TEXT NOT NULL, code TEXT NOT NULL,"
		" code_truncated INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, limits TEXT,"
		" result TEXT NOT NULL);"
		"CREATE INDEX executions_session ON executions(session, seq);"
		"INSERT INTO executions (session, started_at, language, code, status, result)"
		" VALUES ('old', 1.0, 'bash', 'echo hi', 'ok', '{\"stdout\":\"hi\\n\"}');",
		NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(record_open(&(struct record_options){ .path = path, .node = "alpha" },
				     &rec, err, sizeof(err)), 0);
	ck_assert_int_eq(usage(rec, true, NULL).entries, 1);
	ck_assert_int_gt(usage(rec, true, NULL).bytes, 7 + 15);
	add(rec, "old", 10, 10, 'a');
	l = list(rec, "old", 0, &truncated);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 0), "code")),
			 "echo hi");
	/* The old entry names no engine (its digest is the one of its time);
	 * the new one names this petri. */
	ck_assert(json_is_null(json_object_get(json_array_get(l, 0), "engine")));
	ck_assert(json_is_null(json_object_get(json_array_get(l, 0), "node")));
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 1), "engine")),
			 petri_version());
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(l, 1), "node")),
			 "alpha");
	json_decref(l);
	record_close(rec);
	/* Reopened, it knows what it holds, and both digests verify. */
	ck_assert_int_eq(record_open(&(struct record_options){ .path = path }, &rec, err, sizeof(err)), 0);
	ck_assert_int_eq(usage(rec, true, NULL).entries, 2);
	ck_assert_int_eq(record_verify(rec, NULL, 0, NULL, &check), 0);
	ck_assert_msg(check.broken == 0, "%s", check.why);
	ck_assert_int_eq(check.entries, 2);
	record_close(rec);
	/* The node is part of what an entry's digest covers: an entry said
	 * to come from another node, or from none (as if an older petri had
	 * kept it), breaks the chain there. */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
		ck_assert_int_eq(sqlite3_exec(db, i ? "UPDATE executions SET node = 'beta' WHERE seq = 2" :
					      "UPDATE executions SET node = NULL WHERE seq = 2",
					      NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
		ck_assert_int_eq(record_open(&(struct record_options){ .path = path, .readonly = true },
					     &rec, err, sizeof(err)), 0);
		ck_assert_int_eq(record_verify(rec, NULL, 0, NULL, &check), 0);
		ck_assert_int_eq(check.broken, 2);
		record_close(rec);
	}
	/* Read as they are (verify, export), files without a node, or
	 * without an engine either: those columns are null. */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
		ck_assert_int_eq(sqlite3_exec(db, i ? "ALTER TABLE executions DROP COLUMN engine" :
					      "ALTER TABLE executions DROP COLUMN node",
					      NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
		ck_assert_int_eq(record_open(&(struct record_options){ .path = path, .readonly = true },
					     &rec, err, sizeof(err)), 0);
		l = list(rec, "old", 0, &truncated);
		ck_assert_uint_eq(json_array_size(l), 2);
		ck_assert(json_is_null(json_object_get(json_array_get(l, 1), "node")));
		ck_assert(i == 0 || json_is_null(json_object_get(json_array_get(l, 1), "engine")));
		json_decref(l);
		record_close(rec);
	}
	unlink(path);
	snprintf(path, sizeof(path), "%s/record.sqlite-wal", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/record.sqlite-shm", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/record.sqlite.key", dir);
	unlink(path);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Every listing reads an index from where its page starts: never the
 * whole table, never a sort of it (which would cost the whole record for
 * a page of one entry). */
START_TEST(test_the_listings_read_an_index)
{
	static const enum record_scope scopes[] = { RECORD_SESSION, RECORD_ALL, RECORD_ONESHOTS };
	struct record *rec = open_memory();
	char plan[512];

	add(rec, "ses", 10, 10, 'a');
	for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
		ck_assert_int_eq(record_explain(rec, scopes[i], plan, sizeof(plan)), 0);
		ck_assert_msg(strstr(plan, "SEARCH") && !strstr(plan, "SCAN") &&
			      !strstr(plan, "TEMP B-TREE"), "listing %zu reads: %s", i, plan);
		ck_assert_msg(scopes[i] == RECORD_ALL ? strstr(plan, "PRIMARY KEY") != NULL :
			      strstr(plan, "USING INDEX executions_session") != NULL,
			      "listing %zu reads: %s", i, plan);
	}
	record_close(rec);
}
END_TEST

struct watcher {
	int asked, gone_after;
};

static bool watcher_gone(void *arg)
{
	struct watcher *w = arg;

	return ++w->asked > w->gone_after;
}

/* A listing whose client hangs up stops, and leaves the answer as it was;
 * one whose client stays is whole, as text that parses. */
START_TEST(test_a_listing_stops_when_nobody_waits)
{
	struct record *rec = open_memory();
	struct watcher w = { .gone_after = 2 };
	struct record_query q = { .scope = RECORD_ALL, .limit = 1000, .gone = watcher_gone,
				  .gone_arg = &w };
	struct buf out = BUF_INIT;
	bool truncated;
	json_t *l;

	for (int i = 0; i < 100; i++)
		add(rec, i % 2 ? "ses" : NULL, 100, 100, i % 3 ? 'x' : '\n');
	ck_assert_int_eq(buf_append_str(&out, "head"), 0);
	ck_assert_int_eq(record_list_text(rec, &q, &out, &truncated), -ECANCELED);
	ck_assert_uint_eq(out.len, 4);
	ck_assert_int_le(w.asked, 3);
	w.gone_after = 1 << 30;
	buf_reset(&out);
	ck_assert_int_eq(record_list_text(rec, &q, &out, &truncated), 0);
	ck_assert(!truncated);
	ck_assert_ptr_nonnull(l = json_loadb(out.data, out.len, 0, NULL));
	ck_assert_uint_eq(json_array_size(l), 100);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(l, 0), "seq")), 100);
	ck_assert_int_ge(w.asked, 100 / 16);
	json_decref(l);
	buf_release(&out);
	record_close(rec);
}
END_TEST

/* An entry is written as jansson would write it, whatever bytes its code
 * holds: escapes, control characters, and what is not UTF-8 as U+FFFD. */
START_TEST(test_an_entry_is_written_as_json_writes_it)
{
	static const char code[] = "a\"b\\c\n\t\x01\x7f\xc3\xa9\xff/\xe2\x82";
	struct record *rec = open_memory();
	struct result res;
	struct record_entry e = { .session = "s\"1", .language = "python", .code = code,
				  .started_at = 1.0e9, .result = &res };
	bool truncated;
	json_t *l, *entry;
	const char *got;

	ck_assert_int_eq(result_init(&res), 0);
	result_stream_add(&res.out, "out\n", 4, 4);
	ck_assert_int_eq(record_add(rec, &e), 0);
	result_release(&res);
	ck_assert_ptr_nonnull(l = record_list(rec, "s\"1", 10, 0, &truncated));
	ck_assert_uint_eq(json_array_size(l), 1);
	entry = json_array_get(l, 0);
	got = json_string_value(json_object_get(entry, "code"));
	/* Each byte that is not UTF-8 one U+FFFD, as utf8_sanitize() does. */
	ck_assert_str_eq(got, "a\"b\\c\n\t\x01\x7f\xc3\xa9\xef\xbf\xbd/"
			 "\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(json_string_value(json_object_get(entry, "session")), "s\"1");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(entry, "result"),
							   "stdout")), "out\n");
	ck_assert_str_eq(json_string_value(json_object_get(entry, "engine")), petri_version());
	ck_assert_str_eq(json_string_value(json_object_get(entry, "node")), ID_NODE_DEFAULT);
	ck_assert(json_is_false(json_object_get(entry, "code_truncated")));
	json_decref(l);
	record_close(rec);
}
END_TEST

/* Four cases, so that valgrind's run (Makefile, VALGRIND_SUITES) can give
 * each a process of its own: the listings fill the record with tens of MiB
 * (RECORD_LIST_MAX is what they page over), 15-25 s each under memcheck. */
Suite *record_suite(void)
{
	Suite *s = suite_create("record");
	TCase *budgets = tcase_create("budgets"), *listings = tcase_create("listings");
	TCase *whole = tcase_create("whole"), *tc = tcase_create("core");

	tcase_set_timeout(budgets, 120);
	tcase_add_test(budgets, test_budget_bounds_the_record);
	tcase_add_test(budgets, test_a_session_evicts_its_own_first);
	suite_add_tcase(s, budgets);
	tcase_set_timeout(listings, 120);
	tcase_add_test(listings, test_a_listing_is_bounded_and_pages);
	suite_add_tcase(s, listings);
	tcase_set_timeout(whole, 120);
	tcase_add_test(whole, test_the_whole_record_is_bounded_and_pages);
	suite_add_tcase(s, whole);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_an_entry_is_bounded_whatever_it_holds);
	tcase_add_test(tc, test_test_cases_give_way_to_their_counts);
	tcase_add_test(tc, test_a_long_stream_is_cut_on_a_character);
	tcase_add_test(tc, test_the_whole_record_lists_newest_first_with_one_shots);
	tcase_add_test(tc, test_a_file_of_an_older_petri_opens);
	tcase_add_test(tc, test_the_listings_read_an_index);
	tcase_add_test(tc, test_a_listing_stops_when_nobody_waits);
	tcase_add_test(tc, test_an_entry_is_written_as_json_writes_it);
	suite_add_tcase(s, tc);
	return s;
}
