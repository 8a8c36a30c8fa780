#include "util/multipart.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define REFUSE(...) do { snprintf(why, whylen, __VA_ARGS__); return -EINVAL; } while (0)

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 2046's bcharsnospace, and space inside. */
static bool bchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       strchr("'()+_,-./:=? ", c);
}

/* A parameter's value at *p (a token or a quoted-string, whose \ escapes
 * are undone) into out[MULTIPART_VALUE_MAX + 1]; *p moves past it.  false
 * when it is unterminated or too long. */
static bool param_value(const char **p, const char *end, char *out)
{
	const char *s = *p;
	size_t n = 0;

	if (s < end && *s == '"') {
		for (s++; s < end && *s != '"'; s++) {
			if (*s == '\\' && s + 1 < end)
				s++;
			if (n == MULTIPART_VALUE_MAX)
				return false;
			out[n++] = *s;
		}
		if (s == end)
			return false;
		s++;
	} else {
		for (; s < end && *s != ';' && !is_ws(*s); s++) {
			if (n == MULTIPART_VALUE_MAX)
				return false;
			out[n++] = *s;
		}
	}
	out[n] = '\0';
	*p = s;
	return true;
}

/* "form-data; name=...; filename=..." in v[0, end). */
static int disposition(const char *v, const char *end, struct multipart_part *part, char *why,
		       size_t whylen)
{
	const char *p = v;

	while (p < end && is_ws(*p))
		p++;
	if ((size_t)(end - p) < 9 || strncasecmp(p, "form-data", 9) ||
	    (p + 9 < end && p[9] != ';' && !is_ws(p[9])))
		REFUSE("a part is not form-data (Content-Disposition)");
	p += 9;
	for (;;) {
		const char *key;
		size_t klen;
		char value[MULTIPART_VALUE_MAX + 1];

		while (p < end && is_ws(*p))
			p++;
		if (p == end)
			return 0;
		if (*p++ != ';')
			REFUSE("a Content-Disposition header is malformed");
		while (p < end && is_ws(*p))
			p++;
		key = p;
		while (p < end && *p != '=' && *p != ';' && !is_ws(*p))
			p++;
		klen = (size_t)(p - key);
		while (p < end && is_ws(*p))
			p++;
		if (p == end || *p != '=') {
			if (klen == 0 && p == end)
				return 0;	/* a trailing ';' */
			REFUSE("a Content-Disposition parameter has no value");
		}
		p++;
		while (p < end && is_ws(*p))
			p++;
		if (!param_value(&p, end, value))
			REFUSE("a Content-Disposition parameter is unterminated or longer than "
			       "%d bytes", MULTIPART_VALUE_MAX);
		if (klen == 4 && !strncasecmp(key, "name", 4)) {
			memcpy(part->name, value, strlen(value) + 1);
		} else if (klen == 8 && !strncasecmp(key, "filename", 8)) {
			memcpy(part->filename, value, strlen(value) + 1);
			part->has_filename = true;
		}
	}
}

/* The header block h[0, len), each line ending in CRLF. */
static int headers(const char *h, size_t len, struct multipart_part *part, char *why,
		   size_t whylen)
{
	static const char cd[] = "content-disposition";
	const char *p = h, *end = h + len;

	while (p < end) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2), *colon;

		if (!eol)
			REFUSE("a part's header line does not end with CRLF");
		for (const char *c = p; c < eol; c++)
			if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
				REFUSE("a part's header has a control character");
		if (is_ws(*p))
			REFUSE("a part's header is folded (obsolete, refused)");
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon)
			REFUSE("a part's header line has no ':'");
		if ((size_t)(colon - p) == sizeof(cd) - 1 && !strncasecmp(p, cd, sizeof(cd) - 1)) {
			int r = disposition(colon + 1, eol, part, why, whylen);

			if (r < 0)
				return r;
		}
		p = eol + 2;
	}
	return 0;
}

/* Is the delimiter found at body[at] (CRLF "--" boundary) a real one: one
 * followed by "--" or by blanks and CRLF?  Otherwise it is content. */
static bool delimiter_at(const char *body, size_t len, size_t at, size_t dlen)
{
	size_t p = at + dlen;

	if (p + 2 <= len && body[p] == '-' && body[p + 1] == '-')
		return true;
	while (p < len && is_ws(body[p]))
		p++;
	return p + 2 <= len && body[p] == '\r' && body[p + 1] == '\n';
}

/* The next delimiter (with its CRLF) at or after from: its offset, or len. */
static size_t next_delimiter(const char *body, size_t len, size_t from, const char *delim,
			     size_t dlen)
{
	while (from + dlen <= len) {
		const char *hit = memmem(body + from, len - from, delim, dlen);
		size_t at;

		if (!hit)
			break;
		at = (size_t)(hit - body);
		if (delimiter_at(body, len, at, dlen))
			return at;
		from = at + 1;
	}
	return len;
}

static int walk(const char *body, size_t len, const char *boundary, size_t max_parts,
		multipart_fn fn, void *ctx, char *why, size_t whylen)
{
	char delim[MULTIPART_BOUNDARY_MAX + 5];
	size_t blen = strlen(boundary), dlen, pos, nparts = 0;

	if (blen == 0 || blen > MULTIPART_BOUNDARY_MAX)
		REFUSE("the multipart boundary is empty or too long");
	dlen = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	/* The first delimiter may open the body, without its CRLF. */
	if (len >= dlen - 2 && !memcmp(body, delim + 2, dlen - 2) &&
	    delimiter_at(body, len, 0, dlen - 2))
		pos = dlen - 2;
	else if ((pos = next_delimiter(body, len, 0, delim, dlen)) < len)
		pos += dlen;
	else
		REFUSE("the body has no multipart delimiter (--%.*s)", 64, boundary);
	for (;;) {
		struct multipart_part part;
		size_t hend, data, end;
		int r;

		if (pos + 2 <= len && body[pos] == '-' && body[pos + 1] == '-')
			return 0;	/* the close delimiter; the epilogue is ignored */
		while (pos < len && is_ws(body[pos]))
			pos++;
		if (pos + 2 > len || body[pos] != '\r' || body[pos + 1] != '\n')
			REFUSE("the body ends without its closing delimiter (truncated?)");
		pos += 2;
		if (nparts++ == max_parts) {
			snprintf(why, whylen, "more than %zu parts", max_parts);
			return -E2BIG;
		}
		if (pos + 2 <= len && body[pos] == '\r' && body[pos + 1] == '\n') {
			hend = pos;	/* no headers */
		} else {
			size_t window = len - pos < MULTIPART_HEADERS_MAX + 4 ?
					len - pos : MULTIPART_HEADERS_MAX + 4;
			const char *hit = memmem(body + pos, window, "\r\n\r\n", 4);

			if (!hit)
				REFUSE("a part's headers are longer than %d bytes or do not end "
				       "(truncated?)", MULTIPART_HEADERS_MAX);
			hend = (size_t)(hit - body) + 2;
		}
		data = hend + 2;
		end = next_delimiter(body, len, data - 2, delim, dlen);
		if (end == len || end < data) {
			/* data - 2: an empty part's delimiter follows its blank
			 * line at once, sharing its CRLF. */
			if (end == data - 2 && end < len)
				end = data - 2;
			else
				REFUSE("a part does not end with a delimiter (truncated?)");
		}
		memset(&part, 0, sizeof(part));
		if ((r = headers(body + pos, hend - pos, &part, why, whylen)) < 0)
			return r;
		part.data = body + data;
		part.len = end > data ? end - data : 0;
		if (fn && (r = fn(ctx, &part)) < 0)
			return r;
		pos = end + dlen;
	}
}

int multipart_parse(const char *body, size_t len, const char *boundary, size_t max_parts,
		    multipart_fn fn, void *ctx, char *why, size_t whylen)
{
	int r = walk(body, len, boundary, max_parts, NULL, NULL, why, whylen);

	return r < 0 ? r : walk(body, len, boundary, max_parts, fn, ctx, why, whylen);
}

int multipart_boundary(const char *ct, char *out)
{
	const char *p;
	size_t n = 0;

	if (!ct || strncasecmp(ct, "multipart/form-data", 19))
		return -EINVAL;
	for (p = ct + 19; (p = strcasestr(p, "boundary=")); p += 9)
		if (p[-1] == ';' || is_ws(p[-1]))
			break;
	if (!p)
		return -EINVAL;
	p += 9;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (n == MULTIPART_BOUNDARY_MAX || !bchar((unsigned char)*p))
				return -EINVAL;
			out[n++] = *p;
		}
		if (*p != '"')
			return -EINVAL;
	} else {
		for (; *p && *p != ';' && !is_ws(*p); p++) {
			if (n == MULTIPART_BOUNDARY_MAX || !bchar((unsigned char)*p) || *p == ' ')
				return -EINVAL;
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	/* RFC 2046: a boundary does not end in a space. */
	return n && out[n - 1] != ' ' ? 0 : -EINVAL;
}
