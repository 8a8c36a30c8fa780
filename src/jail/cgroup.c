/* cgroup — per-sandbox control groups; the contract is in cgroup.h.
 *
 * One model serves both versions: a manager holds a list of hierarchies
 * (v2: exactly one; v1: one per distinct mount among memory, pids, cpu,
 * cpuacct and freezer, so that co-mounted "cpu,cpuacct" counts once) and, per
 * hierarchy, the directory sandbox cgroups are made in.  A cg holds the same
 * list with its own directory in each.  A cg copies what it needs from its
 * manager, so it may outlive it.
 *
 * Detection, in this order:
 *   1. fs_root/cgroup.controllers lists memory, pids or cpu: v2 with those.
 *   2. fs_root/<ctrl>/cgroup.procs exists for memory, pids, cpu or cpuacct:
 *      v1 (a hybrid host whose v2 root has no controllers lands here).
 *   3. fs_root/cgroup.controllers exists but lists none of them: v2 without
 *      controllers.  We accept this mode rather than fail: a cgroup without
 *      controllers still gives what rlimits cannot, i.e. a kill that reaches
 *      every process (cgroup.kill), a reliable "is anything left" test and CPU
 *      time of the whole sandbox (cpu.stat is core).  cg_has_memory() etc.
 *      say false, so the caller applies rlimits for the limits themselves.
 *   4. Nothing: -ENOENT with a message.
 *
 * Control files are written with O_CREAT so that a fake tree made of plain
 * files works in tests; cgroupfs refuses to create files (EACCES), so a
 * missing control file still fails on a real host.  Nothing here ever
 * unlinks a file: on cgroupfs the control files vanish with rmdir, and
 * removing files is not a cgroup's business.  Tests on fake trees therefore
 * remove the files themselves before cg_destroy()/cg_sweep().
 *
 * Sandboxes cannot make cgroups of their own (no cgroup file system is
 * mounted in their mount namespace and they cannot mount one; as root,
 * cgroupfs also belongs to host root, not to their uids), so a sandbox
 * cgroup never has children: kill and rmdir need not recurse.  Without
 * root, in a delegated subtree, the cgroups we make belong to our uid,
 * which is the sandboxes' host uid too: only the first reason holds then.
 *
 * Thread safety: a manager is read-only after cg_manager_new() apart from
 * the atomic sequence counter of names; each cg belongs to one thread,
 * except that cg_stats() may be called from others while it lives.
 */
#include "jail/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "util/log.h"

enum ctrl { C_MEMORY, C_PIDS, C_CPU, C_CPUACCT, C_FREEZER, C_COUNT };

_Static_assert(CG_JOIN_MAX == C_COUNT, "a cg_join holds one fd per hierarchy");

static const char *const ctrl_names[C_COUNT] = {
	"memory", "pids", "cpu", "cpuacct", "freezer",
};

#define BIT(c) (1u << (c))
#define V2_CTRLS (BIT(C_MEMORY) | BIT(C_PIDS) | BIT(C_CPU))
#define V1_LIMIT_CTRLS (BIT(C_MEMORY) | BIT(C_PIDS) | BIT(C_CPU) | BIT(C_CPUACCT))

#define DEFAULT_LEAF "/petri"
#define SUPERVISOR_LEAF "petri-supervisor"	/* v2_delegated(): where petri moves itself */
#define PROC_CGROUP_INIT_INO 0xEFFFFFFBu	/* the initial cgroup namespace's inode,
						 * fixed (include/linux/proc_ns.h) */
#define CPU_PERIOD_US 100000u
#define CPU_MIN_QUOTA_US 1000u	/* the kernel refuses less than 1 ms */
#define KILL_TIMEOUT_MS 2000	/* the default of cg_manager_set_kill_timeout() */
#define POLL_MS 5
#define RMDIR_TRIES 400		/* x POLL_MS: two seconds (40 zombies released at once on a
				 * loaded machine took longer than a quarter) */
#define NAME_TRIES 16
#define SMALL_FILE 4096		/* every keyed or single-value file fits */

struct cg_manager {
	enum jail_cg_version version;
	unsigned ctrls;			/* BIT(enum ctrl) usable */
	bool swap;
	bool tcp;			/* v1: memory.kmem.tcp.limit_in_bytes */
	size_t nhier;
	char *parent[C_COUNT];		/* per hierarchy: where sandboxes go */
	int hier_of[C_COUNT];		/* controller -> hierarchy, -1: none */
	char tag[48];			/* "p<pid>-<starttime>" */
	atomic_uint seq;
	unsigned kill_timeout_ms;	/* copied into each cg */
	char note[512];			/* cg_manager_note() */
};

struct cg {
	enum jail_cg_version version;
	unsigned ctrls;
	bool swap, tcp;
	size_t ndir;
	char *dir[C_COUNT];		/* per hierarchy, as in the manager */
	int hier_of[C_COUNT];
	int peak_fd;			/* v2 memory.peak, opened on first use */
	bool peak_writable;
	unsigned kill_timeout_ms;	/* cg_kill() gives up after it */
};

/* ---- small helpers ----------------------------------------------------- */

__attribute__((format(printf, 3, 4)))
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int file_path(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

static bool file_exists(const char *dir, const char *name)
{
	char path[PATH_MAX];

	return file_path(path, sizeof(path), dir, name) == 0 &&
	       access(path, F_OK) == 0;
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	size_t len = strlen(text);
	ssize_t n;
	int fd, rc;

	rc = file_path(path, sizeof(path), dir, name);
	if (rc)
		return rc;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	/* Control files take one write(); a short write is an error. */
	n = write(fd, text, len);
	rc = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
	if (close(fd) < 0 && !rc && errno != EINTR)
		rc = -errno;
	return rc;
}

static int write_u64(const char *dir, const char *name, uint64_t v)
{
	char text[32];

	snprintf(text, sizeof(text), "%" PRIu64, v);
	return write_file(dir, name, text);
}

/* Read from offset 0 into buf (NUL-terminated); returns the length. */
static ssize_t read_fd(int fd, char *buf, size_t size)
{
	size_t len = 0;

	while (len < size - 1) {
		ssize_t n = pread(fd, buf + len, size - 1 - len, (off_t)len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

static ssize_t read_file(const char *dir, const char *name, char *buf,
			 size_t size)
{
	char path[PATH_MAX];
	ssize_t rc;
	int fd;

	rc = file_path(path, sizeof(path), dir, name);
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_fd(fd, buf, size);
	close(fd);
	return rc;
}

/* Digits only, no sign, no overflow. */
static int parse_u64(const char *s, const char **end, uint64_t *v)
{
	uint64_t x = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	if (p == s)
		return -EINVAL;
	*end = p;
	*v = x;
	return 0;
}

/* A single-value file: "<number>\n". */
static int parse_value(const char *buf, uint64_t *v)
{
	const char *end;
	int rc = parse_u64(buf, &end, v);

	if (rc)
		return rc;
	if (*end == '\n')
		end++;
	return *end ? -EINVAL : 0;
}

/* A flat keyed file ("key value\n" lines): the value of key. */
static int parse_keyed(const char *buf, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);

	for (const char *line = buf; *line;) {
		const char *nl = strchr(line, '\n');

		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			const char *end;
			int rc = parse_u64(line + klen + 1, &end, v);

			if (rc)
				return rc;
			return (*end == '\n' || !*end) ? 0 : -EINVAL;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return -ENOENT;
}

/* A missing file, or a key missing from it, reads as 0: old kernels lack
 * some statistics and the caller is better served by a zero than a failure. */
static int read_value(const char *dir, const char *name, uint64_t *v)
{
	char buf[SMALL_FILE];
	ssize_t n = read_file(dir, name, buf, sizeof(buf));

	*v = 0;
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	return parse_value(buf, v);
}

static int read_keyed(const char *dir, const char *name, const char *key,
		      uint64_t *v)
{
	char buf[SMALL_FILE];
	ssize_t n = read_file(dir, name, buf, sizeof(buf));
	int rc;

	*v = 0;
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	rc = parse_keyed(buf, key, v);
	return rc == -ENOENT ? 0 : rc;
}

/* "cpu memory pids" (cgroup.controllers, cgroup.subtree_control). */
static unsigned parse_ctrl_list(const char *buf)
{
	unsigned mask = 0;

	for (const char *p = buf; *p;) {
		size_t n;

		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n");
		for (int c = 0; n && c < C_COUNT; c++)
			if (strlen(ctrl_names[c]) == n &&
			    !strncmp(p, ctrl_names[c], n))
				mask |= BIT(c);
		p += n;
	}
	return mask;
}

/* ---- processes ---------------------------------------------------------- */

/* cgroup.procs comes from the kernel, but a fake tree or a confused file
 * system must never make us signal something odd: only plain decimal
 * numbers within pid_t are pids. */
static bool parse_pid(const char *s, pid_t *pid)
{
	const char *end;
	uint64_t v;

	if (parse_u64(s, &end, &v) || *end || v > INT_MAX)
		return false;
	*pid = (pid_t)v;
	return true;
}

static void signal_pid(pid_t pid, int sig)
{
	/* 0 stands for a process outside our pid namespace, 1 is init; and
	 * whoever put us in the cgroup, we do not kill ourselves. */
	if (sig && pid > 1 && pid != getpid())
		kill(pid, sig);
}

/* Count the pids in dir/cgroup.procs and send sig (0: none) to each.
 * A missing file is an empty cgroup (the directory is gone). */
static int procs_scan(const char *dir, int sig)
{
	char path[PATH_MAX], chunk[4096], line[16];
	size_t linelen = 0;
	bool overlong = false;
	int fd, rc, count = 0;

	rc = file_path(path, sizeof(path), dir, "cgroup.procs");
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		pid_t pid;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		/* A last line without '\n' is handled by appending one. */
		if (n == 0 && (linelen || overlong))
			chunk[n++] = '\n';
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i] != '\n') {
				if (linelen < sizeof(line) - 1)
					line[linelen++] = chunk[i];
				else
					overlong = true;
				continue;
			}
			line[linelen] = '\0';
			if (!overlong && parse_pid(line, &pid)) {
				count++;
				signal_pid(pid, sig);
			}
			linelen = 0;
			overlong = false;
		}
	}
	rc = count;
out:
	close(fd);
	return rc;
}

/* Field 22 of /proc/<pid>/stat.  The command name (field 2) may hold
 * spaces and parentheses, so fields are counted after the last ')'. */
static int proc_starttime(pid_t pid, uint64_t *start)
{
	char dir[32], buf[SMALL_FILE];
	const char *p, *end;
	ssize_t n;

	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	n = read_file(dir, "stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	p++;
	for (int field = 2; field < 22;) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		if (++field == 22)
			break;
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
	}
	if (parse_u64(p, &end, start))
		return -EINVAL;
	return (*end == ' ' || *end == '\n' || !*end) ? 0 : -EINVAL;
}

/* "p<pid>-<starttime>-<seq>" exactly; anything else is not ours. */
static bool parse_name(const char *name, pid_t *pid, uint64_t *start)
{
	const char *p = name, *end;
	uint64_t v, seq;

	if (*p++ != 'p' || parse_u64(p, &end, &v) || *end != '-' ||
	    v == 0 || v > INT_MAX)
		return false;
	*pid = (pid_t)v;
	if (parse_u64(end + 1, &end, start) || *end != '-')
		return false;
	return !parse_u64(end + 1, &end, &seq) && !*end;
}

/* Only a positive answer from /proc condemns a cgroup: when in doubt
 * (EACCES, a stat we cannot parse) the owner is taken to be alive. */
static bool owner_gone(pid_t pid, uint64_t start)
{
	uint64_t now;
	int rc = proc_starttime(pid, &now);

	if (rc == -ENOENT || rc == -ESRCH)
		return true;
	return rc == 0 && now != start;
}

/* ---- manager ------------------------------------------------------------ */

/* "/a//b/" -> "/a/b", "/" -> "".  No "." or "..": the result must stay
 * under the hierarchy it is appended to. */
static int cgpath_normalize(const char *in, char *out, size_t outlen)
{
	size_t len = 0;

	if (in[0] != '/')
		return -EINVAL;
	out[0] = '\0';
	for (const char *p = in; *p;) {
		size_t n;

		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (!n)
			break;
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (len + 1 + n >= outlen)
			return -ENAMETOOLONG;
		out[len++] = '/';
		memcpy(out + len, p, n);
		len += n;
		out[len] = '\0';
		p += n;
	}
	return 0;
}

/* Our own cgroup in the v1 hierarchy that lists the controller name, or
 * (name "") in the v2 one, normalized, from self: the text of
 * /proc/self/cgroup ("id:ctrl,ctrl:/path"; v2's line is "0::/path").  ""
 * (the root) when it is not listed or does not exist under mount: a
 * /proc/self/cgroup that does not match the mount (no cgroup namespace in a
 * container) must not make us build a phantom path.  Returns whether it was
 * listed and exists, so that a caller can tell "the root" from "unknown". */
static bool own_cgroup(const char *name, const char *self, const char *mount,
		       char *out, size_t len)
{
	char buf[8192], dir[PATH_MAX];
	size_t nlen = strlen(name);
	struct stat st;

	out[0] = '\0';
	if (snprintf(buf, sizeof(buf), "%s", self) >= (int)sizeof(buf))
		return false;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n'), *start = line, *ctrls, *path;
		bool match = false;

		if (nl)
			*nl = '\0';
		ctrls = strchr(line, ':');
		path = ctrls ? strchr(ctrls + 1, ':') : NULL;
		line = nl ? nl + 1 : NULL;
		if (!path)
			continue;
		*path++ = '\0';
		if (!nlen)
			match = !ctrls[1] && ctrls == start + 1 && start[0] == '0';
		for (char *t = ctrls + 1; nlen && *t && !match;) {
			size_t n = strcspn(t, ",");

			match = n == nlen && !strncmp(t, name, n);
			t += n + (t[n] == ',');
		}
		if (!match)
			continue;
		if (cgpath_normalize(path, out, len) ||
		    file_path(dir, sizeof(dir), mount, out) ||
		    stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			out[0] = '\0';
			return false;
		}
		return true;
	}
	return false;
}

/* The inode of a namespace file is the namespace's id (on nsfs, where
 * /proc/<pid>/ns/ links lead), and the initial cgroup namespace's is fixed.
 * Anything else (no such file, not nsfs: an emulated /proc) counts as the
 * initial namespace, which keeps the behaviour petri has always had. */
enum cg_ns cg_ns_detect(void)
{
	static const char path[] = "/proc/self/ns/cgroup";
	struct statfs fs;
	struct stat st;

	if (stat(path, &st) < 0 || statfs(path, &fs) < 0 ||
	    fs.f_type != NSFS_MAGIC)
		return CG_NS_INITIAL;
	return st.st_ino == PROC_CGROUP_INIT_INO ? CG_NS_INITIAL : CG_NS_PRIVATE;
}

/* Is our own v2 cgroup (or, once we have moved into SUPERVISOR_LEAF, its
 * parent) the root of a cgroup namespace other than the host's?  The
 * container runtime made that namespace for us and mounted its root at
 * root: a cgroup handed over whole, as systemd's Delegate=yes hands one
 * over, but bound by the "no internal processes" rule, unlike the host's
 * real root. */
static bool ns_handed_over(const char *root, const char *self, enum cg_ns ns)
{
	char own[PATH_MAX];

	if (ns != CG_NS_PRIVATE || !own_cgroup("", self, root, own, sizeof(own)))
		return false;
	return !own[0] || !strcmp(own, "/" SUPERVISOR_LEAF);
}

/* systemd marks a cgroup it hands over to a unit (Delegate=yes) with the
 * extended attribute trusted.delegate = "1" (a user manager, which cannot
 * write trusted.*, with user.delegate).  Only the owner of the cgroup can
 * set either, so the mark is as trustworthy as the directory itself. */
static bool delegated(const char *dir)
{
	static const char *const names[] = { "trusted.delegate", "user.delegate" };
	char v[8];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ssize_t n = getxattr(dir, names[i], v, sizeof(v));

		if (n >= 1 && v[0] == '1')
			return true;
	}
	return false;
}

/* Is our own v2 cgroup (or, once we have moved into SUPERVISOR_LEAF, its
 * parent) one that systemd delegated to us?  Then a root petri nests its
 * sandboxes in it too, as an unprivileged one always does: the unit's own
 * limits hold for them, stopping the unit reaches them, and nothing is made
 * in the part of the tree systemd manages. */
static bool marked_delegated(const char *root, const char *self)
{
	char own[PATH_MAX], dir[PATH_MAX];
	char *slash;

	own_cgroup("", self, root, own, sizeof(own));
	if (!own[0])
		return false;
	slash = strrchr(own, '/');
	if (slash && !strcmp(slash + 1, SUPERVISOR_LEAF))
		*slash = '\0';
	return snprintf(dir, sizeof(dir), "%s%s", root, own) < (int)sizeof(dir) &&
	       delegated(dir);
}

/* mkdir -p of mount + rel, where rel is normalized; mount must exist. */
static int mkdir_p(const char *mount, const char *rel)
{
	char path[PATH_MAX];
	size_t len;

	if (snprintf(path, sizeof(path), "%s%s", mount, rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	len = strlen(mount);
	while (path[len]) {
		char *slash = strchr(path + len + 1, '/');

		if (slash)
			*slash = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (!slash)
			break;
		*slash = '/';
		len = (size_t)(slash - path);
	}
	return 0;
}

/* Make sure dir's children get the controllers in want; returns those
 * that are enabled.  A controller the kernel refuses (EBUSY: processes in
 * a non-root dir; EINVAL: a real-time task and "cpu") is dropped with a
 * warning, so the caller sees it missing via cg_has_*(). */
static unsigned v2_enable(const char *dir, unsigned want)
{
	char buf[SMALL_FILE], text[64] = "";
	unsigned have = 0, missing;
	int rc;

	if (read_file(dir, "cgroup.subtree_control", buf, sizeof(buf)) >= 0)
		have = parse_ctrl_list(buf);
	missing = want & ~have;
	if (!missing)
		return want;
	for (int c = 0; c < C_COUNT; c++)
		if (missing & BIT(c)) {
			size_t len = strlen(text);

			snprintf(text + len, sizeof(text) - len, "%s+%s",
				 len ? " " : "", ctrl_names[c]);
		}
	if (!write_file(dir, "cgroup.subtree_control", text))
		return want;
	for (int c = 0; c < C_COUNT; c++) {
		if (!(missing & BIT(c)))
			continue;
		snprintf(text, sizeof(text), "+%s", ctrl_names[c]);
		rc = write_file(dir, "cgroup.subtree_control", text);
		if (rc) {
			log_errno(LOG_WARN, -rc, "cannot enable '%s' in '%s/cgroup.subtree_control'",
				  ctrl_names[c], dir);
			want &= ~BIT(c);
		}
	}
	return want;
}

/* The parent top + rel (both normalized, top "" for the root) under root:
 * made level by level below top, and the controllers in want enabled for
 * the children of top and of every level below it, down to the parent
 * itself, whose children are the sandboxes.  The levels above top are
 * not ours to change (a delegated subtree: see v2_delegated()). */
static int v2_setup(struct cg_manager *m, const char *root, const char *top,
		    const char *rel, unsigned want, char *err, size_t errlen)
{
	char path[PATH_MAX];
	const char *p = rel;
	int rc;

	if (snprintf(path, sizeof(path), "%s%s", root, top) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	for (;;) {
		size_t n, len;

		if (want)
			want = v2_enable(path, want);
		if (!*p)
			break;
		p++;
		n = strcspn(p, "/");
		len = strlen(path);
		if (len + 1 + n >= sizeof(path))
			return -ENAMETOOLONG;
		path[len] = '/';
		memcpy(path + len + 1, p, n);
		path[len + 1 + n] = '\0';
		p += n;
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			rc = -errno;
			set_err(err, errlen, "cannot create cgroup '%s': %s",
				path, strerror(-rc));
			return rc;
		}
	}
	m->parent[0] = strdup(path);
	if (!m->parent[0])
		return -ENOMEM;
	m->nhier = 1;
	m->ctrls = want;
	for (int c = 0; c < C_COUNT; c++)
		m->hier_of[c] = (want & BIT(c)) ? 0 : -1;
	/* Swap accounting can be off (swapaccount=0); the files then do not
	 * exist below the root. */
	m->swap = (want & BIT(C_MEMORY)) && file_exists(path, "memory.swap.max");
	return 0;
}

/* Can we manage the cgroup dir as its delegate: make children in it, move
 * processes through it, enable controllers for its children?  systemd
 * hands a delegated cgroup over by giving the delegate these three. */
static int v2_writable(const char *dir, char *err, size_t errlen)
{
	static const char *const names[] = { "", "cgroup.procs", "cgroup.subtree_control" };
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int rc = *names[i] ? file_path(path, sizeof(path), dir, names[i]) :
			 snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path) ?
			 -ENAMETOOLONG : 0;

		if (!rc && access(path, W_OK) < 0)
			rc = -errno;
		if (rc) {
			set_err(err, errlen, "cgroup v2: our cgroup '%s' is not delegated to uid %u "
				"('%s': %s)", dir, (unsigned)geteuid(), path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The weight as the cgroup's own file says it: v2's cpu.weight as it is,
 * v1's cpu.shares at 1024 per 100 (CG_WEIGHT_MIN gives 10, above the
 * kernel's least, 2). */
static int write_weight(enum jail_cg_version v, const char *dir, uint32_t weight)
{
	if (weight < CG_WEIGHT_MIN || weight > CG_WEIGHT_MAX)
		return -EINVAL;
	if (v == JAIL_CG_V2)
		return write_u64(dir, "cpu.weight", weight);
	return write_u64(dir, "cpu.shares", weight * 1024u / 100u);
}

/* v2 without root: the subtree systemd (or whoever) delegated to us is our
 * own cgroup, from /proc/self/cgroup.  Sandboxes go under <own>/petri.
 * <own> may be the root of a private cgroup namespace (ns_handed_over()),
 * bound by the same rule; only the real root, the initial namespace's, is
 * free of it.
 * A cgroup other than the root may not both hold processes and enable
 * controllers for its children ("no internal processes"), so, as systemd's
 * delegation rules ask, we first move ourselves into a leaf of our own,
 * <own>/petri-supervisor (a petri already there counts <own> as the
 * delegated cgroup).  Processes of others in <own> (the shell of a terminal
 * whose scope we share) would still forbid controllers: then none are
 * enabled, and m->note says so (kill, counting and CPU time still work). */
static int v2_delegated(struct cg_manager *m, const char *root, const char *self,
			enum cg_ns ns, unsigned want, uint32_t weight, char *err,
			size_t errlen)
{
	char own[PATH_MAX], dir[PATH_MAX], leaf[PATH_MAX], buf[SMALL_FILE], pid[16];
	const char *slash;
	int rc, others;

	own_cgroup("", self, root, own, sizeof(own));
	if (!own[0] && ns != CG_NS_PRIVATE)	/* the real root: no such rule */
		return v2_setup(m, root, "", DEFAULT_LEAF, want, err, errlen);
	slash = strrchr(own, '/');
	if (slash && !strcmp(slash + 1, SUPERVISOR_LEAF))
		own[slash - own] = '\0';
	if (snprintf(dir, sizeof(dir), "%s%s", root, own) >= (int)sizeof(dir) ||
	    snprintf(leaf, sizeof(leaf), "%s/" SUPERVISOR_LEAF, dir) >= (int)sizeof(leaf))
		return -ENAMETOOLONG;
	if ((rc = v2_writable(dir, err, errlen)) < 0)
		return rc;
	/* What was delegated: the controllers our cgroup may enable. */
	want &= read_file(dir, "cgroup.controllers", buf, sizeof(buf)) >= 0 ?
		parse_ctrl_list(buf) : 0;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) ||
	    (rc = write_file(leaf, "cgroup.procs", pid)) < 0) {
		rc = rc ? rc : -errno;
		set_err(err, errlen, "cannot move petri into cgroup '%s': %s", leaf,
			strerror(-rc));
		return rc;
	}
	others = procs_scan(dir, 0);
	if (want && others > 0) {
		set_err(m->note, sizeof(m->note), "other processes share our cgroup '%s', so its "
			 "children cannot have controllers (cgroup v2 allows no processes "
			 "in a cgroup that enables them): no memory, pids or cpu limits by "
			 "cgroup; %s", dir, own[0] || ns != CG_NS_PRIVATE ?
			 "run petri in a cgroup of its own" :
			 "make petri the container's command, not a shell or init around it");
		want = 0;
	}
	rc = v2_setup(m, root, own, DEFAULT_LEAF, want, err, errlen);
	/* The daemon's own share beside its sandboxes, which share theirs.  A
	 * share, not a limit: one that cannot be set is said (the note), and
	 * the sandboxes' cgroups work as they would without it. */
	if (!rc && weight && (m->ctrls & BIT(C_CPU))) {
		int w = write_weight(JAIL_CG_V2, leaf, weight);

		if (w < 0 && !m->note[0])
			set_err(m->note, sizeof(m->note), "cannot set the CPU weight of cgroup "
				"'%s' (the daemon keeps the default share): %s", leaf, strerror(-w));
	}
	return rc;
}

static int v1_setup(struct cg_manager *m, const char *root, const char *rel,
		    const char *self, unsigned present, char *err, size_t errlen)
{
	char mount[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
	struct stat st, seen[C_COUNT];
	int rc;

	for (int c = 0; c < C_COUNT; c++) {
		size_t h;

		if (!(present & BIT(c)))
			continue;
		rc = file_path(mount, sizeof(mount), root, ctrl_names[c]);
		if (rc)
			return rc;
		/* Co-mounted controllers ("cpu,cpuacct", reached through
		 * symlinks) share one hierarchy and one directory. */
		if (stat(mount, &st) < 0)
			continue;
		for (h = 0; h < m->nhier; h++)
			if (seen[h].st_dev == st.st_dev &&
			    seen[h].st_ino == st.st_ino)
				break;
		if (h < m->nhier) {
			m->hier_of[c] = (int)h;
			m->ctrls |= BIT(c);
			continue;
		}
		if (rel) {
			snprintf(own, sizeof(own), "%s", rel);
		} else {
			size_t len;

			own_cgroup(ctrl_names[c], self, mount, own, sizeof(own));
			len = strlen(own);
			if (len + sizeof(DEFAULT_LEAF) > sizeof(own))
				return -ENAMETOOLONG;
			memcpy(own + len, DEFAULT_LEAF, sizeof(DEFAULT_LEAF));
		}
		rc = snprintf(dir, sizeof(dir), "%s%s", mount, own) >=
		     (int)sizeof(dir) ? -ENAMETOOLONG : mkdir_p(mount, own);
		if (rc) {
			set_err(err, errlen, "cannot create cgroup '%s%s': %s",
				mount, own, strerror(-rc));
			return rc;
		}
		m->parent[h] = strdup(dir);
		if (!m->parent[h])
			return -ENOMEM;
		seen[h] = st;
		m->hier_of[c] = (int)h;
		m->ctrls |= BIT(c);
		m->nhier++;
	}
	/* v1 lists the memsw files in every memory cgroup, the root too, when
	 * swap accounting is on. */
	if (!(m->ctrls & BIT(C_MEMORY)) || file_path(mount, sizeof(mount), root, "memory"))
		return 0;
	m->swap = file_exists(mount, "memory.memsw.limit_in_bytes");
	/* So does the TCP buffer limit, where the kernel has kmem accounting. */
	m->tcp = file_exists(mount, "memory.kmem.tcp.limit_in_bytes");
	return 0;
}

static enum jail_cg_version detect(const char *root, unsigned *v2,
				   unsigned *v1)
{
	char buf[SMALL_FILE], mount[PATH_MAX];
	bool have_v2 = read_file(root, "cgroup.controllers", buf,
				 sizeof(buf)) >= 0;

	*v2 = have_v2 ? parse_ctrl_list(buf) & V2_CTRLS : 0;
	*v1 = 0;
	for (int c = 0; c < C_COUNT; c++)
		if (!file_path(mount, sizeof(mount), root, ctrl_names[c]) &&
		    file_exists(mount, "cgroup.procs"))
			*v1 |= BIT(c);
	if (*v2)
		return JAIL_CG_V2;
	if (*v1 & V1_LIMIT_CTRLS)
		return JAIL_CG_V1;
	return have_v2 ? JAIL_CG_V2 : JAIL_CG_NONE;
}

static int make_tag(struct cg_manager *m, char *err, size_t errlen)
{
	pid_t pid = getpid();
	uint64_t start;
	int rc = proc_starttime(pid, &start);

	if (rc) {
		set_err(err, errlen, "cannot read the start time of pid %d from '/proc/%d/stat': %s",
			(int)pid, (int)pid, strerror(-rc));
		return rc;
	}
	snprintf(m->tag, sizeof(m->tag), "p%d-%" PRIu64, (int)pid, start);
	return 0;
}

int cg_manager_new(const char *fs_root, const char *parent,
		   struct cg_manager **out, char *err, size_t errlen)
{
	const struct cg_options o = { .parent = parent };

	return cg_manager_open(fs_root, &o, out, err, errlen);
}

int cg_manager_open(const char *fs_root, const struct cg_options *o,
		    struct cg_manager **out, char *err, size_t errlen)
{
	char root[PATH_MAX], rel[PATH_MAX], self[8192] = "";
	const char *parent = o ? o->parent : NULL;
	struct cg_manager *m = NULL;
	enum cg_ns ns;
	unsigned v2, v1;
	size_t len;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!out || !fs_root || fs_root[0] != '/') {
		set_err(err, errlen, "cgroup root must be an absolute path");
		return -EINVAL;
	}
	*out = NULL;
	len = strlen(fs_root);
	while (len > 1 && fs_root[len - 1] == '/')
		len--;
	if (len >= sizeof(root))
		return -ENAMETOOLONG;
	memcpy(root, fs_root, len);
	root[len == 1 ? 0 : len] = '\0';	/* "/" joins as "" + "/x" */
	if (parent && *parent && cgpath_normalize(parent, rel, sizeof(rel))) {
		set_err(err, errlen, "bad cgroup parent '%s': must be absolute, without '.' or '..'",
			parent);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (int c = 0; c < C_COUNT; c++)
		m->hier_of[c] = -1;
	atomic_init(&m->seq, 0);
	m->kill_timeout_ms = KILL_TIMEOUT_MS;
	rc = make_tag(m, err, errlen);
	if (rc)
		goto out;
	if (o && o->self_cgroup)
		snprintf(self, sizeof(self), "%s", o->self_cgroup);
	else if (read_file("/proc/self", "cgroup", self, sizeof(self)) < 0)
		self[0] = '\0';	/* no own cgroup: the root */
	m->version = detect(root, &v2, &v1);
	switch (m->version) {
	case JAIL_CG_V2:
		ns = o && o->ns != CG_NS_DETECT ? o->ns : cg_ns_detect();
		if (parent && *parent)
			rc = v2_setup(m, root, "", rel, v2, err, errlen);
		else if ((o && o->delegated) || marked_delegated(root, self) ||
			 ns_handed_over(root, self, ns))
			rc = v2_delegated(m, root, self, ns, v2, o ? o->daemon_weight : 0,
					  err, errlen);
		else
			rc = v2_setup(m, root, "", DEFAULT_LEAF, v2, err, errlen);
		break;
	case JAIL_CG_V1:
		rc = v1_setup(m, root, parent && *parent ? rel : NULL, self, v1,
			      err, errlen);
		if (!rc && !m->nhier)
			rc = -ENOENT;
		break;
	default:
		rc = -ENOENT;
		break;
	}
	if (rc && m->version == JAIL_CG_NONE)
		set_err(err, errlen, "no usable cgroup hierarchy under '%s' (neither cgroup.controllers nor memory, pids or cpu directories)",
			fs_root);
	else if (rc && err && errlen && !err[0])
		set_err(err, errlen, "cannot set up cgroups under '%s': %s",
			fs_root, strerror(-rc));
out:
	if (rc) {
		cg_manager_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void cg_manager_free(struct cg_manager *m)
{
	if (!m)
		return;
	for (size_t h = 0; h < m->nhier; h++)
		free(m->parent[h]);
	free(m);
}

const char *cg_manager_note(const struct cg_manager *m)
{
	return m ? m->note : "";
}

void cg_manager_set_kill_timeout(struct cg_manager *m, unsigned ms)
{
	m->kill_timeout_ms = ms;
}

enum jail_cg_version cg_version(const struct cg_manager *m)
{
	return m ? m->version : JAIL_CG_NONE;
}

bool cg_has_memory(const struct cg_manager *m)
{
	return m && (m->ctrls & BIT(C_MEMORY));
}

bool cg_has_swap(const struct cg_manager *m)
{
	return m && m->swap;
}

bool cg_has_pids(const struct cg_manager *m)
{
	return m && (m->ctrls & BIT(C_PIDS));
}

bool cg_has_cpu(const struct cg_manager *m)
{
	return m && (m->ctrls & BIT(C_CPU));
}

const char *cg_parent_dir(const struct cg_manager *m)
{
	if (!m || !m->nhier)
		return NULL;
	if (m->hier_of[C_MEMORY] >= 0)
		return m->parent[m->hier_of[C_MEMORY]];
	return m->parent[0];
}

/* ---- one cgroup --------------------------------------------------------- */

static void cg_free(struct cg *cg)
{
	if (!cg)
		return;
	for (size_t h = 0; h < cg->ndir; h++)
		free(cg->dir[h]);
	if (cg->peak_fd >= 0)
		close(cg->peak_fd);
	free(cg);
}

/* The cg named name under m's parents; nothing is made on disk. */
static struct cg *cg_alloc(const struct cg_manager *m, const char *name)
{
	struct cg *cg = calloc(1, sizeof(*cg));

	if (!cg)
		return NULL;
	cg->version = m->version;
	cg->ctrls = m->ctrls;
	cg->swap = m->swap;
	cg->tcp = m->tcp;
	cg->kill_timeout_ms = m->kill_timeout_ms;
	cg->peak_fd = -1;
	memcpy(cg->hier_of, m->hier_of, sizeof(cg->hier_of));
	for (size_t h = 0; h < m->nhier; h++) {
		if (asprintf(&cg->dir[h], "%s/%s", m->parent[h], name) < 0) {
			cg->dir[h] = NULL;
			cg_free(cg);
			return NULL;
		}
		cg->ndir++;
	}
	return cg;
}

static const char *ctrl_dir(const struct cg *cg, enum ctrl c)
{
	return cg->hier_of[c] >= 0 ? cg->dir[cg->hier_of[c]] : NULL;
}

static int make_dirs(struct cg *cg)
{
	int rc = 0;
	size_t h;

	for (h = 0; h < cg->ndir; h++)
		if (mkdir(cg->dir[h], 0755) < 0) {
			rc = -errno;
			break;
		}
	if (rc)
		while (h-- > 0)
			rmdir(cg->dir[h]);
	return rc;
}

static int limits_v2(const struct cg *cg, const struct cg_limits *lim)
{
	const char *dir = cg->dir[0];
	char text[48];
	int rc = 0;

	if (cg->ctrls & BIT(C_MEMORY)) {
		if (lim->memory_bytes) {
			rc = write_u64(dir, "memory.max", lim->memory_bytes);
			if (!rc && cg->swap)
				rc = write_file(dir, "memory.swap.max", "0");
		}
		/* memory.oom.group stays 0: the kernel kills one process,
		 * the interpreter or what the code started (oom_score_adj
		 * 500) rather than the sandbox's keeper (-999),
		 * which then starts a fresh interpreter (runtime/driver.py). */
	}
	if (!rc && (cg->ctrls & BIT(C_PIDS)) && lim->pids)
		rc = write_u64(dir, "pids.max", lim->pids);
	if (!rc && (cg->ctrls & BIT(C_CPU)) && lim->cpu_millicores) {
		uint64_t quota = (uint64_t)lim->cpu_millicores * CPU_PERIOD_US / 1000;

		if (quota < CPU_MIN_QUOTA_US)
			quota = CPU_MIN_QUOTA_US;
		snprintf(text, sizeof(text), "%" PRIu64 " %u", quota, CPU_PERIOD_US);
		rc = write_file(dir, "cpu.max", text);
	}
	if (!rc && (cg->ctrls & BIT(C_CPU)) && lim->cpu_weight)
		rc = write_weight(cg->version, dir, lim->cpu_weight);
	return rc;
}

static int limits_v1(const struct cg *cg, const struct cg_limits *lim)
{
	const char *mem = ctrl_dir(cg, C_MEMORY), *pids = ctrl_dir(cg, C_PIDS);
	const char *cpu = ctrl_dir(cg, C_CPU);
	int rc = 0;

	if (mem && lim->memory_bytes) {
		/* memsw may never be below the memory limit: memory first. */
		rc = write_u64(mem, "memory.limit_in_bytes", lim->memory_bytes);
		if (!rc && cg->swap)
			rc = write_u64(mem, "memory.memsw.limit_in_bytes",
				       lim->memory_bytes);
		/* v1 leaves socket buffers uncharged until this limit is set
		 * (before the first socket: it does not apply to older ones),
		 * and then counts them apart from memory.usage_in_bytes: a
		 * loopback flood would otherwise eat the host-wide TCP budget
		 * that every socket of the host, the API's too, draws from.
		 * Kernels without the file (no kmem accounting) are skipped. */
		if (!rc && cg->tcp)
			rc = write_u64(mem, "memory.kmem.tcp.limit_in_bytes",
				       lim->memory_bytes / CG_TCP_SHARE);
	}
	if (!rc && pids && lim->pids)
		rc = write_u64(pids, "pids.max", lim->pids);
	if (!rc && cpu && lim->cpu_millicores) {
		uint64_t quota = (uint64_t)lim->cpu_millicores * CPU_PERIOD_US / 1000;

		if (quota < CPU_MIN_QUOTA_US)
			quota = CPU_MIN_QUOTA_US;
		rc = write_u64(cpu, "cpu.cfs_period_us", CPU_PERIOD_US);
		if (!rc)
			rc = write_u64(cpu, "cpu.cfs_quota_us", quota);
	}
	if (!rc && cpu && lim->cpu_weight)
		rc = write_weight(cg->version, cpu, lim->cpu_weight);
	return rc;
}

static int peak_open(struct cg *cg);

static void remove_dirs(const struct cg *cg)
{
	for (size_t h = 0; h < cg->ndir; h++)
		rmdir(cg->dir[h]);
}

int cg_create(struct cg_manager *m, const struct cg_limits *lim,
	      struct cg **out)
{
	struct cg *cg = NULL;
	char name[96];
	int rc = -EEXIST;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!m || !lim || !m->nhier)
		return -EINVAL;
	/* A name can only be taken if a predecessor with our pid and start
	 * time left it behind; the next sequence number is free then. */
	for (int i = 0; i < NAME_TRIES && rc == -EEXIST; i++) {
		unsigned seq = atomic_fetch_add(&m->seq, 1);

		cg_free(cg);
		snprintf(name, sizeof(name), "%s-%u", m->tag, seq);
		cg = cg_alloc(m, name);
		if (!cg) {
			rc = -ENOMEM;
			goto out;
		}
		rc = make_dirs(cg);
	}
	if (rc)
		goto out;
	rc = cg->version == JAIL_CG_V2 ? limits_v2(cg, lim) : limits_v1(cg, lim);
	/* memory.peak is opened now rather than on first use, so that
	 * statistics read from two threads (an execution's and an upload's)
	 * never race to open it; a kernel without it is left to fail later. */
	if (!rc && cg->version == JAIL_CG_V2 && (cg->ctrls & BIT(C_MEMORY)))
		peak_open(cg);
	if (rc)
		remove_dirs(cg);
out:
	if (rc) {
		cg_free(cg);
		return rc;
	}
	*out = cg;
	return 0;
}

const char *cg_path(const struct cg *cg)
{
	const char *mem;

	if (!cg || !cg->ndir)
		return NULL;
	mem = ctrl_dir(cg, C_MEMORY);
	return mem ? mem : cg->dir[0];
}

int cg_set_cpu_weight(struct cg *cg, uint32_t weight)
{
	const char *cpu;

	if (!cg || !weight)
		return -EINVAL;
	if (!(cg->ctrls & BIT(C_CPU)))
		return 0;
	cpu = cg->version == JAIL_CG_V2 ? cg->dir[0] : ctrl_dir(cg, C_CPU);
	return cpu ? write_weight(cg->version, cpu, weight) : 0;
}

int cg_add_pid(struct cg *cg, pid_t pid)
{
	char text[16];
	int rc;

	if (!cg || pid <= 0)
		return -EINVAL;
	snprintf(text, sizeof(text), "%d", (int)pid);
	for (size_t h = 0; h < cg->ndir; h++) {
		rc = write_file(cg->dir[h], "cgroup.procs", text);
		if (rc)
			return rc;
	}
	return 0;
}

/* v2 memory.peak through one fd kept open: since 6.12 a write to it starts
 * a new peak for reads through that same fd.  Older kernels have a
 * read-only file (opening it for writing fails), then reset cannot work. */
static int peak_open(struct cg *cg)
{
	char path[PATH_MAX];
	int rc;

	if (cg->peak_fd >= 0)
		return 0;
	rc = file_path(path, sizeof(path), cg->dir[0], "memory.peak");
	if (rc)
		return rc;
	cg->peak_fd = open(path, O_RDWR | O_CLOEXEC);
	cg->peak_writable = cg->peak_fd >= 0;
	if (cg->peak_fd < 0 && errno != ENOENT)
		cg->peak_fd = open(path, O_RDONLY | O_CLOEXEC);
	return cg->peak_fd < 0 ? -errno : 0;
}

static int read_peak_v2(struct cg *cg, uint64_t *v)
{
	char buf[64];
	ssize_t n;
	int rc;

	*v = 0;
	rc = peak_open(cg);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	n = read_fd(cg->peak_fd, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return parse_value(buf, v);
}

static int stats_v2(struct cg *cg, struct cg_stats *st)
{
	const char *dir = cg->dir[0];
	uint64_t usec = 0;
	int rc, first;

	/* cpu.stat is provided by the core even without the cpu controller. */
	first = read_keyed(dir, "cpu.stat", "usage_usec", &usec);
	st->cpu_ns = usec * 1000;
	if (!(cg->ctrls & BIT(C_MEMORY)))
		return first;
	rc = read_peak_v2(cg, &st->memory_peak);
	first = first ? first : rc;
	rc = read_value(dir, "memory.current", &st->memory_current);
	first = first ? first : rc;
	rc = read_keyed(dir, "memory.events", "oom_kill", &st->oom_kills);
	return first ? first : rc;
}

static int stats_v1(struct cg *cg, struct cg_stats *st)
{
	const char *mem = ctrl_dir(cg, C_MEMORY), *acct = ctrl_dir(cg, C_CPUACCT);
	int rc, first = 0;

	if (acct)
		first = read_value(acct, "cpuacct.usage", &st->cpu_ns);
	if (!mem)
		return first;
	rc = read_value(mem, "memory.max_usage_in_bytes", &st->memory_peak);
	first = first ? first : rc;
	rc = read_value(mem, "memory.usage_in_bytes", &st->memory_current);
	first = first ? first : rc;
	rc = read_keyed(mem, "memory.oom_control", "oom_kill", &st->oom_kills);
	return first ? first : rc;
}

/* Reads every statistic it can; returns the first error met, if any. */
int cg_stats(struct cg *cg, struct cg_stats *st)
{
	if (!st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	if (!cg)
		return -EINVAL;
	return cg->version == JAIL_CG_V2 ? stats_v2(cg, st) : stats_v1(cg, st);
}

/* -EOPNOTSUPP when there is no peak to reset (no memory controller, or a
 * kernel before 6.12); memory_peak then stays the peak since cg_create(). */
int cg_reset_peak(struct cg *cg)
{
	const char *mem;
	ssize_t n;
	int rc;

	if (!cg)
		return -EINVAL;
	if (!(cg->ctrls & BIT(C_MEMORY)))
		return -EOPNOTSUPP;
	if (cg->version == JAIL_CG_V1) {
		mem = ctrl_dir(cg, C_MEMORY);
		return write_file(mem, "memory.max_usage_in_bytes", "0");
	}
	rc = peak_open(cg);
	if (rc)
		return rc == -ENOENT ? -EOPNOTSUPP : rc;
	if (!cg->peak_writable)
		return -EOPNOTSUPP;
	n = pwrite(cg->peak_fd, "reset\n", 6, 0);
	return n < 0 ? -errno : 0;
}

/* ---- joining from a child ---------------------------------------------- */

int cg_join_open(struct cg *cg, struct cg_join *cj)
{
	const char *pids;
	char path[PATH_MAX];
	int rc = 0;

	for (size_t i = 0; i < CG_JOIN_MAX; i++)
		cj->procs[i] = -1;
	cj->pids_max = cj->pids_current = -1;
	if (!cg || cg->ndir > CG_JOIN_MAX)
		return -EINVAL;
	for (size_t h = 0; h < cg->ndir && !rc; h++) {
		rc = file_path(path, sizeof(path), cg->dir[h], "cgroup.procs");
		if (!rc && (cj->procs[h] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
			rc = -errno;
	}
	pids = (cg->ctrls & BIT(C_PIDS)) ? ctrl_dir(cg, C_PIDS) : NULL;
	if (!rc && pids) {
		rc = file_path(path, sizeof(path), pids, "pids.max");
		if (!rc && (cj->pids_max = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			rc = -errno;
		if (!rc)
			rc = file_path(path, sizeof(path), pids, "pids.current");
		if (!rc && (cj->pids_current = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			rc = -errno;
	}
	if (rc)
		cg_join_close(cj);
	return rc;
}

/* A decimal number at the start of fd's content; "max" (no limit) and
 * anything unreadable give UINT64_MAX.  Async-signal-safe. */
static uint64_t pread_u64(int fd)
{
	char buf[32];
	const char *end;
	uint64_t v;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return UINT64_MAX;
	buf[n] = '\0';
	return parse_u64(buf, &end, &v) ? UINT64_MAX : v;
}

/* Runs in the child: no malloc, no stdio, no locks. */
int cg_join_self(const struct cg_join *cj)
{
	uint64_t max, current;

	for (size_t h = 0; h < CG_JOIN_MAX; h++)
		/* "0": the writing process itself, in both versions. */
		if (cj->procs[h] >= 0 && write(cj->procs[h], "0", 1) != 1)
			return -errno;
	if (cj->pids_max < 0 || cj->pids_current < 0)
		return 0;
	max = pread_u64(cj->pids_max);
	current = pread_u64(cj->pids_current);
	/* current counts us: one more than the limit is one too many. */
	return max != UINT64_MAX && current != UINT64_MAX && current > max ? -EAGAIN : 0;
}

void cg_join_close(struct cg_join *cj)
{
	for (size_t i = 0; i < CG_JOIN_MAX; i++)
		if (cj->procs[i] >= 0) {
			close(cj->procs[i]);
			cj->procs[i] = -1;
		}
	if (cj->pids_max >= 0)
		close(cj->pids_max);
	if (cj->pids_current >= 0)
		close(cj->pids_current);
	cj->pids_max = cj->pids_current = -1;
}

int cg_count_procs(struct cg *cg)
{
	if (!cg || !cg->ndir)
		return -EINVAL;
	return procs_scan(cg_path(cg), 0);
}

/* ---- kill --------------------------------------------------------------- */

/* Every process in any of the cg's hierarchies; sig 0 only counts. */
static int scan_all(struct cg *cg, int sig)
{
	int total = 0;

	for (size_t h = 0; h < cg->ndir; h++) {
		int n = procs_scan(cg->dir[h], sig);

		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

static int wait_empty(struct cg *cg, int64_t deadline)
{
	for (;;) {
		int n = scan_all(cg, 0);

		if (n <= 0)
			return n;
		if (now_ms() >= deadline)
			return -EBUSY;
		sleep_ms(POLL_MS);
	}
}

/* Without a freezer, a fork bomb can outrun one pass; repeated passes win
 * because pids.max bounds it and every pass kills what it sees. */
static int kill_loop(struct cg *cg, int64_t deadline)
{
	for (;;) {
		int n = scan_all(cg, SIGKILL);

		if (n <= 0)
			return n;
		if (now_ms() >= deadline)
			return -EBUSY;
		sleep_ms(POLL_MS);
	}
}

static int kill_v2(struct cg *cg, int64_t deadline)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, rc;

	rc = file_path(path, sizeof(path), cg->dir[0], "cgroup.kill");
	if (rc)
		return rc;
	/* No O_CREAT: the file's existence is the kernel's (>= 5.14) answer
	 * to "can it kill a whole cgroup atomically". */
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return kill_loop(cg, deadline);
	n = write(fd, "1", 1);
	close(fd);
	if (n != 1)
		return kill_loop(cg, deadline);
	return wait_empty(cg, deadline);
}

/* FREEZING can last while a task sleeps uninterruptibly; at the deadline
 * we go on and kill anyway. */
static void freeze_wait(const char *dir, int64_t deadline)
{
	char buf[64];

	while (read_file(dir, "freezer.state", buf, sizeof(buf)) >= 0 &&
	       strncmp(buf, "FROZEN", 6) != 0 && now_ms() < deadline)
		sleep_ms(1);
}

/* A frozen cgroup cannot fork, so one pass sees every process; SIGKILL is
 * acted on when thawed. */
static int kill_frozen(struct cg *cg, const char *fdir, int64_t deadline)
{
	int n;

	for (;;) {
		if (write_file(fdir, "freezer.state", "FROZEN"))
			return kill_loop(cg, deadline);
		freeze_wait(fdir, deadline);
		n = scan_all(cg, SIGKILL);
		write_file(fdir, "freezer.state", "THAWED");
		if (n <= 0)
			return n;
		sleep_ms(POLL_MS);
		n = scan_all(cg, 0);
		if (n <= 0)
			return n;
		if (now_ms() >= deadline)
			return -EBUSY;
	}
}

int cg_kill(struct cg *cg)
{
	int64_t deadline;
	const char *fdir;
	int n;

	if (!cg)
		return -EINVAL;
	/* Already empty is the common case (pid 1 took the namespace down);
	 * it costs one read and leaves no freezer state behind. */
	n = scan_all(cg, 0);
	if (n <= 0)
		return n;
	deadline = now_ms() + cg->kill_timeout_ms;
	if (cg->version == JAIL_CG_V2)
		return kill_v2(cg, deadline);
	fdir = ctrl_dir(cg, C_FREEZER);
	return fdir ? kill_frozen(cg, fdir, deadline) : kill_loop(cg, deadline);
}

/* Right after its last process exits a cgroup can still be busy for a
 * moment (the exiting task is unlinked asynchronously). */
static int rmdir_retry(const char *dir)
{
	for (int i = 0; i < RMDIR_TRIES; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		sleep_ms(POLL_MS);
	}
	return -EBUSY;
}

int cg_destroy(struct cg *cg)
{
	int rc = 0;

	if (!cg)
		return 0;
	/* rmdir fails on a populated cgroup, so kill's verdict is repeated
	 * there; its own result adds nothing. */
	cg_kill(cg);
	for (size_t h = 0; h < cg->ndir; h++) {
		int r = rmdir_retry(cg->dir[h]);

		if (r) {
			log_errno(LOG_WARN, -r, "cannot remove cgroup '%s'",
				  cg->dir[h]);
			rc = -EBUSY;
		}
	}
	cg_free(cg);
	return rc;
}

/* ---- sweep -------------------------------------------------------------- */

struct names {
	char **v;
	size_t n, cap;
};

static int names_add(struct names *ns, const char *name)
{
	for (size_t i = 0; i < ns->n; i++)
		if (!strcmp(ns->v[i], name))
			return 0;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 16;
		char **v = reallocarray(ns->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	ns->v[ns->n] = strdup(name);
	if (!ns->v[ns->n])
		return -ENOMEM;
	ns->n++;
	return 0;
}

static void names_release(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
}

static bool is_dir_entry(DIR *d, const struct dirent *e)
{
	struct stat st;

	if (e->d_type != DT_UNKNOWN)
		return e->d_type == DT_DIR;
	return fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* Names of stale sandbox cgroups directly under parent. */
static int sweep_collect(const char *parent, struct names *ns)
{
	struct dirent *e;
	DIR *d;
	int rc = 0;

	d = opendir(parent);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		uint64_t start;
		pid_t pid;

		if (!parse_name(e->d_name, &pid, &start) || !is_dir_entry(d, e) ||
		    !owner_gone(pid, start))
			continue;
		rc = names_add(ns, e->d_name);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

int cg_sweep(struct cg_manager *m)
{
	struct names ns = { NULL, 0, 0 };
	int rc = 0, removed = 0;

	if (!m)
		return -EINVAL;
	/* v1: one name, one directory per hierarchy; collect first so that
	 * each stale cgroup is destroyed (and counted) once. */
	for (size_t h = 0; h < m->nhier && !rc; h++)
		rc = sweep_collect(m->parent[h], &ns);
	if (rc)
		goto out;
	for (size_t i = 0; i < ns.n; i++) {
		struct cg *cg = cg_alloc(m, ns.v[i]);

		if (!cg) {
			rc = -ENOMEM;
			goto out;
		}
		if (cg_destroy(cg) == 0)
			removed++;
	}
	rc = removed;
out:
	names_release(&ns);
	return rc;
}
