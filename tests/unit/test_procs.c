/* The /proc/PID/stat parser of src/jail/procs.c: a line the kernel writes
 * but whose command name the process chose (any bytes, ')' and spaces
 * included, cut to 15), and lines that are not one. */
#include <errno.h>
#include <string.h>

#include "jail/procs.h"
#include "unit.h"

#define LINE(name) "4242 (" name ") S 1 4242 4242 0 -1 4194560 1234 0 0 0 12 3 0 0 20 0 " \
	"2 0 98765 12345678 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"

static int parse(const char *line, struct procs_stat *st)
{
	return procs_parse_stat(line, strlen(line), st);
}

START_TEST(test_a_real_line)
{
	struct procs_stat st;

	ck_assert_int_eq(parse(LINE("python3"), &st), 0);
	ck_assert_str_eq(st.name, "python3");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_int_eq(st.ppid, 1);
	ck_assert_uint_eq(st.cpu_ticks, 15);
	ck_assert_uint_eq(st.threads, 2);
	ck_assert_uint_eq(st.start_ticks, 98765);
	ck_assert_uint_eq(st.rss_pages, 2500);
	/* The fields past rss are not needed: a line that ends there is one. */
	ck_assert_int_eq(parse("7 (x) Z 3 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", &st), 0);
	ck_assert_int_eq(st.state, 'Z');
	ck_assert_int_eq(st.ppid, 3);
}
END_TEST

START_TEST(test_hostile_names)
{
	struct procs_stat st;

	/* Fields are counted after the last ')'. */
	ck_assert_int_eq(parse(LINE(") S 666 (a"), &st), 0);
	ck_assert_str_eq(st.name, ") S 666 (a");
	ck_assert_int_eq(st.ppid, 1);
	ck_assert_int_eq(parse(LINE("a) b) c"), &st), 0);
	ck_assert_str_eq(st.name, "a) b) c");
	/* A name longer than 15 bytes is cut (the kernel's are, a line
	 * that says otherwise is kept within bounds). */
	ck_assert_int_eq(parse(LINE("0123456789abcdefghij"), &st), 0);
	ck_assert_str_eq(st.name, "0123456789abcde");
	ck_assert_int_eq(parse(LINE("new\nline"), &st), 0);
	ck_assert_str_eq(st.name, "new\nline");
	ck_assert_int_eq(parse(LINE(""), &st), 0);
	ck_assert_str_eq(st.name, "");
}
END_TEST

START_TEST(test_not_a_line)
{
	static const char *const bad[] = {
		"", "4242", "4242 (x", "4242 x) S 1", "4242 (x)", "4242 (x) ", "4242 (x) S",
		"4242 (x)  S 1", "4242 (x) S -1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
		"4242 (x) S 1 0 0 0 -1 0 0 0 0 0 99999999999999999999999 0 0 0 20 0 1 0 5 0 0",
		"4242 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0",
		")( S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
	};
	struct procs_stat st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], &st) == -EINVAL, "%s", bad[i]);
	/* Only the bytes given: the rest of a buffer is never read. */
	ck_assert_int_eq(procs_parse_stat(LINE("x"), 20, &st), -EINVAL);
}
END_TEST

Suite *procs_suite(void)
{
	Suite *s = suite_create("procs");
	TCase *tc = tcase_create("stat");

	tcase_add_test(tc, test_a_real_line);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_not_a_line);
	suite_add_tcase(s, tc);
	return s;
}
