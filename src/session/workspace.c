#include "session/workspace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "workspace/archive.h"
#include "workspace/files.h"

/* The sandbox's user, whose host ids every operation runs with. */
static struct files_user user_of(struct session *s)
{
	struct files_user u;

	session_file_owner(s, &u.uid, &u.gid);
	return u;
}

/* The end of every operation: r as it came, the session used if it
 * succeeded. */
static int used(struct session *s, int r)
{
	if (r == 0)
		session_touch(s);
	return r;
}

/* The end of every write: noted whatever came of it, then used(). */
static int wrote(struct session *s, int r)
{
	session_note_write(s);
	return used(s, r);
}

int session_file_at(struct session *s, const char *path, const char **rel)
{
	int fd;

	if (path[0] != '/') {
		*rel = path;
		return session_work_fd(s);
	}
	fd = jail_dir_fd(session_jail(s), path, rel);
	return fd < 0 ? -EROFS : fd;
}

/* fd and rel for path, or return its error. */
#define AT(s, path, fd, rel) do {				\
	if (((fd) = session_file_at((s), (path), &(rel))) < 0)	\
		return (fd);					\
} while (0)

int session_file_open(struct session *s, const char *path, struct session_file *f)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd;

	f->fd = -1;
	f->size = 0;
	f->type = files_content_type(path);
	AT(s, path, fd, rel);
	return used(s, files_open(&u, fd, rel, &f->fd, &f->size));
}

int session_file_write(struct session *s, const char *path, const void *data, size_t len)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd;

	AT(s, path, fd, rel);
	return wrote(s, files_write(&u, fd, rel, data, len));
}

/* Each "path" of a listing of dir (an absolute path, rel its part below
 * its filesystem's name) as the caller names it: "/tmp/x" for "x". */
static int absolute_paths(json_t *list, const char *dir, const char *rel)
{
	size_t n = (size_t)(rel - dir), i;
	char full[FILES_PATH_MAX + 32];
	json_t *e;

	if (n && dir[n - 1] == '/')
		n--;
	json_array_foreach(list, i, e) {
		snprintf(full, sizeof(full), "%.*s/%s", (int)n, dir,
			 json_string_value(json_object_get(e, "path")));
		if (json_object_set_new(e, "path", json_string(full)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int session_file_list(struct session *s, const char *dir, json_t **out, bool *truncated)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd, r;

	*out = NULL;
	AT(s, dir, fd, rel);
	if ((r = files_list(&u, fd, rel, out, truncated)) == 0 && rel != dir)
		r = absolute_paths(*out, dir, rel);
	return used(s, r);
}

/* What a walk or a stat hands its caller: each entry's path as the caller
 * names them (relative to /work, or absolute under the filesystem's name
 * for a path outside it: "/tmp/x"). */
struct entries {
	struct files_user u;
	session_entry_fn fn;
	void *ctx;
	const char *mount;	/* "/tmp"; "" for /work */
	size_t mount_len;
};

/* e for the caller of a walk under "/tmp/x": "/tmp/x/y" rather than "x/y". */
static struct entries entries_of(struct session *s, const char *path, const char *rel,
				 session_entry_fn fn, void *ctx)
{
	struct entries w = { user_of(s), fn, ctx, path, (size_t)(rel - path) };

	/* "/tmp/x": "/tmp/"; "/tmp": "/tmp"; the name without its slash */
	if (w.mount_len && path[w.mount_len - 1] == '/')
		w.mount_len--;
	return w;
}

static int entry(void *ctx, const char *path, const struct stat *st, const char *target,
		 const struct files_meta *meta)
{
	const struct entries *w = ctx;
	char full[FILES_PATH_MAX + 32];
	struct session_entry e = {
		.path = path, .st = st, .target = target, .meta = meta,
		.user_uid = st->st_uid == w->u.uid, .user_gid = st->st_gid == w->u.gid,
	};

	if (w->mount_len) {
		snprintf(full, sizeof(full), "%.*s%s%s", (int)w->mount_len, w->mount,
			 *path ? "/" : "", path);
		e.path = full;
	}
	return w->fn(w->ctx, &e);
}

int session_file_stat(struct session *s, const char *path, session_entry_fn fn, void *ctx)
{
	char target[FILES_PATH_MAX + 1];
	struct files_meta meta;
	struct entries w;
	const char *rel;
	struct stat st;
	int fd, r;

	AT(s, path, fd, rel);
	w = entries_of(s, path, rel, fn, ctx);
	r = files_stat(&w.u, fd, rel, &st, target, sizeof(target), &meta);
	return used(s, r < 0 ? r : entry(&w, rel, &st, target, &meta));
}

int session_file_walk(struct session *s, const char *dir, unsigned depth, size_t max,
		      session_entry_fn fn, void *ctx)
{
	struct entries w;
	const char *rel;
	int fd;

	AT(s, dir, fd, rel);
	w = entries_of(s, dir, rel, fn, ctx);
	return used(s, files_walk(&w.u, fd, rel, depth, max, FILES_WALK_META, entry, &w));
}

int session_file_remove(struct session *s, const char *path)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd;

	AT(s, path, fd, rel);
	return used(s, files_delete(&u, fd, rel));
}

int session_file_remove_tree(struct session *s, const char *path, size_t max)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd;

	AT(s, path, fd, rel);
	return wrote(s, files_remove_tree(&u, fd, rel, max));
}

int session_file_mkdir(struct session *s, const char *path)
{
	struct files_user u = user_of(s);
	const char *rel;
	int fd;

	AT(s, path, fd, rel);
	return wrote(s, files_mkdir(&u, fd, rel));
}

int session_file_rename(struct session *s, const char *from, const char *to)
{
	struct files_user u = user_of(s);
	const char *rel_from, *rel_to;
	int fd_from, fd_to;

	AT(s, from, fd_from, rel_from);
	AT(s, to, fd_to, rel_to);
	/* Two filesystems: rename(2) cannot, and the host copies nothing for
	 * the sandbox. */
	if (fd_from != fd_to)
		return -EXDEV;
	return wrote(s, files_rename(&u, fd_from, rel_from, rel_to));
}

/* ---- an archive of a directory, out -------------------------------------- */

int session_archive_start(struct session *s, const char *dir, bool gzip, size_t max_entries,
			  double timeout_s, struct ws_archiver **out, size_t *entries,
			  char *why, size_t whylen)
{
	const struct petri_limits *lim = session_limits(s);
	struct files_user u = user_of(s);
	const char *slash = *dir ? "/" : "";
	int r;

	*entries = 0;
	*out = NULL;
	if (dir[0] == '/') {	/* archives are of /work only */
		snprintf(why, whylen, "only directories of /work are archived");
		return -EROFS;
	}
	r = used(s, ws_archiver_start(&u, session_jail(s), dir, gzip, max_entries,
				      (uint64_t)lim->disk_mb << 20, out));
	if (r < 0) {
		*out = NULL;
		snprintf(why, whylen, "cannot start the archive's writer: %s", strerror(-r));
		return r;
	}
	if ((r = ws_archiver_opened(*out, timeout_s, entries)) == 0)
		return 0;
	ws_archiver_cancel(*out);
	if (r == -EAGAIN)
		snprintf(why, whylen, "the session is at its pids limit (%u): the archive's "
			 "writer needs one process of it", lim->pids);
	else if (r == -ETIMEDOUT)
		snprintf(why, whylen, "the archive's writer listed nothing within %g s: the "
			 "session is starved; try again later", timeout_s);
	else if (r == -ENOMEM)
		snprintf(why, whylen, "the archive's writer went over the session's memory "
			 "limit (%u MiB), or the session ended; archive a directory of it",
			 lim->memory_mb);
	else if (r == -E2BIG)
		snprintf(why, whylen, "/work%s%.300s holds more than %zu entries "
			 "(archive_max_entries), %u MiB of names, %u levels or %u MiB of files "
			 "(the session's disk limit; sparse files and hard links count their "
			 "full size): archive a directory of it", slash, dir, max_entries,
			 ARCHIVE_NAMES_MAX >> 20, FILES_TREE_DEPTH, lim->disk_mb);
	else if (r == -EBUSY)
		snprintf(why, whylen, "the archive's listing and buffers would hold more than "
			 "%u MiB; archive a directory of it", ARCHIVE_HELD_MAX >> 20);
	else
		snprintf(why, whylen, "cannot archive /work%s%.300s: %s", slash, dir,
			 ws_result_of(r) == WS_FAILED ? strerror(-r)
						      : ws_result_message(ws_result_of(r)));
	return r;
}

ssize_t session_archive_read(struct ws_archiver *a, char *out, size_t max)
{
	return ws_archiver_read(a, out, max);
}

int session_archive_fd(const struct ws_archiver *a) { return ws_archiver_fd(a); }
int session_archive_exit_fd(const struct ws_archiver *a) { return ws_archiver_exit_fd(a); }
void session_archive_cancel(struct ws_archiver *a) { ws_archiver_cancel(a); }
bool session_archive_reap(struct ws_archiver *a) { return ws_archiver_reap(a); }
