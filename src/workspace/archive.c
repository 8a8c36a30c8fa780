/* archive — a directory of /work as a tar(.gz) stream (archive.h). */
#include "workspace/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"
#include "util/buf.h"
#include "util/sanitized.h"
#include "util/utf8.h"

#define BLOCK (64u << 10)	/* of a file, per step */
/* What an open archive costs besides its listing: libarchive's and zlib's
 * state and buffers, BLOCK, what a step writes (measured: ~0.4 MiB). */
#define ARCHIVE_COST (512u << 10)

/* Bytes held by every open archive, charged against ARCHIVE_HELD_MAX. */
static atomic_size_t held;

/* One listed entry, packed in a buf: its header, then the path relative to
 * the directory (NUL-terminated), then a symlink's target (likewise). */
struct packed {
	uint32_t mode;
	uint32_t path_len, target_len;	/* without their NULs */
	int64_t mtime;
};

struct ws_archive {
	struct files_user u;
	int dir_fd;		/* the directory archived (O_PATH) */
	struct buf list;	/* struct packed + names, one after another */
	size_t entries, next;	/* offset in list of the next entry */
	uint64_t bytes_left;	/* of file content still to send, of max_bytes */
	struct archive *w;
	struct buf out;		/* what libarchive wrote, not yet read */
	int fd;			/* the file whose data is being written; -1 */
	char *block;		/* BLOCK bytes of it */
	uint64_t left;		/* of its data */
	off_t pos;
	bool closed;		/* the trailer is written */
	int err;
	size_t charged;		/* of held */
};

/* Charge a for n more bytes: 0, or -EBUSY when every archive at once
 * would hold more than ARCHIVE_HELD_MAX. */
static int charge(struct ws_archive *a, size_t n)
{
	if (atomic_fetch_add(&held, n) + n > ARCHIVE_HELD_MAX) {
		atomic_fetch_sub(&held, n);
		return -EBUSY;
	}
	a->charged += n;
	return 0;
}

struct lister {
	struct ws_archive *a;
	size_t skip;		/* the directory's own prefix, "dir/" */
	uint64_t bytes_left;	/* of max_bytes, by the sizes listed */
};

/* Components of a relative path. */
static unsigned depth_of(const char *path)
{
	unsigned n = 1;

	for (; *path; path++)
		n += *path == '/';
	return n;
}

static int list_one(void *ctx, const char *path, const struct stat *st, const char *target,
		    const struct files_meta *meta)
{
	struct lister *l = ctx;
	struct ws_archive *a = l->a;
	struct packed p = {
		.mode = st->st_mode, .mtime = st->st_mtime, .path_len = strlen(path + l->skip),
		.target_len = S_ISLNK(st->st_mode) ? strlen(target) : 0,
	};
	size_t n = sizeof(p) + p.path_len + p.target_len + 2;
	int r;

	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))
		return 0;	/* FIFOs, sockets, devices: not archived */
	/* The walk goes one level deeper than an archive may: a tree deeper
	 * than FILES_TREE_DEPTH is refused, not sent without its depths. */
	if (a->list.len + n > ARCHIVE_NAMES_MAX || depth_of(path + l->skip) > FILES_TREE_DEPTH)
		return -E2BIG;
	if (S_ISREG(st->st_mode) && (uint64_t)st->st_size > l->bytes_left)
		return -E2BIG;	/* more than /work holds: holes, or hard links */
	if (S_ISREG(st->st_mode))
		l->bytes_left -= (uint64_t)st->st_size;
	if (buf_reserve(&a->list, n) < 0)
		return -ENOMEM;
	/* What the listing grew to is charged before it is used. */
	if (a->list.cap + ARCHIVE_COST > a->charged &&
	    (r = charge(a, a->list.cap + ARCHIVE_COST - a->charged)) < 0)
		return r;
	if (buf_append(&a->list, &p, sizeof(p)) < 0 ||
	    buf_append(&a->list, path + l->skip, p.path_len + 1) < 0 ||
	    buf_append(&a->list, p.target_len ? target : "", p.target_len + 1) < 0)
		return -ENOMEM;
	a->entries++;
	return 0;
}

static la_ssize_t on_write(struct archive *w, void *ctx, const void *data, size_t n)
{
	struct ws_archive *a = ctx;

	(void)w;
	return buf_append(&a->out, data, n) < 0 ? -1 : (la_ssize_t)n;
}

int ws_archive_open(const struct files_user *u, int work_fd, const char *dir, bool gzip,
		    size_t max_entries, uint64_t max_bytes, struct ws_archive **out)
{
	struct ws_archive *a = calloc(1, sizeof(*a));
	struct stat st;
	struct lister l;
	int r;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->u = *u;
	a->fd = -1;
	a->dir_fd = -1;
	if ((r = charge(a, ARCHIVE_COST)) < 0)
		goto fail;
	r = -ENOMEM;
	if (!(a->block = malloc(BLOCK)))
		goto fail;
	if (*dir) {
		char target[2];

		if ((r = files_stat(u, work_fd, dir, &st, target, sizeof(target), NULL)) < 0)
			goto fail;
		if (!S_ISDIR(st.st_mode)) {
			r = -ENOTDIR;
			goto fail;
		}
	}
	/* Files are opened from it, the way to it resolved once. */
	if ((a->dir_fd = files_open_dir(u, work_fd, dir)) < 0) {
		r = a->dir_fd;
		goto fail;
	}
	l = (struct lister){ .a = a, .skip = *dir ? strlen(dir) + 1 : 0, .bytes_left = max_bytes };
	if ((r = files_walk(u, work_fd, dir, FILES_TREE_DEPTH + 1, max_entries, 0, list_one,
			      &l)) < 0)
		goto fail;
	a->bytes_left = max_bytes;
	r = -ENOMEM;
	if (!(a->w = archive_write_new()))
		goto fail;
	if (archive_write_set_format_pax_restricted(a->w) != ARCHIVE_OK ||
	    (gzip && (archive_write_add_filter_gzip(a->w) != ARCHIVE_OK ||
		      /* The daemon's CPU: fast compression. */
		      archive_write_set_filter_option(a->w, "gzip", "compression-level",
						      "1") != ARCHIVE_OK)) ||
	    archive_write_set_bytes_in_last_block(a->w, 1) != ARCHIVE_OK ||
	    archive_write_open(a->w, a, NULL, on_write, NULL) != ARCHIVE_OK)
		goto fail;
	*out = a;
	return 0;
fail:
	ws_archive_free(a);
	return r;
}

size_t ws_archive_entries(const struct ws_archive *a)
{
	return a->entries;
}

/* The header of the next listed entry, and for a file opens it. */
static int next_entry(struct ws_archive *a)
{
	struct packed p;
	const char *path, *target;
	struct archive_entry *e;
	uint64_t size = 0;
	int r = 0;

	memcpy(&p, a->list.data + a->next, sizeof(p));
	path = a->list.data + a->next + sizeof(p);
	target = path + p.path_len + 1;
	a->next += sizeof(p) + p.path_len + p.target_len + 2;
	if (S_ISREG(p.mode)) {
		/* Changed since it was listed (gone, no longer a file, a link
		 * on the way): left out. */
		if (files_open_listed(&a->u, a->dir_fd, path, &a->fd, &size) < 0)
			return 0;
		/* Grown since it was listed: cut, within what is left. */
		if (size > a->bytes_left)
			size = a->bytes_left;
		a->bytes_left -= size;
	}
	if (!(e = archive_entry_new2(a->w)))
		return -ENOMEM;
	/* A name that is not UTF-8 goes as its bytes (libarchive warns and
	 * marks that entry's header binary). */
	if (utf8_valid(path, p.path_len))
		archive_entry_set_pathname_utf8(e, path);
	else
		archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, S_ISREG(p.mode) ? AE_IFREG : S_ISDIR(p.mode) ? AE_IFDIR
										: AE_IFLNK);
	archive_entry_set_perm(e, p.mode & 0777);
	archive_entry_set_mtime(e, p.mtime, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (S_ISLNK(p.mode) && utf8_valid(target, p.target_len))
		archive_entry_set_symlink_utf8(e, target);
	else if (S_ISLNK(p.mode))
		archive_entry_set_symlink(e, target);
	archive_entry_set_size(e, (la_int64_t)size);
	if (archive_write_header(a->w, e) < ARCHIVE_WARN)
		r = -EIO;
	archive_entry_free(e);
	a->left = size;
	a->pos = 0;
	return r;
}

/* One block of the open file; at its end (or on a short read: the file
 * shrank) close it: libarchive pads what the header promised. */
static int file_block(struct ws_archive *a)
{
	char *block = a->block;
	size_t want = a->left < BLOCK ? (size_t)a->left : BLOCK;
	ssize_t n = want ? pread(a->fd, block, want, a->pos) : 0;

	if (n > 0) {
		if (archive_write_data(a->w, block, (size_t)n) < 0)
			return -EIO;
		a->left -= (uint64_t)n;
		a->pos += n;
	}
	if (n <= 0 || a->left == 0) {
		close(a->fd);
		a->fd = -1;
		if (archive_write_finish_entry(a->w) < ARCHIVE_WARN)
			return -EIO;
	}
	return 0;
}

static int step(struct ws_archive *a)
{
	if (a->fd >= 0)
		return file_block(a);
	if (a->next < a->list.len)
		return next_entry(a);
	a->closed = true;
	return archive_write_close(a->w) == ARCHIVE_OK ? 0 : -EIO;
}

ssize_t ws_archive_read(struct ws_archive *a, char *out, size_t max)
{
	size_t n;

	/* A few steps at most: each is one block or one header. */
	for (int i = 0; i < 64 && !a->err && !a->closed && a->out.len < max; i++)
		a->err = step(a);
	/* Nothing yet is not the end: gzip hands its output on 64 KiB at a
	 * time, which may take more input than these steps give it. */
	if (a->out.len == 0)
		return a->err ? a->err : a->closed ? 0 : -EAGAIN;
	n = a->out.len < max ? a->out.len : max;
	memcpy(out, a->out.data, n);
	/* What was read goes: the buffer holds one step's output, never
	 * the stream. */
	buf_consume(&a->out, n);
	return (ssize_t)n;
}

void ws_archive_free(struct ws_archive *a)
{
	if (!a)
		return;
	if (a->w)
		archive_write_free(a->w);	/* closes it if open */
	if (a->fd >= 0)
		close(a->fd);
	if (a->dir_fd >= 0)
		close(a->dir_fd);
	buf_release(&a->list);
	buf_release(&a->out);
	free(a->block);
	atomic_fetch_sub(&held, a->charged);
	free(a);
}

/* ---- the writer process (archive.h) ------------------------------------ */

/* In the writer, after the exec: the workspace's directory and the pipe. */
#define WRITER_WORK_FD 3
#define WRITER_OUT_FD 4
#define WRITER_ARGS 10

/* What the writer says first: the listing's outcome. */
struct writer_hello {
	int32_t err;		/* 0 or ws_archive_open()'s -errno */
	uint32_t entries;
};

struct ws_archiver {
	pid_t pid;		/* -1 once reaped */
	int pidfd;		/* -1: none (an old kernel) */
	int in;			/* the pipe's read end */
	int out;		/* its write end, in the parent only until the fork */
	int work_fd;		/* the jail's, not ours */
	bool hello;		/* the listing's outcome was read */
	/* Prepared before the fork: the child only makes system calls. */
	char num[6][24];
	char dir[FILES_PATH_MAX + 1];
	const char *argv[WRITER_ARGS + 1];
};

/* The child of jail_fork_charged(): the two descriptors at their places,
 * /dev/null for 0-2 (not the daemon's log), nothing else of the daemon's,
 * and petri itself in a fresh image. */
static int writer_exec(void *arg)
{
	struct ws_archiver *a = arg;
	static const char *const envp[] = { NULL };
	int work = fcntl(a->work_fd, F_DUPFD, 16), out = fcntl(a->out, F_DUPFD, 16);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (work < 0 || out < 0 || nul < 0 || dup2(work, WRITER_WORK_FD) < 0 ||
	    dup2(out, WRITER_OUT_FD) < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 ||
	    dup2(nul, 2) < 0)
		return -errno;
	if (syscall(SYS_close_range, (unsigned)WRITER_OUT_FD + 1, ~0u, 0u) < 0)
		return -errno;
	execve("/proc/self/exe", (char *const *)a->argv, (char *const *)envp);
	return -errno;
}

static void archiver_free(struct ws_archiver *a)
{
	if (a->in >= 0)
		close(a->in);
	if (a->out >= 0)
		close(a->out);
	if (a->pidfd >= 0)
		close(a->pidfd);
	free(a);
}

int ws_archiver_start(const struct files_user *u, struct jail *j, const char *dir, bool gzip,
		      size_t max_entries, uint64_t max_bytes, struct ws_archiver **out)
{
	struct ws_archiver *a;
	int p[2], r;

	*out = NULL;
	if (strlen(dir) > FILES_PATH_MAX)
		return -ENAMETOOLONG;
	if (!(a = calloc(1, sizeof(*a))))
		return -ENOMEM;
	a->pid = -1;
	a->pidfd = a->in = a->out = -1;
	a->work_fd = jail_work_fd(j);
	snprintf(a->dir, sizeof(a->dir), "%s", dir);
	snprintf(a->num[0], sizeof(a->num[0]), "%u", (unsigned)u->uid);
	snprintf(a->num[1], sizeof(a->num[1]), "%u", (unsigned)u->gid);
	snprintf(a->num[2], sizeof(a->num[2]), "%d", gzip ? 1 : 0);
	snprintf(a->num[3], sizeof(a->num[3]), "%zu", max_entries);
	snprintf(a->num[4], sizeof(a->num[4]), "%llu", (unsigned long long)max_bytes);
	snprintf(a->num[5], sizeof(a->num[5]), "%d", (int)getpid());
	a->argv[0] = "petri";
	a->argv[1] = WS_ARCHIVER_COMMAND;
	for (int i = 0; i < 6; i++)
		a->argv[2 + i] = a->num[i];
	a->argv[8] = a->dir;
	a->argv[9] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	a->in = p[0];
	a->out = p[1];
	if ((r = jail_fork_charged(j, writer_exec, a, &a->pid)) < 0)
		goto fail;
	close(a->out);
	a->out = -1;
	a->pidfd = (int)syscall(SYS_pidfd_open, a->pid, 0);
	*out = a;
	return 0;
fail:
	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, NULL, 0);
	}
	archiver_free(a);
	return r;
}

/* The writer is gone or going (its pipe hit EOF, or it was killed): wait
 * at most wait_ms for its end and reap it.  Its exit code as -errno (0:
 * clean), -ENOMEM when it was killed, -EINPROGRESS when it still runs. */
static int archiver_exit(struct ws_archiver *a, int wait_ms)
{
	int st;
	pid_t r;

	if (a->pid < 0)
		return 0;
	if (a->pidfd >= 0 && wait_ms) {
		struct pollfd pfd = { .fd = a->pidfd, .events = POLLIN };

		poll(&pfd, 1, wait_ms);
	}
	while ((r = waitpid(a->pid, &st, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -EINPROGRESS;
	a->pid = -1;
	if (r < 0)
		return -ECHILD;
	if (WIFSIGNALED(st))
		return -ENOMEM;
	return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

int ws_archiver_opened(struct ws_archiver *a, double timeout_s, size_t *entries)
{
	struct pollfd pfd = { .fd = a->in, .events = POLLIN };
	struct writer_hello h;
	ssize_t n;
	int r;

	*entries = 0;
	r = poll(&pfd, 1, (int)(timeout_s * 1000));
	if (r == 0)
		return -ETIMEDOUT;
	/* At most PIPE_BUF bytes: written and read whole. */
	while ((n = read(a->in, &h, sizeof(h))) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(h)) {
		/* Gone before a word: at the pids limit (EAGAIN), killed... */
		r = archiver_exit(a, 1000);
		return r == -EAGAIN || r == -ENOMEM ? r : -EIO;
	}
	if (h.err > 0 || h.err < -4095)
		return -EPROTO;
	a->hello = true;
	*entries = h.entries;
	fcntl(a->in, F_SETFL, fcntl(a->in, F_GETFL) | O_NONBLOCK);
	return h.err;
}

ssize_t ws_archiver_read(struct ws_archiver *a, char *out, size_t max)
{
	ssize_t n;
	int r;

	if (!a->hello)
		return -EPROTO;
	while ((n = read(a->in, out, max)) < 0 && errno == EINTR)
		;
	if (n > 0)
		return n;
	if (n < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	/* The end of the pipe: a whole stream only if the writer says so.
	 * It closed the pipe on its way out, but its exit may be slow (its
	 * cgroup's CPU is the sandbox's): the caller waits for the exit fd
	 * rather than this thread. */
	r = archiver_exit(a, a->pidfd >= 0 ? 0 : 1000);
	return r == -EINPROGRESS && a->pidfd < 0 ? -EIO : r;
}

int ws_archiver_fd(const struct ws_archiver *a)
{
	return a->in;
}

void ws_archiver_cancel(struct ws_archiver *a)
{
	if (a->pid < 0)
		return;
	if (a->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, a->pidfd, SIGKILL, NULL, 0);
	else
		kill(a->pid, SIGKILL);
}

int ws_archiver_exit_fd(const struct ws_archiver *a)
{
	return a->pidfd;
}

bool ws_archiver_reap(struct ws_archiver *a)
{
	ws_archiver_cancel(a);
	if (archiver_exit(a, 0) == -EINPROGRESS)
		return false;
	archiver_free(a);
	return true;
}

/* ---- in the writer, after the exec ---- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Become the sandbox's user for good: what the daemon's setfsuid() does
 * for a thread, for the whole process and with nothing to go back to. */
static int drop_to(uid_t uid, gid_t gid)
{
	/* An unprivileged daemon's sandboxes are its own uid: nothing to drop. */
	if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
			       setresuid(uid, uid, uid) < 0))
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* A network namespace of its own, with nothing in it: the writer reads
 * what the sandbox made and never needs a network.  As root, one unshare;
 * an unprivileged daemon's writer (its sandboxes' uid is its own) makes it
 * under a user namespace of its own, without a mapping: its files are
 * still reached as its own uid. */
static int own_network(void)
{
	if (unshare(CLONE_NEWNET) == 0)
		return 0;
	if (errno != EPERM || unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return -errno;
	return 0;
}

/* What the writer may do once it reads the sandbox's files: the calls
 * traced under a download of hostile names, links, holes and large files
 * (tar and tar.gz), each with its reason.  Everything else fails with
 * ENOSYS (policy_build_only(): no socket, no exec, no new namespace, no
 * ptrace; mmap and mprotect never executable), so that a bug of
 * libarchive's or zlib's that a file of the sandbox's reaches runs in a
 * process that can only write into its pipe. */
static const char *const writer_calls[] = {
	/* the workspace, through the jail's descriptor (files_walk,
	 * files_open: openat2 in the root; openat of a listed directory), and
	 * glibc's iconv cache for libarchive's names, mapped at the first */
	"openat", "openat2", "newfstatat", "fstat", "statx", "getdents64",
	"readlinkat", "read", "pread64", "lseek", "fcntl", "close",
	/* files.c sets the file-system ids per call: the writer's own ids
	 * already, which without CAP_SETUID are all it can set */
	"setfsuid", "setfsgid",
	/* the stream, into the pipe (and stderr, /dev/null) */
	"write",
	/* memory; mmap and mprotect without PROT_EXEC are added by the filter */
	"brk", "munmap", "mremap", "madvise",
	/* glibc's locks (one thread), abort(), the end */
	"futex", "rt_sigprocmask", "rt_sigreturn", "getpid", "gettid", "tgkill",
	"exit", "exit_group",
	/* clocks, where the vDSO does not answer */
	"clock_gettime", "gettimeofday", "time",
	NULL
};

static bool num_arg(const char *s, unsigned long long max, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s && !*end && !errno && *v <= max;
}

int ws_archiver_main(int argc, char **argv)
{
	unsigned long long uid, gid, gzip, entries, bytes, parent;
	static char block[BLOCK];
	struct writer_hello h = { 0 };
	struct files_user u;
	struct ws_archive *a = NULL;
	char err[256];
	ssize_t n;

	if (argc != 9 || strcmp(argv[1], WS_ARCHIVER_COMMAND) ||
	    !num_arg(argv[2], UINT32_MAX, &uid) || !num_arg(argv[3], UINT32_MAX, &gid) ||
	    !num_arg(argv[4], 1, &gzip) || !num_arg(argv[5], SIZE_MAX, &entries) ||
	    !num_arg(argv[6], UINT64_MAX, &bytes) || !num_arg(argv[7], INT32_MAX, &parent) ||
	    fcntl(WRITER_OUT_FD, F_GETFD) < 0 || fcntl(WRITER_WORK_FD, F_GETFD) < 0) {
		fprintf(stderr, "petri: %s is run by petri serve, not by hand\n",
			WS_ARCHIVER_COMMAND);
		return 2;
	}
	/* Dies with the daemon; the setting does not survive the change of
	 * credentials, so it is made after.  The network namespace needs
	 * root's CAP_SYS_ADMIN: before. */
	if (own_network() < 0 || drop_to((uid_t)uid, (gid_t)gid) < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != (pid_t)parent)
		return EPERM;
	signal(SIGPIPE, SIG_DFL);
	/* Everything it opens from here on is the sandbox's: confined first. */
	if (jail_seccomp_only(writer_calls, err, sizeof(err)) < 0) {
		fprintf(stderr, "petri: %s\n", err);	/* to /dev/null; for a debugger */
		return EPERM;
	}
	u = (struct files_user){ .uid = (uid_t)uid, .gid = (gid_t)gid };
	h.err = ws_archive_open(&u, WRITER_WORK_FD, argv[8], gzip, (size_t)entries, bytes, &a);
	h.entries = a ? (uint32_t)ws_archive_entries(a) : 0;
	if (write_all(WRITER_OUT_FD, (const char *)&h, sizeof(h)) < 0 || h.err < 0)
		return h.err < 0 ? 0 : EPIPE;	/* the refusal is said: a clean end */
	while ((n = ws_archive_read(a, block, sizeof(block))) != 0) {
		if (n == -EAGAIN)
			continue;
		if (n < 0 || write_all(WRITER_OUT_FD, block, (size_t)n) < 0)
			break;
	}
	ws_archive_free(a);
#if SANITIZED_BUILD
	/* LeakSanitizer's check at exit stops the process's threads with
	 * clone and ptrace, which the filter refuses: a sanitized writer ends
	 * without it (the unit tests check ws_archive's leaks). */
	_exit(n ? EIO : 0);
#endif
	return n ? EIO : 0;
}
