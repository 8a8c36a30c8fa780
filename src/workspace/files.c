#include "workspace/files.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "util/utf8.h"

#define RESOLVE_FLAGS (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* Act as the sandbox user in this thread; returns what to restore. */
static struct files_user become(const struct files_user *u)
{
	struct files_user old;

	/* The raw calls are per thread, which is the point: glibc's wrappers
	 * for setfsuid/setfsgid are too, but say so less plainly. */
	old.gid = (gid_t)syscall(SYS_setfsgid, u->gid);
	old.uid = (uid_t)syscall(SYS_setfsuid, u->uid);
	return old;
}

static void restore(const struct files_user *old)
{
	syscall(SYS_setfsuid, old->uid);
	syscall(SYS_setfsgid, old->gid);
}

/* The value of call, evaluated once as the sandbox user u: every
 * operation below runs through it.  A macro, not a function taking the
 * operation: the operations share no signature (their out-parameters are
 * fds, sizes, listings, stats), so a function would need every one's
 * arguments packed into one struct, or a trampoline each, to wrap a call
 * of one line. */
#define AS_USER(u, call) ({				\
	struct files_user old_ = become(u);		\
	int r_ = (call);				\
							\
	restore(&old_);					\
	r_;						\
})

/* openat2() with RESOLVE_IN_ROOT fails with EAGAIN when a rename or a
 * mount anywhere raced one of its ".." steps: it cannot prove the walk
 * stayed inside.  The sandbox can make that happen at will (renames in a
 * loop, and symlinks of many "x/.." hops to walk): a review got 19,988
 * EAGAIN of 20,000 tries.  Retrying until it succeeds would let it hold a
 * daemon thread for as long as it likes, so a few tries ride out an honest
 * race and then the caller is told FILES_ECHANGING.  16: an honest race is
 * one rename in flight, gone by the next try; the bound costs at most 16
 * path walks. */
#define OPEN_TRIES 16

int files_open_in(int work_fd, const char *path, int flags, mode_t mode,
		  int (*try_open)(int, const char *, const struct open_how *))
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_FLAGS,
	};
	int tries = 0, fd;

	for (;;) {
		fd = try_open(work_fd, path, &how);
		if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (errno == EAGAIN && ++tries == OPEN_TRIES)
			return FILES_ECHANGING;
	}
	return fd < 0 ? -errno : fd;
}

static int sys_openat2(int dirfd, const char *path, const struct open_how *how)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static int open_in(int work_fd, const char *path, int flags, mode_t mode)
{
	return files_open_in(work_fd, path, flags, mode, sys_openat2);
}

/* openat2() through no symbolic link at all: ELOOP at the first. */
static int sys_openat2_no_symlinks(int dirfd, const char *path, const struct open_how *how)
{
	struct open_how h = *how;

	h.resolve |= RESOLVE_NO_SYMLINKS;
	return sys_openat2(dirfd, path, &h);
}

int files_check_path(const char *path, bool allow_empty, char *why, size_t whylen)
{
	size_t len = strlen(path), comp = 0;

#define REFUSE(...) do { snprintf(why, whylen, __VA_ARGS__); return -EINVAL; } while (0)
	if (len == 0) {
		if (allow_empty)
			return 0;
		REFUSE("the path is empty");
	}
	if (len > FILES_PATH_MAX)
		REFUSE("the path is longer than %d bytes", FILES_PATH_MAX);
	if (path[0] == '/')
		REFUSE("the path must be relative to /work, not absolute");
	if (!utf8_valid(path, len))
		REFUSE("the path is not valid UTF-8");
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)path[i];

		if (i < len && (c < 0x20 || c == 0x7f))
			REFUSE("the path contains a NUL or control character");
		if (i < len && c != '/') {
			if (++comp > FILES_NAME_MAX)
				REFUSE("a path component is longer than %d bytes", FILES_NAME_MAX);
			continue;
		}
		/* end of a component: path[i - comp, i) */
		if (comp == 0 && !(i == len && path[len - 1] == '/' && allow_empty))
			REFUSE("the path has an empty component");
		if ((comp == 1 && path[i - 1] == '.') ||
		    (comp == 2 && path[i - 1] == '.' && path[i - 2] == '.'))
			REFUSE("the path may not contain '.' or '..' components");
		comp = 0;
	}
	return 0;
#undef REFUSE
}

/* ---- metadata ------------------------------------------------------------ */

int files_meta_add(struct files_meta *m, const char *key, size_t klen, const void *value,
		   size_t vlen)
{
	size_t counted = (m->n + 1) * FILES_META_PREFIX_LEN + m->used;

	if (klen == 0)
		return -EINVAL;
	for (unsigned i = 0; i < m->n; i++)
		if (m->kv[i].klen == klen && !memcmp(m->data + m->kv[i].key, key, klen))
			return -EEXIST;
	if (klen > FILES_META_KEY_MAX || m->n == FILES_META_KEYS || counted > FILES_META_BYTES ||
	    vlen > FILES_META_BYTES || klen + vlen > FILES_META_BYTES - counted)
		return -E2BIG;
	m->kv[m->n] = (struct files_meta_kv){
		.key = (unsigned short)m->used, .klen = (unsigned short)klen,
		.value = (unsigned short)(m->used + klen), .vlen = (unsigned short)vlen,
	};
	memcpy(m->data + m->used, key, klen);
	memcpy(m->data + m->used + klen, value, vlen);
	m->used += klen + vlen;
	m->n++;
	return 0;
}

/* An attribute of name in the directory dfd ("": dfd itself, as ".": the
 * calls take no O_PATH fd with AT_EMPTY_PATH), never following a symlink
 * at name and never resolving more than that one component:
 * listxattrat/getxattrat (Linux 6.13), or on an older kernel the same name
 * under the fd's own /proc/self/fd link (which is the directory dfd holds,
 * whatever the sandbox renamed since). */
#ifndef SYS_getxattrat
#define SYS_getxattrat 464
#endif
#ifndef SYS_listxattrat
#define SYS_listxattrat 465
#endif
struct xattr_args_v0 {		/* the kernel's struct xattr_args */
	uint64_t value;
	uint32_t size;
	uint32_t flags;
};
static atomic_bool no_xattrat;

void files_meta_without_xattrat(void)
{
	atomic_store(&no_xattrat, true);
}

static ssize_t list_at(int dfd, const char *name, char *list, size_t size)
{
	char proc[32 + FILES_NAME_MAX];
	ssize_t n;

	if (!*name)
		name = ".";
	if (!atomic_load_explicit(&no_xattrat, memory_order_relaxed)) {
		n = syscall(SYS_listxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, list, size);
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_xattrat, true, memory_order_relaxed);
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dfd, name);
	return llistxattr(proc, list, size);
}

static ssize_t get_at(int dfd, const char *name, const char *attr, void *value, size_t size)
{
	struct xattr_args_v0 args = { .value = (uintptr_t)value, .size = (uint32_t)size };
	char proc[32 + FILES_NAME_MAX];
	ssize_t n;

	if (!*name)
		name = ".";
	if (!atomic_load_explicit(&no_xattrat, memory_order_relaxed)) {
		n = syscall(SYS_getxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, attr, &args,
			    sizeof(args));
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_xattrat, true, memory_order_relaxed);
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dfd, name);
	return lgetxattr(proc, attr, value, size);
}

/* The metadata of name in dfd ("": dfd itself) into m, as the calling
 * thread's fsuid; list: XATTR_LIST_MAX bytes of scratch for the names
 * (the most a listing of them can be).  What cannot be read is none: no
 * attributes, a file the user may not read, a value removed or grown
 * meanwhile, a key or value past what m has left. */
static void meta_read(int dfd, const char *name, char *list, struct files_meta *m)
{
	ssize_t n = list_at(dfd, name, list, XATTR_LIST_MAX);

	m->n = 0;
	m->used = 0;
	for (size_t off = 0; n > 0 && off < (size_t)n && m->n < FILES_META_KEYS;) {
		const char *attr = list + off;
		size_t alen = strnlen(attr, (size_t)n - off), klen, room, size;
		size_t counted = (m->n + 1) * FILES_META_PREFIX_LEN + m->used;
		char aname[XATTR_NAME_MAX + 1];
		ssize_t v;

		off += alen + 1;
		if (alen <= FILES_META_PREFIX_LEN || alen > XATTR_NAME_MAX ||
		    strncmp(attr, FILES_META_PREFIX, FILES_META_PREFIX_LEN))
			continue;
		if (counted > FILES_META_BYTES)
			break;
		klen = alen - FILES_META_PREFIX_LEN;
		room = FILES_META_BYTES - counted;
		if (klen > room)
			continue;
		size = room - klen;
		/* NUL-ended for the call: the listing's last may not be */
		memcpy(aname, attr, alen);
		aname[alen] = '\0';
		v = get_at(dfd, name, aname, m->data + m->used + klen, size);
		if (v < 0 || (size_t)v > size)
			continue;
		m->kv[m->n] = (struct files_meta_kv){
			.key = (unsigned short)m->used, .klen = (unsigned short)klen,
			.value = (unsigned short)(m->used + klen), .vlen = (unsigned short)v,
		};
		memcpy(m->data + m->used, attr + FILES_META_PREFIX_LEN, klen);
		m->used += klen + (size_t)v;
		m->n++;
	}
}

/* m's attributes on the open file fd.  System calls only: the upload
 * writer sets them. */
static int meta_write(int fd, const struct files_meta *m)
{
	char name[XATTR_NAME_MAX + 1];

	for (unsigned i = 0; i < m->n; i++) {
		const struct files_meta_kv *kv = &m->kv[i];

		if (FILES_META_PREFIX_LEN + kv->klen > XATTR_NAME_MAX)
			return -ERANGE;
		memcpy(name, FILES_META_PREFIX, FILES_META_PREFIX_LEN);
		memcpy(name + FILES_META_PREFIX_LEN, m->data + kv->key, kv->klen);
		name[FILES_META_PREFIX_LEN + kv->klen] = '\0';
		if (fsetxattr(fd, name, m->data + kv->value, kv->vlen, 0) < 0)
			return -errno;
	}
	return 0;
}

/* Split "a/b/c" into the directory "a/b" (or "" for /work) and "c". */
static int split(const char *path, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		dir[0] = '\0';
		*base = path;
		return 0;
	}
	if ((size_t)(slash - path) >= dirlen)
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*base = slash + 1;
	return 0;
}

static int open_dir(int work_fd, const char *dir)
{
	return open_in(work_fd, dir[0] ? dir : ".", O_PATH | O_DIRECTORY, 0);
}

/* Make every missing directory of dir.  Existing ones (or symlinks to
 * directories inside /work) are used as they are. */
static int make_parents(int work_fd, const char *dir)
{
	char sofar[FILES_PATH_MAX + 1] = "";
	const char *p = dir;

	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - dir);
		char name[FILES_NAME_MAX + 1];
		int parent, r;

		memcpy(name, p, (size_t)(end - p));
		name[end - p] = '\0';
		parent = open_dir(work_fd, sofar);
		if (parent < 0)
			return parent;
		/* A name is looked up from its parent's fd: the kernel resolves
		 * it, no symlink in it is followed by mkdirat. */
		r = mkdirat(parent, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
		close(parent);
		if (r < 0)
			return r;
		memcpy(sofar, dir, n);
		sofar[n] = '\0';
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* The directory holding path's last component, opened (an O_PATH fd), and
 * that component in *base (a pointer into path); with make, its missing
 * parents are made first.  An fd or -errno.  System calls only: the upload
 * writer uses it too. */
static int open_parent(int work_fd, const char *path, bool make, const char **base)
{
	char dir[FILES_PATH_MAX + 1];
	int r;

	if ((r = split(path, dir, sizeof(dir), base)) < 0)
		return r;
	if (make && dir[0] && (r = make_parents(work_fd, dir)) < 0)
		return r;
	return open_dir(work_fd, dir);
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ".petri-upload-" and 16 hex digits: a name the sandbox cannot guess and
 * plant a symlink at.  Not async-signal-safe: made before any fork. */
#define TMP_LEN 64
static int tmp_name(char tmp[TMP_LEN])
{
	unsigned char rnd[8];

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	snprintf(tmp, TMP_LEN, ".petri-upload-%02x%02x%02x%02x%02x%02x%02x%02x",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	return 0;
}

/* A file is written into a new file tmp beside the target, then renamed
 * over the target: a refused upload (workspace full) leaves the old file as
 * it was, and a symlink or FIFO the sandbox put there is replaced, never
 * written through.  open_beside() makes the parents and opens tmp (*parent:
 * its directory, *base: the target's name in it); finish_beside() closes
 * fd and renames tmp over base when r is 0, else removes it, and closes
 * parent.  Both only make system calls: the upload writer (a forked child)
 * uses them too. */
static int open_beside(int work_fd, const char *path, const char *tmp, int *parent,
		       int *fd, const char **base)
{
	struct stat st;

	*fd = -1;
	*parent = open_parent(work_fd, path, true, base);
	if (*parent < 0)
		return *parent;
	if (fstatat(*parent, *base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	/* One component under a directory fd: nothing to resolve or follow. */
	*fd = openat(*parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	return *fd < 0 ? -errno : 0;
}

static int finish_beside(int parent, int fd, const char *tmp, const char *base, int r)
{
	if (fd >= 0) {
		if (close(fd) < 0 && r == 0)
			r = -errno;
		if (r == 0 && renameat(parent, tmp, parent, base) < 0)
			r = -errno;
		if (r < 0)
			unlinkat(parent, tmp, 0);
	}
	if (parent >= 0)
		close(parent);
	return r;
}

static int write_as(int work_fd, const char *path, const void *data, size_t len)
{
	char tmp[TMP_LEN];
	const char *base;
	int parent, fd, r;

	if ((r = tmp_name(tmp)) < 0)
		return r;
	r = open_beside(work_fd, path, tmp, &parent, &fd, &base);
	if (r == 0)
		r = write_all(fd, data, len);
	return finish_beside(parent, fd, tmp, base, r);
}

int files_write(const struct files_user *u, int work_fd, const char *path,
		const void *data, size_t len)
{
	return AS_USER(u, write_as(work_fd, path, data, len));
}

/* ---- the upload writer ---------------------------------------------------
 *
 * The daemon and the writer share a socketpair.  The daemon sends frames, a 4-byte length (host order) and that many
 * bytes, at most SINK_FRAME bytes each; a frame of length 0 commits.  EOF
 * without it is an abort: the temporary file is removed.  The socket's
 * buffer is all the daemon holds of an upload: send() blocks while the
 * writer is behind, so a client can go no faster than the sandbox's /work
 * takes the bytes.  Nothing here that an event thread calls waits for the
 * writer, which runs in the sandbox's cgroups (its CPU quota, its memory
 * reclaim): begin does not wait for the temporary file to be open (a
 * failure to open it ends the writer, and the reason comes with finish),
 * offer never blocks, and cancel kills without waiting.  The writer is
 * waited for by finish, or after cancel by reap. */

#define SINK_FRAME (16u << 10)

struct files_sink {
	struct files_user u;
	int work_fd;
	int sock;		/* the daemon's end */
	int peer;		/* the writer's end (closed in the daemon once forked) */
	pid_t pid;		/* the writer; -1 once reaped */
	int pidfd;		/* readable once it exited; -1: none (before 5.3) */
	int err;		/* the first failure: the sink takes nothing more */
	/* The frame being sent by files_sink_offer(): what is left of its
	 * header and of its payload (the caller offers that payload again). */
	unsigned char hdr[4];
	size_t hdr_left, body_left;
	char tmp[TMP_LEN];
	char path[FILES_PATH_MAX + 1];
	struct files_meta meta;	/* set on the temporary file */
};

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got ? -EPROTO : 0;
		got += (size_t)n;
	}
	return 1;
}

/* Close every fd above 2 but a and b: the writer holds nothing of other
 * sessions or connections while it lives (another upload's socket kept open
 * here would hide that upload's end from its writer). */
static void close_others(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	if (syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0u) < 0) {
		/* Before Linux 5.9: one by one, as far as descriptors go here. */
		for (int fd = 3; fd < 65536; fd++)
			if (fd != lo && fd != hi)
				close(fd);
		return;
	}
	if (hi > lo + 1)
		syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0u);
	if (lo > 3)
		syscall(SYS_close_range, 3u, (unsigned)lo - 1, 0u);
}

/* The writer: a forked child inside the sandbox's cgroups (see
 * jail_fork_charged()).  System calls only. */
static int sink_main(void *arg)
{
	struct files_sink *k = arg;
	char buf[SINK_FRAME];
	const char *base = NULL;
	int parent, fd, r;

	close(k->sock);		/* our copy of the daemon's end: EOF must reach us */
	close_others(k->work_fd, k->peer);
	become(&k->u);		/* for good: the writer is the sandbox's user */
	r = open_beside(k->work_fd, k->path, k->tmp, &parent, &fd, &base);
	if (r == 0 && k->meta.n)
		r = meta_write(fd, &k->meta);
	while (r == 0) {
		uint32_t len;

		if ((r = read_full(k->peer, &len, sizeof(len))) <= 0) {
			r = r ? r : -ECANCELED;	/* EOF before the commit */
			break;
		}
		r = 0;
		if (len == 0)
			break;
		if (len > SINK_FRAME) {
			r = -EPROTO;
			break;
		}
		if ((r = read_full(k->peer, buf, len)) <= 0) {
			r = r ? r : -ECANCELED;
			break;
		}
		r = write_all(fd, buf, len);
	}
	return finish_beside(parent, fd, k->tmp, base, r);
}

/* A killed writer leaves its temporary file, and the pages it holds stay
 * charged to the sandbox: remove it from here (a name in /work, as the
 * sandbox's user, the way files_delete() does). */
static int remove_tmp_as(const struct files_sink *k)
{
	const char *base;
	int parent = open_parent(k->work_fd, k->path, false, &base);

	if (parent < 0)
		return parent;
	unlinkat(parent, k->tmp, 0);
	close(parent);
	return 0;
}

static void sink_remove_tmp(struct files_sink *k)
{
	AS_USER(&k->u, remove_tmp_as(k));
}

/* The writer's end, status st (-1: lost): its errno, or -ENOMEM when it
 * was killed. */
static int sink_reaped(struct files_sink *k, int st)
{
	k->pid = -1;
	if (k->pidfd >= 0)
		close(k->pidfd);
	k->pidfd = -1;
	if (st == -1)
		return -ECHILD;
	if (WIFSIGNALED(st)) {
		sink_remove_tmp(k);
		return -ENOMEM;
	}
	return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

/* Wait for the writer: its errno, or -ENOMEM when it was killed (by the
 * sandbox's memory limit, or with the sandbox). */
static int sink_reap(struct files_sink *k)
{
	int st;

	if (k->pid < 0)
		return k->err;
	while (waitpid(k->pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = -1;
			break;
		}
	return sink_reaped(k, st);
}

/* Hang up on the writer: without a commit frame, EOF is an abort.
 * shutdown() and not only close(): a copy of the fd in a process forked
 * meanwhile must not keep the writer waiting. */
static void sink_hangup(struct files_sink *k)
{
	if (k->sock < 0)
		return;
	shutdown(k->sock, SHUT_RDWR);
	close(k->sock);
	k->sock = -1;
}

static void sink_free(struct files_sink *k)
{
	sink_hangup(k);
	if (k->peer >= 0)
		close(k->peer);
	if (k->pid > 0)
		sink_reap(k);
	free(k);
}

int files_sink_begin(const struct files_user *u, struct jail *j, int dir_fd, const char *path,
		     const struct files_meta *meta, struct files_sink **out)
{
	struct files_sink *k;
	int sv[2], r;

	*out = NULL;
	if (strlen(path) > FILES_PATH_MAX)
		return -ENAMETOOLONG;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->u = *u;
	k->work_fd = dir_fd;
	k->pid = -1;
	k->pidfd = k->sock = k->peer = -1;
	memcpy(k->path, path, strlen(path) + 1);
	if (meta)
		k->meta = *meta;
	if ((r = tmp_name(k->tmp)) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		goto fail;
	}
	k->sock = sv[0];
	k->peer = sv[1];
	if ((r = jail_fork_charged(j, sink_main, k, &k->pid)) < 0)
		goto fail;
	close(k->peer);
	k->peer = -1;
	/* For files_sink_reap(): without one, it polls. */
	k->pidfd = (int)syscall(SYS_pidfd_open, k->pid, 0);
	*out = k;
	return 0;
fail:
	sink_free(k);
	return r;
}

/* All of iov[0..n) or -errno. */
static int send_all(int fd, struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (msg.msg_iovlen) {
		ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0)
			return -errno;
		while (msg.msg_iovlen && (size_t)sent >= msg.msg_iov->iov_len) {
			sent -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + sent;
			msg.msg_iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

/* A failed send means the writer stopped: its reason is the error.  It
 * waits for the writer (which is ending): not for an event thread. */
static int sink_failed(struct files_sink *k, int r)
{
	int why;

	sink_hangup(k);
	why = sink_reap(k);
	k->err = why ? why : r;
	return k->err;
}

/* Its reason is known once the writer is reaped (by finish). */
#define SINK_EGONE (-EPIPE)

int files_sink_offer(struct files_sink *k, const void *data, size_t len, size_t *taken)
{
	const char *p = data;

	*taken = 0;
	if (k->err)
		return k->err;
	while (len || k->hdr_left) {
		struct iovec iov[2];
		struct msghdr msg = { .msg_iov = iov };
		size_t body, h;
		ssize_t sent;

		if (!k->hdr_left && !k->body_left) {
			uint32_t n = len > SINK_FRAME ? SINK_FRAME : (uint32_t)len;

			memcpy(k->hdr, &n, sizeof(n));
			k->hdr_left = sizeof(n);
			k->body_left = n;
		}
		body = k->body_left < len ? k->body_left : len;
		if (k->hdr_left)
			iov[msg.msg_iovlen++] = (struct iovec){
				k->hdr + sizeof(k->hdr) - k->hdr_left, k->hdr_left };
		if (body)
			iov[msg.msg_iovlen++] = (struct iovec){ (void *)p, body };
		sent = sendmsg(k->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;	/* the writer is behind: offer the rest later */
		if (sent < 0) {
			sink_hangup(k);
			return k->err = SINK_EGONE;
		}
		h = (size_t)sent < k->hdr_left ? (size_t)sent : k->hdr_left;
		k->hdr_left -= h;
		sent -= (ssize_t)h;
		p += sent;
		len -= (size_t)sent;
		k->body_left -= (size_t)sent;
		*taken += (size_t)sent;
	}
	return 0;
}

int files_sink_fd(const struct files_sink *k)
{
	return k->sock;
}

int files_sink_write(struct files_sink *k, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		struct pollfd pfd = { .fd = k->sock, .events = POLLOUT };
		size_t taken;
		int r = files_sink_offer(k, p, len, &taken);

		if (r == SINK_EGONE && k->pid > 0)
			return sink_failed(k, r);
		if (r < 0)
			return r;
		p += taken;
		len -= taken;
		if (len && poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return sink_failed(k, -errno);
	}
	return 0;
}

int files_sink_finish(struct files_sink *k, bool commit)
{
	uint32_t zero = 0;
	struct iovec iov = { &zero, sizeof(zero) };
	int r = k->err, why;

	if (!r && commit)
		r = send_all(k->sock, &iov, 1);
	/* The writer's own account comes first: why it stopped taking bytes
	 * (a failed send, SINK_EGONE) is in its exit code. */
	sink_hangup(k);
	why = sink_reap(k);
	if (commit)
		r = why ? why : r;
	else
		r = why == -ECANCELED ? 0 : why;
	sink_free(k);
	return r;
}

void files_sink_cancel(struct files_sink *k)
{
	sink_hangup(k);
	/* Not yet reaped: pid is still the writer's, never another's.  Killed
	 * rather than told: a writer the sandbox's cgroups hold back (or a
	 * stopped one) would otherwise keep its temporary file for as long. */
	if (k->pid > 0)
		kill(k->pid, SIGKILL);
}

int files_sink_exit_fd(const struct files_sink *k)
{
	return k->pidfd;
}

bool files_sink_reap(struct files_sink *k)
{
	int st;
	pid_t p;

	if (k->pid > 0) {
		while ((p = waitpid(k->pid, &st, WNOHANG)) < 0 && errno == EINTR)
			;
		if (p == 0)
			return false;
		sink_reaped(k, p < 0 ? -1 : st);
	}
	sink_free(k);
	return true;
}

static int open_as(int work_fd, const char *path, bool links, int *out, uint64_t *size)
{
	struct stat st;
	int fd = files_open_in(work_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0,
			       links ? sys_openat2 : sys_openat2_no_symlinks);

	*out = -1;
	if (fd < 0)
		return fd == -ENXIO ? -EINVAL : fd;	/* ENXIO: a socket */
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	/* Back to blocking reads for whoever sends it. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	*out = fd;
	*size = (uint64_t)st.st_size;
	return 0;
}

int files_open(const struct files_user *u, int work_fd, const char *path, int *out,
	       uint64_t *size)
{
	return AS_USER(u, open_as(work_fd, path, true, out, size));
}

int files_open_dir(const struct files_user *u, int work_fd, const char *dir)
{
	return AS_USER(u, open_dir(work_fd, dir));
}

static int watch_as(int work_fd, const char *dir, int inotify_fd, uint32_t mask)
{
	char path[40];
	int fd = open_dir(work_fd, dir), wd;

	if (fd < 0)
		return fd;
	/* The directory found as every lookup here finds it; the link of our
	 * own descriptor names exactly it, whatever the sandbox renames. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(inotify_fd, path, mask | IN_ONLYDIR);
	if (wd < 0)
		wd = -errno;
	close(fd);
	return wd;
}

int files_watch(const struct files_user *u, int work_fd, const char *dir, int inotify_fd,
		uint32_t mask)
{
	return AS_USER(u, watch_as(work_fd, dir, inotify_fd, mask));
}

int files_open_listed(const struct files_user *u, int work_fd, const char *path, int *out,
		      uint64_t *size)
{
	return AS_USER(u, open_as(work_fd, path, false, out, size));
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "directory";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

static int by_path(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;

	return strcmp(json_string_value(json_object_get(x, "path")),
		      json_string_value(json_object_get(y, "path")));
}

static json_t *entry(const char *dir, const char *name, const struct stat *st)
{
	struct buf path = BUF_INIT;
	char when[32];
	struct tm tm;
	json_t *e = NULL;

	gmtime_r(&st->st_mtim.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if ((dir[0] && (buf_append_str(&path, dir) < 0 || buf_append_str(&path, "/") < 0)) ||
	    utf8_sanitize(&path, name, strlen(name)) < 0)
		goto out;
	e = json_pack("{s:s%, s:I, s:s, s:s}", "path", path.data, path.len,
		      "size", (json_int_t)st->st_size, "type", type_name(st->st_mode),
		      "modified_at", when);
out:
	buf_release(&path);
	return e;
}

static int list_as(int work_fd, const char *dir, json_t **out, bool *truncated)
{
	json_t *list = json_array(), **v = NULL;
	struct dirent *de;
	DIR *d = NULL;
	int fd, r = 0;
	size_t n;

	*out = NULL;
	*truncated = false;
	if (!list)
		return -ENOMEM;
	fd = open_in(work_fd, dir[0] ? dir : ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0) {
		json_decref(list);
		return fd;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		json_decref(list);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;
		json_t *e;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (json_array_size(list) >= FILES_LIST_MAX) {
			*truncated = true;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		e = entry(dir, de->d_name, &st);
		if (!e || json_array_append_new(list, e)) {
			r = -ENOMEM;
			break;
		}
	}
	closedir(d);
	n = json_array_size(list);
	if (r == 0 && n > 1) {
		v = malloc(n * sizeof(*v));
		if (!v) {
			r = -ENOMEM;
		} else {
			json_t *sorted = json_array();

			for (size_t i = 0; i < n; i++)
				v[i] = json_array_get(list, i);
			qsort(v, n, sizeof(*v), by_path);
			for (size_t i = 0; sorted && i < n; i++)
				json_array_append(sorted, v[i]);
			free(v);
			json_decref(list);
			list = sorted;
			if (!list)
				r = -ENOMEM;
		}
	}
	if (r < 0) {
		json_decref(list);
		return r;
	}
	*out = list;
	return 0;
}

int files_list(const struct files_user *u, int work_fd, const char *dir, json_t **out,
	       bool *truncated)
{
	return AS_USER(u, list_as(work_fd, dir, out, truncated));
}

static int delete_as(int work_fd, const char *path)
{
	const char *base;
	int parent, r;

	parent = open_parent(work_fd, path, false, &base);
	if (parent < 0)
		return parent;
	r = unlinkat(parent, base, 0);
	if (r < 0 && errno == EISDIR)
		r = unlinkat(parent, base, AT_REMOVEDIR);
	r = r < 0 ? -errno : 0;
	close(parent);
	return r;
}

int files_delete(const struct files_user *u, int work_fd, const char *path)
{
	return AS_USER(u, delete_as(work_fd, path));
}

/* The metadata of name in dfd, described by st, into m (NULL: not
 * asked): only regular files and directories have any. */
static void meta_of(int dfd, const char *name, const struct stat *st, char *list,
		    struct files_meta *m)
{
	if (!m)
		return;
	m->n = 0;
	m->used = 0;
	/* one component, or "" for dfd itself: never a way elsewhere */
	if (list && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) && !strchr(name, '/') &&
	    strcmp(name, ".") && strcmp(name, ".."))
		meta_read(dfd, name, list, m);
}

static int stat_as(int work_fd, const char *path, struct stat *st, char *target, size_t tlen,
		   struct files_meta *meta)
{
	char *list = meta ? malloc(XATTR_LIST_MAX) : NULL;
	const char *base = "";
	int parent = -1, r;

	if (tlen)
		target[0] = '\0';
	if (meta && !list)
		return -ENOMEM;
	if (!path[0]) {
		r = fstatat(work_fd, "", st, AT_EMPTY_PATH) < 0 ? -errno : 0;
	} else if ((parent = open_parent(work_fd, path, false, &base)) < 0) {
		r = parent;
	} else {
		r = fstatat(parent, base, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
		if (r == 0 && S_ISLNK(st->st_mode) && tlen) {
			ssize_t n = readlinkat(parent, base, target, tlen - 1);

			target[n > 0 ? n : 0] = '\0';
		}
	}
	if (r == 0)
		meta_of(parent >= 0 ? parent : work_fd, base, st, list, meta);
	if (parent >= 0)
		close(parent);
	free(list);
	return r;
}

int files_stat(const struct files_user *u, int work_fd, const char *path, struct stat *st,
	       char *target, size_t tlen, struct files_meta *meta)
{
	return AS_USER(u, stat_as(work_fd, path, st, target, tlen, meta));
}

/* ---- walking a tree ------------------------------------------------------
 *
 * A directory is opened by its fd and each of its names from that fd:
 * open_in() with O_NOFOLLOW on one name (no '/', no "..") never leaves it,
 * follows no symlink and crosses no mount, whatever the sandbox renames
 * meanwhile.  Names are read whole before anything is done with them
 * (removing while readdir() runs may skip some), and at most budget of
 * them, which bounds the memory of a walk as its entries bound its time. */

struct names {
	char **v;
	size_t n;
};

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	ns->v = NULL;
	ns->n = 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the directory dfd, sorted; -E2BIG past max.  Read from a
 * new open of it: dfd's own offset is not this walk's business. */
static int read_names(int dfd, size_t max, struct names *ns)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int r = 0;

	ns->v = NULL;
	ns->n = 0;
	if (fd < 0)
		return -errno;
	if (!(d = fdopendir(fd))) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (ns->n >= max) {
			r = -E2BIG;
			break;
		}
		if (ns->n == cap) {
			size_t c = cap ? cap * 2 : 16;
			char **v = realloc(ns->v, c * sizeof(*v));

			if (!v) {
				r = -ENOMEM;
				break;
			}
			ns->v = v;
			cap = c;
		}
		if (!(ns->v[ns->n] = strdup(de->d_name))) {
			r = -ENOMEM;
			break;
		}
		ns->n++;
	}
	closedir(d);
	if (r < 0)
		names_free(ns);
	else if (ns->n > 1)
		qsort(ns->v, ns->n, sizeof(*ns->v), by_name);
	return r;
}

/* A subdirectory of dfd by its name, never through a symlink: -ELOOP or
 * -ENOTDIR when the sandbox swapped one in since it was looked at. */
static int open_child(int dfd, const char *name)
{
	return open_in(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
}

struct walk {
	files_walk_fn fn;	/* NULL: only count */
	void *ctx;
	char *xlist;		/* XATTR_LIST_MAX bytes: each entry's metadata is read */
	struct files_meta meta;
	size_t left;		/* entries the walk may still see */
	bool whole;		/* a tree deeper than the walk is -E2BIG */
	bool remove;		/* remove each entry after its children */
	char path[FILES_PATH_MAX + 1];
};

/* The entries of the directory dfd, whose path is w->path[0, len), depth
 * levels deep. */
static int walk_dir(struct walk *w, int dfd, size_t len, unsigned depth)
{
	char target[FILES_PATH_MAX + 1];
	struct names ns;
	int r;

	if ((r = read_names(dfd, w->left, &ns)) < 0)
		return r;
	for (size_t i = 0; i < ns.n && r == 0; i++) {
		size_t nlen = strlen(ns.v[i]), plen = len ? len + 1 + nlen : nlen;
		struct stat st;

		if (w->left == 0) {
			r = -E2BIG;
			break;
		}
		w->left--;
		if (plen > FILES_PATH_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		if (len)
			w->path[len] = '/';
		memcpy(w->path + (len ? len + 1 : 0), ns.v[i], nlen + 1);
		if (fstatat(dfd, ns.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;	/* gone since readdir */
			r = -errno;
			break;
		}
		target[0] = '\0';
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dfd, ns.v[i], target, sizeof(target) - 1);

			target[n > 0 ? n : 0] = '\0';
		}
		if (w->fn && w->xlist)
			meta_of(dfd, ns.v[i], &st, w->xlist, &w->meta);
		if (w->fn && (r = w->fn(w->ctx, w->path, &st, target,
					w->xlist ? &w->meta : NULL)) < 0)
			break;
		if (S_ISDIR(st.st_mode) && depth > 1) {
			int child = open_child(dfd, ns.v[i]);

			if (child < 0 && !w->remove && (child == -ENOENT || child == -EACCES ||
							 child == -ELOOP || child == -ENOTDIR))
				continue;	/* changed or closed since: not listed */
			if (child < 0) {
				r = child;
				break;
			}
			r = walk_dir(w, child, plen, depth - 1);
			close(child);
		} else if (S_ISDIR(st.st_mode) && w->whole) {
			r = -E2BIG;	/* deeper than the walk may go */
		}
		if (r == 0 && w->remove && unlinkat(dfd, ns.v[i], S_ISDIR(st.st_mode) ?
						    AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
			r = -errno;
	}
	w->path[len] = '\0';
	names_free(&ns);
	return r;
}

static int walk_as(int work_fd, const char *dir, struct walk *w, unsigned depth)
{
	size_t len = strlen(dir);
	int fd, r;

	if (len > FILES_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(w->path, dir, len + 1);
	fd = open_in(work_fd, len ? dir : ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	r = walk_dir(w, fd, len, depth);
	close(fd);
	return r;
}

int files_walk(const struct files_user *u, int work_fd, const char *dir, unsigned depth,
	       size_t max, unsigned flags, files_walk_fn fn, void *ctx)
{
	struct walk *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->ctx = ctx;
	w->left = max;
	if ((flags & FILES_WALK_META) && fn && !(w->xlist = malloc(XATTR_LIST_MAX))) {
		free(w);
		return -ENOMEM;
	}
	r = depth ? AS_USER(u, walk_as(work_fd, dir, w, depth)) : 0;
	free(w->xlist);
	free(w);
	return r;
}

static int mkdir_as(int work_fd, const char *path)
{
	const char *base;
	int parent, r;

	parent = open_parent(work_fd, path, true, &base);
	if (parent < 0)
		return parent;
	r = mkdirat(parent, base, 0755) < 0 ? -errno : 0;
	close(parent);
	return r;
}

int files_mkdir(const struct files_user *u, int work_fd, const char *path)
{
	return AS_USER(u, mkdir_as(work_fd, path));
}

static int rename_as(int work_fd, const char *from, const char *to)
{
	const char *fbase, *tbase;
	int fp, tp, r;

	if ((fp = open_parent(work_fd, from, false, &fbase)) < 0)
		return fp;
	if ((tp = open_parent(work_fd, to, true, &tbase)) < 0) {
		close(fp);
		return tp;
	}
	/* Both names are one component under a directory fd: the kernel
	 * moves what is there (a symlink itself), following nothing. */
	r = renameat(fp, fbase, tp, tbase) < 0 ? -errno : 0;
	close(tp);
	close(fp);
	return r;
}

int files_rename(const struct files_user *u, int work_fd, const char *from, const char *to)
{
	return AS_USER(u, rename_as(work_fd, from, to));
}

static int remove_as(int work_fd, const char *path, struct walk *w, size_t max)
{
	const char *base;
	struct stat st;
	int parent, fd = -1, r;

	if ((parent = open_parent(work_fd, path, false, &base)) < 0)
		return parent;
	if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		if ((fd = open_child(parent, base)) < 0) {
			r = fd;
			goto out;
		}
		/* Counted first, so that a tree too large loses nothing. */
		*w = (struct walk){ .left = max, .whole = true };
		if ((r = walk_dir(w, fd, 0, FILES_TREE_DEPTH)) < 0)
			goto out;
		*w = (struct walk){ .left = max, .whole = true, .remove = true };
		if ((r = walk_dir(w, fd, 0, FILES_TREE_DEPTH)) < 0)
			goto out;
	}
	r = unlinkat(parent, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
out:
	if (fd >= 0)
		close(fd);
	close(parent);
	return r;
}

int files_remove_tree(const struct files_user *u, int work_fd, const char *path, size_t max)
{
	struct walk *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	r = AS_USER(u, remove_as(work_fd, path, w, max));
	free(w);
	return r;
}

const char *files_content_type(const char *path)
{
	static const char *const types[][2] = {
		{ ".png", "image/png" }, { ".jpg", "image/jpeg" }, { ".jpeg", "image/jpeg" },
		{ ".gif", "image/gif" }, { ".svg", "image/svg+xml" }, { ".webp", "image/webp" },
		{ ".pdf", "application/pdf" }, { ".json", "application/json" },
		{ ".csv", "text/csv; charset=utf-8" }, { ".tsv", "text/tab-separated-values" },
		{ ".txt", "text/plain; charset=utf-8" }, { ".md", "text/markdown; charset=utf-8" },
		{ ".html", "text/html; charset=utf-8" }, { ".htm", "text/html; charset=utf-8" },
		{ ".py", "text/x-python; charset=utf-8" }, { ".c", "text/x-c; charset=utf-8" },
		{ ".sh", "text/x-shellscript; charset=utf-8" }, { ".log", "text/plain; charset=utf-8" },
		{ ".xml", "application/xml" }, { ".zip", "application/zip" },
		{ ".gz", "application/gzip" }, { ".tar", "application/x-tar" },
		{ ".parquet", "application/vnd.apache.parquet" },
		{ ".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
		{ ".xls", "application/vnd.ms-excel" },
	};
	const char *dot = strrchr(path, '.');

	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcasecmp(dot, types[i][0]))
				return types[i][1];
	return "application/octet-stream";
}
