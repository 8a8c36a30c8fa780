#include "runtime/jstring.h"

#include <stdint.h>
#include <string.h>

#include "util/utf8.h"

size_t jstring_token_len(const char *p, size_t n)
{
	size_t i = 1;

	while (i < n) {
		const char *q = memchr(p + i, '"', n - i);
		size_t back = 0;

		if (!q)
			return 0;
		/* An even run of backslashes before it: the closing quote. */
		while ((size_t)(q - p) - back > 1 && q[-1 - (long)back] == '\\')
			back++;
		i = (size_t)(q - p) + 1;
		if (back % 2 == 0)
			return i;
	}
	return 0;
}

static int hex4(const char *p, uint32_t *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* One escape at p[0] == '\\' within p[0, n): its code point's UTF-8 into
 * out.  Returns the bytes of input used, or 0 when invalid. */
static size_t escape(const char *p, size_t n, char *out, size_t *written)
{
	static const char simple[] = "\"\\/bfnrt", value[] = "\"\\/\b\f\n\r\t";
	const char *s;
	uint32_t hi, lo;

	if (n < 2)
		return 0;
	if (p[1] != 'u') {
		if (!(s = memchr(simple, p[1], sizeof(simple) - 1)))
			return 0;
		*out = value[s - simple];
		*written = 1;
		return 2;
	}
	if (n < 6 || hex4(p + 2, &hi) < 0 || hi == 0)
		return 0;	/* U+0000: jansson refuses it, and so do we */
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return 0;	/* a low surrogate first */
	if (hi < 0xd800 || hi > 0xdbff) {
		*written = put_utf8(out, hi);
		return 6;
	}
	if (n < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &lo) < 0 ||
	    lo < 0xdc00 || lo > 0xdfff)
		return 0;	/* a high surrogate alone */
	*written = put_utf8(out, 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
	return 12;
}

long jstring_decode(const char *p, size_t len, char *out)
{
	const char *end = p + len - 1;	/* the closing quote */
	size_t o = 0;

	if (len < 2 || p[0] != '"' || *end != '"')
		return -1;
	for (p++; p < end;) {
		const char *stop = p;
		size_t run, used, w = 0;

		/* The plain run up to the next escape or control byte, then
		 * UTF-8 checked and copied in one go. */
		while (stop < end && *stop != '\\' && (unsigned char)*stop >= 0x20)
			stop++;
		run = (size_t)(stop - p);
		if (run) {
			if (!utf8_valid(p, run))
				return -1;
			memcpy(out + o, p, run);
			o += run;
			p = stop;
		}
		if (p == end)
			break;
		if (*p != '\\')
			return -1;	/* a raw control character */
		if (!(used = escape(p, (size_t)(end - p), out + o, &w)))
			return -1;
		o += w;
		p += used;
	}
	return (long)o;
}
