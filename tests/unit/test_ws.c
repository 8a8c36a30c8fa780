/* runtime/ws: the one result the workspace's errors become. */
#include <errno.h>

#include "runtime/ws.h"
#include "unit.h"

START_TEST(errors_become_one_result_with_words)
{
	ck_assert_int_eq(ws_result_of(0), WS_OK);
	ck_assert_int_eq(ws_result_of(-ENOENT), WS_NOT_FOUND);
	ck_assert_int_eq(ws_result_of(-ENXIO), WS_NOT_REGULAR);
	ck_assert_int_eq(ws_result_of(-EDQUOT), WS_FULL);
	ck_assert_int_eq(ws_result_of(FILES_ECHANGING), WS_CHANGING);
	ck_assert_int_eq(ws_result_of(-EIO), WS_FAILED);
	ck_assert_str_eq(ws_result_code(WS_NOT_FOUND), "file_not_found");
	ck_assert_str_eq(ws_result_message(WS_NOT_FOUND), "no such file or directory");
	for (int r = 0; r < WS_RESULTS; r++) {
		ck_assert_ptr_nonnull(ws_result_message((enum ws_result)r));
		ck_assert_ptr_nonnull(ws_result_code((enum ws_result)r));
	}
	ck_assert_str_eq(ws_result_code((enum ws_result)WS_RESULTS), "internal");
}
END_TEST

Suite *ws_suite(void)
{
	Suite *s = suite_create("ws");
	TCase *tc = tcase_create("result");

	tcase_add_test(tc, errors_become_one_result_with_words);
	suite_add_tcase(s, tc);
	return s;
}
