/* archive — a directory of a sandbox's /work as a tar or tar.gz stream,
 * written by libarchive (docs/api.md#archives).
 *
 * ws_archive_open() lists the tree first (files_walk(): never through a
 * symlink nor into another mount, as the sandbox's user, at most max
 * entries, FILES_TREE_DEPTH levels, ARCHIVE_NAMES_MAX bytes of names and
 * max_bytes of file content, else -E2BIG), so that a refusal is an answer
 * and not a cut stream; what every open archive holds, all together, is
 * bounded too (ARCHIVE_HELD_MAX, else -EBUSY).  max_bytes is what the
 * session's /work can hold (its disk limit): files whose sizes add up to
 * more are sparse or hard links to one another (a 60 MiB hole linked
 * 100,000 times is 6 TB of stream), which the daemon does not make.
 * ws_archive_read() then makes the stream on demand, a bounded piece of
 * work per call (one block of a file, a few headers): each file is opened
 * when its turn comes (files_open(): a regular file inside /work, or it is
 * left out), and its size is what fstat says then, within what is left of
 * max_bytes; a file that shrinks meanwhile is padded with zeros, one that
 * grows is cut, so the stream is always a valid tar and never carries more
 * than max_bytes of content.
 * Entries carry their permission bits only (no set-user-id, set-group-id
 * or sticky bit), owner 0, and their modification time; symbolic links
 * are stored as links; FIFOs, sockets and devices are left out.
 *
 * Extraction is not here: an archive from a client is extracted by the
 * session's own driver, inside the sandbox (session_unpack()). */
#ifndef PETRI_ARCHIVE_H
#define PETRI_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "workspace/files.h"

#define ARCHIVE_NAMES_MAX (32u << 20)
/* Every open archive's listing and buffers together, over all downloads:
 * the daemon's memory for them has this bound whatever the number of
 * clients (docs/security.md). */
#define ARCHIVE_HELD_MAX (128u << 20)

struct ws_archive;

/* dir: a path in /work checked with files_check_path() ("": /work), which
 * must be a directory (-ENOTDIR).  Names in the stream are relative to it.
 * 0 or -errno (-E2BIG over the bounds above, -EBUSY when the archives open
 * already hold ARCHIVE_HELD_MAX, -ENOENT, -ENOMEM). */
int ws_archive_open(const struct files_user *u, int work_fd, const char *dir, bool gzip,
		    size_t max_entries, uint64_t max_bytes, struct ws_archive **out);
/* The next bytes of the stream into out[max]: how many (> 0), 0 at its
 * end, -EAGAIN when this bounded piece of work made none yet (call
 * again), or another -errno (the stream cannot go on). */
ssize_t ws_archive_read(struct ws_archive *a, char *out, size_t max);
/* Entries listed, for the caller's log. */
size_t ws_archive_entries(const struct ws_archive *a);
void ws_archive_free(struct ws_archive *a);

/* ---- the writer process ---------------------------------------------------
 *
 * A download's archive is made by a short-lived process charged to the
 * sandbox (jail_fork_charged(), then an exec of petri itself, so that
 * libarchive and zlib run in a fresh process and never in a copy of the
 * daemon's threads): its listing, its compression and its buffers count
 * against the session's CPU, memory and pids, not the daemon's.  It drops
 * to the sandbox's user (uid, gid, no groups, no capability, no new
 * privileges, not dumpable), dies with the daemon (PR_SET_PDEATHSIG), has
 * an empty network namespace of its own and, before it reads anything of
 * the sandbox's, a seccomp allow-list of its own (jail_seccomp_only()), and
 * writes into a pipe: first the listing's outcome (ws_archive_open()'s
 * 0 or -errno, and the number of entries), then the stream.  The daemon
 * only copies bytes from the pipe.
 *
 * start: the writer is started, without waiting for it.  opened: waits at
 * most timeout_s for the listing's outcome: 0, or ws_archive_open()'s
 * -errno, -EAGAIN (the sandbox is at its pids limit), -ENOMEM (killed: the
 * sandbox's memory limit, or it ended), -ETIMEDOUT; on a worker only.
 * read: never waits: > 0 bytes, 0 at the stream's end (the writer exited
 * cleanly), -EAGAIN (nothing now: wait for ws_archiver_fd() to be
 * readable), or another -errno (the stream is cut: the writer failed or
 * was killed).  cancel: kill it, without waiting; then ws_archiver_reap()
 * until true (it frees a), when ws_archiver_exit_fd() is readable (-1: an
 * old kernel, try now and then). */
struct ws_archiver;
struct jail;
int ws_archiver_start(const struct files_user *u, struct jail *j, const char *dir, bool gzip,
		      size_t max_entries, uint64_t max_bytes, struct ws_archiver **out);
int ws_archiver_opened(struct ws_archiver *a, double timeout_s, size_t *entries);
/* The next bytes (> 0), 0 at a whole stream's end, -EAGAIN when the pipe
 * is empty (wait for ws_archiver_fd()), -EINPROGRESS when the pipe ended
 * but the writer has not exited yet (wait for ws_archiver_exit_fd(), then
 * call again), or another -errno: the stream is not whole. */
ssize_t ws_archiver_read(struct ws_archiver *a, char *out, size_t max);
int ws_archiver_fd(const struct ws_archiver *a);
void ws_archiver_cancel(struct ws_archiver *a);
int ws_archiver_exit_fd(const struct ws_archiver *a);
bool ws_archiver_reap(struct ws_archiver *a);

/* The writer's own main, after the exec (argv[1] is
 * WS_ARCHIVER_COMMAND): its exit code. */
#define WS_ARCHIVER_COMMAND "__archive-writer"
int ws_archiver_main(int argc, char **argv);

#endif
