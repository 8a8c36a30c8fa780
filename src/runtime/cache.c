#include "runtime/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WALK_DEPTH_MAX 16
#define WALK_ENTRIES_MAX 100000
#define BUILD_TIMEOUT_S 40	/* each of fc-cache and python (15-19 s on a loaded host); inside
				 * systemd's start timeout (90 s) */
#define NAME_PREFIX "sandbox-"
#define BUILD_PREFIX ".build-"
/* Changes when what the directory holds changes, so that a new petri does
 * not take an older one's directory. */
#define CACHE_FORMAT "petri-cache-1"

const char *const cache_key_paths[] = {
	/* What fontconfig and matplotlib list: the fonts, fontconfig's
	 * configuration (which directories, which rules), matplotlib's own
	 * fonts; the sandbox sees the same paths (/usr, /etc/fonts). */
	"/usr/share/fonts", "/usr/local/share/fonts", "/etc/fonts",
	"/usr/share/matplotlib/mpl-data/fonts",
	/* What reads and writes the caches: a new matplotlib may change its
	 * list's format or contents, a new fontconfig its cache's. */
	"/usr/lib/python3/dist-packages/matplotlib/_version.py",
	"/usr/lib/python3/dist-packages/matplotlib/font_manager.py",
	"/usr/bin/fc-cache", "/usr/bin/python3",
	NULL
};

/* ---- the key ---------------------------------------------------------- */

static void fnv(uint64_t *h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		*h ^= p[i];
		*h *= 1099511628211ULL;
	}
}

static void fnv_stat(uint64_t *h, const char *name, const struct stat *st)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%o %lld %llu %lld.%09ld\n",
			 (unsigned)st->st_mode, (long long)st->st_size,
			 (unsigned long long)st->st_ino, (long long)st->st_mtim.tv_sec,
			 st->st_mtim.tv_nsec);

	fnv(h, name, strlen(name) + 1);
	fnv(h, line, (size_t)n);
}

/* Every entry below the directory dirfd (named by its path from the root
 * of the walk, for the hash), in readdir's order: a directory's order
 * changes only with its entries, and so with its mtime. */
static void walk(uint64_t *h, int dirfd, const char *path, int depth, long *entries)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;

	if (!d) {
		close(dirfd);
		return;
	}
	while ((de = readdir(d)) && *entries < WALK_ENTRIES_MAX) {
		char sub[4096];
		struct stat st;
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		(*entries)++;
		fnv_stat(h, sub, &st);
		if (S_ISDIR(st.st_mode) && depth < WALK_DEPTH_MAX &&
		    (fd = openat(dirfd, de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
			walk(h, fd, sub, depth + 1, entries);
	}
	closedir(d);
}

uint64_t cache_key(const char *const *paths)
{
	uint64_t h = 14695981039346656037ULL;
	long entries = 0;

	fnv(&h, CACHE_FORMAT, sizeof(CACHE_FORMAT));
	for (size_t i = 0; paths[i]; i++) {
		struct stat st;
		int fd;

		/* The path itself is the operator's: its links are followed
		 * (/usr/bin/python3 -> python3.11), those below it are not. */
		if (stat(paths[i], &st) < 0) {
			fnv(&h, paths[i], strlen(paths[i]) + 1);
			fnv(&h, "missing", 7);
			continue;
		}
		fnv_stat(&h, paths[i], &st);
		if (S_ISDIR(st.st_mode) &&
		    (fd = open(paths[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
			walk(&h, fd, paths[i], 1, &entries);
	}
	return h;
}

/* fontconfig's library, wherever the architecture puts it. */
static uint64_t host_key(void)
{
	uint64_t h = cache_key(cache_key_paths);
	glob_t g;
	int r = glob("/usr/lib/*/libfontconfig.so.1", 0, NULL, &g);

	if (r == 0)
		h ^= cache_key((const char *const *)g.gl_pathv);
	if (r == 0 || r == GLOB_NOMATCH)
		globfree(&g);
	return h;
}

/* ---- building --------------------------------------------------------- */

/* Remove the tree at name below dirfd, never following a link. */
static void remove_tree(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0) {
		unlinkat(dirfd, name, 0);
		return;
	}
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			remove_tree(fd, de->d_name);
	closedir(d);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Run argv with env in cwd, its output into log; its exit status, or -errno
 * (-ETIMEDOUT: killed after BUILD_TIMEOUT_S). */
static int run(const char *const *argv, const char *const *env, const char *cwd,
	       const char *log)
{
	struct timespec tick = { 0, 20 * 1000 * 1000 };
	time_t deadline = time(NULL) + BUILD_TIMEOUT_S;
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		/* What it writes is for every sandbox to read: not the
		 * service's UMask=0077. */
		umask(022);
		if (fd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 ||
		    dup2(fd, 2) < 0 || chdir(cwd) < 0)
			_exit(127);
		execve(argv[0], (char *const *)argv, (char *const *)env);
		_exit(127);
	}
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -ETIMEDOUT;
		}
		nanosleep(&tick, NULL);
	}
}

/* The end of the log, for a message. */
static void log_tail(const char *log, char *out, size_t len)
{
	char buf[512];
	ssize_t n = 0;
	int fd = open(log, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end > (off_t)sizeof(buf) - 1)
			lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
		else
			lseek(fd, 0, SEEK_SET);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '\n' && p[1])
			*p = ' ';
	snprintf(out, len, "%s", buf[0] ? buf : "(no output)");
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (fputs(text, f) < 0)
		r = -EIO;
	if (fclose(f) != 0 && !r)
		r = -errno;
	return r;
}

/* out = dir/name, or -ENAMETOOLONG. */
static int path_in(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Build into tmp: fontconfig's caches of the host's fonts, then
 * matplotlib's font list (its search runs fc-list, which finds them).  The
 * environment is petri's, not the caller's: no HOME (a user's fonts are not
 * a sandbox's), no MATPLOTLIBRC, no PYTHON*; python -I, in a directory
 * with no matplotlibrc.  A host without fc-cache, python3 or matplotlib
 * gets what it has. */
static int build(const char *tmp, char *err, size_t errlen)
{
	char conf[4096], fcdir[4096], mpldir[4096], log[4096], fcenv[4200], mplenv[4200];
	char text[1200 + 4096], tail[600];
	static const char *const fc_argv[] = { "/usr/bin/fc-cache", "-f", NULL };
	static const char *const py_argv[] = {
		"/usr/bin/python3", "-I", "-c", "import matplotlib.font_manager", NULL
	};
	const char *env[] = {
		"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
		"MPLBACKEND=Agg", "PYTHONDONTWRITEBYTECODE=1", fcenv, mplenv, NULL
	};
	int r;

	if (path_in(conf, sizeof(conf), tmp, "build-fonts.conf") < 0 ||
	    path_in(fcdir, sizeof(fcdir), tmp, "fontconfig") < 0 ||
	    path_in(mpldir, sizeof(mpldir), tmp, "matplotlib") < 0 ||
	    path_in(log, sizeof(log), tmp, "build.log") < 0)
		return -ENAMETOOLONG;
	snprintf(fcenv, sizeof(fcenv), "FONTCONFIG_FILE=%s", conf);
	snprintf(mplenv, sizeof(mplenv), "MPLCONFIGDIR=%s", mpldir);
	snprintf(text, sizeof(text), CACHE_FONTS_CONF_FMT, fcdir);
	if (mkdir(fcdir, 0755) < 0 || mkdir(mpldir, 0755) < 0)
		return -errno;
	if ((r = write_text(conf, text)) < 0)
		return r;
	if (access(fc_argv[0], X_OK) == 0 && (r = run(fc_argv, env, tmp, log)) != 0) {
		log_tail(log, tail, sizeof(tail));
		snprintf(err, errlen, "fc-cache failed (%s): %s",
			 r < 0 ? strerror(-r) : "exit status", tail);
		return r < 0 ? r : -EIO;
	}
	if (access(py_argv[0], X_OK) == 0 && (r = run(py_argv, env, tmp, log)) != 0) {
		/* No matplotlib (or a broken one): no font list, fontconfig's
		 * caches still serve. */
		log_tail(log, tail, sizeof(tail));
		if (r < 0 || !strstr(tail, "ModuleNotFoundError")) {
			snprintf(err, errlen, "matplotlib's font list: %s",
				 r < 0 ? strerror(-r) : tail);
			return r < 0 ? r : -EIO;
		}
	}
	unlink(log);
	unlink(conf);
	return 0;
}

/* Directories of other keys, and builds of petris that are gone. */
static void prune(const char *base, const char *keep)
{
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		long pid;

		if (!strncmp(n, NAME_PREFIX, strlen(NAME_PREFIX)) && strcmp(n, keep))
			remove_tree(fd, n);
		else if (!strncmp(n, BUILD_PREFIX, strlen(BUILD_PREFIX)) &&
			 (pid = strtol(n + strlen(BUILD_PREFIX), NULL, 10)) > 0 &&
			 kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			remove_tree(fd, n);
	}
	closedir(d);
}

static int make_base(const char *base)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s", base);
	for (char *s = strchr(path + 1, '/'); ; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(path, 0755) == 0)
			chmod(path, 0755);	/* past a umask of 0077 */
		else if (errno != EEXIST)
			return -errno;
		if (!s)
			return 0;
		*s = '/';
	}
}

/* Read the whole regular file name below dirfd into a new buffer. */
static int read_file(int dirfd, const char *name, size_t max, void **data, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	size_t got = 0;
	char *buf;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
	}
	if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	*data = buf;
	*len = got;
	return 0;
}

/* The files of dir's fontconfig/ and matplotlib/ into c. */
static int load(struct cache *c, const char *dir)
{
	static const char *const subs[] = { "fontconfig", "matplotlib", NULL };
	size_t bytes = 0;
	int r = 0;

	for (size_t i = 0; subs[i] && !r; i++) {
		char path[4200];
		struct dirent *de;
		DIR *d;

		if (path_in(path, sizeof(path), dir, subs[i]) < 0)
			return -ENAMETOOLONG;
		if (!(d = opendir(path)))
			continue;
		while (!r && (de = readdir(d))) {
			struct jail_file *f, *v;
			void *data = NULL;
			size_t len = 0;
			char *name = NULL;

			if (de->d_name[0] == '.')
				continue;
			if (c->nfiles == CACHE_FILES_MAX) {
				r = -EFBIG;
				break;
			}
			if ((r = read_file(dirfd(d), de->d_name, CACHE_BYTES_MAX - bytes,
					   &data, &len)) < 0) {
				if (r == -EINVAL)	/* not a regular file: not ours */
					r = 0;
				continue;
			}
			if (asprintf(&name, CACHE_SANDBOX_DIR "/%s/%s", subs[i], de->d_name) < 0 ||
			    !(v = realloc(c->files, (c->nfiles + 1) * sizeof(*v)))) {
				free(data);
				if (name)
					free(name);
				r = -ENOMEM;
				break;
			}
			c->files = v;
			f = &c->files[c->nfiles++];
			*f = (struct jail_file){ .path = name, .data = data, .len = len,
						 .mode = 0444 };
			bytes += len;
		}
		closedir(d);
	}
	return r;
}

void cache_release(struct cache *c)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		free((void *)c->files[i].path);
		free((void *)c->files[i].data);
	}
	free(c->files);
	memset(c, 0, sizeof(*c));
}

int cache_prepare(const char *base, struct cache *c, char *err, size_t errlen)
{
	char name[64], tmp[4096], *dir = c->dir;
	size_t dirlen = sizeof(c->dir);
	struct stat st;
	int r;

	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	if (base[0] != '/' || strlen(base) > 3000) {
		snprintf(err, errlen, "'%s' is not an absolute path", base);
		return -EINVAL;
	}
	if ((r = make_base(base)) < 0) {
		snprintf(err, errlen, "cannot make '%s': %s", base, strerror(-r));
		return r;
	}
	snprintf(name, sizeof(name), NAME_PREFIX "%016llx", (unsigned long long)host_key());
	if ((size_t)snprintf(dir, dirlen, "%s/%s", base, name) >= dirlen) {
		dir[0] = '\0';
		snprintf(err, errlen, "'%s' is too long", base);
		return -ENAMETOOLONG;
	}
	if (stat(dir, &st) < 0) {
		snprintf(tmp, sizeof(tmp), "%s/" BUILD_PREFIX "%ld-%ld", base, (long)getpid(),
			 (long)time(NULL));
		if (mkdir(tmp, 0755) < 0 || chmod(tmp, 0755) < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot make '%s': %s", tmp, strerror(errno));
			goto fail;
		}
		if ((r = build(tmp, err, errlen)) < 0) {
			if (!err[0])
				snprintf(err, errlen, "cannot build in '%s': %s", tmp, strerror(-r));
			remove_tree(AT_FDCWD, tmp);
			goto fail;
		}
		/* Whole or not at all: another petri that built the same key
		 * first wins, and its directory is as good as ours. */
		if (rename(tmp, dir) < 0) {
			r = -errno;
			remove_tree(AT_FDCWD, tmp);
			if (r != -EEXIST && r != -ENOTEMPTY) {
				snprintf(err, errlen, "cannot rename '%s': %s", tmp, strerror(-r));
				goto fail;
			}
		}
		prune(base, name);
	}
	if ((r = load(c, dir)) < 0) {
		snprintf(err, errlen, "cannot read '%s': %s", dir,
			 r == -EFBIG ? "more than 256 files or 8 MiB" : strerror(-r));
		goto fail;
	}
	return 0;
fail:
	cache_release(c);
	return r;
}
