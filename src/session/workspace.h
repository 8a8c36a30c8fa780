/* workspace — a session's /work as every front end reaches it: the one door.
 *
 * A front end (the HTTP API, E2B's envd, MCP, petri ask) turns its client's
 * spelling of a path into one relative to /work with ws_path()
 * (workspace/ws.h), then calls these.  They do for it what each front end
 * once did by itself: the operation as the sandbox's user, through the
 * sandbox's workspace fd (workspace/files.h), the session's accounting and
 * its use:
 *
 *   - a write the host makes (a file written, a directory made, a rename,
 *     a tree removed) is noted whatever its outcome, a failed one included
 *     (it may have made parents): the next execution's "files" then lists
 *     none of it (box_note_host_write());
 *   - an operation that succeeds counts as use of the session (its idle
 *     timeout starts again), as an execution does.
 *
 * A path is relative to /work (what ws_path() makes of a client's), or
 * absolute for the sandbox's other filesystems of its own: "/tmp/x",
 * "/dev/shm/x" (jail_dir_fd(); ws_path() with WS_PATH_ANYWHERE).  An
 * absolute path elsewhere (the read-only system, /proc) is -EROFS: the
 * host reaches no file but the sandbox's own.  What comes back names
 * paths as they went in (a listing of "/tmp" lists "/tmp/x").
 *
 * Each returns 0 or -errno, as workspace/files.h: a front end maps it once,
 * through ws_result_of() and its own table, and words WS_FAILED with the
 * errno it was given.
 *
 * Threads.  Any thread, a reference to s held.  Nothing here claims the
 * session: reads and writes of /work while code runs see whatever the code
 * does.  Uploads of a client's body (session_upload_*) and archives in
 * (session_unpack) are in session.h: they stream, or claim the session. */
#ifndef PETRI_SESSION_WORKSPACE_H
#define PETRI_SESSION_WORKSPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "session/session.h"
#include "workspace/files.h"
#include "workspace/ws.h"

/* The directory fd of the filesystem that holds path, with *rel path's
 * part below it, as workspace/files.h takes them; or -EROFS. */
int session_file_at(struct session *s, const char *path, const char **rel);

/* A regular file of /work opened for reading: the caller reads and closes
 * fd.  type: a MIME type from the name's extension (static). */
struct session_file {
	int fd;
	uint64_t size;
	const char *type;
};

/* Open path for reading.  -EISDIR, -ENOENT, -EINVAL (not a regular file)... */
int session_file_open(struct session *s, const char *path, struct session_file *f);

/* Write data to path, whole, replacing what was there (files_write(): for
 * files of bounded size, written from the calling thread). */
int session_file_write(struct session *s, const char *path, const void *data, size_t len);

/* The entries of dir ("": /work), as files_list(): *out a new reference,
 * at most FILES_LIST_MAX, *truncated if there were more. */
int session_file_list(struct session *s, const char *dir, json_t **out, bool *truncated);

/* One entry of /work as a listing or a stat sees it: its path (relative to
 * /work), its lstat, a symlink's target ("" otherwise), its metadata
 * (workspace/files.h: user.e2b.* attributes, bounded; n 0 for none), and
 * whether the sandbox's user owns it, which a front end names as the user
 * sees it rather than by the host's ids the sandbox's user maps to. */
struct session_entry {
	const char *path;
	const struct stat *st;
	const char *target;
	const struct files_meta *meta;
	bool user_uid, user_gid;
};
typedef int (*session_entry_fn)(void *ctx, const struct session_entry *e);

/* fn for path ("": /work) itself, not following a symlink at its end;
 * fn's result < 0 is returned. */
int session_file_stat(struct session *s, const char *path, session_entry_fn fn, void *ctx);
/* fn for every entry under dir, depth levels deep, as files_walk():
 * -E2BIG after max entries; fn's result < 0 stops the walk and is
 * returned. */
int session_file_walk(struct session *s, const char *dir, unsigned depth, size_t max,
		      session_entry_fn fn, void *ctx);

/* Remove a file, a symlink or an empty directory (not noted as a write:
 * it leaves nothing for an execution's "files" to list). */
int session_file_remove(struct session *s, const char *path);
/* Remove path and everything under it, refused (-E2BIG) before anything
 * goes when the tree holds more than max entries (files_remove_tree()). */
int session_file_remove_tree(struct session *s, const char *path, size_t max);
/* Make the directory path and its missing parents; -EEXIST if something
 * is there. */
int session_file_mkdir(struct session *s, const char *path);
/* Move from to to (replacing a file there), making to's missing parents. */
int session_file_rename(struct session *s, const char *from, const char *to);

/* ---- an archive of a directory, out -------------------------------------
 *
 * A tar (gzip: tar.gz) of dir of the session's /work, made by a writer
 * process charged to the session's cgroups (workspace/archive.h: its CPU
 * and memory are the session's), at most max_entries entries and the
 * session's disk limit of content.
 *
 * start: starts the writer, and waits at most timeout_s for its listing
 * (on a worker, never an event thread); its start counts as use.  0 with
 * *out, the writer, and the number of entries; or -errno with why in a
 * sentence the client can act on: -EAGAIN (the session's pids limit),
 * -ETIMEDOUT (the session is starved), -ENOMEM (its memory limit, or it
 * ended), -E2BIG (over the entries, names, depth or disk bounds), -EBUSY
 * (over what the daemon holds for archives at once), or a file's error
 * (ws_result_of()); then *out is the writer, killed, to reap as below, or
 * NULL when none started.  read: never waits: bytes (> 0), 0 at the whole
 * stream's end, -EAGAIN (wait for session_archive_fd() to be readable),
 * -EINPROGRESS (wait for session_archive_exit_fd(), then read again), or
 * another -errno: the stream is cut.  cancel: kill the writer without
 * waiting; then session_archive_reap() until true (it frees a), when
 * session_archive_exit_fd() is readable (-1: try now and then).  The caller
 * holds a reference to s while it reads, and cancels when the session
 * ends. */
struct ws_archiver;
int session_archive_start(struct session *s, const char *dir, bool gzip, size_t max_entries,
			  double timeout_s, struct ws_archiver **out, size_t *entries,
			  char *why, size_t whylen);
ssize_t session_archive_read(struct ws_archiver *a, char *out, size_t max);
int session_archive_fd(const struct ws_archiver *a);
int session_archive_exit_fd(const struct ws_archiver *a);
void session_archive_cancel(struct ws_archiver *a);
bool session_archive_reap(struct ws_archiver *a);

#endif
