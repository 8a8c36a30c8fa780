#include "workspace/changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/utf8.h"

struct walk {
	const struct timespec *since;
	json_t *found;
	size_t scanned;
	bool cut;
};

static bool newer(const struct stat *st, const struct timespec *since)
{
	return st->st_ctim.tv_sec > since->tv_sec ||
	       (st->st_ctim.tv_sec == since->tv_sec && st->st_ctim.tv_nsec >= since->tv_nsec);
}

static int add_file(struct walk *w, const char *path, const struct stat *st)
{
	struct buf clean = BUF_INIT;
	json_t *e;
	int r;

	if (json_array_size(w->found) >= WS_MAX_LIST) {
		w->cut = true;
		return 0;
	}
	/* File names are bytes; JSON wants UTF-8. */
	if ((r = utf8_sanitize(&clean, path, strlen(path))) < 0)
		return r;
	e = json_pack("{s:s%, s:I}", "path", clean.data, clean.len,
		      "size", (json_int_t)st->st_size);
	buf_release(&clean);
	if (!e || json_array_append_new(w->found, e))
		return -ENOMEM;
	return 0;
}

static int walk_dir(struct walk *w, int dir, const char *prefix, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd, r = 0;

	if (depth > WS_MAX_DEPTH) {
		w->cut = true;
		return 0;
	}
	fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while (r == 0 && (de = readdir(d))) {
		struct stat st;
		char path[4096];
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* The session's installed packages (pip's --user base,
		 * BOX_USER_BASE), not what its code made. */
		if (depth == 0 && !strcmp(de->d_name, ".local"))
			continue;
		if (++w->scanned > WS_MAX_SCAN) {
			w->cut = true;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* removed meanwhile */
		if ((size_t)snprintf(path, sizeof(path), "%s%s", prefix, de->d_name) >=
		    sizeof(path))
			continue;
		if (S_ISREG(st.st_mode)) {
			if (newer(&st, w->since))
				r = add_file(w, path, &st);
		} else if (S_ISDIR(st.st_mode)) {
			sub = openat(dirfd(d), de->d_name,
				     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			strncat(path, "/", sizeof(path) - strlen(path) - 1);
			r = walk_dir(w, sub, path, depth + 1);
			close(sub);
		}
	}
	closedir(d);
	return r;
}

static int by_path(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;

	return strcmp(json_string_value(json_object_get(x, "path")),
		      json_string_value(json_object_get(y, "path")));
}

int ws_changed_files(int work_fd, const struct timespec *since, json_t *files)
{
	struct walk w = { .since = since };
	json_t **v;
	size_t n;
	int r;

	w.found = json_array();
	if (!w.found)
		return -ENOMEM;
	r = walk_dir(&w, work_fd, "", 0);
	n = json_array_size(w.found);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		json_decref(w.found);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(w.found, i);
	qsort(v, n, sizeof(*v), by_path);
	for (size_t i = 0; i < n && r == 0; i++)
		if (json_array_append(files, v[i]))
			r = -ENOMEM;
	free(v);
	json_decref(w.found);
	if (r < 0)
		return r;
	return w.cut ? 1 : 0;
}
