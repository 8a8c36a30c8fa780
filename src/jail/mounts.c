#include "jail/mounts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "jail/safe.h"
#include "util/buf.h"

/* ---- building the plan (parent side) ---------------------------------- */

static const char *plan_strdup(struct mount_plan *p, const char *s, size_t len)
{
	char *copy;

	if (p->nstrings == p->capstrings) {
		size_t cap = p->capstrings ? p->capstrings * 2 : 32;
		char **v = realloc(p->strings, cap * sizeof(*v));

		if (!v)
			return NULL;
		p->strings = v;
		p->capstrings = cap;
	}
	copy = malloc(len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = '\0';
	p->strings[p->nstrings++] = copy;
	return copy;
}

static int plan_add(struct mount_plan *p, enum mount_op op, unsigned flags,
		    const char *src, const char *dst, const char *data,
		    size_t len, mode_t mode)
{
	struct mount_entry *e;

	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct mount_entry *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	e = &p->v[p->n];
	memset(e, 0, sizeof(*e));
	e->op = op;
	e->flags = flags;
	e->mode = mode;
	e->len = len;
	if ((src && !(e->src = plan_strdup(p, src, strlen(src)))) ||
	    !(e->dst = plan_strdup(p, dst, strlen(dst))) ||
	    (data && !(e->data = plan_strdup(p, data, len))))
		return -ENOMEM;
	p->n++;
	return 0;
}

static int plan_text(struct mount_plan *p, const char *dst, const char *text)
{
	return plan_add(p, MOUNT_FILE, 0, NULL, dst, text, strlen(text), 0644);
}

/* Bind a host path at the same place if it exists.  A symlink is copied as
 * a symlink, never followed: its target then resolves inside the sandbox,
 * so a link on the host cannot pull in a file from outside the plan. */
static int plan_host_path(struct mount_plan *p, const char *path)
{
	struct stat st;
	char target[4096];
	ssize_t n;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		n = readlink(path, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return plan_add(p, MOUNT_SYMLINK, 0, target, path, NULL, 0, 0);
	}
	if (S_ISDIR(st.st_mode))
		return plan_add(p, MOUNT_BIND, MOUNT_F_DIR | MOUNT_F_OPTIONAL,
				path, path, NULL, 0, 0);
	if (S_ISREG(st.st_mode))
		return plan_add(p, MOUNT_BIND, MOUNT_F_OPTIONAL, path, path,
				NULL, 0, 0);
	return 0;	/* devices, sockets, fifos: never */
}

/* Paths the plan owns; a caller's extra bind may not land on or under them
 * (it would be covered by, or cover, the sandbox's own mounts), nor on the
 * links at the top, through which it would land somewhere else. */
static const char *const reserved[] = {
	"/proc", "/dev", "/work", "/tmp", "/etc", "/opt/petri", "/usr", "/home",
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL
};

static bool path_is_clean(const char *path)
{
	size_t len = strlen(path);

	if (len < 2 || len >= 1024 || path[0] != '/' || path[len - 1] == '/')
		return false;
	if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
		return false;
	if (len >= 2 && strcmp(path + len - 2, "/.") == 0)
		return false;
	if (len >= 3 && strcmp(path + len - 3, "/..") == 0)
		return false;
	return true;
}

static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Why path cannot be an extra bind, from its name alone; NULL: it can. */
static const char *bind_refusal(const char *path, char *why, size_t len)
{
	if (!path_is_clean(path)) {
		snprintf(why, len, "is not a clean absolute path (no '.', '..', '//' "
			 "or trailing '/', below 1024 bytes)");
		return why;
	}
	for (size_t i = 0; reserved[i]; i++)
		if (path_under(path, reserved[i]) || path_under(reserved[i], path)) {
			snprintf(why, len, "is on, under or over %s, which every sandbox "
				 "mounts itself", reserved[i]);
			return why;
		}
	return NULL;
}

static int plan_user_bind(struct mount_plan *p, const char *path)
{
	char why[160], real[PATH_MAX];
	struct stat st;

	if (bind_refusal(path, why, sizeof(why)))
		return -EINVAL;
	/* The host's symlinks resolved here, where they are the operator's:
	 * the child binds what they point to (it never follows a link). */
	if (!realpath(path, real) || stat(real, &st) < 0)
		return -errno;
	/* Never a device, a socket or a FIFO: what is bound is data. */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return -EINVAL;
	return plan_add(p, MOUNT_BIND, S_ISDIR(st.st_mode) ? MOUNT_F_DIR : 0,
			real, path, NULL, 0, 0);
}

/* Can the sandbox's users reach path?  As root, a sandbox is a host uid of
 * no group, so only the bits for others count (an ACL is not looked at);
 * without root it is our own uid. */
static bool readable_by_sandbox(const char *path, bool dir, char *bad, size_t len)
{
	char prefix[1024];
	struct stat st;

	if (geteuid() != 0) {
		snprintf(bad, len, "%s", path);
		return access(path, R_OK | (dir ? X_OK : 0)) == 0;
	}
	for (const char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(s - path), path);
		snprintf(bad, len, "%s", prefix);
		if (stat(prefix, &st) < 0 || !(st.st_mode & S_IXOTH))
			return false;
	}
	snprintf(bad, len, "%s", path);
	return stat(path, &st) == 0 && (st.st_mode & S_IROTH) &&
	       (!dir || (st.st_mode & S_IXOTH));
}

int jail_bind_check(const char *path, bool want_dir, char *why, size_t whylen)
{
	char bad[1024];
	struct stat st;

	if (bind_refusal(path, why, whylen))
		return -EINVAL;
	if (stat(path, &st) < 0) {
		snprintf(why, whylen, "cannot be found: %s", strerror(errno));
		return -ENOENT;
	}
	if (want_dir && !S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "is not a directory");
		return -ENOTDIR;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "is neither a directory nor a regular file");
		return -EINVAL;
	}
	if (!readable_by_sandbox(path, S_ISDIR(st.st_mode), bad, sizeof(bad))) {
		snprintf(why, whylen, "cannot be read by the sandbox's users: '%s' is not "
			 "readable (and searchable) by others", bad);
		return -EACCES;
	}
	return 0;
}

/* Debian's JDK configuration directories: "java-<version>-openjdk", and no
 * other /etc/java-* (an operator's own may hold secrets). */
static bool jdk_config(const char *name)
{
	size_t digits;

	if (strncmp(name, "java-", 5))
		return false;
	digits = strspn(name + 5, "0123456789");
	return digits > 0 && digits < 4 && !strcmp(name + 5 + digits, "-openjdk");
}

static int plan_etc(struct mount_plan *p, const char *hostname)
{
	/* Read-only host entries the runtimes need: the dynamic loader's
	 * cache, Debian's alternatives links (cc, awk...), matplotlib's and
	 * Python's configuration, fonts, and public lookup tables. */
	static const char *const host_etc[] = {
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/alternatives", "/etc/matplotlibrc", "/etc/fonts",
		"/etc/mime.types", "/etc/protocols", "/etc/services",
		"/etc/localtime",
		/* What the system is (platform.freedesktop_os_release, lsb
		 * tools): public, and what uname does not say. */
		"/etc/os-release", "/etc/debian_version",
		/* The CA certificates and OpenSSL's configuration (public
		 * data), so that TLS code works the day a network is allowed.
		 * Never all of /etc/ssl: /etc/ssl/private holds the host's
		 * keys. */
		"/etc/ssl/certs", "/etc/ssl/openssl.cnf",
		/* R's own configuration (Renviron, ldpaths): Rscript starts
		 * without it, but finds none of its base packages. */
		"/etc/R", NULL
	};
	char hosts[256], name[128];
	DIR *d;
	struct dirent *de;
	int r;

	snprintf(hosts, sizeof(hosts),
		 "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		 hostname);
	snprintf(name, sizeof(name), "%s\n", hostname);
	if ((r = plan_add(p, MOUNT_DIR, 0, NULL, "/etc", NULL, 0, 0755)) ||
	    (r = plan_text(p, "/etc/passwd",
			   "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
			   JAIL_USER ":x:1000:1000:sandbox:" JAIL_WORKDIR ":/bin/bash\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")) ||
	    (r = plan_text(p, "/etc/group",
			   "root:x:0:\n" JAIL_USER ":x:1000:\nnogroup:x:65534:\n")) ||
	    /* Names: /etc/hosts, then DNS.  With no resolv.conf the C
	     * library asks 127.0.0.1:53, where nothing answers in a sandbox
	     * without a network; a session with one has it led to its own
	     * resolver (src/net/router.h). */
	    (r = plan_text(p, "/etc/nsswitch.conf",
			   "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
			   "networks: files\nprotocols: files\nservices: files\n")) ||
	    (r = plan_text(p, "/etc/hosts", hosts)) ||
	    (r = plan_text(p, "/etc/hostname", name)) ||
	    /* git refuses to commit without an author, and a project's tests
	     * often make commits: an identity for the sandbox's user, at the
	     * lowest precedence (a `git config` of the code's own wins). */
	    (r = plan_text(p, "/etc/gitconfig",
			   "[user]\n\tname = " JAIL_USER "\n\temail = " JAIL_USER
			   "@petri.invalid\n[init]\n\tdefaultBranch = main\n")))
		return r;
	for (size_t i = 0; host_etc[i]; i++)
		if ((r = plan_host_path(p, host_etc[i])) < 0)
			return r;
	/* /etc/python3, /etc/python3.11: sitecustomize and friends;
	 * /etc/java-17-openjdk: the JDK's own configuration (its security
	 * properties and policy, logging), which the JVM does not start
	 * without; both public, as Debian ships them. */
	d = opendir("/etc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[300];

		if (strncmp(de->d_name, "python3", 7) != 0 && !jdk_config(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/etc/%s", de->d_name);
		if ((r = plan_host_path(p, path)) < 0)
			break;
	}
	closedir(d);
	return r < 0 ? r : 0;
}

/* Pseudo-terminals (os.openpty, pty, script, expect, ssh-like tools): a
 * devpts instance of the sandbox's own, so that it sees no pty of the host
 * or of another sandbox (every instance is private since Linux 4.7;
 * newinstance says so for older kernels), its ptmx open to the sandbox
 * user.  max bounds the ptys one sandbox holds: the kernel's pty.max is
 * shared by every instance outside the host's own, so without a bound one
 * sandbox could take them all from the others ([sandbox] ptys, whose sum
 * over the sandboxes the daemon checks against the host's table at
 * start: src/session/tables.h). */
static int plan_devpts(struct mount_plan *p, const struct jail_limits *lim)
{
	char opts[96];

	snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,max=%u",
		 lim->ptys ? lim->ptys : JAIL_PTYS_DEFAULT);
	return plan_add(p, MOUNT_DEVPTS, 0, NULL, "/dev/pts", opts, strlen(opts), 0);
}

static int plan_dev(struct mount_plan *p, const struct jail_limits *lim, uint64_t shm_bytes,
		    uid_t uid, gid_t gid)
{
	static const char *const nodes[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL
	};
	static const char *const links[][2] = {
		{ "/proc/self/fd", "/dev/fd" }, { "/proc/self/fd/0", "/dev/stdin" },
		{ "/proc/self/fd/1", "/dev/stdout" }, { "/proc/self/fd/2", "/dev/stderr" },
		{ "pts/ptmx", "/dev/ptmx" },
	};
	char opts[160];
	int r;

	if ((r = plan_add(p, MOUNT_TMPFS, MOUNT_F_NOEXEC, NULL, "/dev",
			  "mode=0755,size=64k,nr_inodes=64", 32, 0)))
		return r;
	for (size_t i = 0; nodes[i]; i++)
		if ((r = plan_add(p, MOUNT_BIND, MOUNT_F_RW, nodes[i], nodes[i],
				  NULL, 0, 0)))
			return r;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if ((r = plan_add(p, MOUNT_SYMLINK, 0, links[i][0], links[i][1],
				  NULL, 0, 0)))
			return r;
	if ((r = plan_devpts(p, lim)))
		return r;
	snprintf(opts, sizeof(opts), "mode=1777,size=%llu,nr_inodes=1024,uid=%u,gid=%u",
		 (unsigned long long)shm_bytes, (unsigned)uid, (unsigned)gid);
	return plan_add(p, MOUNT_TMPFS, MOUNT_F_NOEXEC, NULL, "/dev/shm", opts,
			strlen(opts), 0);
}

/* ---- /proc files that would move with the neighbours ----------------
 *
 * Each is replaced by a file written when the plan is built, the same on
 * every read: the tools that read them keep working, and nothing in them
 * moves when another sandbox (or the host) works.  Built by the daemon on
 * the cold path and by the template on the warm one, from the host's
 * shape (the CPUs we may run on, the cgroup controllers, the size of its
 * memory), the sandbox's memory limit and btime. */

/* A cpuN line for each CPU we may run on (the sandbox inherits our
 * affinity): with no /sys, glibc counts processors here, so
 * os.cpu_count(), nproc and OpenBLAS keep their answer.  Every counter is
 * zero; btime is the start of the sandbox's own clocks, which ps adds to a
 * process's start (proc(5)). */
static int fake_stat(struct buf *b, long long btime)
{
	static const char zeros[] = " 0 0 0 0 0 0 0 0 0 0\n";
	cpu_set_t set;
	long n = 0;
	int r;

	if ((r = buf_appendf(b, "cpu %s", zeros)))
		return r;
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int i = 0; i < CPU_SETSIZE && !r; i++)
			if (CPU_ISSET(i, &set) && !(r = buf_appendf(b, "cpu%d%s", i, zeros)))
				n++;
	} else {
		/* More CPUs than a cpu_set_t holds: all of them. */
		long online = sysconf(_SC_NPROCESSORS_ONLN);

		for (; n < online && !r; n++)
			r = buf_appendf(b, "cpu%ld%s", n, zeros);
	}
	if (!r && n == 0)
		r = buf_appendf(b, "cpu0%s", zeros);
	if (!r)
		r = buf_appendf(b, "intr 0\nctxt 0\nbtime %lld\nprocesses 0\nprocs_running 1\n"
				"procs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n", btime);
	return r;
}

/* The controllers as the host has them, each with its hierarchy, whether
 * it is enabled, and one cgroup: the host's count is every cgroup of the
 * machine, which moved exactly as sandboxes came and went. */
static int fake_cgroups(struct buf *b)
{
	char line[256], name[64];
	unsigned hier, num, enabled;
	FILE *f = fopen("/proc/cgroups", "re");
	int r = buf_append_str(b, "#subsys_name\thierarchy\tnum_cgroups\tenabled\n");

	while (!r && f && fgets(line, sizeof(line), f))
		if (line[0] != '#' &&
		    sscanf(line, "%63s %u %u %u", name, &hier, &num, &enabled) == 4)
			r = buf_appendf(b, "%s\t%u\t1\t%u\n", name, hier, enabled);
	if (f)
		fclose(f);
	return r;
}

/* The sandbox's memory as if nothing used it: its limit (the host's size
 * without one, or when the host is smaller), all of it free and
 * available.  psutil, joblib and dask size their work by MemTotal and
 * MemAvailable; the host's free fields move with every allocation of
 * every neighbour. */
static int fake_meminfo(struct buf *b, const struct jail_limits *lim)
{
	struct sysinfo si;
	unsigned long long kb = lim->memory_bytes >> 10, host = 0;

	if (sysinfo(&si) == 0)
		host = (unsigned long long)si.totalram * si.mem_unit >> 10;
	if (!kb || (host && host < kb))
		kb = host;
	return buf_appendf(b,
		"MemTotal:       %8llu kB\nMemFree:        %8llu kB\n"
		"MemAvailable:   %8llu kB\nBuffers:               0 kB\n"
		"Cached:                0 kB\nSwapCached:            0 kB\n"
		"Active:                0 kB\nInactive:              0 kB\n"
		"SwapTotal:             0 kB\nSwapFree:              0 kB\n"
		"Dirty:                 0 kB\nWriteback:             0 kB\n"
		"AnonPages:             0 kB\nMapped:                0 kB\n"
		"Shmem:                 0 kB\nSlab:                  0 kB\n"
		"SReclaimable:          0 kB\nSUnreclaim:            0 kB\n",
		kb, kb, kb);
}

static int plan_fake(struct mount_plan *p, const char *dst, struct buf *b)
{
	int r = plan_add(p, MOUNT_FAKE, 0, NULL, dst, b->data ? b->data : "", b->len, 0444);

	buf_reset(b);
	return r;
}

static int plan_proc_fakes(struct mount_plan *p, const struct jail_limits *lim,
			   long long btime)
{
	struct buf b = BUF_INIT;
	int r;

	if ((r = fake_stat(&b, btime)) || (r = plan_fake(p, "/proc/stat", &b)) ||
	    (r = fake_cgroups(&b)) || (r = plan_fake(p, "/proc/cgroups", &b)) ||
	    (r = fake_meminfo(&b, lim)) || (r = plan_fake(p, "/proc/meminfo", &b)) ||
	    /* os.getloadavg(), uptime, w, top's header: idle, one task; the
	     * host's run queue and thread count move with the neighbours. */
	    (r = buf_append_str(&b, "0.00 0.00 0.00 1/1 1\n")) ||
	    (r = plan_fake(p, "/proc/loadavg", &b)) ||
	    /* vmstat(1) and psutil's swap_memory(): the counters they read,
	     * at zero. */
	    (r = buf_append_str(&b, "nr_free_pages 0\npgpgin 0\npgpgout 0\npswpin 0\n"
				"pswpout 0\npgfault 0\npgmajfault 0\n")) ||
	    (r = plan_fake(p, "/proc/vmstat", &b)))
		goto out;
out:
	buf_release(&b);
	return r;
}

static int plan_proc(struct mount_plan *p, const struct jail_limits *lim,
		     long long btime)
{
	/* Read-only: writes to /proc/sys and the sysrq trigger are refused
	 * even if some other layer failed. */
	static const char *const ro[] = {
		"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", NULL
	};
	/* Masked: files that describe the host rather than the sandbox.  Its
	 * kernel: addresses, symbols, modules, configuration, boot command
	 * line, hardware maps and the allocators' internals (exploit aids).
	 * Its activity, host-wide and live: interrupts (irq/ too), softirqs,
	 * disk I/O, the filesystems' own statistics (fs/), the allocators'
	 * free lists, pressure, scheduler statistics, file locks, and the
	 * counts of the kernel's shared tables (ptys, open files, inodes,
	 * dentries, AIO contexts, quota), which time a neighbour's work
	 * (keystrokes, queries, imports, sessions starting) as a side
	 * channel.  Its identity: disks, swap, and boot_id, which names the
	 * machine alike in every sandbox so that sessions can be linked.
	 * Replaced by a file of the sandbox's own (plan_proc_fakes), because
	 * the runtimes read them: stat, cgroups, meminfo, loadavg, vmstat.
	 * Kept, because a pid, mount, network or time namespace already gives
	 * them the sandbox's own view, or they hold only the machine's size
	 * or a constant: self, thread-self, mounts, net, sysvipc, uptime (the
	 * sandbox's clocks), cpuinfo (numpy, os.cpu_count's fallbacks),
	 * version (what uname says anyway), filesystems, crypto,
	 * sys/kernel/random/entropy_avail (256 on every kernel since 5.18).
	 * docs/security.md says why for each. */
	static const char *const masked[] = {
		"/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
		"/proc/sched_debug", "/proc/kallsyms", "/proc/kmsg",
		"/proc/latency_stats", "/proc/acpi", "/proc/scsi", "/proc/asound",
		"/proc/driver", "/proc/modules", "/proc/config.gz", "/proc/cmdline",
		"/proc/iomem", "/proc/ioports", "/proc/vmallocinfo", "/proc/slabinfo",
		"/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
		"/proc/interrupts", "/proc/softirqs", "/proc/irq", "/proc/diskstats",
		"/proc/fs",
		"/proc/pagetypeinfo", "/proc/zoneinfo", "/proc/buddyinfo",
		"/proc/pressure", "/proc/schedstat", "/proc/locks",
		"/proc/partitions", "/proc/swaps", "/proc/sys/kernel/random/boot_id",
		"/proc/sys/kernel/pty/nr", "/proc/sys/fs/file-nr",
		"/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state",
		"/proc/sys/fs/dentry-state", "/proc/sys/fs/aio-nr",
		"/proc/sys/fs/quota",
		NULL
	};
	int r;

	if ((r = plan_add(p, MOUNT_PROC, 0, NULL, "/proc", NULL, 0, 0)))
		return r;
	for (size_t i = 0; ro[i]; i++)
		if ((r = plan_add(p, MOUNT_BIND, MOUNT_F_SELF | MOUNT_F_OPTIONAL,
				  ro[i], ro[i], NULL, 0, 0)))
			return r;
	for (size_t i = 0; masked[i]; i++)
		if ((r = plan_add(p, MOUNT_MASK, MOUNT_F_OPTIONAL, NULL, masked[i],
				  NULL, 0, 0)))
			return r;
	return plan_proc_fakes(p, lim, btime);
}

static int plan_tmpfs(struct mount_plan *p, const char *dst, uint64_t bytes,
		      uint64_t inodes, const char *mode, uid_t uid, gid_t gid)
{
	char opts[160];

	snprintf(opts, sizeof(opts), "mode=%s,size=%llu,nr_inodes=%llu,uid=%u,gid=%u",
		 mode, (unsigned long long)bytes, (unsigned long long)inodes,
		 (unsigned)uid, (unsigned)gid);
	return plan_add(p, MOUNT_TMPFS, 0, NULL, dst, opts, strlen(opts), 0);
}

static uint64_t shm_bytes(const struct jail_limits *lim)
{
	uint64_t shm = lim->tmp_bytes < (64u << 20) ? lim->tmp_bytes : (64u << 20);

	return shm ? shm : (16u << 20);
}

/* The workspace under the name E2B's SDKs use, after /work exists: the same
 * mount, so that the working directory is /home/user there and not /work
 * behind a link. */
static int plan_alias(struct mount_plan *p)
{
	return plan_add(p, MOUNT_ALIAS, 0, JAIL_WORKDIR, JAIL_HOME_ALIAS, NULL, 0, 0);
}

int mount_plan_forked(struct mount_plan *p, const struct jail_limits *lim,
		      uid_t uid, gid_t gid, long long btime)
{
	uint64_t inodes = lim->inodes ? lim->inodes : 65536;
	char opts[160];
	int r;

	memset(p, 0, sizeof(*p));
	snprintf(opts, sizeof(opts), "mode=1777,size=%llu,nr_inodes=1024,uid=%u,gid=%u",
		 (unsigned long long)shm_bytes(lim), (unsigned)uid, (unsigned)gid);
	if ((r = plan_proc(p, lim, btime)) ||
	    (r = plan_devpts(p, lim)) ||
	    (r = plan_add(p, MOUNT_TMPFS, MOUNT_F_NOEXEC, NULL, "/dev/shm", opts,
			  strlen(opts), 0)) ||
	    (r = plan_tmpfs(p, "/tmp", lim->tmp_bytes, inodes, "1777", uid, gid)) ||
	    (r = plan_tmpfs(p, JAIL_WORKDIR, lim->work_bytes, inodes, "0755", uid, gid)) ||
	    (r = plan_alias(p)))
		mount_plan_release(p);
	return r;
}

int mount_plan_build(struct mount_plan *p, const struct jail_config *cfg,
		     uid_t uid, gid_t gid, long long btime)
{
	static const char *const top_links[] = {
		"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL
	};
	const struct jail_limits *lim = &cfg->limits;
	uint64_t inodes = lim->inodes ? lim->inodes : 65536;
	int r;

	memset(p, 0, sizeof(*p));
	if ((r = plan_add(p, MOUNT_BIND, MOUNT_F_DIR, "/usr", "/usr", NULL, 0, 0)))
		goto fail;
	for (size_t i = 0; top_links[i]; i++)
		if ((r = plan_host_path(p, top_links[i])) < 0)
			goto fail;
	if ((r = plan_etc(p, cfg->hostname ? cfg->hostname : "petri")) ||
	    (r = plan_dev(p, lim, shm_bytes(lim), uid, gid)) ||
	    (r = plan_proc(p, lim, btime)))
		goto fail;
	for (size_t i = 0; i < cfg->nfiles; i++) {
		const struct jail_file *f = &cfg->files[i];

		if (!path_is_clean(f->path) || !path_under(f->path, "/opt")) {
			r = -EINVAL;
			goto fail;
		}
		if ((r = plan_add(p, MOUNT_FILE, 0, NULL, f->path, f->data, f->len,
				  f->mode)))
			goto fail;
	}
	for (size_t i = 0; cfg->ro_binds && cfg->ro_binds[i]; i++)
		if ((r = plan_user_bind(p, cfg->ro_binds[i])) < 0)
			goto fail;
	if ((r = plan_tmpfs(p, "/tmp", lim->tmp_bytes, inodes, "1777", uid, gid)) ||
	    (r = plan_tmpfs(p, JAIL_WORKDIR, lim->work_bytes, inodes, "0755", uid, gid)))
		goto fail;
	if ((r = plan_alias(p)))
		goto fail;
	return 0;
fail:
	mount_plan_release(p);
	return r;
}

void mount_plan_release(struct mount_plan *p)
{
	for (size_t i = 0; i < p->nstrings; i++)
		free(p->strings[i]);
	free(p->strings);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int mount_plan_describe(const struct mount_plan *p, char **out)
{
	static const char *const names[] = {
		[MOUNT_DIR] = "dir", [MOUNT_TMPFS] = "tmpfs", [MOUNT_BIND] = "bind",
		[MOUNT_PROC] = "proc", [MOUNT_SYMLINK] = "symlink",
		[MOUNT_FILE] = "file", [MOUNT_MASK] = "mask",
		[MOUNT_ALIAS] = "alias", [MOUNT_DEVPTS] = "devpts",
		[MOUNT_FAKE] = "fake",
	};
	struct buf b = BUF_INIT;
	int r = 0;

	for (size_t i = 0; i < p->n && r == 0; i++) {
		const struct mount_entry *e = &p->v[i];

		r = buf_appendf(&b, "%s%s %s", names[e->op],
				e->op == MOUNT_BIND ? (e->flags & MOUNT_F_RW ? "-rw" : "-ro") : "",
				e->dst);
		if (!r && e->src)
			r = buf_appendf(&b, " <- %s", e->src);
		if (!r && (e->op == MOUNT_TMPFS || e->op == MOUNT_DEVPTS))
			r = buf_appendf(&b, " (%s)", e->data);
		if (!r)
			r = buf_append_str(&b, "\n");
	}
	if (r) {
		buf_release(&b);
		return r;
	}
	*out = buf_detach(&b, NULL);
	return *out ? 0 : -ENOMEM;
}

/* ---- applying the plan (child side: system calls only) ---------------- */

/* The flags a bind mount inherits from its source and must keep when it
 * is remounted inside a user namespace (the kernel locks them). */
static unsigned long locked_flags(const char *path)
{
	struct statfs sf;
	unsigned long f = 0;

	if (statfs(path, &sf) < 0)
		return 0;
	if (sf.f_flags & ST_NOSUID)
		f |= MS_NOSUID;
	if (sf.f_flags & ST_NODEV)
		f |= MS_NODEV;
	if (sf.f_flags & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sf.f_flags & ST_NOATIME)
		f |= MS_NOATIME;
	if (sf.f_flags & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sf.f_flags & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

static int make_parent(const char *path)
{
	char parent[4096];
	char *slash;
	size_t len = strlen(path);

	if (len >= sizeof(parent))
		return -ENAMETOOLONG;
	memcpy(parent, path, len + 1);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return 0;
	*slash = '\0';
	return safe_mkdir_p(parent, 0755);
}

static int make_mountpoint(const char *path, bool dir)
{
	int r = make_parent(path), fd;

	if (r < 0)
		return r;
	if (dir)
		return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int bind_ro(const char *src, const char *dst, unsigned long extra)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -errno;
	if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | extra |
		  locked_flags(dst), NULL) < 0)
		return -errno;
	return 0;
}

static int apply_bind(const struct mount_entry *e, const char *newroot,
		      const char *dst, char *err, size_t errlen)
{
	char src[4096];
	struct stat st;
	unsigned long extra = MS_NOSUID;
	int r;

	if (e->flags & MOUNT_F_SELF) {
		if ((r = safe_join(src, sizeof(src), newroot, e->src)) < 0)
			return safe_fail(err, errlen, "path too long", e->src, -r);
	} else if ((r = safe_join(src, sizeof(src), "", e->src)) < 0) {
		return safe_fail(err, errlen, "path too long", e->src, -r);
	}
	if (lstat(src, &st) < 0) {
		if (errno == ENOENT && (e->flags & MOUNT_F_OPTIONAL))
			return 0;
		return safe_fail(err, errlen, "cannot find", e->src, errno);
	}
	if (!(e->flags & MOUNT_F_SELF) &&
	    (r = make_mountpoint(dst, S_ISDIR(st.st_mode))) < 0)
		return safe_fail(err, errlen, "cannot create mount point", e->dst, -r);
	if (e->flags & MOUNT_F_RW) {
		/* Device nodes: writable, executable never. */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID |
			  MS_NOEXEC | locked_flags(dst), NULL) < 0)
			return safe_fail(err, errlen, "cannot bind", e->src, errno);
		return 0;
	}
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		extra |= MS_NODEV;
	if ((r = bind_ro(src, dst, extra)) < 0)
		return safe_fail(err, errlen, "cannot bind read-only", e->src, -r);
	return 0;
}

static int apply_mask(const struct mount_entry *e, const char *newroot,
		      const char *dst, char *err, size_t errlen)
{
	char devnull[4096];
	struct stat st;
	int r;

	if (lstat(dst, &st) < 0) {
		if (errno == ENOENT && (e->flags & MOUNT_F_OPTIONAL))
			return 0;
		return safe_fail(err, errlen, "cannot find", e->dst, errno);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV |
			  MS_NOEXEC, "mode=0555,size=4k,nr_inodes=1") < 0)
			return safe_fail(err, errlen, "cannot mask", e->dst, errno);
		return 0;
	}
	if ((r = safe_join(devnull, sizeof(devnull), newroot, "/dev/null")) < 0 ||
	    (r = bind_ro(devnull, dst, MS_NOSUID | MS_NOEXEC)) < 0)
		return safe_fail(err, errlen, "cannot mask", e->dst, -r);
	return 0;
}

/* The run of MOUNT_FAKE entries that starts at v[0] (n of them at most):
 * their files are written into one scratch tmpfs on the new root's /tmp
 * (mounted over later, on both paths), which is then made read-only;
 * each file is bound over its dst (a bind keeps its source's read-only,
 * nosuid, nodev and noexec: one mount call a file), and the scratch mount
 * is detached: the binds keep the small tmpfs alive, and nothing of it is
 * reachable but the files, for as long as the sandbox's mount namespace
 * lives.  Returns how many entries it applied, or -errno. */
static int apply_fakes(const struct mount_entry *v, size_t n, const char *newroot,
		       char *err, size_t errlen)
{
	const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	char scratch[4096], file[4096], dst[4096], num[24];
	size_t k, count = 0;
	int r = 0;

	while (count < n && v[count].op == MOUNT_FAKE)
		count++;
	if ((r = safe_join(scratch, sizeof(scratch), newroot, "/tmp")) < 0)
		return safe_fail(err, errlen, "path too long", v[0].dst, -r);
	if ((r = safe_mkdir_p(scratch, 0755)) < 0)
		return safe_fail(err, errlen, "cannot create", "/tmp", -r);
	if (mount("tmpfs", scratch, "tmpfs", flags, "mode=0755,size=256k,nr_inodes=16") < 0)
		return safe_fail(err, errlen, "cannot mount a tmpfs for", v[0].dst, errno);
	for (k = 0; k < count && r == 0; k++) {
		file[0] = '\0';
		safe_strlcat(file, scratch, sizeof(file));
		safe_strlcat(file, "/", sizeof(file));
		if (safe_strlcat(file, safe_utoa(k, num), sizeof(file)) >= sizeof(file))
			r = safe_fail(err, errlen, "path too long", v[k].dst, ENAMETOOLONG);
		else if ((r = safe_write_file(file, v[k].data, v[k].len,
					      O_CREAT | O_EXCL | O_NOFOLLOW, v[k].mode)) < 0)
			r = safe_fail(err, errlen, "cannot write", v[k].dst, -r);
	}
	if (r == 0 && mount(NULL, scratch, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags,
			    NULL) < 0)
		r = safe_fail(err, errlen, "cannot make read-only the tmpfs of", v[0].dst, errno);
	for (k = 0; k < count && r == 0; k++) {
		file[0] = '\0';
		safe_strlcat(file, scratch, sizeof(file));
		safe_strlcat(file, "/", sizeof(file));
		safe_strlcat(file, safe_utoa(k, num), sizeof(file));
		if ((r = safe_join(dst, sizeof(dst), newroot, v[k].dst)) < 0)
			r = safe_fail(err, errlen, "path too long", v[k].dst, -r);
		else if (mount(file, dst, NULL, MS_BIND, NULL) < 0)
			r = safe_fail(err, errlen, "cannot bind a file over", v[k].dst, errno);
	}
	if (umount2(scratch, MNT_DETACH) < 0 && r == 0)
		r = safe_fail(err, errlen, "cannot detach the scratch tmpfs of", v[0].dst, errno);
	return r < 0 ? r : (int)count;
}

static int apply_one(const struct mount_entry *e, const char *newroot,
		     char *err, size_t errlen)
{
	char dst[4096];
	int r;

	if ((r = safe_join(dst, sizeof(dst), newroot, e->dst)) < 0)
		return safe_fail(err, errlen, "path too long", e->dst, -r);
	switch (e->op) {
	case MOUNT_DIR:
		if ((r = safe_mkdir_p(dst, e->mode)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		return 0;
	case MOUNT_TMPFS:
		if ((r = safe_mkdir_p(dst, 0755)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV |
			  (e->flags & MOUNT_F_NOEXEC ? MS_NOEXEC : 0), e->data) < 0)
			return safe_fail(err, errlen, "cannot mount tmpfs at", e->dst, errno);
		return 0;
	case MOUNT_BIND:
		return apply_bind(e, newroot, dst, err, errlen);
	case MOUNT_PROC:
		if ((r = safe_mkdir_p(dst, 0555)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return safe_fail(err, errlen, "cannot mount proc at", e->dst, errno);
		return 0;
	case MOUNT_SYMLINK:
		if ((r = make_parent(dst)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		if (symlink(e->src, dst) < 0 && errno != EEXIST)
			return safe_fail(err, errlen, "cannot create symlink", e->dst, errno);
		return 0;
	case MOUNT_FILE:
		if ((r = make_parent(dst)) < 0 ||
		    (r = safe_write_file(dst, e->data, e->len,
					 O_CREAT | O_EXCL | O_NOFOLLOW, e->mode)) < 0)
			return safe_fail(err, errlen, "cannot write", e->dst, -r);
		return 0;
	case MOUNT_MASK:
		return apply_mask(e, newroot, dst, err, errlen);
	case MOUNT_FAKE:
		r = apply_fakes(e, 1, newroot, err, errlen);
		return r < 0 ? r : 0;
	case MOUNT_DEVPTS:
		if ((r = safe_mkdir_p(dst, 0755)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		if (mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC, e->data) < 0)
			return safe_fail(err, errlen, "cannot mount devpts at", e->dst, errno);
		return 0;
	case MOUNT_ALIAS: {
		char src[4096];

		if ((r = safe_join(src, sizeof(src), newroot, e->src)) < 0)
			return safe_fail(err, errlen, "path too long", e->src, -r);
		if ((r = safe_mkdir_p(dst, 0755)) < 0)
			return safe_fail(err, errlen, "cannot create", e->dst, -r);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
			  locked_flags(dst), NULL) < 0)
			return safe_fail(err, errlen, "cannot bind", e->dst, errno);
		return 0;
	}
	}
	return safe_fail(err, errlen, "unknown mount operation for", e->dst, EINVAL);
}

int mount_plan_apply(const struct mount_plan *p, const char *newroot,
		     char *err, size_t errlen)
{
	for (size_t i = 0; i < p->n; i++) {
		int r;

		if (p->v[i].op == MOUNT_FAKE) {
			if ((r = apply_fakes(&p->v[i], p->n - i, newroot, err, errlen)) < 0)
				return r;
			i += (size_t)r - 1;
			continue;
		}
		if ((r = apply_one(&p->v[i], newroot, err, errlen)) < 0)
			return r;
	}
	return 0;
}

int mount_setup_root(const struct mount_plan *plan, char *err, size_t errlen)
{
	/* Any existing directory of the host serves as the scratch mount
	 * point: the tmpfs on it exists only in this mount namespace. */
	static const char base[] = "/tmp";
	int r;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return safe_fail(err, errlen, "cannot make mounts private", NULL, errno);
	if (mount("tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=16m,nr_inodes=4096") < 0)
		return safe_fail(err, errlen, "cannot mount the root tmpfs", NULL, errno);
	if ((r = mount_plan_apply(plan, base, err, errlen)) < 0)
		return r;
	if (mkdir("/tmp/.oldroot", 0700) < 0)
		return safe_fail(err, errlen, "cannot create", "/.oldroot", errno);
	if (syscall(SYS_pivot_root, base, "/tmp/.oldroot") < 0)
		return safe_fail(err, errlen, "pivot_root failed", NULL, errno);
	if (chdir("/") < 0)
		return safe_fail(err, errlen, "cannot chdir", "/", errno);
	if (umount2("/.oldroot", MNT_DETACH) < 0)
		return safe_fail(err, errlen, "cannot detach the old root", NULL, errno);
	if (rmdir("/.oldroot") < 0)
		return safe_fail(err, errlen, "cannot remove", "/.oldroot", errno);
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0)
		return safe_fail(err, errlen, "cannot make the root read-only", NULL, errno);
	return 0;
}

int mount_refresh(const struct mount_plan *plan, char *err, size_t errlen)
{
	/* Private first: nothing here may reach the template's mounts. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return safe_fail(err, errlen, "cannot make mounts private", NULL, errno);
	for (size_t i = 0; i < plan->n; i++) {
		const struct mount_entry *e = &plan->v[i];
		int r;

		switch (e->op) {
		case MOUNT_PROC:
			/* The kernel lets a user namespace mount proc only while
			 * an instance is fully visible: mount ours on /tmp
			 * (replaced below anyway) while the template's is still
			 * on /proc, drop the template's, then move ours there. */
			if (mount("proc", "/tmp", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
				  NULL) < 0)
				return safe_fail(err, errlen, "cannot mount proc", NULL, errno);
			if (umount2(e->dst, MNT_DETACH) < 0)
				return safe_fail(err, errlen, "cannot detach", e->dst, errno);
			if (mount("/tmp", e->dst, NULL, MS_MOVE, NULL) < 0)
				return safe_fail(err, errlen, "cannot move proc to", e->dst, errno);
			break;
		case MOUNT_ALIAS:
			/* The template's alias shows the template's /work: it
			 * goes, and one of the fresh /work comes. */
			if (umount2(e->dst, MNT_DETACH) < 0 && errno != EINVAL)
				return safe_fail(err, errlen, "cannot detach", e->dst, errno);
			if ((r = apply_one(e, "", err, errlen)) < 0)
				return r;
			break;
		case MOUNT_DEVPTS:
			/* The template's instance goes (its ptys are not this
			 * sandbox's); a fresh one comes.  /dev/ptmx, a link into
			 * it, is the template's and stays. */
			if (umount2(e->dst, MNT_DETACH) < 0)
				return safe_fail(err, errlen, "cannot detach", e->dst, errno);
			if ((r = apply_one(e, "", err, errlen)) < 0)
				return r;
			break;
		case MOUNT_FAKE:
			/* Over the fresh /proc, from a scratch tmpfs on the
			 * template's /tmp, which is replaced below. */
			if ((r = apply_fakes(e, plan->n - i, "", err, errlen)) < 0)
				return r;
			i += (size_t)r - 1;
			break;
		case MOUNT_TMPFS:
			/* The template's own tmpfs goes; a fresh one comes. */
			if (umount2(e->dst, MNT_DETACH) < 0)
				return safe_fail(err, errlen, "cannot detach", e->dst, errno);
			if (mount("tmpfs", e->dst, "tmpfs", MS_NOSUID | MS_NODEV |
				  (e->flags & MOUNT_F_NOEXEC ? MS_NOEXEC : 0), e->data) < 0)
				return safe_fail(err, errlen, "cannot mount tmpfs at", e->dst, errno);
			break;
		default:
			if ((r = apply_one(e, "", err, errlen)) < 0)
				return r;
		}
	}
	return 0;
}
