/* safe — helpers for code that runs between clone() and execve() in a copy
 * of a possibly multi-threaded process: no allocation, no locks, no stdio.
 * Only system calls and stack buffers. */
#ifndef PETRI_SAFE_H
#define PETRI_SAFE_H

#include <stddef.h>
#include <sys/types.h>

/* Append src to dst (size dstlen), always NUL-terminating.  Returns the
 * length the result would have had; >= dstlen means truncated. */
size_t safe_strlcat(char *dst, const char *src, size_t dstlen);
/* dst = a + b, or -ENAMETOOLONG. */
int safe_join(char *dst, size_t dstlen, const char *a, const char *b);
/* Unsigned decimal into buf (>= 21 bytes); returns buf. */
char *safe_utoa(unsigned long long v, char *buf);
/* Fields first .. first + n - 1 of /proc/self/stat (numbered as proc(5)
 * numbers them, from 1; each a decimal number, from field 3 on) into v[].
 * 0, or -1 when they cannot be read. */
int safe_stat_fields(int first, int n, unsigned long long *v);
/* err = "<what> '<subject>': <strerror(errnum)>", truncated to errlen.
 * subject may be NULL.  Returns -errnum, for `return safe_fail(...)`. */
int safe_fail(char *err, size_t errlen, const char *what, const char *subject,
	      int errnum);
/* write() all of buf, retrying on EINTR and short writes. 0 or -errno. */
int safe_write_all(int fd, const void *buf, size_t len);
/* Open path (O_WRONLY|O_CLOEXEC plus extra flags), write s, close.
 * 0 or -errno. */
int safe_write_file(const char *path, const void *data, size_t len,
		    int extra_flags, mode_t mode);
/* mkdir path and its missing parents with mode. 0 or -errno. */
int safe_mkdir_p(const char *path, mode_t mode);

#endif
