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

#include "runtime/files.h"

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

#endif
