/* Codecs for bytes that come out of a sandbox: UTF-8, base64, frames, and
 * the result object's JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/frame.h"
#include "runtime/jstring.h"
#include "exec/result.h"
#include "unit.h"
#include "util/base64.h"
#include "util/utf8.h"

START_TEST(test_utf8_valid)
{
	ck_assert(utf8_valid("hello", 5));
	ck_assert(utf8_valid("h\0llo", 5));		/* NUL is valid UTF-8 */
	ck_assert(utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
	ck_assert(!utf8_valid("\xff", 1));
	ck_assert(!utf8_valid("\xc0\xaf", 2));		/* overlong '/' */
	ck_assert(!utf8_valid("\xed\xa0\x80", 3));	/* surrogate */
	ck_assert(!utf8_valid("\xf4\x90\x80\x80", 4));	/* > U+10FFFF */
	ck_assert(!utf8_valid("\xe2\x82", 2));		/* truncated */
}
END_TEST

START_TEST(test_utf8_cut)
{
	/* never split a character; cut before an incomplete tail */
	ck_assert_uint_eq(utf8_cut("ab\xe2\x82", 4), 2);
	ck_assert_uint_eq(utf8_cut("ab\xe2\x82\xac", 5), 5);
	ck_assert_uint_eq(utf8_cut("ab\xf0", 3), 2);
	ck_assert_uint_eq(utf8_cut("ab\xff", 3), 3);	/* invalid: nothing to wait for */
	ck_assert_uint_eq(utf8_cut("", 0), 0);
}
END_TEST

START_TEST(test_utf8_sanitize)
{
	struct buf b = BUF_INIT;

	ck_assert_int_eq(utf8_sanitize(&b, "a\xff" "b\xc3", 4), 0);
	ck_assert_uint_eq(b.len, 8);
	ck_assert_mem_eq(b.data, "a\xef\xbf\xbd" "b\xef\xbf\xbd", 8);
	buf_release(&b);
}
END_TEST

START_TEST(test_utf8_carry)
{
	struct utf8_carry c = { .n = 0 };
	struct buf b = BUF_INIT;

	/* "€" (e2 82 ac) cut after its first byte, then after its second */
	ck_assert_int_eq(utf8_carry_take(&c, "a\xe2", 2, &b), 0);
	ck_assert_uint_eq(b.len, 1);
	ck_assert_int_eq(utf8_carry_take(&c, "\x82", 1, &b), 0);
	ck_assert_uint_eq(b.len, 1);
	ck_assert_int_eq(utf8_carry_take(&c, "\xac" "b", 2, &b), 0);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_mem_eq(b.data, "a\xe2\x82\xac" "b", 5);
	/* an invalid byte is replaced at once, not held */
	ck_assert_int_eq(utf8_carry_take(&c, "\xff", 1, &b), 0);
	ck_assert_uint_eq(c.n, 0);
	ck_assert_mem_eq(b.data + 5, "\xef\xbf\xbd", 3);
	/* the end of the text with a character unfinished */
	ck_assert_int_eq(utf8_carry_take(&c, "\xf0\x9f", 2, &b), 0);
	ck_assert_uint_eq(c.n, 2);
	ck_assert_uint_eq(b.len, 8);
	ck_assert_int_eq(utf8_carry_flush(&c, &b), 0);
	ck_assert_uint_eq(c.n, 0);
	ck_assert(utf8_valid(b.data, b.len));
	ck_assert_uint_gt(b.len, 8);
	buf_release(&b);
}
END_TEST

START_TEST(test_base64)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const coded[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==",
					     "Zm9vYmE=", "Zm9vYmFy" };

	for (size_t i = 0; i < 7; i++) {
		size_t n;
		char *e = base64_encode(plain[i], strlen(plain[i]), &n);
		unsigned char *d;

		ck_assert_str_eq(e, coded[i]);
		d = base64_decode(e, n, &n);
		ck_assert_ptr_nonnull(d);
		ck_assert_uint_eq(n, strlen(plain[i]));
		ck_assert(memcmp(d, plain[i], n) == 0);
		free(e);
		free(d);
	}
	ck_assert(!base64_valid("Zg=", 3));
	ck_assert(!base64_valid("Z===", 4));
	ck_assert(!base64_valid("Zg==Zg==", 8));	/* padding in the middle */
	ck_assert(!base64_valid("Zm9v\n", 5));
	ck_assert(!base64_valid("Zm9-", 4));
	ck_assert(base64_valid("Zm9v", 4));
}
END_TEST

static void feed_header(struct frame_reader *fr, size_t n)
{
	unsigned char hdr[4] = { (unsigned char)(n >> 24), (unsigned char)(n >> 16),
				 (unsigned char)(n >> 8), (unsigned char)n };

	ck_assert_int_eq(frame_reader_feed(fr, hdr, 4), 0);
}

static void feed_frame(struct frame_reader *fr, const char *json)
{
	size_t n = strlen(json);

	feed_header(fr, n);
	ck_assert_int_eq(frame_reader_feed(fr, json, n), 0);
}

/* A reader in the middle of execution 7, with room for plenty. */
static void reader_for_exec(struct frame_reader *fr, size_t bytes, size_t frames)
{
	struct frame_expect ex = { .id = 7, .bytes = bytes, .frames = frames };

	frame_reader_init(fr);
	frame_reader_expect(fr, &ex);
}

START_TEST(test_frames_roundtrip)
{
	struct frame_reader fr;
	struct buf b = BUF_INIT;
	json_t *obj = json_pack("{s:s, s:i, s:i}", "type", "done", "id", 7, "exit_code", 0), *out;

	reader_for_exec(&fr, 1 << 20, 10);
	ck_assert_int_eq(frame_encode(obj, &b), 0);
	/* byte by byte: a frame is only whole when all of it arrived */
	for (size_t i = 0; i < b.len; i++) {
		ck_assert_int_eq(frame_reader_next(&fr, &out), 0);
		frame_reader_feed(&fr, b.data + i, 1);
	}
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	ck_assert(json_equal(obj, out));
	json_decref(out);
	ck_assert_int_eq(frame_reader_next(&fr, &out), 0);
	ck_assert_uint_eq(fr.expect.bytes, (1u << 20) - b.len);
	ck_assert_uint_eq(fr.expect.frames, 9);
	json_decref(obj);
	buf_release(&b);
	frame_reader_release(&fr);
}
END_TEST

/* The keeper's "died": at any time, for any execution (box.c judges
 * which), outside the execution's budget, and at most 256 bytes. */
START_TEST(test_frames_died)
{
	struct frame_reader fr;
	json_t *out;
	char big[400];

	/* an execution whose budget is spent: "died" still comes in */
	reader_for_exec(&fr, 0, 0);
	feed_frame(&fr, "{\"type\":\"died\",\"id\":6,\"status\":9}");
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	ck_assert_str_eq(json_string_value(json_object_get(out, "type")), "died");
	json_decref(out);
	ck_assert_uint_eq(fr.expect.frames, 0);
	feed_frame(&fr, "{\"type\":\"done\",\"id\":7,\"exit_code\":0}");
	ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
	frame_reader_release(&fr);

	/* before "ready" too, and "ready" after it */
	frame_reader_init(&fr);
	feed_frame(&fr, "{\"type\":\"died\",\"id\":0,\"status\":0}");
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	json_decref(out);
	feed_frame(&fr, "{\"type\":\"ready\",\"python\":\"3.11.2\",\"pid\":3}");
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	json_decref(out);
	frame_reader_release(&fr);

	/* over its size */
	snprintf(big, sizeof(big), "{\"type\":\"died\",\"id\":7,\"status\":0,\"x\":\"%0300d\"}", 0);
	reader_for_exec(&fr, 1 << 20, 10);
	feed_frame(&fr, big);
	ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
	frame_reader_release(&fr);
}
END_TEST

START_TEST(test_frames_hostile)
{
	static const char *const bad[] = {
		"[1,2]", "{\"type\": 3}", "{\"id\": 1}", "not json",
		"{\"type\":\"done\",\"id\":7,\"type\":\"b\"}",
		"{\"type\":\"done\",\"id\":7,\"exit_code\":\"\\u0000\"}x",
		"{\"type\":\"done\",\"id\":7,\"x\":\"\xff\"}",
		"{\"type\":\"\xff\"}",
		/* the head: type first, id second, an integer, this execution's */
		"{\"id\":7,\"type\":\"done\"}", "{\"type\":\"done\"}",
		"{\"type\":\"done\",\"exit_code\":0,\"id\":7}", "{\"type\":\"done\",\"id\":7.0}",
		"{\"type\":\"done\",\"id\":-7}", "{\"type\":\"done\",\"id\":8}",
		"{\"type\":\"Done\",\"id\":7}", "{\"type\":\"ready\",\"id\":7}",
		"{\"type\":\"bogus\",\"id\":7}",
		/* the tree: a handful of values, two levels */
		"{\"type\":\"result\",\"id\":7,\"data\":{\"a\":[[1]]}}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct frame_reader fr;
		json_t *out;

		reader_for_exec(&fr, 1 << 20, 10);
		feed_frame(&fr, bad[i]);
		ck_assert_msg(frame_reader_next(&fr, &out) == -EPROTO, "accepted %s", bad[i]);
		ck_assert(fr.error[0]);
		/* and it stays failed */
		feed_frame(&fr, "{\"type\":\"done\",\"id\":7,\"exit_code\":0}");
		ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
		frame_reader_release(&fr);
	}
	{
		struct frame_reader fr;
		json_t *out;
		unsigned char huge[4] = { 0x01, 0x00, 0x00, 0x01 };	/* 16 MiB + 1 */

		reader_for_exec(&fr, 64u << 20, 10);
		frame_reader_feed(&fr, huge, 4);
		ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
		frame_reader_release(&fr);
	}
}
END_TEST

/* 16 MiB announced: what is wrong shows in the first bytes, and the
 * reader refuses it before it holds the rest. */
START_TEST(test_frames_refused_from_the_head)
{
	static const char *const heads[] = {
		"[{},{},{},{},{},{}",				/* not an object */
		"{\"type\":\"result\",\"id\":8,\"data\":{",	/* another execution */
		"{\"type\":\"error\",\"id\":7,\"name\":\"",	/* longer than an error */
		"{\"type\":\"done\",\"id\":7,\"exit_code\":",	/* longer than a done */
		"{\"data\":{\"text/plain\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	};

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		struct frame_reader fr;
		json_t *out;

		reader_for_exec(&fr, 64u << 20, 10);
		feed_header(&fr, FRAME_MAX);
		ck_assert_int_eq(frame_reader_feed(&fr, heads[i], strlen(heads[i])), 0);
		ck_assert_msg(frame_reader_next(&fr, &out) == -EPROTO, "waited for %s", heads[i]);
		ck_assert(fr.in.cap == 0);	/* given back */
		frame_reader_release(&fr);
	}
}
END_TEST

START_TEST(test_frames_budget)
{
	const char *done = "{\"type\":\"done\",\"id\":7,\"exit_code\":0}";
	struct frame_reader fr;
	json_t *out;

	/* bytes: a result longer than what is left is refused from its head */
	reader_for_exec(&fr, 1000, 10);
	feed_header(&fr, 2000);
	frame_reader_feed(&fr, "{\"type\":\"result\",\"id\":7,", 25);
	ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
	ck_assert_ptr_nonnull(strstr(fr.error, "more than the execution may still send"));
	frame_reader_release(&fr);

	/* frames: one too many */
	reader_for_exec(&fr, 1000, 1);
	feed_frame(&fr, done);
	feed_frame(&fr, done);
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	json_decref(out);
	ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
	frame_reader_release(&fr);

	/* start-up: only a small "ready" */
	frame_reader_init(&fr);
	feed_frame(&fr, done);
	ck_assert_int_eq(frame_reader_next(&fr, &out), -EPROTO);
	frame_reader_release(&fr);
	frame_reader_init(&fr);
	feed_frame(&fr, "{\"type\":\"ready\",\"python\":\"3.11.2\",\"pid\":2}");
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	json_decref(out);
	frame_reader_release(&fr);
}
END_TEST

/* A big frame gets room for itself, not twice that, and gives it back. */
START_TEST(test_frames_buffer_size)
{
	size_t n = 4u << 20;
	char *json = malloc(n + 1);
	struct frame_reader fr;
	json_t *out;
	size_t head;

	ck_assert_ptr_nonnull(json);
	head = (size_t)sprintf(json, "{\"type\":\"result\",\"id\":7,\"data\":{\"text/plain\":\"");
	memset(json + head, 'a', n - head - 3);
	memcpy(json + n - 3, "\"}}", 4);
	reader_for_exec(&fr, 64u << 20, 10);
	feed_header(&fr, n);
	for (size_t off = 0; off < n; off += 65536) {
		ck_assert_int_eq(frame_reader_feed(&fr, json + off, n - off < 65536 ? n - off : 65536), 0);
		if (off + 65536 < n) {
			ck_assert_int_eq(frame_reader_next(&fr, &out), 0);
			ck_assert_uint_le(fr.in.cap, 4 + n + (128u << 10));
		}
	}
	ck_assert_int_eq(frame_reader_next(&fr, &out), 1);
	ck_assert_uint_eq(json_string_length(json_object_get(json_object_get(out, "data"),
							     "text/plain")), n - head - 3);
	json_decref(out);
	ck_assert_uint_le(fr.in.cap, 256u << 10);
	free(json);
	frame_reader_release(&fr);
}
END_TEST

START_TEST(test_result_json)
{
	struct result r;
	json_t *j;

	ck_assert_int_eq(result_init(&r), 0);
	r.status = RESULT_ERROR;
	r.has_exit_code = true;
	r.exit_code = 1;
	result_stream_add(&r.out, "ok\n", 3, 100);
	result_stream_add(&r.err, "bad\xff\0", 5, 100);
	ck_assert_int_eq(result_set_error_str(&r, "ValueError", "boom", "tb"), 0);
	json_array_append_new(r.results, json_pack("{s:s}", "text/plain", "42"));
	j = result_to_json(&r);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "error");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "ok\n");
	ck_assert_ptr_null(json_object_get(j, "stdout_base64"));
	/* invalid UTF-8: replaced in text, exact in base64 */
	ck_assert_uint_eq(json_string_length(json_object_get(j, "stderr")), 3 + 3 + 1);
	ck_assert_str_eq(json_string_value(json_object_get(j, "stderr_base64")), "YmFk/wA=");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"),
							   "name")), "ValueError");
	ck_assert(json_is_null(json_object_get(j, "reason")));
	ck_assert(json_is_null(json_object_get(j, "signal")));
	ck_assert_uint_eq(json_array_size(json_object_get(j, "results")), 1);
	json_decref(j);
	result_release(&r);
}
END_TEST

START_TEST(test_result_caps)
{
	struct result r;

	ck_assert_int_eq(result_init(&r), 0);
	ck_assert_uint_eq(result_stream_add(&r.out, "abcdef", 6, 4), 4);
	ck_assert(r.out.truncated);
	ck_assert_uint_eq(result_stream_add(&r.out, "gh", 2, 4), 0);
	ck_assert_uint_eq(r.out.total, 8);
	ck_assert_uint_eq(r.out.data.len, 4);
	/* a cut inside a character keeps the text valid */
	ck_assert_uint_eq(result_stream_add(&r.err, "a\xe2\x82\xac", 4, 3), 1);
	ck_assert(utf8_valid(r.err.data.data, r.err.data.len));
	ck_assert_int_eq(result_cli_exit_code(&r), 0);
	r.status = RESULT_TIMEOUT;
	ck_assert_int_eq(result_cli_exit_code(&r), 124);
	r.status = RESULT_OOM;
	ck_assert_int_eq(result_cli_exit_code(&r), 137);
	r.status = RESULT_KILLED;
	r.signal = 11;
	ck_assert_int_eq(result_cli_exit_code(&r), 139);
	result_release(&r);
}
END_TEST

START_TEST(test_jstring)
{
	char out[64];
	struct { const char *tok; const char *want; } ok[] = {
		{ "\"\"", "" },
		{ "\"plain\"", "plain" },
		{ "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "a\"b\\c/d\b\f\n\r\t" },
		{ "\"\\u00e9\\u20AC\"", "\xc3\xa9\xe2\x82\xac" },
		{ "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80" },
		{ "\"\xc3\xa9\x7f\"", "\xc3\xa9\x7f" },
	};
	const char *bad[] = {
		"\"\\u0000\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"\\x\"",
		"\"\\u12\"", "\"\x01\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		size_t n = strlen(ok[i].tok);
		long r;

		ck_assert_uint_eq(jstring_token_len(ok[i].tok, n), n);
		r = jstring_decode(ok[i].tok, n, out);
		ck_assert_msg(r == (long)strlen(ok[i].want) && !memcmp(out, ok[i].want, (size_t)r),
			      "decoded %s wrong", ok[i].tok);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(jstring_decode(bad[i], strlen(bad[i]), out) < 0, "accepted %s", bad[i]);
	/* The token ends at the first quote not escaped by an odd run. */
	ck_assert_uint_eq(jstring_token_len("\"a\\\\\"b\"", 7), 5);
	ck_assert_uint_eq(jstring_token_len("\"a\\\"b\"", 6), 6);
	ck_assert_uint_eq(jstring_token_len("\"abc", 4), 0);
}
END_TEST

Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_utf8_valid);
	tcase_add_test(tc, test_utf8_cut);
	tcase_add_test(tc, test_utf8_sanitize);
	tcase_add_test(tc, test_utf8_carry);
	tcase_add_test(tc, test_base64);
	tcase_add_test(tc, test_frames_roundtrip);
	tcase_add_test(tc, test_frames_hostile);
	tcase_add_test(tc, test_frames_died);
	tcase_add_test(tc, test_frames_refused_from_the_head);
	tcase_add_test(tc, test_frames_budget);
	tcase_add_test(tc, test_frames_buffer_size);
	tcase_add_test(tc, test_result_json);
	tcase_add_test(tc, test_result_caps);
	tcase_add_test(tc, test_jstring);
	suite_add_tcase(s, tc);
	return s;
}
