/* Unit tests of src/jail/cgroup.c.
 *
 * Three groups:
 *   fake  cgroup v1 and v2 trees made of plain files in a temporary
 *         directory: detection, limits written, statistics parsed,
 *         naming, sweep, hostile cgroup.procs content.
 *   real  this host's cgroups (needs root): v1 under /sys/fs/cgroup with
 *         the parent "/petri-unit-<pid>", and cgroup v2 on the controller-
 *         less mount /sys/fs/cgroup/unified, which cg_manager_new() accepts
 *         as "v2 without controllers" (kill, membership and CPU time work,
 *         limits are absent).  Each skips, saying why, when not root or
 *         when its hierarchy is not mounted.
 *
 * Fake trees and rmdir: the library only ever rmdirs (on cgroupfs control
 * files vanish with their directory); it never unlinks files.  So in fake
 * trees, stale cgroups for the sweep are made as empty directories and the
 * tests unlink the files cg_create() wrote before calling cg_destroy().
 *
 * Clean-up survives failures: tests run in forked children (CK_FORK), so an
 * unchecked fixture, which runs in the runner process, removes the temporary
 * tree and kills and removes every real cgroup under the test prefix; a
 * checked one does the same before each real test, so that one failure
 * does not spill into the next test.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "unit.h"

#define MiB (1024ull * 1024ull)
#define REAL_ROOT "/sys/fs/cgroup"
#define REAL_V2 "/sys/fs/cgroup/unified"

/* Set in the runner process by the unchecked setup, inherited by tests. */
static char fake_base[PATH_MAX];
static char real_prefix[64];

/* The v1 hierarchies cgroup.c uses, in its order. */
static const char *const ctrls[5] = {
	"memory", "pids", "cpu", "cpuacct", "freezer",
};

static const char *const real_hiers[] = {
	"memory", "pids", "cpu", "cpuacct", "freezer", "unified",
};

/* ---- file helpers ------------------------------------------------------- */

/* snprintf for paths; a test path never comes near PATH_MAX. */
static void pathf(char *out, size_t len, const char *fmt, ...)
		  __attribute__((format(printf, 3, 4)));
static void pathf(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, len, fmt, ap);
	va_end(ap);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	int fd;

	pathf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "cannot create '%s': %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void mkdirf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirf(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	ck_assert_msg(mkdir(path, 0755) == 0, "cannot mkdir '%s': %s", path,
		      strerror(errno));
}

static bool existsf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool existsf(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return access(path, F_OK) == 0;
}

/* The file's content, or "<missing>". */
static const char *rd(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	pathf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "<missing>";
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

#define ck_file(dir, name, expect)                                          \
	do {                                                                \
		char b_[256];                                               \
		ck_assert_str_eq(rd(dir, name, b_, sizeof(b_)), expect);    \
	} while (0)

/* Fake trees only: what cgroupfs does by itself on rmdir. */
static void unlink_files(const char *dir)
{
	struct dirent *e;
	DIR *d = opendir(dir);

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_type == DT_REG)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	remove(path);
	return 0;
}

/* For clean-up paths, where a failed assertion must not stop the rest. */
static void try_put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	int fd;

	pathf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0)
		fprintf(stderr, "test_cgroup: cannot write '%s'\n", path);
	close(fd);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static unsigned long long self_starttime(void)
{
	char buf[4096];
	const char *p;
	unsigned long long start = 0;

	rd("/proc/self", "stat", buf, sizeof(buf));
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	/* Fields 3..21 skipped, then field 22. */
	ck_assert_int_eq(sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				"%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &start), 1);
	return start;
}

/* A pid that just stopped existing. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

static bool pid_listed(const char *dir, pid_t pid)
{
	char buf[65536], *save = NULL;

	rd(dir, "cgroup.procs", buf, sizeof(buf));
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
		if (atoi(t) == pid)
			return true;
	return false;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- fake trees --------------------------------------------------------- */

static void fake_v2(char *root, size_t len, const char *name,
		    const char *controllers)
{
	pathf(root, len, "%s/%s", fake_base, name);
	mkdirf("%s", root);
	put(root, "cgroup.controllers", controllers);
	put(root, "cgroup.subtree_control", "");
	put(root, "cgroup.procs", "");
}

static void fake_v1(char *root, size_t len, const char *name, bool memsw,
		    bool freezer)
{
	char dir[PATH_MAX];

	pathf(root, len, "%s/%s", fake_base, name);
	mkdirf("%s", root);
	for (size_t i = 0; i < 5; i++) {
		if (!freezer && !strcmp(ctrls[i], "freezer"))
			continue;
		pathf(dir, sizeof(dir), "%s/%s", root, ctrls[i]);
		mkdirf("%s", dir);
		put(dir, "cgroup.procs", "");
	}
	if (memsw) {
		pathf(dir, sizeof(dir), "%s/memory", root);
		put(dir, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
	}
}

static struct cg_manager *manager(const char *root, const char *parent)
{
	struct cg_manager *m = NULL;
	char err[256] = "";
	int rc = cg_manager_new(root, parent, &m, err, sizeof(err));

	ck_assert_msg(rc == 0, "cg_manager_new('%s'): %d %s", root, rc, err);
	ck_assert_ptr_nonnull(m);
	return m;
}

/* A fake tree's cgroup.procs never empties by itself: the tests that make
 * cg_kill() give up wait this long, not the daemon's 2 s. */
#define FAKE_KILL_MS 100

static struct cg_manager *manager_short_kill(const char *root, const char *parent)
{
	struct cg_manager *m = manager(root, parent);

	cg_manager_set_kill_timeout(m, FAKE_KILL_MS);
	return m;
}

/* Unlink the fake files of cg in each v1 hierarchy, or its one v2 dir. */
static void fake_destroy(struct cg *cg, const char *root, bool v1)
{
	char dir[PATH_MAX], name[128], parent_rel[PATH_MAX], path[PATH_MAX];

	pathf(path, sizeof(path), "%s", cg_path(cg));
	pathf(name, sizeof(name), "%s", base_name(path));
	if (!v1) {
		unlink_files(path);
	} else {
		/* path is <root>/memory/<parent>/<name> */
		pathf(parent_rel, sizeof(parent_rel), "%s",
		      path + strlen(root) + strlen("/memory"));
		parent_rel[strlen(parent_rel) - strlen(name) - 1] = '\0';
		for (size_t i = 0; i < 5; i++) {
			pathf(dir, sizeof(dir), "%s/%s%s/%s", root, ctrls[i],
			      parent_rel, name);
			if (existsf("%s", dir))
				unlink_files(dir);
		}
	}
	ck_assert_int_eq(cg_destroy(cg), 0);
	ck_assert(!existsf("%s", path));
}

/* ---- fake v2 ------------------------------------------------------------ */

START_TEST(test_v2_fake_create)
{
	struct cg_limits lim = { 64 * MiB, 32, 500, 250 };
	struct cg_manager *m;
	char root[PATH_MAX], parent[PATH_MAX];
	const char *path;
	struct cg *cg;

	fake_v2(root, sizeof(root), "v2", "cpuset cpu io memory hugetlb pids rdma\n");
	/* The kernel would make memory.swap.max appear in /petri once the
	 * root enables memory; the fake does it beforehand. */
	mkdirf("%s/petri", root);
	pathf(parent, sizeof(parent), "%s/petri", root);
	put(parent, "memory.swap.max", "max\n");

	m = manager(root, NULL);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	ck_assert(cg_has_memory(m) && cg_has_pids(m) && cg_has_cpu(m));
	ck_assert(cg_has_swap(m));
	ck_assert_str_eq(cg_parent_dir(m), parent);
	ck_file(root, "cgroup.subtree_control", "+memory +pids +cpu");
	ck_file(parent, "cgroup.subtree_control", "+memory +pids +cpu");

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	ck_assert_int_eq(strncmp(path, parent, strlen(parent)), 0);
	ck_file(path, "memory.max", "67108864");
	ck_file(path, "memory.swap.max", "0");
	/* Not written: an OOM kills one process, not the keeper with it. */
	ck_file(path, "memory.oom.group", "<missing>");
	ck_file(path, "pids.max", "32");
	ck_file(path, "cpu.max", "50000 100000");
	ck_file(path, "cpu.weight", "250");
	/* A pooled sandbox taken by a session: its weight changes. */
	ck_assert_int_eq(cg_set_cpu_weight(cg, 100), 0);
	ck_file(path, "cpu.weight", "100");
	ck_assert_int_eq(cg_set_cpu_weight(cg, 0), -EINVAL);
	ck_assert_int_eq(cg_set_cpu_weight(cg, CG_WEIGHT_MAX + 1), -EINVAL);
	ck_file(path, "cpu.weight", "100");

	ck_assert_int_eq(cg_add_pid(cg, 2147483000), 0);
	ck_file(path, "cgroup.procs", "2147483000");
	ck_assert_int_eq(cg_add_pid(cg, 0), -EINVAL);
	ck_assert_int_eq(cg_add_pid(cg, -1), -EINVAL);
	put(path, "cgroup.procs", "");
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v2_fake_nested_parent_and_partial)
{
	struct cg_limits lim = { 8 * MiB, 0, 1, 300 };
	struct cg_manager *m;
	char root[PATH_MAX], dir[PATH_MAX];
	struct cg *cg;

	/* No cpu: cpu.max is skipped.  No memory.swap.max in the parent:
	 * swap accounting is off, memory.swap.max is not written. */
	fake_v2(root, sizeof(root), "v2n", "memory pids");
	m = manager(root, "//a/b/");
	ck_assert(cg_has_memory(m) && cg_has_pids(m) && !cg_has_cpu(m));
	ck_assert(!cg_has_swap(m));
	pathf(dir, sizeof(dir), "%s/a/b", root);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_file(root, "cgroup.subtree_control", "+memory +pids");
	pathf(dir, sizeof(dir), "%s/a", root);
	ck_file(dir, "cgroup.subtree_control", "+memory +pids");
	pathf(dir, sizeof(dir), "%s/a/b", root);
	ck_file(dir, "cgroup.subtree_control", "+memory +pids");

	/* Already enabled: nothing is rewritten. */
	put(root, "cgroup.subtree_control", "memory pids\n");
	cg_manager_free(m);
	m = manager(root, "/a/b");
	ck_file(root, "cgroup.subtree_control", "memory pids\n");

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	ck_file(cg_path(cg), "memory.max", "8388608");
	ck_file(cg_path(cg), "memory.swap.max", "<missing>");
	ck_file(cg_path(cg), "pids.max", "<missing>");
	ck_file(cg_path(cg), "cpu.max", "<missing>");
	ck_file(cg_path(cg), "cpu.weight", "<missing>");
	ck_assert_int_eq(cg_set_cpu_weight(cg, 100), 0);
	ck_file(cg_path(cg), "cpu.weight", "<missing>");
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v2_fake_stats_and_peak_reset)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m;
	struct cg_stats st;
	char root[PATH_MAX];
	const char *path;
	struct cg *cg;

	fake_v2(root, sizeof(root), "v2s", "cpu memory pids");
	m = manager(root, "/petri");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	ck_file(path, "memory.max", "<missing>");	/* 0: no limit */

	put(path, "cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"
			       "nr_periods 0\n");
	/* oom_group_kill first: the key must match whole. */
	put(path, "memory.events", "low 0\nhigh 0\nmax 7\noom 3\n"
				   "oom_group_kill 5\noom_kill 2\n");
	put(path, "memory.peak", "123456\n");
	put(path, "memory.current", "4096\n");
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.cpu_ns, 1500000);
	ck_assert_uint_eq(st.memory_peak, 123456);
	ck_assert_uint_eq(st.memory_current, 4096);
	ck_assert_uint_eq(st.oom_kills, 2);

	/* The reset goes through the fd that is kept open, and later reads use
	 * that same fd: a rewrite of the file (same inode) shows through it. */
	ck_assert_int_eq(cg_reset_peak(cg), 0);
	ck_file(path, "memory.peak", "reset\n\n");
	put(path, "memory.peak", "777\n");
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.memory_peak, 777);

	/* Missing files read as 0. */
	unlink_files(path);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.cpu_ns, 0);
	ck_assert_uint_eq(st.memory_current, 0);
	ck_assert_uint_eq(st.oom_kills, 0);

	/* Garbage is an error, not a number. */
	put(path, "memory.current", "12kB\n");
	ck_assert_int_eq(cg_stats(cg, &st), -EINVAL);
	put(path, "memory.current", "99999999999999999999999\n");
	ck_assert_int_eq(cg_stats(cg, &st), -ERANGE);
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v2_fake_kill_hostile_procs)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], procs[128];
	const char *path;
	int64_t t0, dt;
	struct cg *cg;

	fake_v2(root, sizeof(root), "v2k", "");
	m = manager_short_kill(root, "/petri");
	ck_assert(!cg_has_memory(m) && !cg_has_pids(m) && !cg_has_cpu(m));
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	put(path, "cgroup.kill", "");
	/* 0 (kill(0) would hit our process group), ourselves, and a pid
	 * beyond PID_MAX_LIMIT: none may be signalled, the cgroup never
	 * empties, cg_kill gives up at the kill timeout (never before it; a
	 * hang is the test case's timeout). */
	pathf(procs, sizeof(procs), "0\n%d\n2147483647\n", (int)getpid());
	put(path, "cgroup.procs", procs);
	ck_assert_int_eq(cg_count_procs(cg), 3);
	t0 = mono_ms();
	ck_assert_int_eq(cg_kill(cg), -EBUSY);
	dt = mono_ms() - t0;
	ck_assert_int_ge(dt, FAKE_KILL_MS);
	ck_file(path, "cgroup.kill", "1");
	/* Without cgroup.kill (kernels before 5.14): the kill loop, which
	 * must not signal those either. */
	unlink_files(path);
	put(path, "cgroup.procs", procs);
	ck_assert_int_eq(cg_kill(cg), -EBUSY);
	put(path, "cgroup.procs", "");
	ck_assert_int_eq(cg_kill(cg), 0);
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_procs_parsing)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], *big;
	const char *path;
	struct cg *cg;

	fake_v2(root, sizeof(root), "procs", "");
	m = manager(root, "/petri");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	ck_assert_int_eq(cg_count_procs(cg), 0);	/* no file: empty */
	put(path, "cgroup.procs", "");
	ck_assert_int_eq(cg_count_procs(cg), 0);
	/* Well-formed: 12, 0, 2147483647 and the final 8 without '\n'. */
	put(path, "cgroup.procs", "12\n\n-3\n+4\n0\n 5\n6 \n99999999999\n"
				  "2147483648\n2147483647\n7a\n0x10\n8");
	ck_assert_int_eq(cg_count_procs(cg), 4);

	/* A line longer than any pid, split across reads, is one bad line. */
	big = malloc(20000);
	ck_assert_ptr_nonnull(big);
	memset(big, '1', 9000);
	memcpy(big + 9000, "\n42\n", 5);
	put(path, "cgroup.procs", big);
	free(big);
	ck_assert_int_eq(cg_count_procs(cg), 1);
	put(path, "cgroup.procs", "");
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

/* Fork a child that joins cg as the upload writer does; its cg_join_self()
 * result (0 or an errno), as the exit code. */
/* A child as jail_fork_charged() makes it: a raw clone, so that no fork
 * handler runs (a sanitizer's would start a thread in the child, which the
 * pids limit of a join counts). */
static pid_t raw_fork(void)
{
	return (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
}

static int join_in_child(struct cg *cg)
{
	struct cg_join cj;
	int status;
	pid_t pid;

	ck_assert_int_eq(cg_join_open(cg, &cj), 0);
	pid = raw_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(-cg_join_self(&cj));
	cg_join_close(&cj);
	for (size_t i = 0; i < CG_JOIN_MAX; i++)
		ck_assert_int_eq(cj.procs[i], -1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(test_v2_fake_join)
{
	struct cg_limits lim = { 64 * MiB, 8, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX];
	struct cg *cg;

	fake_v2(root, sizeof(root), "v2join", "memory pids");
	m = manager(root, "/petri");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	put(cg_path(cg), "cgroup.procs", "");
	/* Without pids.current the join cannot check the limit: refused. */
	ck_assert_int_ne(cg_join_open(cg, &(struct cg_join){ 0 }), 0);
	put(cg_path(cg), "pids.current", "3\n");
	ck_assert_int_eq(join_in_child(cg), 0);
	ck_file(cg_path(cg), "cgroup.procs", "0");	/* "0": the writer itself */
	/* The kernel counts the newcomer: 9 of 8 is one too many. */
	put(cg_path(cg), "pids.current", "9\n");
	ck_assert_int_eq(join_in_child(cg), EAGAIN);
	put(cg_path(cg), "pids.current", "8\n");
	ck_assert_int_eq(join_in_child(cg), 0);
	put(cg_path(cg), "pids.max", "max\n");
	put(cg_path(cg), "pids.current", "100000\n");
	ck_assert_int_eq(join_in_child(cg), 0);
	fake_destroy(cg, root, false);
	cg_manager_free(m);
}
END_TEST

/* ---- fake v1 ------------------------------------------------------------ */

START_TEST(test_v1_fake_join)
{
	struct cg_limits lim = { 64 * MiB, 4, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], dir[PATH_MAX], name[128];
	struct cg *cg;

	fake_v1(root, sizeof(root), "v1join", false, true);
	m = manager(root, "/p");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	pathf(name, sizeof(name), "%s", base_name(cg_path(cg)));
	for (size_t i = 0; i < 5; i++) {
		pathf(dir, sizeof(dir), "%s/%s/p/%s", root, ctrls[i], name);
		put(dir, "cgroup.procs", "");
	}
	pathf(dir, sizeof(dir), "%s/pids/p/%s", root, name);
	put(dir, "pids.current", "5\n");
	ck_assert_int_eq(join_in_child(cg), EAGAIN);
	put(dir, "pids.current", "2\n");
	ck_assert_int_eq(join_in_child(cg), 0);
	/* Every hierarchy, memory first among them, got the writer. */
	for (size_t i = 0; i < 5; i++) {
		pathf(dir, sizeof(dir), "%s/%s/p/%s", root, ctrls[i], name);
		ck_file(dir, "cgroup.procs", "0");
	}
	fake_destroy(cg, root, true);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v1_fake_create)
{
	struct cg_limits lim = { 100 * MiB, 50, 2500, 50 };
	struct cg_manager *m;
	char root[PATH_MAX], dir[PATH_MAX], name[128];
	struct cg *cg;

	fake_v1(root, sizeof(root), "v1", true, true);
	pathf(dir, sizeof(dir), "%s/memory", root);
	put(dir, "memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n");
	m = manager(root, "/petri-x/y");
	ck_assert_int_eq(cg_version(m), JAIL_CG_V1);
	ck_assert(cg_has_memory(m) && cg_has_pids(m) && cg_has_cpu(m));
	ck_assert(cg_has_swap(m));
	pathf(dir, sizeof(dir), "%s/memory/petri-x/y", root);
	ck_assert_str_eq(cg_parent_dir(m), dir);

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	pathf(name, sizeof(name), "%s", base_name(cg_path(cg)));
	pathf(dir, sizeof(dir), "%s/memory/petri-x/y/%s", root, name);
	ck_assert_str_eq(cg_path(cg), dir);
	for (size_t i = 0; i < 5; i++)
		ck_assert_msg(existsf("%s/%s/petri-x/y/%s", root, ctrls[i], name),
			      "no cgroup in '%s'", ctrls[i]);
	ck_file(dir, "memory.limit_in_bytes", "104857600");
	ck_file(dir, "memory.memsw.limit_in_bytes", "104857600");
	/* Socket buffers charged too: a quarter of the memory limit. */
	ck_file(dir, "memory.kmem.tcp.limit_in_bytes", "26214400");
	pathf(dir, sizeof(dir), "%s/pids/petri-x/y/%s", root, name);
	ck_file(dir, "pids.max", "50");
	pathf(dir, sizeof(dir), "%s/cpu/petri-x/y/%s", root, name);
	ck_file(dir, "cpu.cfs_period_us", "100000");
	ck_file(dir, "cpu.cfs_quota_us", "250000");
	/* v1's scale: 1024 shares per 100 of weight. */
	ck_file(dir, "cpu.shares", "512");
	ck_assert_int_eq(cg_set_cpu_weight(cg, 1), 0);
	ck_file(dir, "cpu.shares", "10");
	ck_assert_int_eq(cg_set_cpu_weight(cg, CG_WEIGHT_MAX), 0);
	ck_file(dir, "cpu.shares", "102400");

	/* Every hierarchy gets the pid. */
	ck_assert_int_eq(cg_add_pid(cg, 2147483000), 0);
	for (size_t i = 0; i < 5; i++) {
		pathf(dir, sizeof(dir), "%s/%s/petri-x/y/%s", root, ctrls[i], name);
		ck_file(dir, "cgroup.procs", "2147483000");
		put(dir, "cgroup.procs", "");
	}
	fake_destroy(cg, root, true);
	for (size_t i = 0; i < 5; i++)
		ck_assert(!existsf("%s/%s/petri-x/y/%s", root, ctrls[i], name));
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v1_fake_comounted_no_swap)
{
	struct cg_limits lim = { 16 * MiB, 0, 1, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], dir[PATH_MAX], name[128];
	struct cg_stats st;
	struct cg *cg;

	/* cpu and cpuacct are one hierarchy reached through two symlinks. */
	pathf(root, sizeof(root), "%s/v1c", fake_base);
	mkdirf("%s", root);
	mkdirf("%s/memory", root);
	mkdirf("%s/cpu,cpuacct", root);
	pathf(dir, sizeof(dir), "%s/memory", root);
	put(dir, "cgroup.procs", "");
	pathf(dir, sizeof(dir), "%s/cpu,cpuacct", root);
	put(dir, "cgroup.procs", "");
	pathf(dir, sizeof(dir), "%s/cpu", root);
	ck_assert_int_eq(symlink("cpu,cpuacct", dir), 0);
	pathf(dir, sizeof(dir), "%s/cpuacct", root);
	ck_assert_int_eq(symlink("cpu,cpuacct", dir), 0);

	m = manager(root, "/p");
	ck_assert(cg_has_memory(m) && cg_has_cpu(m) && !cg_has_pids(m));
	ck_assert(!cg_has_swap(m));
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	pathf(name, sizeof(name), "%s", base_name(cg_path(cg)));
	ck_file(cg_path(cg), "memory.limit_in_bytes", "16777216");
	ck_file(cg_path(cg), "memory.memsw.limit_in_bytes", "<missing>");
	/* A kernel without kmem accounting: nothing invented. */
	ck_file(cg_path(cg), "memory.kmem.tcp.limit_in_bytes", "<missing>");
	pathf(dir, sizeof(dir), "%s/cpu,cpuacct/p/%s", root, name);
	ck_file(dir, "cpu.cfs_quota_us", "1000");	/* 1 millicore: the minimum */
	put(dir, "cpuacct.usage", "5\n");
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.cpu_ns, 5);
	unlink_files(dir);
	fake_destroy(cg, root, true);
	ck_assert(!existsf("%s", dir));
	cg_manager_free(m);
}
END_TEST

START_TEST(test_v1_fake_stats)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], dir[PATH_MAX];
	const char *path;
	struct cg_stats st;
	struct cg *cg;

	fake_v1(root, sizeof(root), "v1s", false, false);
	m = manager(root, "/petri");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	put(path, "memory.max_usage_in_bytes", "52428800\n");
	put(path, "memory.usage_in_bytes", "1048576\n");
	put(path, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	pathf(dir, sizeof(dir), "%s/cpuacct/petri/%s", root, base_name(path));
	put(dir, "cpuacct.usage", "987654321\n");
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.cpu_ns, 987654321);
	ck_assert_uint_eq(st.memory_peak, 52428800);
	ck_assert_uint_eq(st.memory_current, 1048576);
	ck_assert_uint_eq(st.oom_kills, 3);
	ck_assert_int_eq(cg_reset_peak(cg), 0);
	ck_file(path, "memory.max_usage_in_bytes", "0");

	/* Old kernels have no oom_kill line; missing files read as 0. */
	put(path, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
	unlink_files(dir);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_eq(st.oom_kills, 0);
	ck_assert_uint_eq(st.cpu_ns, 0);
	fake_destroy(cg, root, true);
	cg_manager_free(m);
}
END_TEST

/* The v1 kill without a freezer (kill loop) and with one (freeze, kill,
 * thaw) must both refuse to signal 0 or ourselves and give up in time. */
static void v1_kill_hostile(bool freezer)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m;
	char root[PATH_MAX], procs[64], dir[PATH_MAX];
	const char *path;
	struct cg *cg;

	fake_v1(root, sizeof(root), freezer ? "v1kf" : "v1k", false, freezer);
	m = manager_short_kill(root, "/petri");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	path = cg_path(cg);
	pathf(procs, sizeof(procs), "0\n%d\n2147483647\n", (int)getpid());
	put(path, "cgroup.procs", procs);
	ck_assert_int_eq(cg_kill(cg), -EBUSY);
	put(path, "cgroup.procs", "");
	if (freezer) {
		pathf(dir, sizeof(dir), "%s/freezer/petri/%s", root, base_name(path));
		ck_file(dir, "freezer.state", "THAWED");
	}
	fake_destroy(cg, root, true);
	cg_manager_free(m);
}

START_TEST(test_v1_fake_kill_loop)
{
	v1_kill_hostile(false);
}
END_TEST

START_TEST(test_v1_fake_kill_frozen)
{
	v1_kill_hostile(true);
}
END_TEST

/* ---- detection ---------------------------------------------------------- */

START_TEST(test_detect)
{
	struct cg_manager *m = (struct cg_manager *)1;
	char root[PATH_MAX], err[256];

	/* Nothing there. */
	pathf(root, sizeof(root), "%s/empty", fake_base);
	mkdirf("%s", root);
	ck_assert_int_eq(cg_manager_new(root, NULL, &m, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, root) && strstr(err, "no usable cgroup"),
		      "message: %s", err);

	/* A v2 root with none of our controllers: v2 without controllers. */
	fake_v2(root, sizeof(root), "hugetlb", "hugetlb\n");
	m = manager(root, NULL);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	ck_assert(!cg_has_memory(m) && !cg_has_pids(m) && !cg_has_cpu(m) &&
		  !cg_has_swap(m));
	ck_file(root, "cgroup.subtree_control", "");
	ck_assert(existsf("%s/petri", root));
	cg_manager_free(m);

	/* Hybrid: the v2 root is empty, v1 controllers are mounted. */
	fake_v1(root, sizeof(root), "hybrid", true, true);
	put(root, "cgroup.controllers", "");
	m = manager(root, "/x");
	ck_assert_int_eq(cg_version(m), JAIL_CG_V1);
	cg_manager_free(m);

	/* Bad arguments. */
	ck_assert_int_eq(cg_manager_new(root, "x", &m, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'x'"));
	ck_assert_int_eq(cg_manager_new(root, "/a/../b", &m, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cg_manager_new(root, "/a/./b", &m, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cg_manager_new("relative", NULL, &m, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cg_manager_new(root, NULL, NULL, NULL, 0), -EINVAL);

	/* NULL-tolerant accessors. */
	ck_assert_int_eq(cg_version(NULL), JAIL_CG_NONE);
	ck_assert_ptr_null(cg_parent_dir(NULL));
	ck_assert_int_eq(cg_destroy(NULL), 0);
	cg_manager_free(NULL);
}
END_TEST

/* ---- fake v2, delegated ------------------------------------------------- */

/* A v2 tree whose caller sits in <root>/u/app.scope, a cgroup delegated to
 * it (as systemd's user manager delegates one), offering those controllers. */
static void fake_delegated(char *root, size_t len, char *own, size_t ownlen,
			   const char *name, const char *offered)
{
	fake_v2(root, len, name, "cpuset cpu io memory pids\n");
	mkdirf("%s/u", root);
	pathf(own, ownlen, "%s/u/app.scope", root);
	mkdirf("%s", own);
	put(own, "cgroup.controllers", offered);
	put(own, "cgroup.subtree_control", "");
	put(own, "cgroup.procs", "");
}

/* The options of a caller that /proc/self/cgroup places at self, in the
 * cgroup namespace ns (a fake tree cannot make its own namespace). */
static struct cg_manager *ns_manager(const char *root, const char *self,
				     enum cg_ns ns, bool delegated)
{
	const struct cg_options o = { .delegated = delegated, .self_cgroup = self,
				      .ns = ns };
	struct cg_manager *m = NULL;
	char err[512] = "";
	int rc = cg_manager_open(root, &o, &m, err, sizeof(err));

	ck_assert_msg(rc == 0, "cg_manager_open('%s'): %d %s", root, rc, err);
	return m;
}

static struct cg_manager *delegated_manager(const char *root, const char *self)
{
	return ns_manager(root, self, CG_NS_DETECT, true);
}

/* m nests in own as a delegate does: out of <own> before it enables
 * controllers (the leaf petri-supervisor holds us), all three enabled for
 * <own> and <own>/petri, the sandboxes' parent. */
static void ck_nested(const struct cg_manager *m, const char *own)
{
	char dir[PATH_MAX], pid[16];

	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	ck_assert(cg_has_memory(m) && cg_has_pids(m) && cg_has_cpu(m));
	ck_assert_str_eq(cg_manager_note(m), "");
	pathf(dir, sizeof(dir), "%s/petri", own);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_file(dir, "cgroup.subtree_control", "+memory +pids +cpu");
	ck_file(own, "cgroup.subtree_control", "+memory +pids +cpu");
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	pathf(dir, sizeof(dir), "%s/petri-supervisor", own);
	ck_file(dir, "cgroup.procs", pid);
}

/* The delegate's own cgroup, not the hierarchy's root, is where its
 * cgroups go; it moves itself into a leaf first, then enables what was
 * delegated for <own> and <own>/petri only. */
START_TEST(test_v2_fake_delegated)
{
	/* /proc/self/cgroup of a process under systemd --user, hybrid style:
	 * a v1 line first, the v2 line last. */
	static const char self[] = "1:name=systemd:/elsewhere\n0::/u/app.scope\n";
	struct cg_limits lim = { 64 * MiB, 32, 500, 0 };
	char root[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
	struct cg_manager *m;
	struct cg *cg;

	fake_delegated(root, sizeof(root), own, sizeof(own), "v2d", "cpu memory pids\n");
	m = delegated_manager(root, self);
	ck_nested(m, own);
	pathf(dir, sizeof(dir), "%s/petri", own);
	/* Above <own> is not ours: untouched. */
	ck_file(root, "cgroup.subtree_control", "");
	ck_assert(!existsf("%s/u/cgroup.subtree_control", root));
	ck_assert(!existsf("%s/petri", root));

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	ck_assert_int_eq(strncmp(cg_path(cg), dir, strlen(dir)), 0);
	ck_file(cg_path(cg), "memory.max", "67108864");
	ck_file(cg_path(cg), "pids.max", "32");
	fake_destroy(cg, root, false);
	cg_manager_free(m);

	/* Started again from the leaf (a petri already moved): the same
	 * delegated cgroup, the same parent. */
	m = delegated_manager(root, "0::/u/app.scope/petri-supervisor\n");
	pathf(dir, sizeof(dir), "%s/petri", own);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_assert(!existsf("%s/petri-supervisor/petri-supervisor", own));
	/* No weight asked: the kernel's. */
	pathf(dir, sizeof(dir), "%s/petri-supervisor", own);
	ck_file(dir, "cpu.weight", "<missing>");
	cg_manager_free(m);

	/* A weight that cannot be written is a note, never a failure: the
	 * sandboxes keep their cgroups and limits. */
	{
		const struct cg_options o = { .delegated = true, .daemon_weight = 300,
					      .self_cgroup = "0::/u/app.scope\n" };
		char err[512] = "";

		mkdirf("%s/petri-supervisor/cpu.weight", own);
		ck_assert_msg(cg_manager_open(root, &o, &m, err, sizeof(err)) == 0, "%s", err);
		ck_assert(cg_has_memory(m) && cg_has_cpu(m));
		ck_assert_msg(strstr(cg_manager_note(m), "cannot set the CPU weight"), "%s",
			      cg_manager_note(m));
		cg_manager_free(m);
		pathf(dir, sizeof(dir), "%s/petri-supervisor/cpu.weight", own);
		ck_assert_int_eq(rmdir(dir), 0);
	}
}
END_TEST

/* A root petri, not asked to be a delegate, in a cgroup that systemd
 * marked as delegated (Delegate=yes sets the xattr trusted.delegate; a user
 * manager, which may not write trusted.*, sets user.delegate): the same
 * nesting as a delegate's.  Without the mark, the default parent. */
START_TEST(test_v2_fake_marked_delegated)
{
	static const char self[] = "0::/u/app.scope\n";
	const struct cg_options o = { .self_cgroup = self, .daemon_weight = 300 };
	struct cg_limits lim = { 8 * MiB, 16, 0, 0 };
	char root[PATH_MAX], own[PATH_MAX], dir[PATH_MAX], err[512] = "";
	struct cg_manager *m = NULL;
	struct cg *cg;

	fake_delegated(root, sizeof(root), own, sizeof(own), "v2m", "cpu memory pids\n");
	if (setxattr(own, "trusted.delegate", "1", 1, 0) < 0 &&
	    setxattr(own, "user.delegate", "1", 1, 0) < 0) {
		fprintf(stderr, "test_cgroup: skip fake marked delegated: no xattrs on '%s': %s\n",
			own, strerror(errno));
		return;
	}
	ck_assert_msg(cg_manager_open(root, &o, &m, err, sizeof(err)) == 0, "%s", err);
	pathf(dir, sizeof(dir), "%s/petri", own);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_assert(existsf("%s/petri-supervisor", own));
	ck_assert(!existsf("%s/petri", root));
	/* The daemon's share beside its sandboxes' parent. */
	pathf(dir, sizeof(dir), "%s/petri-supervisor", own);
	ck_file(dir, "cpu.weight", "300");
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	ck_file(cg_path(cg), "memory.max", "8388608");
	fake_destroy(cg, root, false);
	cg_manager_free(m);

	ck_assert_int_eq(removexattr(own, "trusted.delegate") == 0 ||
			 removexattr(own, "user.delegate") == 0, 1);
	ck_assert_msg(cg_manager_open(root, &o, &m, err, sizeof(err)) == 0, "%s", err);
	pathf(dir, sizeof(dir), "%s/petri", root);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	cg_manager_free(m);
}
END_TEST

/* Only what was delegated (here pids, not memory or cpu); and none in a
 * cgroup we share with a process of someone else's (the shell of the
 * terminal whose scope we run in): cgroups without limits, and a note
 * saying why. */
START_TEST(test_v2_fake_delegated_some_controllers)
{
	char root[PATH_MAX], own[PATH_MAX];
	struct cg_manager *m;

	fake_delegated(root, sizeof(root), own, sizeof(own), "v2dp", "pids\n");
	m = delegated_manager(root, "0::/u/app.scope\n");
	ck_assert(!cg_has_memory(m) && cg_has_pids(m) && !cg_has_cpu(m));
	ck_file(own, "cgroup.subtree_control", "+pids");
	cg_manager_free(m);

	fake_delegated(root, sizeof(root), own, sizeof(own), "v2ds", "cpu memory pids\n");
	put(own, "cgroup.procs", "1\n");
	m = delegated_manager(root, "0::/u/app.scope\n");
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	ck_assert(!cg_has_memory(m) && !cg_has_pids(m) && !cg_has_cpu(m));
	ck_assert_msg(strstr(cg_manager_note(m), "other processes share our cgroup") &&
		      strstr(cg_manager_note(m), own), "note: %s", cg_manager_note(m));
	ck_file(own, "cgroup.subtree_control", "");
	cg_manager_free(m);
}
END_TEST

/* Our cgroup is not delegated to us (a login session's scope belongs to
 * root): -EACCES, naming it, and nothing made or moved.  Run as nobody,
 * for access() to say no. */
START_TEST(test_v2_fake_delegated_not_ours)
{
	const struct cg_options o = { .delegated = true, .self_cgroup = "0::/u/app.scope\n" };
	char root[PATH_MAX], own[PATH_MAX], err[512] = "";
	struct cg_manager *m = NULL;

	if (geteuid() != 0) {
		fprintf(stderr, "test_cgroup: skip delegated, not ours: not root (cannot become nobody)\n");
		return;
	}
	fake_delegated(root, sizeof(root), own, sizeof(own), "v2dn", "cpu memory pids\n");
	ck_assert_int_eq(chmod(fake_base, 0755), 0);
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(65534, 65534, 65534), 0);
	ck_assert_int_eq(setresuid(65534, 65534, 65534), 0);
	ck_assert_int_eq(cg_manager_open(root, &o, &m, err, sizeof(err)), -EACCES);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, own) && strstr(err, "not delegated to uid 65534"),
		      "message: %s", err);
	ck_assert(!existsf("%s/petri-supervisor", own));
	ck_assert(!existsf("%s/petri", own));
}
END_TEST

/* ---- fake v2, a container's cgroup namespace --------------------------- */

/* A container's private cgroup namespace: its root, mounted at the fake
 * root, is our own cgroup ("0::/"), handed over whole.  As in a delegated
 * cgroup, we move into petri-supervisor first, then enable controllers at
 * the root and in /petri, where the sandboxes go.  A petri started again
 * from the leaf finds the same. */
START_TEST(test_v2_fake_private_ns)
{
	struct cg_limits lim = { 32 * MiB, 16, 250, 0 };
	char root[PATH_MAX], dir[PATH_MAX];
	struct cg_manager *m;
	struct cg *cg;

	fake_v2(root, sizeof(root), "v2ns", "cpu io memory pids\n");
	m = ns_manager(root, "0::/\n", CG_NS_PRIVATE, false);
	ck_nested(m, root);
	pathf(dir, sizeof(dir), "%s/petri", root);

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	ck_assert_int_eq(strncmp(cg_path(cg), dir, strlen(dir)), 0);
	ck_file(cg_path(cg), "memory.max", "33554432");
	ck_file(cg_path(cg), "pids.max", "16");
	fake_destroy(cg, root, false);
	cg_manager_free(m);

	m = ns_manager(root, "0::/petri-supervisor\n", CG_NS_PRIVATE, false);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_assert(cg_has_memory(m));
	ck_assert(!existsf("%s/petri-supervisor/petri-supervisor", root));
	cg_manager_free(m);

	/* Asked to be a delegate (no root), the same. */
	fake_v2(root, sizeof(root), "v2nsd", "pids\n");
	m = ns_manager(root, "0::/\n", CG_NS_PRIVATE, true);
	ck_assert(!cg_has_memory(m) && cg_has_pids(m));
	ck_assert(existsf("%s/petri-supervisor", root));
	ck_file(root, "cgroup.subtree_control", "+pids");
	cg_manager_free(m);
}
END_TEST

/* Another process shares the namespace's root (a shell that started
 * petri): no controller can be enabled, and the note says so and why. */
START_TEST(test_v2_fake_private_ns_shared)
{
	char root[PATH_MAX], dir[PATH_MAX];
	struct cg_manager *m;

	fake_v2(root, sizeof(root), "v2nss", "cpu memory pids\n");
	put(root, "cgroup.procs", "1\n");
	m = ns_manager(root, "0::/\n", CG_NS_PRIVATE, false);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	ck_assert(!cg_has_memory(m) && !cg_has_pids(m) && !cg_has_cpu(m));
	ck_assert_msg(strstr(cg_manager_note(m), "other processes share our cgroup") &&
		      strstr(cg_manager_note(m), root) &&
		      strstr(cg_manager_note(m), "container's command"),
		      "note: %s", cg_manager_note(m));
	ck_file(root, "cgroup.subtree_control", "");
	pathf(dir, sizeof(dir), "%s/petri", root);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_file(dir, "cgroup.subtree_control", "<missing>");
	cg_manager_free(m);
}
END_TEST

/* The host's namespace: its root is the real root, which may hold
 * processes and enable controllers at once, so petri stays where it is and
 * makes /petri, as it always did (delegate or not).  In a private
 * namespace, a cgroup below its root is not handed over by that alone:
 * the same default. */
START_TEST(test_v2_fake_initial_ns)
{
	char root[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
	struct cg_manager *m;

	fake_v2(root, sizeof(root), "v2ni", "cpu memory pids\n");
	put(root, "cgroup.procs", "1\n");
	for (int delegated = 0; delegated < 2; delegated++) {
		m = ns_manager(root, "0::/\n", CG_NS_INITIAL, delegated);
		ck_assert(cg_has_memory(m) && cg_has_pids(m) && cg_has_cpu(m));
		ck_assert_str_eq(cg_manager_note(m), "");
		pathf(dir, sizeof(dir), "%s/petri", root);
		ck_assert_str_eq(cg_parent_dir(m), dir);
		ck_assert(!existsf("%s/petri-supervisor", root));
		ck_file(root, "cgroup.subtree_control", "+memory +pids +cpu");
		cg_manager_free(m);
	}

	fake_delegated(root, sizeof(root), own, sizeof(own), "v2nb", "cpu memory pids\n");
	m = ns_manager(root, "0::/u/app.scope\n", CG_NS_PRIVATE, false);
	pathf(dir, sizeof(dir), "%s/petri", root);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_assert(!existsf("%s/petri-supervisor", own));
	ck_assert(!existsf("%s/petri-supervisor", root));
	cg_manager_free(m);
}
END_TEST

/* ---- naming and sweep --------------------------------------------------- */

START_TEST(test_naming)
{
	struct cg_limits lim = { 0, 0, 0, 0 };
	struct cg_manager *m, *m2;
	char root[PATH_MAX], want[128];
	unsigned long long start = self_starttime();
	struct cg *a, *b;

	fake_v2(root, sizeof(root), "names", "");
	m = manager(root, "/petri");
	/* A leftover with our own name makes cg_create take the next one. */
	mkdirf("%s/petri/p%d-%llu-0", root, (int)getpid(), start);
	ck_assert_int_eq(cg_create(m, &lim, &a), 0);
	ck_assert_int_eq(cg_create(m, &lim, &b), 0);
	pathf(want, sizeof(want), "p%d-%llu-1", (int)getpid(), start);
	ck_assert_str_eq(base_name(cg_path(a)), want);
	pathf(want, sizeof(want), "p%d-%llu-2", (int)getpid(), start);
	ck_assert_str_eq(base_name(cg_path(b)), want);

	/* A cg copies what it needs: it outlives its manager. */
	cg_manager_free(m);
	ck_assert_int_eq(cg_count_procs(a), 0);
	ck_assert_int_eq(cg_destroy(a), 0);
	ck_assert_int_eq(cg_destroy(b), 0);

	/* A second manager in the same process counts from 0 again. */
	m2 = manager(root, "/petri");
	ck_assert_int_eq(cg_create(m2, &lim, &a), 0);
	pathf(want, sizeof(want), "p%d-%llu-1", (int)getpid(), start);
	ck_assert_str_eq(base_name(cg_path(a)), want);
	ck_assert_int_eq(cg_destroy(a), 0);
	cg_manager_free(m2);
}
END_TEST

struct creator {
	struct cg_manager *m;
	char names[25][128];
	int rc;
};

static void *create_many(void *arg)
{
	struct creator *c = arg;
	struct cg_limits lim = { 0, 0, 0, 0 };

	for (int i = 0; i < 25 && !c->rc; i++) {
		struct cg *cg;

		c->rc = cg_create(c->m, &lim, &cg);
		if (c->rc)
			break;
		snprintf(c->names[i], sizeof(c->names[i]), "%s", base_name(cg_path(cg)));
		c->rc = cg_destroy(cg);
	}
	return NULL;
}

START_TEST(test_concurrent_names)
{
	struct creator c[4];
	pthread_t t[4];
	char root[PATH_MAX];
	struct cg_manager *m;

	fake_v2(root, sizeof(root), "threads", "");
	m = manager(root, "/petri");
	for (int i = 0; i < 4; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].m = m;
		ck_assert_int_eq(pthread_create(&t[i], NULL, create_many, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(c[i].rc, 0);
	}
	for (int i = 0; i < 100; i++)
		for (int j = i + 1; j < 100; j++)
			ck_assert_str_ne(c[i / 25].names[i % 25], c[j / 25].names[j % 25]);
	cg_manager_free(m);
}
END_TEST

static void expand(char *out, size_t len, const char *pattern, pid_t pid)
{
	const char *hash = strchr(pattern, '#');

	if (!hash)
		pathf(out, len, "%s", pattern);
	else
		pathf(out, len, "%.*s%d%s", (int)(hash - pattern), pattern,
		      (int)pid, hash + 1);
}

START_TEST(test_sweep_fake_v2)
{
	/* '#' stands for the dead pid. */
	static const char *const others[] = {
		"other", "p1-2", "p#-1-2x", "p#-1-2-3", "px-1-2", "p-5-1-2",
		"p0-1-2", "P#-1-2", "p#--1", "p#-1-", "p99999999999-1-2",
		"p#-1-2.old", "p #-1-2",
	};
	struct cg_limits lim = { 0, 0, 0, 0 };
	unsigned long long start = self_starttime();
	struct cg_manager *m;
	char root[PATH_MAX], p[PATH_MAX], name[128];
	pid_t dead = dead_pid(), me = getpid();
	struct cg *own;

	fake_v2(root, sizeof(root), "sweep2", "memory");
	m = manager(root, "/petri");
	pathf(p, sizeof(p), "%s", cg_parent_dir(m));
	mkdirf("%s/p%d-%llu-0", p, (int)dead, start);		/* owner gone */
	mkdirf("%s/p%d-%llu-3", p, (int)me, start + 1);		/* pid reused */
	mkdirf("%s/p%d-%llu-99", p, (int)me, start);		/* ours */
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		expand(name, sizeof(name), others[i], dead);
		mkdirf("%s/%s", p, name);
	}
	pathf(name, sizeof(name), "p%d-1-5", (int)dead);	/* not a dir */
	      put(p, name, "");
	ck_assert_int_eq(cg_create(m, &lim, &own), 0);

	ck_assert_int_eq(cg_sweep(m), 2);
	ck_assert(!existsf("%s/p%d-%llu-0", p, (int)dead, start));
	ck_assert(!existsf("%s/p%d-%llu-3", p, (int)me, start + 1));
	ck_assert(existsf("%s/p%d-%llu-99", p, (int)me, start));
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		expand(name, sizeof(name), others[i], dead);
		ck_assert_msg(existsf("%s/%s", p, name), "'%s' was swept", name);
	}
	ck_assert(existsf("%s/p%d-1-5", p, (int)dead));
	ck_assert(existsf("%s", cg_path(own)));
	ck_assert_int_eq(cg_sweep(m), 0);
	fake_destroy(own, root, false);
	cg_manager_free(m);
}
END_TEST

START_TEST(test_sweep_fake_v1)
{
	struct cg_manager *m;
	char root[PATH_MAX];
	pid_t dead = dead_pid();

	fake_v1(root, sizeof(root), "sweep1", true, true);
	m = manager(root, "/petri");
	/* One stale cgroup is a directory in each hierarchy, counted once;
	 * it may be missing from some of them. */
	for (size_t i = 0; i < 4; i++)
		mkdirf("%s/%s/petri/p%d-1-0", root, ctrls[i], (int)dead);
	mkdirf("%s/freezer/petri/p%d-2-0", root, (int)dead);
	ck_assert_int_eq(cg_sweep(m), 2);
	for (size_t i = 0; i < 5; i++)
		ck_assert(!existsf("%s/%s/petri/p%d-1-0", root, ctrls[i], (int)dead));
	ck_assert(!existsf("%s/freezer/petri/p%d-2-0", root, (int)dead));
	cg_manager_free(m);
}
END_TEST

/* ---- real cgroups ------------------------------------------------------- */

static bool real_skip(const char *hier_root, const char *what)
{
	char probe[PATH_MAX];

	if (geteuid() != 0) {
		fprintf(stderr, "test_cgroup: skip %s: not root\n", what);
		return true;
	}
	pathf(probe, sizeof(probe), "%s/cgroup.procs", hier_root);
	if (access(probe, F_OK) != 0) {
		fprintf(stderr, "test_cgroup: skip %s: '%s' is not mounted\n",
			what, hier_root);
		return true;
	}
	return false;
}

static void kill_listed(const char *dir)
{
	char buf[65536], *save = NULL;

	rd(dir, "cgroup.procs", buf, sizeof(buf));
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
		if (atoi(t) > 1 && atoi(t) != getpid())
			kill(atoi(t), SIGKILL);
}

static void rmdir_patiently(const char *dir)
{
	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++) {
		kill_listed(dir);
		usleep(10000);
	}
}

/* Thaw, kill and remove dir and the cgroups below it, deepest first (the
 * delegated test leaves <prefix>/petri/<sandbox> when it fails). */
static void remove_tree(const char *dir)
{
	char sub[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			pathf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
			remove_tree(sub);
		}
	if (d)
		closedir(d);
	try_put(dir, "freezer.state", "THAWED");
	kill_listed(dir);
	rmdir_patiently(dir);
}

/* Kill and remove everything under <hierarchy><prefix>; returns how many
 * sandbox cgroups were left there. */
static int real_cleanup(const char *prefix)
{
	char base[PATH_MAX], dir[PATH_MAX];
	int left = 0;

	for (size_t i = 0; i < sizeof(real_hiers) / sizeof(real_hiers[0]); i++) {
		struct dirent *e;
		DIR *d;

		pathf(base, sizeof(base), "%s/%s%s", REAL_ROOT, real_hiers[i], prefix);
		d = opendir(base);
		if (!d)
			continue;
		while ((e = readdir(d))) {
			if (e->d_type != DT_DIR || e->d_name[0] == '.')
				continue;
			pathf(dir, sizeof(dir), "%s/%s", base, e->d_name);
			remove_tree(dir);
			left++;
		}
		closedir(d);
		rmdir_patiently(base);
	}
	return left;
}

enum kid_job { KID_BURN, KID_HOG, KID_FORK };

struct kid {
	pid_t pid;
	int go;		/* write end: start the job */
	int ack;	/* read end: job done */
};

static void touch_mib(unsigned long long mib)
{
	size_t len = (size_t)(mib * MiB);
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(3);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
}

static void burn_cpu_ms(long ms)
{
	struct timespec ts;
	volatile unsigned long spin = 0;

	do {
		for (int i = 0; i < 100000; i++)
			spin++;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec * 1000 + ts.tv_nsec / 1000000 < ms);
}

/* The child waits for "go" so that it runs its job inside the cgroup. */
static void kid_start(struct kid *k, enum kid_job job)
{
	int go[2], ack[2];
	char c;

	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ack, O_CLOEXEC), 0);
	k->pid = fork();
	ck_assert_int_ge(k->pid, 0);
	if (k->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		if (job == KID_HOG) {
			touch_mib(200);
			_exit(0);
		}
		/* Every process forks for ever; pids.max holds them. */
		while (job == KID_FORK)
			fork();
		burn_cpu_ms(60);
		touch_mib(8);
		if (write(ack[1], "k", 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(go[0]);
	close(ack[1]);
	k->go = go[1];
	k->ack = ack[0];
}

static void kid_go(struct kid *k, bool wait_ack)
{
	char c;

	ck_assert_int_eq(write(k->go, "g", 1), 1);
	if (wait_ack)
		ck_assert_int_eq(read(k->ack, &c, 1), 1);
}

static int kid_reap(struct kid *k)
{
	int status = 0;

	ck_assert_int_eq(waitpid(k->pid, &status, 0), k->pid);
	close(k->go);
	close(k->ack);
	return status;
}

/* A burning kid that has joined cg, and is its only process. */
static void kid_join(struct cg *cg, struct kid *k)
{
	kid_start(k, KID_BURN);
	ck_assert_int_eq(cg_add_pid(cg, k->pid), 0);
	kid_go(k, true);
	ck_assert(pid_listed(cg_path(cg), k->pid));
	ck_assert_int_eq(cg_count_procs(cg), 1);
}

/* cg_kill() takes the kid, cg_destroy() the directory. */
static void kid_kill_destroy(struct cg *cg, struct kid *k)
{
	char dir[PATH_MAX];
	int status;

	ck_assert_int_eq(cg_kill(cg), 0);
	ck_assert_int_eq(cg_count_procs(cg), 0);
	status = kid_reap(k);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	pathf(dir, sizeof(dir), "%s", cg_path(cg));
	ck_assert_int_eq(cg_destroy(cg), 0);
	ck_assert(!existsf("%s", dir));
}

START_TEST(test_real_v1_lifecycle)
{
	struct cg_limits lim = { 256 * MiB, 64, 1000, 0 };
	struct cg_manager *m;
	struct cg_stats st;
	char dir[PATH_MAX], name[128];
	pid_t dead = dead_pid();
	struct kid k;
	struct cg *cg;
	int status;

	if (real_skip(REAL_ROOT "/memory", "real v1"))
		return;
	m = manager(REAL_ROOT, real_prefix);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V1);
	ck_assert(cg_has_memory(m) && cg_has_pids(m) && cg_has_cpu(m));
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	pathf(name, sizeof(name), "%s", base_name(cg_path(cg)));
	pathf(dir, sizeof(dir), "%s/memory%s/%s", REAL_ROOT, real_prefix, name);
	ck_assert_str_eq(cg_path(cg), dir);
	ck_file(dir, "memory.limit_in_bytes", "268435456\n");
	if (cg_has_swap(m))
		ck_file(dir, "memory.memsw.limit_in_bytes", "268435456\n");
	pathf(dir, sizeof(dir), "%s/pids%s/%s", REAL_ROOT, real_prefix, name);
	ck_file(dir, "pids.max", "64\n");
	pathf(dir, sizeof(dir), "%s/cpu%s/%s", REAL_ROOT, real_prefix, name);
	ck_file(dir, "cpu.cfs_quota_us", "100000\n");

	kid_start(&k, KID_BURN);
	ck_assert_int_eq(cg_add_pid(cg, k.pid), 0);
	kid_go(&k, true);
	ck_assert(pid_listed(cg_path(cg), k.pid));
	pathf(dir, sizeof(dir), "%s/pids%s/%s", REAL_ROOT, real_prefix, name);
	ck_assert(pid_listed(dir, k.pid));
	ck_assert_int_eq(cg_count_procs(cg), 1);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_gt(st.cpu_ns, 0);
	ck_assert_uint_ge(st.memory_peak, 8 * MiB);
	ck_assert_uint_gt(st.memory_current, 0);
	ck_assert_uint_eq(st.oom_kills, 0);
	ck_assert_int_eq(cg_reset_peak(cg), 0);

	/* A stale cgroup beside a live one: only the stale one goes. */
	for (size_t i = 0; i < 5; i++)
		mkdirf("%s/%s%s/p%d-1-0", REAL_ROOT, ctrls[i], real_prefix, (int)dead);
	ck_assert_int_eq(cg_sweep(m), 1);
	ck_assert(!existsf("%s/memory%s/p%d-1-0", REAL_ROOT, real_prefix, (int)dead));
	ck_assert(pid_listed(cg_path(cg), k.pid));

	ck_assert_int_eq(cg_kill(cg), 0);
	ck_assert_int_eq(cg_count_procs(cg), 0);
	status = kid_reap(&k);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_int_eq(cg_destroy(cg), 0);
	for (size_t i = 0; i < 5; i++)
		ck_assert_msg(!existsf("%s/%s%s/%s", REAL_ROOT, ctrls[i], real_prefix, name),
			      "cgroup left in '%s'", ctrls[i]);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
	ck_assert(!existsf("%s/memory%s", REAL_ROOT, real_prefix));
}
END_TEST

START_TEST(test_real_v1_destroy_running)
{
	struct cg_limits lim = { 64 * MiB, 16, 0, 0 };
	struct cg_manager *m;
	struct kid k;
	struct cg *cg;
	int status;

	if (real_skip(REAL_ROOT "/memory", "real v1"))
		return;
	/* cg_destroy alone kills and removes a cgroup that still runs. */
	m = manager(REAL_ROOT, real_prefix);
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	kid_start(&k, KID_BURN);
	ck_assert_int_eq(cg_add_pid(cg, k.pid), 0);
	kid_go(&k, true);
	ck_assert_int_eq(cg_destroy(cg), 0);
	status = kid_reap(&k);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
}
END_TEST

START_TEST(test_real_v1_fork_bomb)
{
	struct cg_limits lim = { 256 * MiB, 24, 0, 0 };
	struct cg_manager *m;
	int64_t deadline;
	struct kid k;
	struct cg *cg;
	int status;

	if (real_skip(REAL_ROOT "/memory", "real v1 fork bomb"))
		return;
	/* The freezer stops the forking while we kill.  Orphans come to us,
	 * not to a host init that might leave them as zombies. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	m = manager(REAL_ROOT, real_prefix);
	ck_assert(cg_has_pids(m));
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	kid_start(&k, KID_FORK);
	ck_assert_int_eq(cg_add_pid(cg, k.pid), 0);
	kid_go(&k, false);
	deadline = mono_ms() + 5000;
	while (cg_count_procs(cg) < 12 && mono_ms() < deadline)
		usleep(1000);
	ck_assert_int_ge(cg_count_procs(cg), 12);
	ck_assert_int_eq(cg_kill(cg), 0);
	ck_assert_int_eq(cg_count_procs(cg), 0);
	status = kid_reap(&k);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	while (waitpid(-1, NULL, 0) > 0)
		;
	ck_assert_int_eq(errno, ECHILD);
	ck_assert_int_eq(cg_destroy(cg), 0);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
}
END_TEST

START_TEST(test_real_v1_oom)
{
	struct cg_limits lim = { 50 * MiB, 16, 0, 0 };
	struct cg_manager *m;
	struct cg_stats st;
	struct kid k;
	struct cg *cg;
	int status;

	if (real_skip(REAL_ROOT "/memory", "real v1 oom"))
		return;
	m = manager(REAL_ROOT, real_prefix);
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	kid_start(&k, KID_HOG);
	ck_assert_int_eq(cg_add_pid(cg, k.pid), 0);
	kid_go(&k, false);
	status = kid_reap(&k);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "200 MB under a 50 MB limit: status %#x", status);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_ge(st.oom_kills, 1);
	ck_assert_uint_gt(st.memory_peak, 40 * MiB);
	ck_assert_uint_le(st.memory_peak, 50 * MiB);
	ck_assert_int_eq(cg_destroy(cg), 0);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
}
END_TEST

/* A real join: the writer lands in every hierarchy, its pages count there,
 * and a cgroup at its pids limit refuses it. */
START_TEST(test_real_v1_join)
{
	struct cg_limits lim = { 64 * MiB, 1, 0, 0 };
	struct cg_manager *m;
	struct cg_stats st;
	struct cg_join cj;
	char name[128];
	struct kid k;
	struct cg *cg;
	int status;
	pid_t pid;

	if (real_skip(REAL_ROOT "/memory", "real v1 join"))
		return;
	m = manager(REAL_ROOT, real_prefix);
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	pathf(name, sizeof(name), "%s", base_name(cg_path(cg)));
	ck_assert_int_eq(cg_join_open(cg, &cj), 0);
	pid = raw_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char buf[4096];
		ssize_t n;
		int fd;

		if (cg_join_self(&cj) < 0)
			_exit(2);
		/* In memory, pids and cpu alike; and 16 MiB touched here are
		 * the cgroup's. */
		fd = open("/proc/self/cgroup", O_RDONLY);
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			_exit(3);
		buf[n] = '\0';
		for (const char *h = buf; h; h = strchr(h, '\n') ? strchr(h, '\n') + 1 : NULL)
			if ((!strncmp(strchr(h, ':') ? strchr(h, ':') : h, ":memory:", 8) ||
			     !strncmp(strchr(h, ':') ? strchr(h, ':') : h, ":pids:", 6)) &&
			    !strstr(h, name))
				_exit(4);
		touch_mib(16);
		_exit(strstr(buf, name) ? 0 : 5);
	}
	cg_join_close(&cj);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_ge(st.memory_peak, 16 * MiB);
	/* One of one taken: a writer would be the second. */
	kid_start(&k, KID_BURN);
	ck_assert_int_eq(cg_add_pid(cg, k.pid), 0);
	ck_assert_int_eq(join_in_child(cg), EAGAIN);
	cg_kill(cg);
	kid_reap(&k);
	ck_assert_int_eq(cg_destroy(cg), 0);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
}
END_TEST

/* Our cgroup in the v1 hierarchy that lists ctrl, from /proc/self/cgroup. */
static void own_v1_cgroup(const char *ctrl, char *out, size_t len)
{
	char buf[8192], *save = NULL;
	size_t n = strlen(ctrl);

	out[0] = '\0';
	rd("/proc/self", "cgroup", buf, sizeof(buf));
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *list = strchr(l, ':'), *path = list ? strchr(list + 1, ':') : NULL;

		if (!path)
			continue;
		*path++ = '\0';
		for (char *t = list + 1; *t; t += strcspn(t, ",") + (t[strcspn(t, ",")] == ',')) {
			if (strncmp(t, ctrl, n) == 0 && (t[n] == ',' || !t[n])) {
				pathf(out, len, "%s", strcmp(path, "/") ? path : "");
				return;
			}
		}
	}
}

START_TEST(test_real_v1_default_parent)
{
	char own[PATH_MAX], dir[5][PATH_MAX];
	bool existed[5];
	struct cg_manager *m;

	if (real_skip(REAL_ROOT "/memory", "real v1 default parent"))
		return;
	/* The default nests under our own cgroup in each hierarchy (here the
	 * memory one is /process_api/<hash>), so petri's limits hold for its
	 * sandboxes.  Remove only the parents this test made. */
	for (size_t i = 0; i < 5; i++) {
		own_v1_cgroup(ctrls[i], own, sizeof(own));
		pathf(dir[i], sizeof(dir[i]), "%s/%s%s/petri", REAL_ROOT, ctrls[i], own);
		existed[i] = existsf("%s", dir[i]);
	}
	m = manager(REAL_ROOT, NULL);
	ck_assert_str_eq(cg_parent_dir(m), dir[0]);
	for (size_t i = 0; i < 5; i++)
		ck_assert_msg(existsf("%s", dir[i]), "no parent '%s'", dir[i]);
	cg_manager_free(m);
	for (size_t i = 0; i < 5; i++)
		if (!existed[i])
			rmdir(dir[i]);
}
END_TEST

START_TEST(test_real_v2_unified)
{
	struct cg_limits lim = { 64 * MiB, 32, 500, 0 };
	struct cg_manager *m;
	struct cg_stats st;
	char dir[PATH_MAX];
	pid_t dead = dead_pid();
	struct kid k;
	struct cg *cg;

	if (real_skip(REAL_V2, "real v2"))
		return;
	m = manager(REAL_V2, real_prefix);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	pathf(dir, sizeof(dir), "%s%s", REAL_V2, real_prefix);
	ck_assert_str_eq(cg_parent_dir(m), dir);
	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);

	kid_join(cg, &k);
	ck_assert_int_eq(cg_stats(cg, &st), 0);
	ck_assert_uint_gt(st.cpu_ns, 0);
	if (!cg_has_memory(m))
		ck_assert_int_eq(cg_reset_peak(cg), -EOPNOTSUPP);

	mkdirf("%s/p%d-1-0", dir, (int)dead);
	ck_assert_int_eq(cg_sweep(m), 1);
	ck_assert(!existsf("%s/p%d-1-0", dir, (int)dead));
	ck_assert(existsf("%s/cgroup.procs", cg_path(cg)));

	kid_kill_destroy(cg, &k);
	cg_manager_free(m);
	ck_assert_int_eq(real_cleanup(real_prefix), 0);
	ck_assert(!existsf("%s%s", REAL_V2, real_prefix));
}
END_TEST

/* In a child moved into dir (as systemd starts a unit's main process in
 * its cgroup), or into dir/petri-supervisor: cg_manager_new() on the v2 mount
 * must put the sandboxes under dir/petri and leave the child in
 * dir/petri-supervisor.
 * Returns the child's exit status: 0, or the number of the step that
 * failed. */
static int delegated_child(const char *dir, bool in_leaf)
{
	char path[PATH_MAX], own[PATH_MAX], buf[4096], pid[24], err[256];
	struct cg_limits lim = { 0, 8, 0, 0 };
	struct cg_manager *m;
	struct cg *cg;
	int status;
	pid_t kid;
	int fd;

	kid = raw_fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		pathf(path, sizeof(path), "%s%s", dir, in_leaf ? "/petri-supervisor" : "");
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		fd = open(strcat(path, "/cgroup.procs"), O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, pid, strlen(pid)) != (ssize_t)strlen(pid))
			_exit(2);
		close(fd);
		if (cg_manager_new(REAL_V2, NULL, &m, err, sizeof(err)) < 0) {
			fprintf(stderr, "delegated child: %s\n", err);
			_exit(3);
		}
		pathf(path, sizeof(path), "%s/petri", dir);
		if (strcmp(cg_parent_dir(m), path)) {
			fprintf(stderr, "delegated child: parent '%s', not '%s'\n", cg_parent_dir(m), path);
			_exit(4);
		}
		pathf(own, sizeof(own), "0::%s/petri-supervisor\n", dir + strlen(REAL_V2));
		fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
		buf[fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1)] = '\0';
		if (!strstr(buf, own))
			_exit(5);
		if (cg_create(m, &lim, &cg) < 0 || strncmp(cg_path(cg), path, strlen(path)) ||
		    cg_path(cg)[strlen(path)] != '/' || strchr(cg_path(cg) + strlen(path) + 1, '/'))
			_exit(6);
		if (cg_destroy(cg) < 0)
			_exit(7);
		cg_manager_free(m);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(kid, &status, 0), kid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(test_real_v2_marked_delegated)
{
	char dir[PATH_MAX];

	if (real_skip(REAL_V2, "real v2 marked delegated"))
		return;
	pathf(dir, sizeof(dir), "%s%s", REAL_V2, real_prefix);
	mkdirf("%s", dir);
	ck_assert_msg(setxattr(dir, "trusted.delegate", "1", 1, 0) == 0,
		      "setxattr '%s': %s", dir, strerror(errno));
	ck_assert_int_eq(delegated_child(dir, false), 0);
	ck_assert(existsf("%s/petri-supervisor", dir));
	/* Started in the leaf already: the same. */
	ck_assert_int_eq(delegated_child(dir, true), 0);
	ck_assert_int_eq(rmdir(strcat(dir, "/petri-supervisor")), 0);
	real_cleanup(real_prefix);
	ck_assert(!existsf("%s%s", REAL_V2, real_prefix));
}
END_TEST

/* The delegated path on a real cgroup2 hierarchy, as an unprivileged
 * user: root delegates <unified><prefix> to nobody as systemd does (the
 * directory and its cgroup.procs, cgroup.subtree_control and
 * cgroup.threads change owner) and moves the test into it; as nobody, the
 * manager moves itself into the leaf, makes its parent, and a sandbox
 * cgroup that a process joins, is counted in and is killed through.  This
 * host's v2 mount has no controllers (v1 holds them all), so limits are
 * not exercised here: the fake trees above check what is enabled. */
START_TEST(test_real_v2_delegated)
{
	static const char *const handed[] = {
		"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads",
	};
	const struct cg_options o = { .delegated = true };
	struct cg_limits lim = { 0, 0, 0, 0 };
	char dir[PATH_MAX], path[PATH_MAX], self[4096], want[PATH_MAX], err[512] = "";
	struct cg_manager *m = NULL;
	struct kid k;
	struct cg *cg;

	if (real_skip(REAL_V2, "real v2 delegated"))
		return;
	pathf(dir, sizeof(dir), "%s%s", REAL_V2, real_prefix);
	mkdirf("%s", dir);
	for (size_t i = 0; i < sizeof(handed) / sizeof(handed[0]); i++) {
		pathf(path, sizeof(path), "%s%s%s", dir, *handed[i] ? "/" : "", handed[i]);
		ck_assert_msg(chown(path, 65534, 65534) == 0, "chown '%s': %s", path,
			      strerror(errno));
	}
	put(dir, "cgroup.procs", "0");
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(65534, 65534, 65534), 0);
	ck_assert_int_eq(setresuid(65534, 65534, 65534), 0);

	ck_assert_msg(cg_manager_open(REAL_V2, &o, &m, err, sizeof(err)) == 0,
		      "cg_manager_open: %s", err);
	ck_assert_int_eq(cg_version(m), JAIL_CG_V2);
	pathf(path, sizeof(path), "%s/petri", dir);
	ck_assert_str_eq(cg_parent_dir(m), path);
	rd("/proc/self", "cgroup", self, sizeof(self));
	pathf(want, sizeof(want), "0::%s/petri-supervisor\n", real_prefix);
	ck_assert_msg(strstr(self, want), "/proc/self/cgroup: %s", self);

	ck_assert_int_eq(cg_create(m, &lim, &cg), 0);
	kid_join(cg, &k);
	kid_kill_destroy(cg, &k);
	cg_manager_free(m);
	/* The fixture, as root, removes the rest once this process is gone. */
}
END_TEST

/* cg_ns_detect() on this kernel: "private" in a child that made a cgroup
 * namespace of its own, and in this process what its namespace is (the
 * initial one, unless the tests themselves run in a container's). */
START_TEST(test_real_ns_detect)
{
	struct stat st;
	int status;
	pid_t pid;

	if (geteuid() != 0) {
		fprintf(stderr, "test_cgroup: skip real cgroup namespace: not root "
			"(unshare(CLONE_NEWCGROUP) needs CAP_SYS_ADMIN)\n");
		return;
	}
	if (stat("/proc/self/ns/cgroup", &st) < 0) {
		fprintf(stderr, "test_cgroup: skip real cgroup namespace: "
			"'/proc/self/ns/cgroup': %s\n", strerror(errno));
		return;
	}
	if (st.st_ino == 0xEFFFFFFBu)
		ck_assert_int_eq(cg_ns_detect(), CG_NS_INITIAL);
	else
		fprintf(stderr, "test_cgroup: real cgroup namespace: these tests run in a "
			"private one already, not checking the initial one\n");
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct stat own;

		if (unshare(CLONE_NEWCGROUP) < 0)
			_exit(2);
		if (stat("/proc/self/ns/cgroup", &own) < 0 || own.st_ino == st.st_ino)
			_exit(3);
		_exit(cg_ns_detect() == CG_NS_PRIVATE ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_msg(WEXITSTATUS(status) == 0, "child: %s",
		      WEXITSTATUS(status) == 1 ? "cg_ns_detect() did not say private" :
		      WEXITSTATUS(status) == 2 ? "unshare(CLONE_NEWCGROUP) failed" :
		      "no new cgroup namespace after unshare()");
}
END_TEST

/* ---- fixtures ----------------------------------------------------------- */

static void fake_setup(void)
{
	pathf(fake_base, sizeof(fake_base), "/tmp/petri-cg-unit-XXXXXX");
	if (!mkdtemp(fake_base)) {
		fprintf(stderr, "test_cgroup: mkdtemp: %s\n", strerror(errno));
		abort();
	}
}

static void fake_teardown(void)
{
	nftw(fake_base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void real_setup(void)
{
	pathf(real_prefix, sizeof(real_prefix), "/petri-unit-%d", (int)getpid());
}

/* Each test starts clean even when the one before failed half-way. */
static void real_preclean(void)
{
	if (geteuid() == 0)
		real_cleanup(real_prefix);
}

static void real_teardown(void)
{
	if (geteuid() == 0)
		real_cleanup(real_prefix);
}

Suite *cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *fake = tcase_create("fake");
	TCase *real = tcase_create("real");

	tcase_add_unchecked_fixture(fake, fake_setup, fake_teardown);
	tcase_set_timeout(fake, 20);
	tcase_add_test(fake, test_v2_fake_create);
	tcase_add_test(fake, test_v2_fake_nested_parent_and_partial);
	tcase_add_test(fake, test_v2_fake_stats_and_peak_reset);
	tcase_add_test(fake, test_v2_fake_kill_hostile_procs);
	tcase_add_test(fake, test_procs_parsing);
	tcase_add_test(fake, test_v2_fake_join);
	tcase_add_test(fake, test_v1_fake_join);
	tcase_add_test(fake, test_v1_fake_create);
	tcase_add_test(fake, test_v1_fake_comounted_no_swap);
	tcase_add_test(fake, test_v1_fake_stats);
	tcase_add_test(fake, test_v1_fake_kill_loop);
	tcase_add_test(fake, test_v1_fake_kill_frozen);
	tcase_add_test(fake, test_detect);
	tcase_add_test(fake, test_v2_fake_delegated);
	tcase_add_test(fake, test_v2_fake_marked_delegated);
	tcase_add_test(fake, test_v2_fake_delegated_some_controllers);
	tcase_add_test(fake, test_v2_fake_delegated_not_ours);
	tcase_add_test(fake, test_v2_fake_private_ns);
	tcase_add_test(fake, test_v2_fake_private_ns_shared);
	tcase_add_test(fake, test_v2_fake_initial_ns);
	tcase_add_test(fake, test_naming);
	tcase_add_test(fake, test_concurrent_names);
	tcase_add_test(fake, test_sweep_fake_v2);
	tcase_add_test(fake, test_sweep_fake_v1);
	suite_add_tcase(s, fake);

	tcase_add_unchecked_fixture(real, real_setup, real_teardown);
	tcase_add_checked_fixture(real, real_preclean, NULL);
	tcase_set_timeout(real, 30);
	tcase_add_test(real, test_real_v1_lifecycle);
	tcase_add_test(real, test_real_v1_destroy_running);
	tcase_add_test(real, test_real_v1_fork_bomb);
	tcase_add_test(real, test_real_v1_oom);
	tcase_add_test(real, test_real_v1_join);
	tcase_add_test(real, test_real_v1_default_parent);
	tcase_add_test(real, test_real_v2_unified);
	tcase_add_test(real, test_real_v2_marked_delegated);
	tcase_add_test(real, test_real_v2_delegated);
	tcase_add_test(real, test_real_ns_detect);
	suite_add_tcase(s, real);
	return s;
}
