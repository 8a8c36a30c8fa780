#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util/buf.h"

START_TEST(test_append_and_detach)
{
	struct buf b = BUF_INIT;
	size_t len;
	char *s;

	ck_assert_int_eq(buf_append_str(&b, "hello"), 0);
	ck_assert_int_eq(buf_appendf(&b, ", %s %d", "world", 42), 0);
	ck_assert_str_eq(b.data, "hello, world 42");
	buf_consume(&b, 7);
	ck_assert_str_eq(b.data, "world 42");
	s = buf_detach(&b, &len);
	ck_assert_uint_eq(len, 8);
	ck_assert_str_eq(s, "world 42");
	ck_assert_ptr_null(b.data);
	free(s);
}
END_TEST

START_TEST(test_binary_and_growth)
{
	struct buf b = BUF_INIT;
	char chunk[1000];

	memset(chunk, 0, sizeof(chunk));
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(buf_append(&b, chunk, sizeof(chunk)), 0);
	ck_assert_uint_eq(b.len, 1000000);
	ck_assert_int_eq(b.data[b.len], '\0');
	buf_release(&b);
	ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(test_empty_detach)
{
	struct buf b = BUF_INIT;
	size_t len = 99;
	char *s = buf_detach(&b, &len);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

Suite *buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_append_and_detach);
	tcase_add_test(tc, test_binary_and_growth);
	tcase_add_test(tc, test_empty_detach);
	suite_add_tcase(s, tc);
	return s;
}
