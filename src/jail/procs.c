/* The processes of a sandbox through its own /proc; see procs.h for why
 * that is race-free. */
#include "jail/procs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STAT_MAX 1024		/* a stat line is ~300 bytes after the name */
#define STATUS_HEAD 512		/* Name, Umask, State, Tgid: the first lines */

static int sys_openat2(int dirfd, const char *path, const struct open_how *how)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int procs_open(pid_t pid1, int *fd)
{
	/* "proc" of the sandbox's root as pid 1 made it: no link followed
	 * (none can be there before the sandbox's code runs, and none is
	 * trusted after). */
	const struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char path[64];
	struct statfs sfs;
	struct stat ours, theirs;
	int root, p = -1, r = 0;

	*fd = -1;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid1);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	p = sys_openat2(root, "proc", &how);
	if (p < 0) {
		r = -errno;
		goto out;
	}
	/* A procfs, and the one of pid1's pid namespace: its own pid 1 is in
	 * the namespace that the host's pid1 is in. */
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid1);
	if (fstatfs(p, &sfs) < 0 || stat(path, &theirs) < 0 ||
	    fstatat(p, "1/ns/pid", &ours, 0) < 0) {
		r = -errno;
		goto out;
	}
	if (sfs.f_type != PROC_SUPER_MAGIC || !same_file(&ours, &theirs)) {
		r = -EXDEV;
		goto out;
	}
	*fd = p;
	p = -1;
out:
	if (p >= 0)
		close(p);
	close(root);
	return r;
}

/* ---- reading ------------------------------------------------------------- */

/* Up to size bytes of dirfd/name; the count read, or -errno. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t size)
{
	size_t got = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return (ssize_t)got;
}

/* A decimal number of at most 20 digits: the span [*p, end) up to the next
 * space or newline, *p moved past it. */
static bool parse_ull(const char **p, const char *end, unsigned long long *v)
{
	const char *s = *p;
	unsigned long long x = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++)
		if (__builtin_mul_overflow(x, 10, &x) ||
		    __builtin_add_overflow(x, (unsigned long long)(*s - '0'), &x))
			return false;
	*p = s;
	*v = x;
	return true;
}

static bool parse_pid(const char *s, pid_t *pid)
{
	const char *end = s + strlen(s);
	unsigned long long v;

	if (!parse_ull(&s, end, &v) || s != end || v == 0 || v > INT_MAX)
		return false;
	*pid = (pid_t)v;
	return true;
}

/* Which fields of a stat line a procs_stat keeps (numbered from 1). */
enum {
	F_STATE = 3, F_PPID = 4, F_UTIME = 14, F_STIME = 15, F_THREADS = 20,
	F_START = 22, F_RSS = 24,
};

static void keep_field(struct procs_stat *st, int field, unsigned long long v)
{
	switch (field) {
	case F_PPID:
		st->ppid = v > INT_MAX ? 0 : (pid_t)v;
		break;
	case F_UTIME:
	case F_STIME:
		st->cpu_ticks += v;
		break;
	case F_THREADS:
		st->threads = (unsigned long)v;
		break;
	case F_START:
		st->start_ticks = v;
		break;
	case F_RSS:
		st->rss_pages = v;
		break;
	}
}

int procs_parse_stat(const char *line, size_t len, struct procs_stat *st)
{
	const char *end = line + len, *open = memchr(line, '(', len), *close = NULL, *p;
	size_t n;

	memset(st, 0, sizeof(*st));
	for (p = end; p > line; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (!open || !close || close < open)
		return -EINVAL;
	n = (size_t)(close - open - 1);
	memcpy(st->name, open + 1, n < sizeof(st->name) ? n : sizeof(st->name) - 1);
	/* " S ppid pgrp ...": each field after one space. */
	p = close + 1;
	for (int field = F_STATE; field <= F_RSS; field++) {
		unsigned long long v;

		if (p >= end || *p != ' ')
			return -EINVAL;
		p++;
		if (field == F_STATE) {
			if (p >= end || *p == ' ' || *p == '\n')
				return -EINVAL;
			st->state = *p++;
		} else if (field == F_PPID || field == F_UTIME || field == F_STIME ||
			   field == F_THREADS || field == F_START || field == F_RSS) {
			if (!parse_ull(&p, end, &v))
				return -EINVAL;
			keep_field(st, field, v);
		} else {
			while (p < end && *p != ' ' && *p != '\n')	/* signed, or unused */
				p++;
		}
	}
	return 0;
}

struct clocks {
	double boot_s, wall_s;		/* now */
	long tick, page;
};

static double seconds(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Describe pid into *p: 0, or -errno when it is gone (or not a process). */
static int describe(int proc_fd, pid_t pid, const struct clocks *c, struct jail_proc *p)
{
	char name[16], line[STAT_MAX], cmd[JAIL_PROC_CMD_MAX + 1];
	struct procs_stat st;
	ssize_t n, m;
	int dfd, r;

	snprintf(name, sizeof(name), "%d", (int)pid);
	/* Everything below reads through dfd: about this process, or nothing. */
	dfd = openat(proc_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	n = read_at(dfd, "stat", line, sizeof(line));
	m = n > 0 ? read_at(dfd, "cmdline", cmd, sizeof(cmd)) : 0;
	close(dfd);
	if (n < 0 || m < 0)
		return n < 0 ? (int)n : (int)m;
	if ((r = procs_parse_stat(line, (size_t)n, &st)) < 0)
		return r;
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = st.ppid;
	p->state = st.state;
	p->threads = st.threads > UINT32_MAX ? UINT32_MAX : (uint32_t)st.threads;
	memcpy(p->name, st.name, sizeof(p->name));
	p->cmd_cut = (size_t)m > JAIL_PROC_CMD_MAX;
	p->cmd_len = p->cmd_cut ? JAIL_PROC_CMD_MAX : (size_t)m;
	memcpy(p->cmd, cmd, p->cmd_len);
	p->elapsed_s = c->boot_s - (double)st.start_ticks / (double)c->tick;
	if (p->elapsed_s < 0)
		p->elapsed_s = 0;
	p->started_at = c->wall_s - p->elapsed_s;
	p->rss_bytes = st.rss_pages * (uint64_t)c->page;
	p->cpu_ns = (uint64_t)((double)st.cpu_ticks * 1e9 / (double)c->tick);
	return 0;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct jail_proc *)a)->pid, y = ((const struct jail_proc *)b)->pid;

	return (x > y) - (x < y);
}

int procs_list(int proc_fd, pid_t also, struct jail_proc *out, size_t max, size_t *total)
{
	struct clocks c = {
		.boot_s = seconds(CLOCK_BOOTTIME), .wall_s = seconds(CLOCK_REALTIME),
		.tick = sysconf(_SC_CLK_TCK), .page = sysconf(_SC_PAGESIZE),
	};
	struct dirent *e;
	size_t n = 0, more = 0;
	DIR *d;
	int fd;

	*total = 0;
	if (proc_fd < 0)
		return -EOPNOTSUPP;
	if (c.tick <= 0 || c.page <= 0)
		return -EINVAL;
	if (max > JAIL_PROCS_MAX)
		max = JAIL_PROCS_MAX;
	/* A descriptor of its own: a directory offset is shared by dup()s,
	 * and two listings may run at once. */
	fd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		int err = errno;

		close(fd);
		return -err;
	}
	/* The root of a procfs lists each process (thread group) of its
	 * namespace once: as many as the sandbox's pids limit allows. */
	while ((e = readdir(d))) {
		pid_t pid;

		if (!parse_pid(e->d_name, &pid) || pid == JAIL_INIT_PID || pid == JAIL_MAIN_PID)
			continue;
		if (also > 0 && pid == also)
			continue;
		if (n < max) {
			if (describe(proc_fd, pid, &c, &out[n]) == 0)
				n++;
		} else {
			more++;
		}
	}
	closedir(d);
	qsort(out, n, sizeof(*out), by_pid);
	*total = n + more;
	return (int)n;
}

int procs_oom_score_adj(int proc_fd, pid_t pid, int adj)
{
	char path[32], text[16];
	int fd, n, r = 0;

	if (proc_fd < 0)
		return -EOPNOTSUPP;
	if (pid <= 0 || pid > (1 << 22) || adj < -1000 || adj > 1000)
		return -EINVAL;
	snprintf(path, sizeof(path), "%d/oom_score_adj", (int)pid);
	n = snprintf(text, sizeof(text), "%d", adj);
	fd = openat(proc_fd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	if (write(fd, text, (size_t)n) != n)
		r = -errno;
	close(fd);
	return r;
}

int procs_signal(int proc_fd, pid_t also, pid_t pid, int sig)
{
	char name[16], head[STATUS_HEAD + 1];
	const char *tgid;
	ssize_t n;
	pid_t leader;
	int dfd, r = 0;

	if (pid == JAIL_INIT_PID || pid == JAIL_MAIN_PID || (also > 0 && pid == also))
		return -EPERM;
	if (proc_fd < 0)
		return -EOPNOTSUPP;
	if (pid <= 0)
		return -ESRCH;
	snprintf(name, sizeof(name), "%d", (int)pid);
	dfd = openat(proc_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* A thread's number opens a directory too: only a process (the
	 * leader of its thread group) is one. */
	n = read_at(dfd, "status", head, STATUS_HEAD);
	if (n < 0) {
		r = n == -ENOENT ? -ESRCH : (int)n;
		goto out;
	}
	head[n] = '\0';
	tgid = strstr(head, "\nTgid:\t");
	if (!tgid) {
		r = -ESRCH;
		goto out;
	}
	tgid += 7;
	{
		char num[16];
		size_t k = strcspn(tgid, "\n");

		if (k >= sizeof(num) || !tgid[k]) {
			r = -ESRCH;
			goto out;
		}
		memcpy(num, tgid, k);
		num[k] = '\0';
		if (!parse_pid(num, &leader) || leader != pid) {
			r = -ESRCH;
			goto out;
		}
	}
	/* The directory is a pidfd of the process it was opened for. */
	if (syscall(SYS_pidfd_send_signal, dfd, sig, NULL, 0) < 0)
		r = -errno;
out:
	close(dfd);
	return r;
}
