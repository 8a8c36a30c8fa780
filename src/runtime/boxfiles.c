/* The content of the files an execution wrote, put inline in its result
 * (box_files_inline() in box.h): read as the sandbox's user, as a download
 * is, after the sandbox stopped running. */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/box.h"
#include "runtime/files.h"
#include "util/base64.h"

static bool wanted(const char *path, const char *const *patterns, size_t n)
{
	if (!patterns)
		return true;
	for (size_t i = 0; i < n; i++)
		if (fnmatch(patterns[i], path, 0) == 0)
			return true;
	return false;
}

/* Read at most max bytes of path (at most its size, which the sandbox
 * cannot change any more: it has stopped running). */
static int read_capped(const struct files_user *u, int work_fd, const char *path,
		       uint64_t max, char **data, size_t *len, uint64_t *size)
{
	size_t got = 0;
	char *p = NULL;
	int fd, r;

	*data = NULL;
	*len = 0;
	if ((r = files_open(u, work_fd, path, &fd, size)) < 0)
		return r;
	if (*size > max) {
		r = -EFBIG;
		goto out;
	}
	if (!(p = malloc(*size ? *size : 1))) {
		r = -ENOMEM;
		goto out;
	}
	while (got < *size) {
		ssize_t n = read(fd, p + got, *size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*data = p;
	*len = got;
	p = NULL;
	r = 0;
out:
	free(p);
	close(fd);
	return r;
}

static int refuse(json_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(json_t *f, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return json_object_set_new(f, "truncated", json_true()) ||
	       json_object_set_new(f, "reason", json_string(why)) ? -ENOMEM : 0;
}

int box_files_inline(struct box *b, json_t *files, const char *const *patterns,
		     size_t npatterns, uint64_t per_file, uint64_t total)
{
	uint64_t left = total;
	int work_fd = jail_work_fd(box_jail(b));
	struct files_user u;
	json_t *f;
	size_t i;

	jail_owner(box_jail(b), &u.uid, &u.gid);
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		uint64_t size = 0;
		size_t len, n64;
		char *data, *b64;
		int r;

		if (!path || !wanted(path, patterns, npatterns))
			continue;
		r = read_capped(&u, work_fd, path, per_file < left ? per_file : left, &data, &len,
				&size);
		if (r == -ENOMEM)
			return r;
		if (r == -EFBIG && size > per_file)
			r = refuse(f, "the file is larger than max_return_file_kb (%llu KiB)",
				   (unsigned long long)(per_file >> 10));
		else if (r == -EFBIG)
			r = refuse(f, "the files returned would be larger than "
				   "max_return_files_mb (%llu MiB) together",
				   (unsigned long long)(total >> 20));
		else if (r < 0)
			r = refuse(f, "cannot read the file: %s", strerror(-r));
		if (r < 0)
			return r;
		if (!data)
			continue;
		left -= len;
		b64 = base64_encode(data, len, &n64);
		free(data);
		if (!b64 || json_object_set_new(f, "content_base64", json_stringn(b64, n64)) ||
		    json_object_set_new(f, "truncated", json_false())) {
			free(b64);
			return -ENOMEM;
		}
		free(b64);
	}
	return 0;
}
