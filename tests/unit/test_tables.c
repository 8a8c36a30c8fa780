/* The host's tables and petri's budget of them (src/session/tables.h):
 * read from a /proc of the same layout, the host's reserve kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/tables.h"
#include "unit.h"

static char root[64];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/sys/kernel/%s", root, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void fake_proc(const char *pid_max, const char *threads_max, const char *pty_max,
		      const char *pty_reserve)
{
	char path[256];

	snprintf(root, sizeof(root), "/tmp/petri-tables-unit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/sys", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sys/kernel", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sys/kernel/pty", root);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	put("pid_max", pid_max);
	put("threads-max", threads_max);
	if (pty_max)
		put("pty/max", pty_max);
	put("pty/reserve", pty_reserve);
}

static void fake_remove(void)
{
	if (!root[0])
		return;
	static const char *const names[] = {
		"sys/kernel/pid_max", "sys/kernel/threads-max", "sys/kernel/pty/max",
		"sys/kernel/pty/reserve", "sys/kernel/pty", "sys/kernel", "sys", "",
	};
	char path[256];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, names[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
	root[0] = '\0';
}

/* The kernel's defaults: 32768 pids, 4096 ptys of which 1024 are the
 * host's.  An eighth of the pids and the kernel's first 300 stay out; a
 * quarter of the sandboxes' ptys is left to other containers. */
START_TEST(test_the_kernel_defaults)
{
	struct host_tables t;

	fake_proc("32768\n", "192735\n", "4096\n", "1024\n");
	ck_assert_int_eq(host_tables_read(root, &t), 0);
	ck_assert_uint_eq(t.pid_max, 32768);
	ck_assert_uint_eq(t.threads_max, 192735);
	ck_assert_uint_eq(host_tasks_budget(&t), 32768 - 300 - 4096);
	ck_assert_uint_eq(host_ptys_budget(&t), 3072 - 768);
	/* petri's defaults fit: 100 sessions, a pool of 8 and the probe at
	 * pids 256; 108 sandboxes at 16 ptys */
	ck_assert_uint_le(109 * 256, host_tasks_budget(&t));
	ck_assert_uint_le(109 * 16, host_ptys_budget(&t));
}
END_TEST

/* The smaller of pid_max and threads-max bounds the tasks; a tiny table
 * leaves nothing after the reserve (at least 2048); systemd's 4194304
 * keeps an eighth. */
START_TEST(test_the_smaller_table_and_the_reserve)
{
	struct host_tables t = { .pid_max = 4194304, .threads_max = 20000 };

	ck_assert_uint_eq(host_tasks_budget(&t), 20000 - 300 - 2500);
	t.threads_max = 2000;
	ck_assert_uint_eq(host_tasks_budget(&t), 0);
	t.threads_max = 4194304;
	ck_assert_uint_eq(host_tasks_budget(&t), 4194304 - 300 - 524288);
	t.pty_max = 1000;
	t.pty_reserve = 1024;
	ck_assert_uint_eq(host_ptys_budget(&t), 0);
}
END_TEST

/* A table that cannot be read, or is not a number, is an error and reads
 * as nothing. */
START_TEST(test_unreadable_tables)
{
	struct host_tables t;

	fake_proc("32768\n", "192735\n", NULL, "1024\n");
	ck_assert_int_eq(host_tables_read(root, &t), -ENOENT);
	ck_assert_uint_eq(t.pid_max, 0);
	put("pty/max", "-1\n");
	ck_assert_int_eq(host_tables_read(root, &t), -EINVAL);
	put("pty/max", "");
	ck_assert_int_eq(host_tables_read(root, &t), -EINVAL);
}
END_TEST

Suite *tables_suite(void)
{
	Suite *s = suite_create("tables");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, NULL, fake_remove);

	tcase_add_test(tc, test_the_kernel_defaults);
	tcase_add_test(tc, test_the_smaller_table_and_the_reserve);
	tcase_add_test(tc, test_unreadable_tables);
	suite_add_tcase(s, tc);
	return s;
}
