/* A growable byte buffer.  The buffer owns `data`; buf_release() frees it.
 * `data` is always NUL-terminated once anything was appended, so text can be
 * used as a C string (binary data may hold NULs of its own: use `len`). */
#ifndef PETRI_BUF_H
#define PETRI_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

/* All return 0 or -ENOMEM; on failure the buffer is unchanged. */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_append_str(struct buf *b, const char *s);
int buf_appendf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int buf_vappendf(struct buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Drop the first n bytes. */
void buf_consume(struct buf *b, size_t n);
void buf_reset(struct buf *b);
void buf_release(struct buf *b);
/* Hand the data to the caller (who frees it); the buffer is left empty.
 * An empty buffer yields an allocated ""; NULL only when out of memory. */
char *buf_detach(struct buf *b, size_t *len);

#endif
