/* workspace/ws: the one path rule every front end resolves a client's path
 * by, against the spellings a hostile client tries, and the one result its
 * errors become. */
#include <errno.h>
#include <string.h>

#include "workspace/ws.h"
#include "unit.h"

static char rel[FILES_PATH_MAX + 1], why[160];

/* ws_path() of in, its result; rel and why hold the rest. */
static enum ws_result path(const char *in, const char *root, unsigned flags)
{
	memset(rel, 'X', sizeof(rel));
	why[0] = '\0';
	return ws_path(in, root, flags, rel, why, sizeof(why));
}

#define ACCEPTS(in, root, flags, want) do {					\
	ck_assert_int_eq(path(in, root, flags), WS_OK);				\
	ck_assert_str_eq(rel, want);						\
} while (0)

#define REFUSES(in, root, flags, result, reason) do {				\
	ck_assert_int_eq(path(in, root, flags), result);			\
	ck_assert_str_eq(rel, "");						\
	ck_assert_msg(strstr(why, reason), "'%s': why is '%s'", in, why);	\
} while (0)

START_TEST(the_spellings_of_a_file_in_the_workspace)
{
	ACCEPTS("x", "/work", 0, "x");
	ACCEPTS("a/b.csv", "/work", 0, "a/b.csv");
	ACCEPTS("/work/a/b.csv", "/work", 0, "a/b.csv");
	ACCEPTS("./a/b.csv", "/work", 0, "a/b.csv");
	ACCEPTS("/home/user/a.txt", "/home/user", 0, "a.txt");
	ACCEPTS("a.txt", "/home/user", 0, "a.txt");
	/* Without a root (the HTTP API's), a path is relative, as it is. */
	ACCEPTS("a/b.csv", NULL, 0, "a/b.csv");
}
END_TEST

START_TEST(the_workspace_itself_only_where_a_directory_is_asked_for)
{
	static const char *const spellings[] = { "", ".", "./", "/work", "/work/" };

	for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
		ACCEPTS(spellings[i], "/work", WS_PATH_ROOT, "");
		ck_assert_int_eq(path(spellings[i], "/work", 0), WS_BAD_PATH);
	}
	REFUSES("", "/work", 0, WS_BAD_PATH, "the path is empty");
	ACCEPTS("", NULL, WS_PATH_ROOT, "");
	ACCEPTS("/home/user", "/home/user", WS_PATH_ROOT, "");
	/* "." is a component like any other without a root. */
	REFUSES(".", NULL, WS_PATH_ROOT, WS_BAD_PATH, "'.' or '..'");
}
END_TEST

START_TEST(dot_dot_never_climbs_out)
{
	REFUSES("..", "/work", WS_PATH_ROOT, WS_BAD_PATH, "'..'");
	REFUSES("../etc/passwd", "/work", 0, WS_BAD_PATH, "'..'");
	REFUSES("a/../../x", "/work", 0, WS_BAD_PATH, "'..'");
	REFUSES("/work/../etc/shadow", "/work", 0, WS_BAD_PATH, "'..'");
	REFUSES("/work/a/..", "/work", WS_PATH_ROOT, WS_BAD_PATH, "'..'");
	REFUSES("./../x", "/work", 0, WS_BAD_PATH, "'..'");
	REFUSES("/home/user/../../etc/shadow", "/home/user", 0, WS_BAD_PATH, "'..'");
	REFUSES("a/../b", NULL, 0, WS_BAD_PATH, "'..'");
}
END_TEST

START_TEST(an_absolute_path_elsewhere_is_outside)
{
	REFUSES("/etc/passwd", "/work", 0, WS_ELSEWHERE,
		"only files under /work can be reached: give a path relative to /work or "
		"starting with /work/");
	REFUSES("/", "/work", WS_PATH_ROOT, WS_ELSEWHERE, "only files under /work");
	REFUSES("//work/x", "/work", 0, WS_ELSEWHERE, "only files under /work");
	/* A name that starts like the root's is another name. */
	REFUSES("/workspace/x", "/work", 0, WS_ELSEWHERE, "only files under /work");
	REFUSES("/home/user2/x", "/home/user", 0, WS_ELSEWHERE, "only files under /home/user");
	REFUSES("/home", "/home/user", WS_PATH_ROOT, WS_ELSEWHERE, "/home/user");
	/* Without a root, absolute is a bad path: nothing is outside. */
	REFUSES("/work/x", NULL, 0, WS_BAD_PATH, "must be relative to /work");
	REFUSES("/", NULL, WS_PATH_ROOT | WS_PATH_SLASH, WS_BAD_PATH, "must be relative");
}
END_TEST

START_TEST(an_absolute_path_elsewhere_as_it_is_where_asked_for)
{
	/* For the session layer to find on the sandbox's own filesystems
	 * (or refuse): only the spelling is checked here. */
	ACCEPTS("/tmp/x", "/home/user", WS_PATH_ANYWHERE, "/tmp/x");
	ACCEPTS("/tmp/d/", "/home/user", WS_PATH_ANYWHERE | WS_PATH_SLASH, "/tmp/d");
	ACCEPTS("/tmp", "/home/user", WS_PATH_ANYWHERE, "/tmp");
	ACCEPTS("/", "/home/user", WS_PATH_ANYWHERE | WS_PATH_SLASH, "/");
	ACCEPTS("/etc/passwd", "/work", WS_PATH_ANYWHERE, "/etc/passwd");
	/* Under the root: relative, as ever. */
	ACCEPTS("/home/user/x", "/home/user", WS_PATH_ANYWHERE, "x");
	REFUSES("/tmp/../etc/passwd", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "'..'");
	REFUSES("/tmp/./x", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "'.'");
	REFUSES("//tmp/x", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "empty component");
	REFUSES("/tmp//x", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "empty component");
	REFUSES("/tmp/d/", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "empty component");
	REFUSES("/tmp/a\nb", "/home/user", WS_PATH_ANYWHERE, WS_BAD_PATH, "control character");
	/* Without a root, nothing is elsewhere. */
	REFUSES("/tmp/x", NULL, WS_PATH_ANYWHERE, WS_BAD_PATH, "must be relative");
}
END_TEST

START_TEST(empty_components_are_refused)
{
	REFUSES("a//b", "/work", 0, WS_BAD_PATH, "empty component");
	REFUSES("/work//etc/passwd", "/work", 0, WS_BAD_PATH, "must be relative");
	REFUSES("/home/user//x", "/home/user", 0, WS_BAD_PATH, "must be relative");
}
END_TEST

START_TEST(a_trailing_slash_names_a_directory_where_one_is_taken)
{
	ACCEPTS("d/", "/work", WS_PATH_SLASH, "d");
	ACCEPTS("/work/d/e/", "/work", WS_PATH_ROOT | WS_PATH_SLASH, "d/e");
	ACCEPTS("/home/user/d/", "/home/user", WS_PATH_SLASH, "d");
	ACCEPTS("d/", NULL, WS_PATH_ROOT | WS_PATH_SLASH, "d");
	REFUSES("d/", "/work", 0, WS_BAD_PATH, "empty component");
	/* One slash: "d//" is an empty component before it. */
	REFUSES("d//", "/work", WS_PATH_SLASH, WS_BAD_PATH, "empty component");
}
END_TEST

START_TEST(nul_and_control_characters)
{
	/* A C string ends at its NUL: nothing after it is seen. */
	ACCEPTS("x\0/../../etc/passwd", "/work", 0, "x");
	REFUSES("a\x01b", "/work", 0, WS_BAD_PATH, "control character");
	REFUSES("a\nb", "/home/user", 0, WS_BAD_PATH, "control character");
	REFUSES("a\x7f", NULL, 0, WS_BAD_PATH, "control character");
	REFUSES("\xff\xfe", "/work", 0, WS_BAD_PATH, "UTF-8");
}
END_TEST

START_TEST(long_paths)
{
	static char in[8192];
	char name[FILES_NAME_MAX + 2];

	/* 4096 bytes, in names of 100: the longest path there is. */
	memset(in, 0, sizeof(in));
	for (size_t n = 0; n + 101 < FILES_PATH_MAX; n += 101) {
		memset(in + n, 'a', 100);
		in[n + 100] = '/';
	}
	memset(in + strlen(in), 'b', FILES_PATH_MAX - strlen(in));
	ck_assert_uint_eq(strlen(in), FILES_PATH_MAX);
	ck_assert_int_eq(path(in, "/work", 0), WS_OK);
	ck_assert_str_eq(rel, in);
	in[FILES_PATH_MAX] = 'b';
	REFUSES(in, "/work", 0, WS_BAD_PATH, "longer than 4096 bytes");
	REFUSES(in, NULL, WS_PATH_SLASH, WS_BAD_PATH, "longer than 4096 bytes");
	memset(in, 'c', 6000);
	in[6000] = '\0';
	REFUSES(in, "/home/user", 0, WS_BAD_PATH, "longer than 4096 bytes");
	/* The root's name does not count: it is not part of the path. */
	memmove(in + 6, in, 6001);
	memcpy(in, "/work/", 6);
	REFUSES(in, "/work", 0, WS_BAD_PATH, "longer than 4096 bytes");
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	REFUSES(name, "/work", 0, WS_BAD_PATH, "component is longer than 255 bytes");
}
END_TEST

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
	TCase *tc = tcase_create("path");

	tcase_add_test(tc, the_spellings_of_a_file_in_the_workspace);
	tcase_add_test(tc, the_workspace_itself_only_where_a_directory_is_asked_for);
	tcase_add_test(tc, dot_dot_never_climbs_out);
	tcase_add_test(tc, an_absolute_path_elsewhere_is_outside);
	tcase_add_test(tc, an_absolute_path_elsewhere_as_it_is_where_asked_for);
	tcase_add_test(tc, empty_components_are_refused);
	tcase_add_test(tc, a_trailing_slash_names_a_directory_where_one_is_taken);
	tcase_add_test(tc, nul_and_control_characters);
	tcase_add_test(tc, long_paths);
	suite_add_tcase(s, tc);
	tc = tcase_create("result");
	tcase_add_test(tc, errors_become_one_result_with_words);
	suite_add_tcase(s, tc);
	return s;
}
