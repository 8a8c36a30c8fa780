#include "util/savefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Write name in dir as a new file beside it, renamed over it: a name is
 * replaced, never an inode written through (a hard link of the old file
 * elsewhere keeps its content; a FIFO is never opened).  What is there
 * already must be a regular file (its permission bits are kept) or
 * nothing. */
static int write_at(int dir, const char *name, const void *data, size_t len)
{
	char tmp[32];
	unsigned char rnd[8];
	mode_t mode = 0644;
	struct stat st;
	int fd, r;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		mode = st.st_mode & 0777;
	} else if (errno != ENOENT) {
		return -errno;
	}
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	snprintf(tmp, sizeof(tmp), ".petri-save-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = write_all(fd, data, len);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dir, tmp, dir, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dir, tmp, 0);
	return r;
}

int savefile_write(const char *dir, const char *rel, const void *data, size_t len)
{
	char comp[NAME_MAX + 1];
	const char *p = rel, *slash;
	int fd, next, r;

	/* git runs what .git/config and .git/hooks name: not the sandbox's
	 * to write, in DIR nor anywhere below it. */
	for (const char *c = rel; c; c = (slash = strchr(c, '/')) ? slash + 1 : NULL)
		if (!strncasecmp(c, ".git", 4) && (c[4] == '/' || !c[4]))
			return -EPERM;
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
