#include "runtime/frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void frame_reader_init(struct frame_reader *fr)
{
	memset(fr, 0, sizeof(*fr));
}

void frame_reader_release(struct frame_reader *fr)
{
	buf_release(&fr->in);
}

int frame_reader_feed(struct frame_reader *fr, const void *data, size_t len)
{
	if (fr->error[0])
		return 0;	/* nothing more is read after a violation */
	return buf_append(&fr->in, data, len);
}

static int violation(struct frame_reader *fr, const char *what)
{
	snprintf(fr->error, sizeof(fr->error), "%s", what);
	buf_release(&fr->in);
	return -EPROTO;
}

int frame_reader_next(struct frame_reader *fr, json_t **out)
{
	const unsigned char *p = (const unsigned char *)fr->in.data;
	json_error_t jerr;
	json_t *obj, *type;
	uint32_t len;

	*out = NULL;
	if (fr->error[0])
		return -EPROTO;
	if (fr->in.len < 4)
		return 0;
	len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	if (len > FRAME_MAX)
		return violation(fr, "frame longer than the 16 MiB limit");
	if (len == 0)
		return violation(fr, "empty frame");
	if (fr->in.len - 4 < len)
		return 0;
	/* jansson rejects invalid UTF-8 and NUL bytes in strings unless told
	 * otherwise: exactly what a frame must not contain. */
	obj = json_loadb(fr->in.data + 4, len, JSON_REJECT_DUPLICATES, &jerr);
	buf_consume(&fr->in, 4 + (size_t)len);
	if (!obj)
		return violation(fr, "frame is not valid JSON");
	type = json_object_get(obj, "type");
	if (!json_is_object(obj) || !json_is_string(type)) {
		json_decref(obj);
		return violation(fr, "frame is not an object with a string \"type\"");
	}
	*out = obj;
	return 1;
}

int frame_encode(const json_t *obj, struct buf *out)
{
	size_t n = json_dumpb(obj, NULL, 0, JSON_COMPACT);
	unsigned char hdr[4];
	int r;

	if (n == 0)
		return -ENOMEM;
	if (n > FRAME_MAX)
		return -E2BIG;
	hdr[0] = (unsigned char)(n >> 24);
	hdr[1] = (unsigned char)(n >> 16);
	hdr[2] = (unsigned char)(n >> 8);
	hdr[3] = (unsigned char)n;
	if ((r = buf_append(out, hdr, 4)) < 0 || (r = buf_reserve(out, n)) < 0)
		return r;
	if (json_dumpb(obj, out->data + out->len, n, JSON_COMPACT) != n)
		return -EIO;
	out->len += n;
	out->data[out->len] = '\0';
	return 0;
}
