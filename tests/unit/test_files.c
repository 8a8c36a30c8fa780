/* runtime/files: the bounded retries of a path lookup the sandbox races.
 *
 * openat2(RESOLVE_IN_ROOT) returns EAGAIN whenever a rename or a mount
 * happened during a ".." step; a sandbox renaming in a loop makes almost
 * every try fail (19,988 of 20,000 in a review).  The lookup must give up
 * with FILES_ECHANGING instead of spinning the daemon's thread.  A fake
 * openat2 stands in for the race, which cannot be made to happen on cue. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>

#include "runtime/files.h"
#include "unit.h"

static int calls, fail_first, fail_errno;

static int fake_open(int dirfd, const char *path, const struct open_how *how)
{
	(void)dirfd;
	(void)path;
	ck_assert(how->resolve & RESOLVE_IN_ROOT);
	if (calls++ < fail_first) {
		errno = fail_errno;
		return -1;
	}
	return 42;
}

static void fake(int first, int err)
{
	calls = 0;
	fail_first = first;
	fail_errno = err;
}

START_TEST(eagain_forever_gives_up)
{
	fake(1 << 30, EAGAIN);
	ck_assert_int_eq(files_open_in(3, "a/b", O_RDONLY, 0, fake_open), FILES_ECHANGING);
	ck_assert_int_le(calls, 64);	/* a few tries, not until it succeeds */
	ck_assert_int_ge(calls, 2);	/* an honest race gets a second try */
}
END_TEST

START_TEST(an_honest_race_is_ridden_out)
{
	fake(1, EAGAIN);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), 42);
	ck_assert_int_eq(calls, 2);
}
END_TEST

START_TEST(eintr_is_retried_and_other_errors_are_not)
{
	fake(3, EINTR);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), 42);
	fake(1 << 30, ENOENT);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), -ENOENT);
	ck_assert_int_eq(calls, 1);
}
END_TEST

Suite *files_suite(void)
{
	Suite *s = suite_create("files");
	TCase *tc = tcase_create("open_in");

	tcase_add_test(tc, eagain_forever_gives_up);
	tcase_add_test(tc, an_honest_race_is_ridden_out);
	tcase_add_test(tc, eintr_is_retried_and_other_errors_are_not);
	suite_add_tcase(s, tc);
	return s;
}
