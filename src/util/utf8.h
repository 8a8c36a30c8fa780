/* UTF-8 checks for text that came out of a sandbox. */
#ifndef PETRI_UTF8_H
#define PETRI_UTF8_H

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

#endif
