/* jstring — JSON strings decoded at memory speed, for the large strings of
 * frames (results: base64 images, HTML, text).
 *
 * jansson decodes a string a byte at a time (about 35 MB/s here): a 16 MiB
 * result frame cost the daemon half a second of CPU.  frame.c lifts every
 * long string out of a frame with jstring_decode() and lets jansson parse
 * only the small rest.  The rules are jansson's (RFC 8259 with its
 * choices): UTF-8 only, no raw control characters, the eight escapes and
 * \uXXXX with surrogates paired, no U+0000.  tests/fuzz/fuzz_jstring.c checks
 * that frames decode to the same tree either way. */
#ifndef PETRI_JSTRING_H
#define PETRI_JSTRING_H

#include <stddef.h>

/* The length of the string token at p[0] (which must be '"'), closing quote
 * included, scanning at most n bytes; 0 if it does not end within them. */
size_t jstring_token_len(const char *p, size_t n);

/* Decode the token p[0, len) (quotes included, as jstring_token_len found
 * it) into out, which has room for len bytes (a decoded string is never
 * longer than its token).  Returns the decoded length, or -1 when the
 * string is not one jansson would accept. */
long jstring_decode(const char *p, size_t len, char *out);

#endif
