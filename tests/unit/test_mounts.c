#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/mounts.h"
#include "unit.h"

#define BTIME 1700000000LL	/* the sandbox's boot, as its /proc/stat says */

static const struct mount_entry *find(const struct mount_plan *p, enum mount_op op,
				      const char *dst)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].op == op && strcmp(p->v[i].dst, dst) == 0)
			return &p->v[i];
	return NULL;
}

static void default_config(struct jail_config *cfg, struct jail_file *f)
{
	static const char *const argv[] = { "/usr/bin/true", NULL };
	static const char *const envp[] = { NULL };

	memset(cfg, 0, sizeof(*cfg));
	cfg->argv = argv;
	cfg->envp = envp;
	cfg->limits.work_bytes = 100 << 20;
	cfg->limits.tmp_bytes = 50 << 20;
	cfg->limits.inodes = 1234;
	f->path = "/opt/petri/driver.py";
	f->data = "print(1)\n";
	f->len = 9;
	f->mode = 0644;
	cfg->files = f;
	cfg->nfiles = 1;
}

START_TEST(test_plan_layout)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;
	const struct mount_entry *e;

	default_config(&cfg, &f);
	ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), 0);

	e = find(&p, MOUNT_BIND, "/usr");
	ck_assert_ptr_nonnull(e);
	ck_assert(!(e->flags & MOUNT_F_RW));		/* read-only */
	ck_assert_ptr_nonnull(find(&p, MOUNT_PROC, "/proc"));
	ck_assert_ptr_nonnull(find(&p, MOUNT_TMPFS, "/dev"));
	e = find(&p, MOUNT_BIND, "/dev/null");
	ck_assert(e && (e->flags & MOUNT_F_RW));
	ck_assert_ptr_null(find(&p, MOUNT_BIND, "/dev/tty"));
	e = find(&p, MOUNT_TMPFS, "/work");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(strstr(e->data, "size=104857600"));
	ck_assert_ptr_nonnull(strstr(e->data, "nr_inodes=1234"));
	ck_assert_ptr_nonnull(strstr(e->data, "uid=1000"));
	e = find(&p, MOUNT_TMPFS, "/tmp");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(strstr(e->data, "size=52428800"));
	ck_assert_ptr_nonnull(strstr(e->data, "mode=1777"));
	e = find(&p, MOUNT_TMPFS, "/dev/shm");
	ck_assert(e && (e->flags & MOUNT_F_NOEXEC));
	e = find(&p, MOUNT_FILE, "/opt/petri/driver.py");
	ck_assert(e && e->len == 9 && memcmp(e->data, "print(1)\n", 9) == 0);
	e = find(&p, MOUNT_FILE, "/etc/passwd");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(strstr(e->data, "sandbox:x:1000:1000"));
	ck_assert_ptr_null(strstr(e->data, "root:x:0:0:root:/root"));
	e = find(&p, MOUNT_FILE, "/etc/gitconfig");
	ck_assert(e && strstr(e->data, "email = sandbox@petri.invalid"));
	/* /proc/sys read-only, the kernel's secrets masked */
	e = find(&p, MOUNT_BIND, "/proc/sys");
	ck_assert(e && (e->flags & MOUNT_F_SELF) && !(e->flags & MOUNT_F_RW));
	ck_assert_ptr_nonnull(find(&p, MOUNT_MASK, "/proc/kcore"));
	/* /home/user is the workspace under E2B's name, after /work is
	 * mounted; nothing of the host's /home */
	e = find(&p, MOUNT_ALIAS, "/home/user");
	ck_assert(e && !strcmp(e->src, "/work"));
	ck_assert(find(&p, MOUNT_TMPFS, "/work") < e);
	/* nothing of the host's private places */
	for (size_t i = 0; i < p.n; i++) {
		const char *d = p.v[i].dst;

		if (p.v[i].op == MOUNT_ALIAS && !strcmp(d, "/home/user"))
			continue;
		ck_assert_msg(strncmp(d, "/home", 5) && strncmp(d, "/root", 5) &&
			      strncmp(d, "/var", 4) && strncmp(d, "/run", 4) &&
			      strcmp(d, "/etc/shadow") && strncmp(d, "/sys", 4),
			      "unexpected mount at %s", d);
	}
	/* /proc comes before its masks, /dev before the device binds */
	ck_assert(find(&p, MOUNT_PROC, "/proc") < find(&p, MOUNT_MASK, "/proc/kcore"));
	ck_assert(find(&p, MOUNT_TMPFS, "/dev") < find(&p, MOUNT_BIND, "/dev/null"));
	mount_plan_release(&p);
}
END_TEST

/* Host-wide /proc files: the host's kernel, its activity and its identity. */
static const char *const host_proc[] = {
	"/proc/kcore", "/proc/kallsyms", "/proc/cmdline", "/proc/config.gz",
	"/proc/diskstats", "/proc/interrupts", "/proc/softirqs",
	"/proc/sys/kernel/random/boot_id", "/proc/modules", "/proc/partitions",
	"/proc/swaps", "/proc/vmallocinfo", "/proc/slabinfo", "/proc/pagetypeinfo",
	"/proc/zoneinfo", "/proc/buddyinfo", "/proc/sched_debug",
	"/proc/timer_list", "/proc/pressure", "/proc/locks", "/proc/iomem",
	"/proc/fs", "/proc/irq", "/proc/sys/kernel/pty/nr", "/proc/sys/fs/file-nr",
	"/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state",
	"/proc/sys/fs/dentry-state", "/proc/sys/fs/aio-nr",
	NULL
};

/* What the runtimes read but moves with the neighbours: a file of the
 * sandbox's own over it. */
static const char *const faked_proc[] = {
	"/proc/stat", "/proc/loadavg", "/proc/meminfo", "/proc/vmstat",
	"/proc/cgroups", NULL
};

/* What the runtimes read: never masked. */
static const char *const runtime_proc[] = {
	"/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
	"/proc/uptime", "/proc/loadavg", "/proc/mounts", NULL
};

static void check_proc_masks(const struct mount_plan *p, const char *which)
{
	const struct mount_entry *proc = find(p, MOUNT_PROC, "/proc");
	const struct mount_entry *ro = find(p, MOUNT_BIND, "/proc/sys");

	ck_assert_ptr_nonnull(proc);
	for (size_t i = 0; host_proc[i]; i++) {
		const struct mount_entry *e = find(p, MOUNT_MASK, host_proc[i]);

		ck_assert_msg(e, "%s: %s not masked", which, host_proc[i]);
		/* optional (a kernel may not have it), after /proc and after
		 * the read-only /proc/sys it may lie in */
		ck_assert(e->flags & MOUNT_F_OPTIONAL);
		ck_assert(proc < e && ro && ro < e);
	}
	for (size_t i = 0; runtime_proc[i]; i++)
		ck_assert_msg(!find(p, MOUNT_MASK, runtime_proc[i]), "%s: %s masked",
			      which, runtime_proc[i]);
	/* replaced after the masks, one run of entries (one scratch tmpfs),
	 * before the /tmp it is made on is mounted over */
	for (size_t i = 0; faked_proc[i]; i++) {
		const struct mount_entry *e = find(p, MOUNT_FAKE, faked_proc[i]);

		ck_assert_msg(e && e->len > 0, "%s: %s not replaced", which, faked_proc[i]);
		ck_assert(proc < e && e->mode == 0444);
		ck_assert(find(p, MOUNT_MASK, "/proc/kcore") < e);
		ck_assert(e < find(p, MOUNT_TMPFS, "/tmp"));
		ck_assert(e == find(p, MOUNT_FAKE, "/proc/stat") ||
			  e[-1].op == MOUNT_FAKE);
	}
}

START_TEST(test_plan_proc_masks_both_paths)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan cold, warm;
	size_t ncold = 0, nwarm = 0;

	default_config(&cfg, &f);
	ck_assert_int_eq(mount_plan_build(&cold, &cfg, 1000, 1000, BTIME), 0);
	ck_assert_int_eq(mount_plan_forked(&warm, &cfg.limits, 1000, 1000, BTIME), 0);
	check_proc_masks(&cold, "cold");
	check_proc_masks(&warm, "warm");
	/* the same masks on both paths */
	for (size_t i = 0; i < cold.n; i++)
		if (cold.v[i].op == MOUNT_MASK) {
			ncold++;
			ck_assert_msg(find(&warm, MOUNT_MASK, cold.v[i].dst),
				      "warm path misses %s", cold.v[i].dst);
		}
	for (size_t i = 0; i < warm.n; i++)
		nwarm += warm.v[i].op == MOUNT_MASK;
	ck_assert_uint_eq(ncold, nwarm);
	/* the same files of the sandbox's own on both paths */
	for (size_t i = 0; faked_proc[i]; i++) {
		const struct mount_entry *c = find(&cold, MOUNT_FAKE, faked_proc[i]);
		const struct mount_entry *w = find(&warm, MOUNT_FAKE, faked_proc[i]);

		ck_assert(c && w && c->len == w->len);
		ck_assert(memcmp(c->data, w->data, c->len) == 0);
	}
	mount_plan_release(&cold);
	mount_plan_release(&warm);
}
END_TEST

/* The sandbox's own view: its memory limit in meminfo, all of it free;
 * nothing of the host's activity in stat or loadavg; btime the one the
 * jail gives (the start of the sandbox's clocks), never the host's. */
START_TEST(test_plan_proc_own_view)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;
	const struct mount_entry *e;
	cpu_set_t set;
	char *text, *s;
	int cpus = 0;

	default_config(&cfg, &f);
	cfg.limits.memory_bytes = 256ull << 20;
	ck_assert_int_eq(mount_plan_forked(&p, &cfg.limits, 1000, 1000, BTIME), 0);
	e = find(&p, MOUNT_FAKE, "/proc/meminfo");
	ck_assert_ptr_nonnull(e);
	text = strndup(e->data, e->len);
	ck_assert_ptr_nonnull(strstr(text, "MemTotal:         262144 kB\n"));
	ck_assert_ptr_nonnull(strstr(text, "MemFree:          262144 kB\n"));
	ck_assert_ptr_nonnull(strstr(text, "MemAvailable:     262144 kB\n"));
	free(text);
	e = find(&p, MOUNT_FAKE, "/proc/loadavg");
	ck_assert(e && e->len == 21 && memcmp(e->data, "0.00 0.00 0.00 1/1 1\n", 21) == 0);
	e = find(&p, MOUNT_FAKE, "/proc/stat");
	ck_assert_ptr_nonnull(e);
	text = strndup(e->data, e->len);
	ck_assert(strncmp(text, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu", 28) == 0);
	ck_assert_ptr_nonnull(strstr(text, "\nbtime 1700000000\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nprocs_running 1\n"));
	/* a cpuN line per CPU we may run on: what glibc counts */
	for (s = text; (s = strstr(s, "\ncpu")); s++)
		cpus++;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	ck_assert_int_eq(cpus, CPU_COUNT(&set));
	free(text);
	e = find(&p, MOUNT_FAKE, "/proc/cgroups");
	ck_assert(e && e->len > 43 &&
		  strncmp(e->data, "#subsys_name\thierarchy\tnum_cgroups\tenabled\n", 43) == 0);
	mount_plan_release(&p);
}
END_TEST

/* ptys: a devpts instance of each sandbox's own on both paths, private,
 * bounded, its ptmx open to the sandbox user; /dev/ptmx points into it. */
START_TEST(test_plan_devpts)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan cold, warm;
	const struct mount_entry *c, *w, *link;

	default_config(&cfg, &f);
	cfg.limits.ptys = 5;
	ck_assert_int_eq(mount_plan_build(&cold, &cfg, 1000, 1000, BTIME), 0);
	ck_assert_int_eq(mount_plan_forked(&warm, &cfg.limits, 1000, 1000, BTIME), 0);
	c = find(&cold, MOUNT_DEVPTS, "/dev/pts");
	w = find(&warm, MOUNT_DEVPTS, "/dev/pts");
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(w);
	ck_assert_str_eq(c->data, w->data);
	ck_assert_ptr_nonnull(strstr(c->data, "newinstance"));
	ck_assert_ptr_nonnull(strstr(c->data, "ptmxmode=0666"));
	ck_assert_ptr_nonnull(strstr(c->data, ",max=5"));
	ck_assert(find(&cold, MOUNT_TMPFS, "/dev") < c);
	link = find(&cold, MOUNT_SYMLINK, "/dev/ptmx");
	ck_assert(link && strcmp(link->src, "pts/ptmx") == 0);
	mount_plan_release(&cold);
	mount_plan_release(&warm);
}
END_TEST

/* The public parts of /etc/ssl, never the host's private keys. */
START_TEST(test_plan_etc_ssl)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;

	default_config(&cfg, &f);
	ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), 0);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_msg(strcmp(p.v[i].dst, "/etc/ssl") != 0 &&
			      strncmp(p.v[i].dst, "/etc/ssl/private", 16) != 0,
			      "the plan mounts %s", p.v[i].dst);
	mount_plan_release(&p);
}
END_TEST

START_TEST(test_plan_user_binds)
{
	static const char *const bad[][2] = {
		{ "relative/path", NULL }, { "/proc", NULL }, { "/work/x", NULL },
		{ "/usr/../etc", NULL }, { "/opt/petri/x", NULL }, { "/", NULL },
		{ "/tmp", NULL }, { "/a//b", NULL }, { "/etc", NULL },
	};
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;

	default_config(&cfg, &f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg.ro_binds = bad[i];
		ck_assert_msg(mount_plan_build(&p, &cfg, 1000, 1000, BTIME) == -EINVAL,
			      "accepted %s", bad[i][0]);
	}
	{
		static const char *const good[] = { "/srv", NULL };

		cfg.ro_binds = good;
		/* /srv exists on Debian; a bind of it is read-only */
		ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), 0);
		ck_assert_ptr_nonnull(find(&p, MOUNT_BIND, "/srv"));
		mount_plan_release(&p);
	}
}
END_TEST

/* What the configuration refuses at load, with the reason to name. */
START_TEST(test_bind_check)
{
	char why[256];

	ck_assert_int_eq(jail_bind_check("/srv", true, why, sizeof(why)), 0);
	ck_assert_int_eq(jail_bind_check("/tmp/x", true, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "/tmp"));
	ck_assert_int_eq(jail_bind_check("/lib/x", false, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(jail_bind_check("srv", false, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(jail_bind_check("/nonexistent-petri", false, why, sizeof(why)),
			 -ENOENT);
	ck_assert_int_eq(jail_bind_check("/var/lib/dpkg/status", true, why, sizeof(why)),
			 -ENOTDIR);
	ck_assert_int_eq(jail_bind_check("/var/lib/dpkg/status", false, why, sizeof(why)), 0);
	if (geteuid() == 0)	/* root's home: 0700 on Debian */
		ck_assert_int_eq(jail_bind_check("/root", true, why, sizeof(why)), -EACCES);
}
END_TEST

START_TEST(test_plan_files_only_under_opt)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;

	default_config(&cfg, &f);
	f.path = "/etc/evil";
	ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), -EINVAL);
	f.path = "/opt/../etc/evil";
	ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), -EINVAL);
}
END_TEST

START_TEST(test_plan_describe)
{
	struct jail_config cfg;
	struct jail_file f;
	struct mount_plan p;
	char *text;

	default_config(&cfg, &f);
	ck_assert_int_eq(mount_plan_build(&p, &cfg, 1000, 1000, BTIME), 0);
	ck_assert_int_eq(mount_plan_describe(&p, &text), 0);
	ck_assert_ptr_nonnull(strstr(text, "bind-ro /usr <- /usr\n"));
	ck_assert_ptr_nonnull(strstr(text, "proc /proc\n"));
	free(text);
	mount_plan_release(&p);
}
END_TEST

Suite *mounts_suite(void)
{
	Suite *s = suite_create("mounts");
	TCase *tc = tcase_create("plan");

	tcase_add_test(tc, test_plan_layout);
	tcase_add_test(tc, test_plan_proc_masks_both_paths);
	tcase_add_test(tc, test_plan_proc_own_view);
	tcase_add_test(tc, test_plan_devpts);
	tcase_add_test(tc, test_plan_etc_ssl);
	tcase_add_test(tc, test_plan_user_binds);
	tcase_add_test(tc, test_bind_check);
	tcase_add_test(tc, test_plan_files_only_under_opt);
	tcase_add_test(tc, test_plan_describe);
	suite_add_tcase(s, tc);
	return s;
}
