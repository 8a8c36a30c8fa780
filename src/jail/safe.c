#include "jail/safe.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t safe_strlcat(char *dst, const char *src, size_t dstlen)
{
	size_t dl = strnlen(dst, dstlen), sl = strlen(src);

	if (dl < dstlen) {
		size_t n = sl < dstlen - dl - 1 ? sl : dstlen - dl - 1;

		memcpy(dst + dl, src, n);
		dst[dl + n] = '\0';
	}
	return dl + sl;
}

int safe_join(char *dst, size_t dstlen, const char *a, const char *b)
{
	if (!dstlen)
		return -ENAMETOOLONG;
	dst[0] = '\0';
	if (safe_strlcat(dst, a, dstlen) >= dstlen ||
	    safe_strlcat(dst, b, dstlen) >= dstlen)
		return -ENAMETOOLONG;
	return 0;
}

char *safe_utoa(unsigned long long v, char *buf)
{
	char tmp[21];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return buf;
}

int safe_fail(char *err, size_t errlen, const char *what, const char *subject,
	      int errnum)
{
	/* strerrordesc_np() returns a static, untranslated string: unlike
	 * strerror() it neither allocates nor touches the locale. */
	const char *desc = strerrordesc_np(errnum);

	if (err && errlen) {
		err[0] = '\0';
		safe_strlcat(err, what, errlen);
		if (subject) {
			safe_strlcat(err, " '", errlen);
			safe_strlcat(err, subject, errlen);
			safe_strlcat(err, "'", errlen);
		}
		safe_strlcat(err, ": ", errlen);
		safe_strlcat(err, desc ? desc : "unknown error", errlen);
	}
	return -errnum;
}

int safe_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int safe_write_file(const char *path, const void *data, size_t len,
		    int extra_flags, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | extra_flags, mode);
	int r;

	if (fd < 0)
		return -errno;
	r = safe_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0 && errno != EINTR)
		r = -errno;
	return r;
}

int safe_mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (tmp[i] != '/' && tmp[i] != '\0')
			continue;
		tmp[i] = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		tmp[i] = path[i];
	}
	return 0;
}

int safe_stat_fields(int first, int n, unsigned long long *v)
{
	char buf[1024];
	ssize_t len;
	int fd, field = 2;
	char *p;

	if (first < 3 || n < 1 || (fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	p = strrchr(buf, ')');	/* field 2, the command name, may hold anything */
	if (!p)
		return -1;
	for (p++; *p && field < first + n - 1; ) {
		while (*p == ' ')
			p++;
		field++;
		if (field >= first) {
			unsigned long long x = 0;

			while (*p >= '0' && *p <= '9')
				x = x * 10 + (unsigned long long)(*p++ - '0');
			v[field - first] = x;
		}
		while (*p && *p != ' ')
			p++;
	}
	return field == first + n - 1 ? 0 : -1;
}
