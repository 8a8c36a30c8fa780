#include "session/workspace.h"

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
