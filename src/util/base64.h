/* Standard base64 (RFC 4648, with padding, no line breaks). */
#ifndef PETRI_BASE64_H
#define PETRI_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* A new NUL-terminated string (free it), or NULL when out of memory. */
char *base64_encode(const void *data, size_t len, size_t *outlen);
/* Decode s[0..n) into a new buffer (free it).  Returns NULL on invalid
 * input (wrong alphabet, bad padding, stray characters) or no memory. */
unsigned char *base64_decode(const char *s, size_t n, size_t *outlen);
/* Is s[0..n) valid base64, without decoding it? */
bool base64_valid(const char *s, size_t n);

#endif
