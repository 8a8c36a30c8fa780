/* Host uid leases: never one uid for two holders, in one process or two;
 * released and crashed holders free theirs; nothing is left behind. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/lease.h"
#include "unit.h"

#define FIRST 3000000u
#define COUNT 8u

static char dir[64];

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/petri-lease-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0700), 0);
}

static int files_in_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void remove_dir(void)
{
	char path[320];
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

static struct lease_pool *open_pool(void)
{
	struct lease_pool *p;
	char err[256];

	ck_assert_int_eq(lease_pool_open(dir, FIRST, COUNT, &p, err, sizeof(err)), 0);
	return p;
}

START_TEST(test_take_all_distinct)
{
	struct lease_pool *p;
	struct lease l[COUNT], extra;
	bool seen[COUNT] = { false };

	make_dir();
	p = open_pool();
	for (unsigned i = 0; i < COUNT; i++) {
		ck_assert_int_eq(lease_take(p, &l[i]), 0);
		ck_assert_uint_ge(l[i].uid, FIRST);
		ck_assert_uint_lt(l[i].uid, FIRST + COUNT);
		ck_assert(!seen[l[i].uid - FIRST]);
		seen[l[i].uid - FIRST] = true;
	}
	ck_assert_int_eq(lease_count_free(p), 0);
	ck_assert_int_eq(lease_take(p, &extra), -EAGAIN);
	ck_assert_int_eq(extra.fd, -1);
	lease_drop(p, &l[3]);
	ck_assert_int_eq(lease_count_free(p), 1);
	ck_assert_int_eq(lease_take(p, &extra), 0);
	ck_assert_uint_eq(extra.uid, l[3].uid);
	lease_drop(p, &extra);
	for (unsigned i = 0; i < COUNT; i++)
		lease_drop(p, &l[i]);	/* l[3] again: fd -1, left alone */
	ck_assert_int_eq(files_in_dir(), 0);
	ck_assert_int_eq(lease_count_free(p), COUNT);
	lease_pool_free(p);
	remove_dir();
}
END_TEST

/* Two processes taking at the same time split the range between them. */
START_TEST(test_two_processes_disjoint)
{
	int pipes[2][2];
	pid_t pid[2];
	bool seen[COUNT] = { false };
	int got = 0;

	make_dir();
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(pipe(pipes[k]), 0);
		pid[k] = fork();
		ck_assert_int_ge(pid[k], 0);
		if (pid[k] == 0) {
			struct lease_pool *p;
			struct lease l;
			char err[256];

			if (lease_pool_open(dir, FIRST, COUNT, &p, err, sizeof(err)) < 0)
				_exit(2);
			while (lease_take(p, &l) == 0)
				if (write(pipes[k][1], &l.uid, sizeof(l.uid)) != sizeof(l.uid))
					_exit(3);
			close(pipes[k][1]);
			pause();	/* hold them until killed: a crash */
			_exit(0);
		}
		close(pipes[k][1]);
	}
	for (int k = 0; k < 2; k++) {
		uid_t uid;

		while (read(pipes[k][0], &uid, sizeof(uid)) == sizeof(uid)) {
			ck_assert_uint_ge(uid, FIRST);
			ck_assert_uint_lt(uid, FIRST + COUNT);
			ck_assert_msg(!seen[uid - FIRST], "uid %u leased twice", (unsigned)uid);
			seen[uid - FIRST] = true;
			got++;
		}
		close(pipes[k][0]);
	}
	ck_assert_int_eq(got, COUNT);
	/* Both still hold everything: a third holder gets nothing. */
	{
		struct lease_pool *p = open_pool();
		struct lease l;

		ck_assert_int_eq(lease_take(p, &l), -EAGAIN);
		ck_assert_int_eq(lease_count_free(p), 0);
		/* Crash both: their leases are free again, their files stale
		 * until swept. */
		for (int k = 0; k < 2; k++) {
			kill(pid[k], SIGKILL);
			waitpid(pid[k], NULL, 0);
		}
		ck_assert_int_eq(lease_count_free(p), COUNT);
		ck_assert_int_eq(files_in_dir(), COUNT);
		ck_assert_int_eq(lease_sweep(p), COUNT);
		ck_assert_int_eq(files_in_dir(), 0);
		ck_assert_int_eq(lease_take(p, &l), 0);
		lease_drop(p, &l);
		lease_pool_free(p);
	}
	remove_dir();
}
END_TEST

/* Opening a pool sweeps what a dead holder left, and only that. */
START_TEST(test_open_sweeps_stale)
{
	struct lease_pool *p = NULL, *q;
	struct lease held;
	char path[320];
	FILE *f;

	make_dir();
	for (unsigned i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%u", dir, FIRST + i);
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/not-a-uid", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	p = open_pool();
	ck_assert_int_eq(files_in_dir(), 1);	/* only not-a-uid */
	ck_assert_int_eq(lease_take(p, &held), 0);
	q = open_pool();			/* its sweep leaves held alone */
	ck_assert_int_eq(files_in_dir(), 2);
	ck_assert_int_eq(lease_count_free(q), COUNT - 1);
	lease_drop(p, &held);
	lease_pool_free(q);
	lease_pool_free(p);
	unlink(path);
	remove_dir();
}
END_TEST

START_TEST(test_refuses_open_dir)
{
	struct lease_pool *p;
	char err[256];

	make_dir();
	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(lease_pool_open(dir, FIRST, COUNT, &p, err, sizeof(err)), -EPERM);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(err, "writable"));
	ck_assert_int_eq(lease_pool_open(dir, 4294967000u, 1000, &p, err, sizeof(err)),
			 -EINVAL);
	remove_dir();
}
END_TEST

Suite *lease_suite(void)
{
	Suite *s = suite_create("lease");
	TCase *tc = tcase_create("lease");

	tcase_add_test(tc, test_take_all_distinct);
	tcase_add_test(tc, test_two_processes_disjoint);
	tcase_add_test(tc, test_open_sweeps_stale);
	tcase_add_test(tc, test_refuses_open_dir);
	suite_add_tcase(s, tc);
	return s;
}
