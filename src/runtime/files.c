#include "runtime/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/syscall.h>
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

static int open_in(int work_fd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_FLAGS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, work_fd, path, &how, sizeof(how));
	while (fd < 0 && (errno == EAGAIN || errno == EINTR));
	return fd < 0 ? -errno : (int)fd;
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

/* Write into a new file beside the target, then rename it over the target:
 * a refused upload (workspace full) leaves the old file as it was, and a
 * symlink or FIFO the sandbox put there is replaced, never written
 * through. */
static int write_as(int work_fd, const char *path, const void *data, size_t len)
{
	char dir[FILES_PATH_MAX + 1], tmp[64];
	unsigned char rnd[8];
	const char *base;
	struct stat st;
	int parent, fd, r;

	if ((r = split(path, dir, sizeof(dir), &base)) < 0)
		return r;
	if (dir[0] && (r = make_parents(work_fd, dir)) < 0)
		return r;
	parent = open_dir(work_fd, dir);
	if (parent < 0)
		return parent;
	if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		r = -EISDIR;
		goto out;
	}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		r = -EIO;
		goto out;
	}
	snprintf(tmp, sizeof(tmp), ".petri-upload-%02x%02x%02x%02x%02x%02x%02x%02x",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	/* One component under a directory fd: nothing to resolve or follow. */
	fd = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	r = write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(parent, tmp, parent, base) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(parent, tmp, 0);
out:
	close(parent);
	return r;
}

int files_write(const struct files_user *u, int work_fd, const char *path,
		const void *data, size_t len)
{
	struct files_user old = become(u);
	int r = write_as(work_fd, path, data, len);

	restore(&old);
	return r;
}

static int open_as(int work_fd, const char *path, int *out, uint64_t *size)
{
	struct stat st;
	int fd = open_in(work_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);

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
	struct files_user old = become(u);
	int r = open_as(work_fd, path, out, size);

	restore(&old);
	return r;
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
	struct files_user old = become(u);
	int r = list_as(work_fd, dir, out, truncated);

	restore(&old);
	return r;
}

static int delete_as(int work_fd, const char *path)
{
	char dir[FILES_PATH_MAX + 1];
	const char *base;
	int parent, r;

	if ((r = split(path, dir, sizeof(dir), &base)) < 0)
		return r;
	parent = open_dir(work_fd, dir);
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
	struct files_user old = become(u);
	int r = delete_as(work_fd, path);

	restore(&old);
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
