#include "util/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t len, size_t *outlen)
{
	const unsigned char *p = data;
	size_t n = (len + 2) / 3 * 4, o = 0;
	char *out;

	if (len > (SIZE_MAX - 1) / 4 * 3)
		return NULL;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Walk s, writing bytes to out when out is not NULL. */
static bool decode(const char *s, size_t n, unsigned char *out, size_t *outlen)
{
	size_t o = 0;

	if (n % 4)
		return false;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;

		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)s[i + k];

			if (c == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = value_of(c)) < 0)
				return false;
		}
		if (out) {
			uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
				     (uint32_t)v[2] << 6 | (uint32_t)v[3];

			out[o] = (unsigned char)(x >> 16);
			if (pad < 2)
				out[o + 1] = (unsigned char)(x >> 8);
			if (pad < 1)
				out[o + 2] = (unsigned char)x;
		}
		o += 3 - (size_t)pad;
	}
	if (outlen)
		*outlen = o;
	return true;
}

bool base64_valid(const char *s, size_t n)
{
	return decode(s, n, NULL, NULL);
}

unsigned char *base64_decode(const char *s, size_t n, size_t *outlen)
{
	unsigned char *out;

	if (!decode(s, n, NULL, NULL))
		return NULL;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	decode(s, n, out, outlen);
	return out;
}
