/* multipart — a multipart/form-data body (RFC 7578, RFC 2046 §5.1), held
 * whole in memory, cut into its parts without copying them.
 *
 * The body comes from a client: hostile.  The parser reads each byte a
 * bounded number of times (one memmem per part), allocates nothing, and
 * refuses rather than guesses: a boundary that is missing or too long, a
 * part's headers longer than MULTIPART_HEADERS_MAX, a header line without
 * CRLF, a body without its closing delimiter (truncated), more than
 * max_parts parts.  libmicrohttpd's post processor does this too, but
 * streams each field in pieces of its own choosing and reports truncation
 * only at the end; a buffered body is simpler and safer cut whole. */
#ifndef PETRI_MULTIPART_H
#define PETRI_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define MULTIPART_BOUNDARY_MAX	200	/* RFC 2046: 70; clients stay well under */
#define MULTIPART_HEADERS_MAX	8192	/* bytes of one part's header block */
#define MULTIPART_VALUE_MAX	4352	/* a name or filename, decoded (a path fits) */

/* The boundary parameter of a Content-Type header ("multipart/form-data;
 * boundary=..."), into out[MULTIPART_BOUNDARY_MAX + 1].  0, or -EINVAL
 * (not multipart/form-data, no boundary, or a bad one). */
int multipart_boundary(const char *content_type, char *out);

/* One part: its form field's name and filename (from Content-Disposition;
 * has_filename false when absent), decoded from quoted-string escapes, and
 * its content, a slice of the body. */
struct multipart_part {
	char name[MULTIPART_VALUE_MAX + 1];
	char filename[MULTIPART_VALUE_MAX + 1];
	bool has_filename;
	const char *data;
	size_t len;
};

/* Walk body[0, len) with boundary: fn is called with each part in order
 * (its return < 0 stops the walk, and is returned); first the whole body is
 * checked (check_only pass, no call), so that fn never sees a part of a
 * body that turns out malformed.  0, -EINVAL (malformed: why says how),
 * -E2BIG (more than max_parts). */
typedef int (*multipart_fn)(void *ctx, const struct multipart_part *p);
int multipart_parse(const char *body, size_t len, const char *boundary, size_t max_parts,
		    multipart_fn fn, void *ctx, char *why, size_t whylen);

#endif
