#include "cli/userfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

static int read_file(const char *path, size_t max, struct buf *out)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return -errno;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (out->len + n > max) {
			fclose(f);
			return -EFBIG;
		}
		if (buf_append(out, chunk, n) < 0) {
			fclose(f);
			return -ENOMEM;
		}
	}
	n = (size_t)ferror(f);
	fclose(f);
	return n ? -EIO : 0;
}

void userfiles_load(struct userfile *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *copy = strdup(v[i].host_path), why[160];
		int r;

		if (!copy)
			die(125, "out of memory");
		snprintf(v[i].name, sizeof(v[i].name), "%s", basename(copy));
		free(copy);
		if (files_check_path(v[i].name, false, why, sizeof(why)) < 0)
			die(2, "--file: '%s' cannot be named '%s' in /work: %s", v[i].host_path,
			    v[i].name, why);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v[k].name, v[i].name))
				die(2, "--file: two files are named '%s'", v[i].name);
		v[i].data = (struct buf)BUF_INIT;
		r = read_file(v[i].host_path, USERFILES_READ_MAX, &v[i].data);
		if (r == -EFBIG)
			die(2, "--file: '%s' is larger than %u MiB", v[i].host_path,
			    USERFILES_READ_MAX >> 20);
		if (r < 0)
			die(2, "--file: cannot read '%s': %s", v[i].host_path, strerror(-r));
	}
}

void userfiles_release(struct userfile *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_release(&v[i].data);
}

static int write_at(int dir, const char *name, const void *data, size_t len)
{
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	const char *p = data;

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		p += w;
		len -= (size_t)w;
	}
	return close(fd) < 0 ? -errno : 0;
}

int userfiles_save(const char *dir, const char *rel, const void *data, size_t len)
{
	char why[160], comp[FILES_NAME_MAX + 1];
	const char *p = rel, *slash;
	int fd, next, r;

	if (files_check_path(rel, false, why, sizeof(why)) < 0)
		return -EINVAL;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	/* One component at a time, none of them a link. */
	while ((slash = strchr(p, '/'))) {
		snprintf(comp, sizeof(comp), "%.*s", (int)(slash - p), p);
		p = slash + 1;
		mkdirat(fd, comp, 0755);
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if ((fd = next) < 0)
			return -errno;
	}
	r = write_at(fd, p, data, len);
	close(fd);
	return r;
}
