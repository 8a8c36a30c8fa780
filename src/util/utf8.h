/* UTF-8 checks for text that came out of a sandbox. */
#ifndef PETRI_UTF8_H
#define PETRI_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* Length of the longest valid UTF-8 sequence starting at s[0] (1-4), or 0
 * if s[0..n) does not start with one.  Overlongs, surrogates and code
 * points above U+10FFFF are invalid. */
size_t utf8_seq_len(const unsigned char *s, size_t n);
bool utf8_valid(const char *s, size_t n);
/* Length of the prefix of s[0..n) that does not end inside an incomplete
 * (but so far valid) multi-byte sequence: where to cut a stream so that a
 * character is never split across chunks. */
size_t utf8_cut(const char *s, size_t n);
/* Append s to out with every invalid byte replaced by U+FFFD. */
int utf8_sanitize(struct buf *out, const char *s, size_t n);
/* s[0..n), any bytes, as a JSON string sanitized so (jansson refuses what
 * is not UTF-8); NULL when out of memory. */
json_t *utf8_json_string(const char *s, size_t n);

/* Text that arrives in chunks cut anywhere (a program's output): the first
 * bytes of a character cut at a chunk's end wait here for the rest, so that
 * each piece given on is whole UTF-8.  Zeroed: empty. */
struct utf8_carry {
	char bytes[4];
	size_t n;
};
/* Append to out (sanitized as utf8_sanitize() does) what c held and
 * s[0..n) bring, up to the last whole character; keep the rest in c.
 * 0 or -ENOMEM (then c is unchanged). */
int utf8_carry_take(struct utf8_carry *c, const char *s, size_t n, struct buf *out);
/* The end of the text: what c still holds, as U+FFFD, appended to out. */
int utf8_carry_flush(struct utf8_carry *c, struct buf *out);

#endif
