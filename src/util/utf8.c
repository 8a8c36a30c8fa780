#include "util/utf8.h"

#include <errno.h>
#include <string.h>

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned c;
	size_t len;
	unsigned cp;

	if (n == 0)
		return 0;
	c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		size_t k = utf8_seq_len(p + i, n - i);

		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* Could s[0..n) (n < the sequence's length) still become a valid sequence? */
static bool utf8_valid_prefix(const unsigned char *s, size_t n)
{
	unsigned char full[4] = { 0 };
	size_t need;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		need = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		need = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		need = 4;
	else
		return false;
	if (n >= need)
		return false;
	/* Complete it with the smallest and the largest continuation bytes:
	 * if either makes a valid character, the prefix is one. */
	for (size_t i = 0; i < n; i++)
		full[i] = s[i];
	for (size_t i = n; i < need; i++)
		full[i] = 0x80;
	if (utf8_seq_len(full, need))
		return true;
	for (size_t i = n; i < need; i++)
		full[i] = 0xbf;
	return utf8_seq_len(full, need) != 0;
}

size_t utf8_cut(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	/* Only the last three bytes can start an incomplete sequence. */
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = p[n - back];

		if ((c & 0xc0) == 0x80)
			continue;	/* continuation: look further back */
		if (c >= 0xc0 && utf8_valid_prefix(p + n - back, back))
			return n - back;
		break;
	}
	return n;
}

int utf8_sanitize(struct buf *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	int r;

	while (i < n) {
		size_t k = utf8_seq_len(p + i, n - i);

		if (k) {
			i += k;
			continue;
		}
		if ((r = buf_append(out, s + run, i - run)) < 0 ||
		    (r = buf_append(out, "\xef\xbf\xbd", 3)) < 0)
			return r;
		i++;
		run = i;
	}
	return buf_append(out, s + run, n - run);
}

json_t *utf8_json_string(const char *s, size_t n)
{
	struct buf clean = BUF_INIT;
	json_t *j = NULL;

	if (utf8_valid(s, n))
		return json_stringn(s, n);
	if (utf8_sanitize(&clean, s, n) == 0)
		j = json_stringn(clean.data ? clean.data : "", clean.len);
	buf_release(&clean);
	return j;
}

int utf8_carry_take(struct utf8_carry *c, const char *s, size_t n, struct buf *out)
{
	struct buf joined = BUF_INIT;
	size_t cut;
	int r;

	if (!c->n) {	/* the usual case: no copy */
		cut = utf8_cut(s, n);
		if ((r = utf8_sanitize(out, s, cut)) < 0)
			return r;
		c->n = n - cut;
		memcpy(c->bytes, s + cut, c->n);
		return 0;
	}
	if (buf_append(&joined, c->bytes, c->n) < 0 || buf_append(&joined, s, n) < 0) {
		buf_release(&joined);
		return -ENOMEM;
	}
	cut = utf8_cut(joined.data, joined.len);
	r = utf8_sanitize(out, joined.data, cut);
	if (r == 0) {
		c->n = joined.len - cut;
		memcpy(c->bytes, joined.data + cut, c->n);
	}
	buf_release(&joined);
	return r;
}

int utf8_carry_flush(struct utf8_carry *c, struct buf *out)
{
	int r = c->n ? utf8_sanitize(out, c->bytes, c->n) : 0;

	if (r == 0)
		c->n = 0;
	return r;
}
