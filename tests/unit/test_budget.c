/* config/budget.h over made-up hosts: the defaults fit the smallest
 * default pid_max, an operator's impossible setting is refused with its
 * numbers, a setting left to petri is sized. */
#include <errno.h>
#include <string.h>

#include "config/budget.h"
#include "jail/jail.h"
#include "unit.h"

/* Linux's default pid_max on a small machine, Debian's pty defaults. */
static const struct host_tables small_host = {
	.pid_max = 32768, .threads_max = 192735, .pty_max = 4096, .pty_reserve = 1024,
};

START_TEST(test_defaults_fit_a_small_host)
{
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), 0);
	/* 100 sessions at the default 1024 pids would be 101,000: lowered */
	ck_assert(b.pids_sized);
	ck_assert_uint_eq(b.pid_reserve, 4096);
	ck_assert_uint_eq(b.pids, (32768 - 4096 - 10 * BUDGET_IDLE_PIDS) / 101);
	ck_assert_uint_eq(c.max.pids, b.pids);
	ck_assert_uint_ge(c.max.pids, c.defaults.pids);
	ck_assert_uint_le(b.pid_worst, 32768 - 4096);
	/* 3072 ptys for sandboxes, 768 kept: 22 each for 101 */
	ck_assert(b.ptys_sized);
	ck_assert_uint_eq(b.pty_reserve, 768);
	ck_assert_uint_eq(c.ptys, 2304 / 101);
	ck_assert_uint_le(b.pty_worst, 3072 - 768);
	config_release(&c);
}
END_TEST

/* petri run holds one sandbox: the defaults stand on a small host. */
START_TEST(test_one_session)
{
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	ck_assert_int_eq(budget_apply(&c, &small_host, 1, &b, err, sizeof(err)), 0);
	ck_assert(!b.pids_sized && !b.ptys_sized);
	ck_assert_uint_eq(c.max.pids, 1024);
	ck_assert_uint_eq(c.ptys, JAIL_PTYS_DEFAULT);
	ck_assert_uint_eq(b.pid_worst, 2 * 1024 + 10 * BUDGET_IDLE_PIDS);
	config_release(&c);
}
END_TEST

/* A large host: nothing to lower. */
START_TEST(test_defaults_untouched_on_a_large_host)
{
	struct host_tables h = { .pid_max = 4194304, .threads_max = 4000000,
				 .pty_max = 65536, .pty_reserve = 1024 };
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	ck_assert_int_eq(budget_apply(&c, &h, c.max_sessions, &b, err, sizeof(err)), 0);
	ck_assert(!b.pids_sized && !b.ptys_sized);
	ck_assert_uint_eq(c.max.pids, 1024);
	ck_assert_uint_eq(c.ptys, JAIL_PTYS_DEFAULT);
	/* threads-max, the smaller, is the table */
	ck_assert_uint_eq(b.pid_table, 4000000);
	ck_assert_uint_eq(b.pid_reserve, 500000);
	config_release(&c);
}
END_TEST

START_TEST(test_explicit_pids_refused_with_numbers)
{
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	c.max_sessions = 40;
	c.max.pids = 1024;
	c.max_pids_set = true;
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "[max_limits] pids = 1024"));
	ck_assert_ptr_nonnull(strstr(err, "max_sessions = 40"));
	ck_assert_ptr_nonnull(strstr(err, "kernel.pid_max = 32768"));
	ck_assert_ptr_nonnull(strstr(err, "4096 kept for the host"));
	ck_assert_uint_eq(c.max.pids, 1024);	/* unchanged */
	/* what fits is accepted as it is */
	c.max.pids = 512;
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), 0);
	ck_assert(!b.pids_sized);
	ck_assert_uint_eq(c.max.pids, 512);
	config_release(&c);
}
END_TEST

/* Too many sessions even at the default limit: refused, never sized
 * below [limits] pids. */
START_TEST(test_defaults_that_cannot_fit_refused)
{
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	c.max_sessions = 200;
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "max_sessions = 200"));
	ck_assert_ptr_nonnull(strstr(err, "[limits] pids = 256"));
	config_release(&c);
}
END_TEST

START_TEST(test_threads_max_is_a_table_too)
{
	struct host_tables h = small_host;
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	h.threads_max = 20000;
	config_defaults(&c);
	c.max_sessions = 40;
	c.max.pids = 512;
	c.max_pids_set = true;
	ck_assert_int_eq(budget_apply(&c, &h, c.max_sessions, &b, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "kernel.threads-max = 20000"));
	config_release(&c);
}
END_TEST

START_TEST(test_ptys)
{
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	c.ptys = 64;
	c.ptys_set = true;
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ptys = 64 in [sandbox]"));
	ck_assert_ptr_nonnull(strstr(err, "kernel.pty.max = 4096"));
	ck_assert_ptr_nonnull(strstr(err, "at most 22 each fits"));
	c.ptys = 8;
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.ptys, 8);
	ck_assert(!b.ptys_sized);
	/* left to petri, but not even BUDGET_MIN_PTYS each fits */
	c.ptys_set = false;
	c.ptys = JAIL_PTYS_DEFAULT;
	c.max_sessions = 1000;
	c.defaults.pids = 8;	/* the pid table is not what fails */
	ck_assert_int_eq(budget_apply(&c, &small_host, c.max_sessions, &b, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "cannot each have 4 ptys"));
	config_release(&c);
}
END_TEST

/* A host that does not show a table: that table is not checked. */
START_TEST(test_unknown_tables_not_checked)
{
	struct host_tables h = { 0 };
	struct petri_config c;
	struct budget b;
	char err[1024] = "";

	config_defaults(&c);
	c.max_sessions = 100000;
	ck_assert_int_eq(budget_apply(&c, &h, c.max_sessions, &b, err, sizeof(err)), 0);
	ck_assert_uint_eq(b.pid_table, 0);
	ck_assert_uint_eq(b.pty_table, 0);
	ck_assert_uint_eq(c.max.pids, 1024);
	ck_assert_uint_eq(c.ptys, JAIL_PTYS_DEFAULT);
	config_release(&c);
}
END_TEST

Suite *budget_suite(void)
{
	Suite *s = suite_create("budget");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_defaults_fit_a_small_host);
	tcase_add_test(tc, test_defaults_untouched_on_a_large_host);
	tcase_add_test(tc, test_one_session);
	tcase_add_test(tc, test_explicit_pids_refused_with_numbers);
	tcase_add_test(tc, test_defaults_that_cannot_fit_refused);
	tcase_add_test(tc, test_threads_max_is_a_table_too);
	tcase_add_test(tc, test_ptys);
	tcase_add_test(tc, test_unknown_tables_not_checked);
	suite_add_tcase(s, tc);
	return s;
}
