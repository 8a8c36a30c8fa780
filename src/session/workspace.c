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

int session_file_open(struct session *s, const char *path, struct session_file *f)
{
	struct files_user u = user_of(s);

	f->fd = -1;
	f->size = 0;
	f->type = files_content_type(path);
	return used(s, files_open(&u, session_work_fd(s), path, &f->fd, &f->size));
}

int session_file_write(struct session *s, const char *path, const void *data, size_t len)
{
	struct files_user u = user_of(s);

	return wrote(s, files_write(&u, session_work_fd(s), path, data, len));
}

int session_file_list(struct session *s, const char *dir, json_t **out, bool *truncated)
{
	struct files_user u = user_of(s);

	return used(s, files_list(&u, session_work_fd(s), dir, out, truncated));
}

struct entries {
	struct files_user u;
	session_entry_fn fn;
	void *ctx;
};

static int entry(void *ctx, const char *path, const struct stat *st, const char *target)
{
	const struct entries *w = ctx;
	struct session_entry e = {
		.path = path, .st = st, .target = target,
		.user_uid = st->st_uid == w->u.uid, .user_gid = st->st_gid == w->u.gid,
	};

	return w->fn(w->ctx, &e);
}

int session_file_stat(struct session *s, const char *path, session_entry_fn fn, void *ctx)
{
	struct entries w = { user_of(s), fn, ctx };
	char target[FILES_PATH_MAX + 1];
	struct stat st;
	int r = files_stat(&w.u, session_work_fd(s), path, &st, target, sizeof(target));

	return used(s, r < 0 ? r : entry(&w, path, &st, target));
}

int session_file_walk(struct session *s, const char *dir, unsigned depth, size_t max,
		      session_entry_fn fn, void *ctx)
{
	struct entries w = { user_of(s), fn, ctx };

	return used(s, files_walk(&w.u, session_work_fd(s), dir, depth, max, entry, &w));
}

int session_file_remove(struct session *s, const char *path)
{
	struct files_user u = user_of(s);

	return used(s, files_delete(&u, session_work_fd(s), path));
}

int session_file_remove_tree(struct session *s, const char *path, size_t max)
{
	struct files_user u = user_of(s);

	return wrote(s, files_remove_tree(&u, session_work_fd(s), path, max));
}

int session_file_mkdir(struct session *s, const char *path)
{
	struct files_user u = user_of(s);

	return wrote(s, files_mkdir(&u, session_work_fd(s), path));
}

int session_file_rename(struct session *s, const char *from, const char *to)
{
	struct files_user u = user_of(s);

	return wrote(s, files_rename(&u, session_work_fd(s), from, to));
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
