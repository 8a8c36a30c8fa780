/* util/multipart: multipart/form-data bodies as E2B's SDKs send them
 * (undici's FormData, httpx), and the malformed and hostile ones a client
 * may send instead: each refused with a reason, none read past its end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/multipart.h"
#include "unit.h"

struct got {
	int n;
	char names[8][64], files[8][64], data[8][64];
	bool has_file[8];
};

static int take(void *ctx, const struct multipart_part *p)
{
	struct got *g = ctx;

	if (g->n == 8)
		return -ENOSPC;
	snprintf(g->names[g->n], 64, "%.63s", p->name);
	snprintf(g->files[g->n], 64, "%.63s", p->filename);
	snprintf(g->data[g->n], 64, "%.*s", (int)p->len, p->data);
	g->has_file[g->n] = p->has_filename;
	g->n++;
	return 0;
}

static int parse(const char *body, struct got *g, char *why)
{
	memset(g, 0, sizeof(*g));
	return multipart_parse(body, strlen(body), "XyZ", 100, take, g, why, 160);
}

START_TEST(boundary_from_content_type)
{
	char b[MULTIPART_BOUNDARY_MAX + 1];

	ck_assert_int_eq(multipart_boundary("multipart/form-data; boundary=----abc123", b), 0);
	ck_assert_str_eq(b, "----abc123");
	ck_assert_int_eq(multipart_boundary("multipart/form-data; charset=x; boundary=\"a b\"", b), 0);
	ck_assert_str_eq(b, "a b");
	ck_assert_int_eq(multipart_boundary("Multipart/Form-Data;boundary=q", b), 0);
	ck_assert_int_eq(multipart_boundary("multipart/form-data", b), -EINVAL);
	ck_assert_int_eq(multipart_boundary("multipart/form-data; boundary=", b), -EINVAL);
	ck_assert_int_eq(multipart_boundary("multipart/form-data; xboundary=q", b), -EINVAL);
	ck_assert_int_eq(multipart_boundary("text/plain; boundary=q", b), -EINVAL);
	ck_assert_int_eq(multipart_boundary("multipart/form-data; boundary=\"unterminated", b), -EINVAL);
	ck_assert_int_eq(multipart_boundary("multipart/form-data; boundary=a\x01", b), -EINVAL);
	{
		char ct[400];

		snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%0*d", 201, 0);
		ck_assert_int_eq(multipart_boundary(ct, b), -EINVAL);
	}
}
END_TEST

START_TEST(parts_as_sdks_send_them)
{
	struct got g;
	char why[160];

	ck_assert_int_eq(parse("--XyZ\r\n"
			       "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
			       "Content-Type: application/octet-stream\r\n\r\n"
			       "hello\r\n--XyZ\r\n"
			       "content-disposition: form-data; name=file; filename=\"q\\\"uote\"\r\n\r\n"
			       "\r\n--XyZ\r\n"
			       "Content-Disposition: form-data; name=\"other\"\r\n\r\n"
			       "line\r\n--XyZx\r\ncontent\r\n--XyZ--\r\nepilogue", &g, why), 0);
	ck_assert_int_eq(g.n, 3);
	ck_assert_str_eq(g.names[0], "file");
	ck_assert_str_eq(g.files[0], "/home/user/a.txt");
	ck_assert_str_eq(g.data[0], "hello");
	ck_assert_str_eq(g.files[1], "q\"uote");
	ck_assert_str_eq(g.data[1], "");	/* an empty file */
	ck_assert(!g.has_file[2]);
	/* "\r\n--XyZ" followed by other than CRLF or "--" is content. */
	ck_assert_str_eq(g.data[2], "line\r\n--XyZx\r\ncontent");
}
END_TEST

START_TEST(a_preamble_and_blanks_after_a_delimiter)
{
	struct got g;
	char why[160];

	ck_assert_int_eq(parse("preamble\r\n--XyZ  \r\n\r\nbare\r\n--XyZ--", &g, why), 0);
	ck_assert_int_eq(g.n, 1);
	ck_assert_str_eq(g.data[0], "bare");
}
END_TEST

START_TEST(malformed_bodies_are_refused_before_any_part)
{
	static const char *const bad[] = {
		"",
		"no delimiter at all",
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ntruncated",
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--XyZ",
		"--XyZ\r\nContent-Disposition: form-data; name=\"file\"",
		"--XyZ\r\nContent-Disposition: attachment; name=\"file\"\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nContent-Disposition: form-data; filename=\"open\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nNo colon here\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nX: a\r\n folded\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nX: a\x01\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\n\r\nx\r\n--XyZ  junk",
		/* a good part first: it is not delivered either */
		"--XyZ\r\n\r\nfirst\r\n--XyZ\r\nContent-Disposition: form-data; name\r\n\r\n\r\n--XyZ--",
	};
	struct got g;
	char why[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(parse(bad[i], &g, why) == -EINVAL, "case %zu accepted", i);
		ck_assert_int_eq(g.n, 0);
		ck_assert_msg(why[0], "case %zu has no reason", i);
	}
}
END_TEST

START_TEST(parts_and_headers_are_bounded)
{
	struct got g;
	char why[160];
	size_t cap = 200 * 16 + MULTIPART_HEADERS_MAX * 2 + 100, n = 0;
	char *b = malloc(cap);

	for (int i = 0; i < 101; i++)
		n += (size_t)snprintf(b + n, cap - n, "--XyZ\r\n\r\nx\r\n");
	snprintf(b + n, cap - n, "--XyZ--");
	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(multipart_parse(b, strlen(b), "XyZ", 100, take, &g, why, sizeof(why)),
			 -E2BIG);
	ck_assert_int_eq(g.n, 0);
	n = (size_t)snprintf(b, cap, "--XyZ\r\nX: ");
	memset(b + n, 'a', MULTIPART_HEADERS_MAX);
	n += MULTIPART_HEADERS_MAX;
	snprintf(b + n, cap - n, "\r\n\r\nx\r\n--XyZ--");
	ck_assert_int_eq(multipart_parse(b, strlen(b), "XyZ", 100, take, &g, why, sizeof(why)),
			 -EINVAL);
	free(b);
}
END_TEST

START_TEST(the_callback_stops_the_walk)
{
	struct got g = { .n = 8 };
	char why[160];
	const char *b = "--XyZ\r\n\r\nx\r\n--XyZ--";

	ck_assert_int_eq(multipart_parse(b, strlen(b), "XyZ", 100, take, &g, why, sizeof(why)),
			 -ENOSPC);
}
END_TEST

Suite *multipart_suite(void)
{
	Suite *s = suite_create("multipart");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, boundary_from_content_type);
	tcase_add_test(tc, parts_as_sdks_send_them);
	tcase_add_test(tc, a_preamble_and_blanks_after_a_delimiter);
	tcase_add_test(tc, malformed_bodies_are_refused_before_any_part);
	tcase_add_test(tc, parts_and_headers_are_bounded);
	tcase_add_test(tc, the_callback_stops_the_walk);
	suite_add_tcase(s, tc);
	return s;
}
