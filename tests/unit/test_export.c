/* The record's export (record/export.h): every entry once, oldest first,
 * across pages and whatever was recorded after it began; one-shots by
 * time; the HTML escapes what the record holds; a notebook's outputs;
 * RFC 3339 and dates parsed (util/timefmt.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "record/export.h"
#include "unit.h"
#include "util/buf.h"
#include "util/timefmt.h"

#define HOSTILE "</script><img src=x onerror=alert(1)>"

static struct record *open_memory(void)
{
	struct record *rec;
	char err[256];

	ck_assert_int_eq(record_open(&(struct record_options){ 0 }, &rec, err, sizeof(err)), 0);
	return rec;
}

/* One execution printing out, with bundle as its one result (may be NULL). */
static void add(struct record *rec, const char *session, double t, const char *code,
		const char *out, json_t *bundle)
{
	struct result res;
	struct record_entry e = { .session = session, .language = "python", .code = code,
				  .started_at = t, .result = &res };

	ck_assert_int_eq(result_init(&res), 0);
	result_stream_add(&res.out, out, strlen(out), 1 << 20);
	if (bundle)
		json_array_append_new(res.results, bundle);
	ck_assert_int_eq(record_add(rec, &e), 0);
	result_release(&res);
}

static int to_buf(void *arg, const char *data, size_t len)
{
	return buf_append(arg, data, len);
}

/* The whole export of q as f, and how many entries export_begin() saw. */
static char *export_all(struct record *rec, const struct export_query *q, enum export_format f,
			size_t *count)
{
	struct buf b = BUF_INIT;
	struct export *x;
	int r;

	ck_assert_int_eq(export_begin(rec, q, f, &x), 0);
	*count = export_count(x);
	while ((r = export_step(x, to_buf, &b)) > 0)
		;
	ck_assert_int_eq(r, 0);
	export_free(x);
	return buf_detach(&b, NULL);
}

START_TEST(test_every_entry_once_oldest_first_across_pages)
{
	struct record *rec = open_memory();
	struct export_query q = { .session = "s1" };
	size_t n = EXPORT_PAGE * 3 + 2, count, lines = 0;
	struct export *x;
	struct buf b = BUF_INIT;
	char code[32], *text, *line, *save;
	long long last = 0;
	int r;

	for (size_t i = 0; i < n; i++) {
		snprintf(code, sizeof(code), "x = %zu", i);
		add(rec, "s1", 1.0e9 + (double)i, code, "", NULL);
		add(rec, "other", 1.0e9, "y", "", NULL);
	}
	text = export_all(rec, &q, EXPORT_JSONL, &count);
	ck_assert_uint_eq(count, n);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *e = json_loads(line, 0, NULL);

		ck_assert_ptr_nonnull(e);
		ck_assert_str_eq(json_string_value(json_object_get(e, "session")), "s1");
		snprintf(code, sizeof(code), "x = %zu", lines++);
		ck_assert_str_eq(json_string_value(json_object_get(e, "code")), code);
		ck_assert_int_gt(json_integer_value(json_object_get(e, "seq")), last);
		last = json_integer_value(json_object_get(e, "seq"));
		json_decref(e);
	}
	ck_assert_uint_eq(lines, n);
	free(text);

	/* What is recorded after the export began is not part of it. */
	ck_assert_int_eq(export_begin(rec, &q, EXPORT_JSONL, &x), 0);
	add(rec, "s1", 2.0e9, "late", "", NULL);
	while ((r = export_step(x, to_buf, &b)) > 0)
		;
	ck_assert_int_eq(r, 0);
	ck_assert_ptr_null(strstr(b.data, "late"));
	export_free(x);
	buf_release(&b);

	q.session = "nobody";
	text = export_all(rec, &q, EXPORT_IPYNB, &count);
	ck_assert_uint_eq(count, 0);
	free(text);
	record_close(rec);
}
END_TEST

START_TEST(test_oneshots_by_time)
{
	struct record *rec = open_memory();
	struct export_query q = { 0 };
	size_t count;
	char *text;

	add(rec, NULL, 1000.0, "early", "", NULL);
	add(rec, "s1", 2000.0, "in a session", "", NULL);
	add(rec, NULL, 2000.0, "middle", "", NULL);
	add(rec, NULL, 3000.0, "late", "", NULL);
	q.since = 2000.0;
	q.until = 3000.0;
	text = export_all(rec, &q, EXPORT_JSONL, &count);
	ck_assert_uint_eq(count, 1);
	ck_assert_ptr_nonnull(strstr(text, "\"middle\""));
	ck_assert_ptr_null(strstr(text, "early"));
	ck_assert_ptr_null(strstr(text, "late"));
	ck_assert_ptr_null(strstr(text, "in a session"));
	free(text);
	record_close(rec);
}
END_TEST

START_TEST(test_html_escapes_everything_it_shows)
{
	struct record *rec = open_memory();
	struct export_query q = { .session = "s1" };
	size_t count;
	char *text;

	add(rec, "s1", 1.0e9, "print('" HOSTILE "')", HOSTILE "\n",
	    json_pack("{s:s, s:s, s:s}", "text/html", "<b>bold</b><script>alert(1)</script>",
		      "text/plain", HOSTILE, "image/png", "\"><script>alert(1)</script>"));
	add(rec, "s1", 1.0e9, "chart", "", json_pack("{s:s}", "image/png", "iVBORw0KGgo="));
	text = export_all(rec, &q, EXPORT_HTML, &count);
	ck_assert_ptr_null(strstr(text, "<script"));
	ck_assert_ptr_null(strstr(text, "<img src=x"));
	ck_assert_ptr_nonnull(strstr(text, "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
	ck_assert_ptr_nonnull(strstr(text, "<iframe sandbox=\"\" title=\"text/html result\" "
					   "srcdoc=\"&lt;b&gt;bold&lt;/b&gt;"));
	/* Not base64: no image of it; base64: a data: URL (where the record
	 * keeps images; else its note). */
	ck_assert_ptr_null(strstr(text, "data:image/png;base64,&quot;"));
	if (!strstr(text, "not recorded]</p>"))
		ck_assert_ptr_nonnull(strstr(text, "src=\"data:image/png;base64,iVBORw0KGgo=\""));
	ck_assert_ptr_nonnull(strstr(text, "Content-Security-Policy\" content=\"default-src "
					   "'none'"));
	free(text);
	record_close(rec);
}
END_TEST

START_TEST(test_a_notebook_cell_per_execution)
{
	struct record *rec = open_memory();
	struct export_query q = { .session = "s1" };
	json_t *nb, *cell, *outputs;
	size_t count;
	char *text;

	add(rec, "s1", 1.0e9, "print(1)", "1\n", json_pack("{s:s, s:s}", "image/png",
							    "[9 bytes of base64, not recorded]",
							    "text/plain", "<Figure>"));
	add(rec, "s1", 1.0e9, "1/0", "", NULL);
	text = export_all(rec, &q, EXPORT_IPYNB, &count);
	nb = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(nb);
	ck_assert_int_eq(json_integer_value(json_object_get(nb, "nbformat")), 4);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 json_object_get(nb, "metadata"), "kernelspec"), "name")), "python3");
	ck_assert_uint_eq(json_array_size(json_object_get(nb, "cells")), 2);
	cell = json_array_get(json_object_get(nb, "cells"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(cell, "source")), "print(1)");
	ck_assert_int_eq(json_integer_value(json_object_get(cell, "execution_count")), 1);
	outputs = json_object_get(cell, "outputs");
	ck_assert_uint_eq(json_array_size(outputs), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(outputs, 0), "text")),
			 "1\n");
	/* The note is not an image. */
	ck_assert_ptr_null(json_object_get(json_object_get(json_array_get(outputs, 1), "data"),
					   "image/png"));
	json_decref(nb);
	free(text);
	record_close(rec);
}
END_TEST

START_TEST(test_times_parse)
{
	double t;

	ck_assert(timefmt_parse("1970-01-02", &t) && t == 86400.0);
	ck_assert(timefmt_parse("1970-01-01T01:00:00+01:00", &t) && t == 0.0);
	ck_assert(timefmt_parse("2026-11-30T03:45:41.755Z", &t) && t > 1.79e9);
	ck_assert(timefmt_parse("1970-01-01 00:01z", &t) && t == 60.0);
	ck_assert(timefmt_parse("2024-02-29", &t));
	ck_assert(!timefmt_parse("2023-02-29", &t));
	ck_assert(!timefmt_parse("2026-11-30T03:45:41", &t));	/* no offset */
	ck_assert(!timefmt_parse("2026-11-30x", &t));
	ck_assert(!timefmt_parse("2026-13-01", &t));
	ck_assert(!timefmt_parse("yesterday", &t));
	ck_assert(!timefmt_parse("", &t));
}
END_TEST

Suite *export_suite(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_every_entry_once_oldest_first_across_pages);
	tcase_add_test(tc, test_oneshots_by_time);
	tcase_add_test(tc, test_html_escapes_everything_it_shows);
	tcase_add_test(tc, test_a_notebook_cell_per_execution);
	tcase_add_test(tc, test_times_parse);
	suite_add_tcase(s, tc);
	return s;
}
