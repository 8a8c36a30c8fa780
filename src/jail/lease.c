/* lease — host uids leased by lock files; see lease.h. */
#include "jail/lease.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/safe.h"
#include "util/num.h"

/* A taker that keeps losing the unlink race on one name moves on. */
#define TAKE_RETRIES 4

struct lease_pool {
	int dfd;		/* the lock directory */
	uid_t first;
	uint32_t count;
	pthread_mutex_t lock;
	uint32_t next;		/* where the next search starts */
};

static void uid_name(uid_t uid, char name[24])
{
	safe_utoa(uid, name);
}

/* The name still points at the inode fd has locked. */
static bool still_linked(int dfd, const char *name, int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Lock name (creating it if create): the locked fd, -EAGAIN if someone
 * holds it, -ENOENT if it is not there (and !create), or -errno. */
static int lock_name(int dfd, const char *name, bool create)
{
	for (int i = 0; i < TAKE_RETRIES; i++) {
		int fd = openat(dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
				(create ? O_CREAT : 0), 0600);

		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;

			close(fd);
			return e == EWOULDBLOCK ? -EAGAIN : -e;
		}
		if (still_linked(dfd, name, fd))
			return fd;
		/* Unlinked (released or swept) between our open and our lock:
		 * that inode is nobody's lease any more; try the name again. */
		close(fd);
		if (!create)
			return -ENOENT;
	}
	return -EAGAIN;
}

static bool parse_uid(const char *name, uid_t *uid)
{
	uint32_t v;

	if (name[0] < '0' || name[0] > '9' || !num_u32(name, 0, UINT32_MAX - 1, &v))
		return false;
	*uid = v;
	return true;
}

/* Call fn for every lock file of the directory (whatever its range). */
static int for_each_file(struct lease_pool *p, void (*fn)(struct lease_pool *, const char *,
							  uid_t, void *), void *ctx)
{
	int fd = openat(p->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((e = readdir(d))) {
		uid_t uid;

		if (parse_uid(e->d_name, &uid))
			fn(p, e->d_name, uid, ctx);
	}
	closedir(d);
	return 0;
}

static void sweep_one(struct lease_pool *p, const char *name, uid_t uid, void *ctx)
{
	int fd = lock_name(p->dfd, name, false);

	(void)uid;
	if (fd < 0)
		return;		/* held (or gone): not ours to remove */
	if (unlinkat(p->dfd, name, 0) == 0)
		++*(int *)ctx;
	close(fd);
}

int lease_sweep(struct lease_pool *p)
{
	int n = 0, r = for_each_file(p, sweep_one, &n);

	return r < 0 ? r : n;
}

static void count_held(struct lease_pool *p, const char *name, uid_t uid, void *ctx)
{
	int fd;

	if (uid < p->first || uid - p->first >= p->count)
		return;
	fd = openat(p->dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return;
	/* A shared probe: it never blocks a holder, only (for an instant) a
	 * taker, who then tries the next uid. */
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		++*(long *)ctx;
	close(fd);
}

long lease_count_free(struct lease_pool *p)
{
	long held = 0;
	int r = for_each_file(p, count_held, &held);

	return r < 0 ? r : (long)p->count - held;
}

/* dir exists, is a directory, and no one but its owner (root, or us) can
 * change what is in it: lock files there are trustworthy. */
static int open_dir(const char *dir, char *err, size_t errlen)
{
	char parent[256];
	struct stat st;
	char *slash;
	int fd;

	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		(void)safe_mkdir_p(parent, 0755);
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the uid lease directory %s: %s", dir,
			 strerror(errno));
		return -errno;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open the uid lease directory %s: %s", dir,
			 strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen, "the uid lease directory %s must belong to root and be "
			 "writable by no one else", dir);
		close(fd);
		return -EPERM;
	}
	return fd;
}

int lease_pool_open(const char *dir, uid_t first, uint32_t count,
		    struct lease_pool **out, char *err, size_t errlen)
{
	struct lease_pool *p;
	int r;

	*out = NULL;
	if (count == 0 || (uint64_t)first + count > (uint64_t)UINT32_MAX) {
		snprintf(err, errlen, "invalid uid range %u+%u", (unsigned)first, count);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->first = first;
	p->count = count;
	pthread_mutex_init(&p->lock, NULL);
	p->dfd = open_dir(dir, err, errlen);
	if (p->dfd < 0) {
		r = p->dfd;
		p->dfd = -1;
		lease_pool_free(p);
		return r;
	}
	(void)lease_sweep(p);
	*out = p;
	return 0;
}

void lease_pool_free(struct lease_pool *p)
{
	if (!p)
		return;
	if (p->dfd >= 0)
		close(p->dfd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int lease_take(struct lease_pool *p, struct lease *out)
{
	uint32_t start;

	out->fd = -1;
	/* Start after the last uid handed out: a uid just given back is the
	 * last to be reused. */
	pthread_mutex_lock(&p->lock);
	start = p->next;
	pthread_mutex_unlock(&p->lock);
	for (uint32_t i = 0; i < p->count; i++) {
		uint32_t k = (start + i) % p->count;
		char name[24];
		int fd;

		uid_name(p->first + k, name);
		fd = lock_name(p->dfd, name, true);
		if (fd == -EAGAIN)
			continue;
		if (fd < 0)
			return fd;
		pthread_mutex_lock(&p->lock);
		p->next = (k + 1) % p->count;
		pthread_mutex_unlock(&p->lock);
		out->uid = p->first + k;
		out->fd = fd;
		return 0;
	}
	return -EAGAIN;
}

void lease_drop(struct lease_pool *p, struct lease *l)
{
	char name[24];

	if (l->fd < 0)
		return;
	/* Unlink first, still locked: a taker that opened the old inode finds
	 * it unlinked once it gets the lock, and makes a fresh file. */
	uid_name(l->uid, name);
	(void)unlinkat(p->dfd, name, 0);
	close(l->fd);
	l->fd = -1;
}
