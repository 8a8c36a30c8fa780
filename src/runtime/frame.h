/* frame — the length-prefixed JSON frames of docs/protocol.md.
 *
 * A frame_reader accumulates bytes read from a sandbox's control socket and
 * hands out whole frames as jansson objects.  Everything it reads is
 * untrusted: lengths are bounded, the JSON must be one object with a string
 * "type", and any violation is final (the reader stays failed). */
#ifndef PETRI_FRAME_H
#define PETRI_FRAME_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define FRAME_MAX (16u << 20)

struct frame_reader {
	struct buf in;
	char error[128];	/* set once a violation was seen */
};

void frame_reader_init(struct frame_reader *fr);
void frame_reader_release(struct frame_reader *fr);

/* Add bytes read from the socket.  0 or -ENOMEM. */
int frame_reader_feed(struct frame_reader *fr, const void *data, size_t len);

/* Take the next whole frame: returns 1 and a new reference in *out, 0 when
 * more bytes are needed, -EPROTO on a violation (fr->error says which). */
int frame_reader_next(struct frame_reader *fr, json_t **out);

/* Append the frame for obj to out.  0, -ENOMEM, or -E2BIG over FRAME_MAX. */
int frame_encode(const json_t *obj, struct buf *out);

#endif
