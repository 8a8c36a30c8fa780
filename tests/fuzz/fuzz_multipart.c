/* multipart/form-data bodies from E2B clients (POST /files on envd): the
 * whole body through multipart_parse, whose parts must lie inside it, in
 * order, without overlapping; and its first line as a Content-Type for
 * multipart_boundary. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct span {
	const char *body, *next;
	size_t len;
};

static int check(void *ctx, const struct multipart_part *p)
{
	struct span *s = ctx;

	assert(p->data >= s->next && p->data + p->len <= s->body + s->len);
	assert(strlen(p->name) <= MULTIPART_VALUE_MAX);
	assert(strlen(p->filename) <= MULTIPART_VALUE_MAX);
	s->next = p->data + p->len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), boundary[MULTIPART_BOUNDARY_MAX + 1], why[160];
	const char *body = (const char *)data;
	struct span s = { .body = body, .next = body, .len = size };
	size_t line;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	line = strcspn(copy, "\n");
	copy[line] = '\0';
	if (multipart_boundary(copy, boundary) == 0)
		assert(strlen(boundary) > 0 && strlen(boundary) <= MULTIPART_BOUNDARY_MAX);
	multipart_parse(body, size, "b", 100, check, &s, why, sizeof(why));
	multipart_parse(body, size, "----formdata-undici-0123", 100, check,
			&(struct span){ body, body, size }, why, sizeof(why));
	free(copy);
	return 0;
}
