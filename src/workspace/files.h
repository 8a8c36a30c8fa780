/* files — moving files in and out of a sandbox's /work from the host.
 *
 * Every path is relative to /work and resolved with openat2() and
 * RESOLVE_IN_ROOT under the workspace fd (jail_work_fd()): "..", absolute
 * symlinks and symlinks to "/" planted by the sandboxed code all stay
 * inside /work.  Magic links (/proc/self/fd/...) and crossing into another
 * mount are refused.  Only regular files are read or written: FIFOs,
 * sockets and devices are refused without ever blocking on them.  Paths
 * are checked first (files_check_path; a client's spelling of one goes
 * through ws_path() in ws.h) so a client gets a clear 400 rather than
 * whatever the kernel makes of it.
 *
 * Every operation runs with the calling thread's filesystem ids switched to
 * the sandbox user's host ids (setfsuid/setfsgid, per thread): the kernel
 * then checks permissions as for the sandbox's own code, new files belong
 * to it, and the tmpfs (owned by the sandbox's user namespace) accepts
 * them.  The ids are restored before returning.
 *
 * A path lookup that the sandbox keeps racing (renames or mounts during
 * its ".." steps) is tried a bounded number of times, then fails with
 * FILES_ECHANGING: the daemon's thread is not the sandbox's to hold.
 *
 * Uploads from a client (files_sink_*) are written by a short-lived writer
 * process inside the sandbox's cgroups (jail_fork_charged()): the tmpfs
 * pages of /work are then charged to the sandbox's memory limit and not to
 * the daemon, and the body streams through a socket, never whole in the
 * daemon's memory.  files_write() writes from the calling thread (charged
 * to the caller's cgroup): for files of bounded size only.
 *
 * Errors are negative errnos. */
#ifndef PETRI_FILES_H
#define PETRI_FILES_H

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "jail/jail.h"

#define FILES_PATH_MAX 4096
#define FILES_NAME_MAX 255

/* ---- metadata -------------------------------------------------------------
 *
 * A file's metadata is its extended attributes in the user.e2b. namespace
 * (E2B's file metadata, envd 0.6.2), each key without that prefix.  It is
 * bounded both ways, as E2B counts it (each key with its prefix, plus its
 * value): at most FILES_META_KEYS keys and FILES_META_BYTES bytes.  An
 * upload carrying more is refused by its front end before anything is
 * written; of a file whose own code set more, what fits is read (in the
 * order the filesystem lists the attributes) and the rest left out.  Only
 * regular files and directories carry any (the kernel's rule for user.*).
 * Keys and values are bytes here: a front end checks what it takes and
 * makes what it gives valid for its wire. */
#define FILES_META_PREFIX "user.e2b."
#define FILES_META_PREFIX_LEN (sizeof(FILES_META_PREFIX) - 1)
#define FILES_META_KEYS 32
#define FILES_META_BYTES 4096
/* The VFS's 255 bytes of an attribute's name, less the prefix: 246. */
#define FILES_META_KEY_MAX (255 - FILES_META_PREFIX_LEN)

struct files_meta {
	unsigned n;
	struct files_meta_kv {		/* offsets into data: the struct copies whole */
		unsigned short key, klen, value, vlen;
	} kv[FILES_META_KEYS];
	size_t used;			/* bytes of data taken */
	char data[FILES_META_BYTES];
};

/* Add key=value to m (zeroed: empty): 0; -EEXIST when key is there already
 * (the first stays); -EINVAL for an empty key; -E2BIG for a key longer
 * than FILES_META_KEY_MAX or past the bounds above. */
int files_meta_add(struct files_meta *m, const char *key, size_t klen, const void *value,
		   size_t vlen);
/* For the unit test: read metadata as on a kernel before 6.13 (without
 * getxattrat/listxattrat), through /proc/self/fd, from now on. */
void files_meta_without_xattrat(void);

/* 0 if path is an acceptable relative path, else -EINVAL with the reason
 * in why: empty, absolute, a "." or ".." or empty component, a NUL or
 * control character, not UTF-8, or too long.  allow_empty: "" means /work
 * itself (for listings). */
int files_check_path(const char *path, bool allow_empty, char *why, size_t whylen);

/* The workspace changed under every try of a lookup: retry later. */
#define FILES_ECHANGING (-ESTALE)

/* openat2(work_fd, path, RESOLVE_IN_ROOT...) through try_open (which
 * returns an fd or -1 with errno), retried on EINTR and on EAGAIN at most a
 * few times: an fd, FILES_ECHANGING or -errno.  Exposed for the unit test;
 * every operation below uses it with openat2(). */
struct open_how;
int files_open_in(int work_fd, const char *path, int flags, mode_t mode,
		  int (*try_open)(int, const char *, const struct open_how *));

struct files_user {
	uid_t uid;
	gid_t gid;
};

/* Write data to path (mode 0644), making missing parent directories
 * (0755).  The new content replaces whatever was at path (file, symlink,
 * FIFO) in one rename, so a failed write leaves the old one untouched.
 * -EISDIR if path is a directory, -ENOSPC when the workspace is full. */
int files_write(const struct files_user *u, int work_fd, const char *path,
		const void *data, size_t len);

/* A streamed upload to path (under dir_fd: jail_work_fd(), or another of
 * jail_dir_fd()), written as files_write() writes (parents made, a
 * temporary file renamed over the target on commit) by a writer charged
 * to the sandbox j, with meta (NULL: none) set on the temporary file before
 * it is renamed: the new file has that metadata and no other, whatever the
 * old one had.  begin: the writer is started, without waiting for it
 * (-EAGAIN when the sandbox is at its pids limit); its failures to open the
 * file (-EISDIR, -ENOTDIR, -ELOOP... as files_write()) come from finish.
 * write: hand it bytes; blocks while the writer is behind; after a failure
 * every call returns that failure.  finish: commit (replace the file) or
 * abort (remove the temporary file, the old file untouched), wait for the
 * writer and free the sink.  Errors of write and finish: -ENOSPC (/work is
 * full), -ENOMEM (over the sandbox's memory limit, or the sandbox was
 * killed meanwhile).  write and finish wait for the writer: not on an
 * event thread. */
struct files_sink;
int files_sink_begin(const struct files_user *u, struct jail *j, int dir_fd, const char *path,
		     const struct files_meta *meta, struct files_sink **out);
int files_sink_write(struct files_sink *k, const void *data, size_t len);
/* Without waiting: send what the writer's socket takes now of data[0, len),
 * *taken bytes of it (maybe 0), and 0; or -errno once the writer stopped
 * taking bytes (finish then says why).  Offer the rest again from where it
 * stopped, when files_sink_fd() is writable. */
int files_sink_offer(struct files_sink *k, const void *data, size_t len, size_t *taken);
int files_sink_fd(const struct files_sink *k);
int files_sink_finish(struct files_sink *k, bool commit);
/* Abort without waiting: hang up and kill the writer.  Then call
 * files_sink_reap() until it returns true (it frees the sink and removes
 * the temporary file); files_sink_exit_fd() is readable once it will, or
 * -1 (an old kernel): then try again now and then. */
void files_sink_cancel(struct files_sink *k);
int files_sink_exit_fd(const struct files_sink *k);
bool files_sink_reap(struct files_sink *k);

/* Open a regular file for reading: *fd and its size.  -EISDIR, -ENOENT,
 * -EINVAL (not a regular file). */
int files_open(const struct files_user *u, int work_fd, const char *path, int *fd,
	       uint64_t *size);
/* The directory dir of /work ("": /work) as an O_PATH descriptor, to open
 * files from (as work_fd): an fd or -errno. */
int files_open_dir(const struct files_user *u, int work_fd, const char *dir);
/* Watch the directory dir ("": work_fd's own) with the inotify instance
 * inotify_fd, as the sandbox user: the directory files_open_dir() finds,
 * with mask (IN_ONLYDIR added).  The watch descriptor, or -errno
 * (-ENOENT, -ENOTDIR, -ENOSPC: the host's watches are used up). */
int files_watch(const struct files_user *u, int work_fd, const char *dir, int inotify_fd,
		uint32_t mask);
/* As files_open(), but through no symbolic link (-ELOOP): for a path a
 * walk listed (files_walk()), each of whose components was a directory
 * then.  What the sandbox made of them since costs one walk of the path's
 * own components, never the 40 links of up to 4 KiB of ".." hops each
 * that files_open() would resolve (milliseconds per open, on the thread
 * that streams an archive). */
int files_open_listed(const struct files_user *u, int work_fd, const char *path, int *fd,
		      uint64_t *size);

/* List a directory ("" for /work): an array of {"path", "size", "type":
 * "file"|"directory"|"symlink"|"other", "modified_at"} sorted by path.
 * At most FILES_LIST_MAX entries; *truncated says if there were more. */
#define FILES_LIST_MAX 10000
int files_list(const struct files_user *u, int work_fd, const char *dir, json_t **out,
	       bool *truncated);

/* Remove a file, a symlink, or an empty directory. */
int files_delete(const struct files_user *u, int work_fd, const char *path);

/* What stat says of path ("" for /work), without following a symlink at
 * its end; a symlink's target into target[tlen] (NUL-terminated, cut to
 * fit; "" for anything else); its metadata into meta (NULL: not read; what
 * cannot be read, say for a file the user may not read, is none). */
int files_stat(const struct files_user *u, int work_fd, const char *path, struct stat *st,
	       char *target, size_t tlen, struct files_meta *meta);

/* Every entry under dir ("" for /work), sorted by name in each directory,
 * depth levels deep (1: dir's own entries), never through a symlink nor
 * into another mount: fn gets each one's path (relative to /work), its
 * lstat, a symlink's target ("" otherwise) and, with FILES_WALK_META in
 * flags, its metadata (else NULL), and stops the walk by returning < 0
 * (which files_walk returns).  -E2BIG after max entries: the daemon's
 * thread and memory are bounded whatever the sandbox made.  The metadata
 * costs a listing of each entry's attribute names (one system call, into a
 * buffer the walk keeps) and one read per key, FILES_META_KEYS at most. */
#define FILES_WALK_META 0x1u
typedef int (*files_walk_fn)(void *ctx, const char *path, const struct stat *st,
			     const char *target, const struct files_meta *meta);
int files_walk(const struct files_user *u, int work_fd, const char *dir, unsigned depth,
	       size_t max, unsigned flags, files_walk_fn fn, void *ctx);

/* Make the directory path (0755) and its missing parents; -EEXIST if
 * something is there already. */
int files_mkdir(const struct files_user *u, int work_fd, const char *path);

/* rename(2) from to to (replacing a file there), making to's missing
 * parents. */
int files_rename(const struct files_user *u, int work_fd, const char *from, const char *to);

/* Remove path, and when it is a directory everything in it (symlinks are
 * removed, never followed).  A tree of more than max entries, or deeper
 * than FILES_TREE_DEPTH, is refused with -E2BIG before anything is
 * removed (it is counted first). */
#define FILES_TREE_DEPTH 64
int files_remove_tree(const struct files_user *u, int work_fd, const char *path, size_t max);

/* A MIME type for a file name, from its extension. */
const char *files_content_type(const char *path);

#endif
