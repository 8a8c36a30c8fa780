#include "util/savefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int savefile_write(const char *dir, const char *rel, const void *data, size_t len)
{
	char comp[NAME_MAX + 1];
	const char *p = rel, *slash;
	int fd, next, r;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	/* One component at a time, none of them a link. */
	while ((slash = strchr(p, '/'))) {
		size_t n = (size_t)(slash - p);

		if (n > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
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
