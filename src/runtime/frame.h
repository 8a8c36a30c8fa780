/* frame — the length-prefixed JSON frames of docs/protocol.md.
 *
 * A frame_reader accumulates bytes read from a sandbox's control socket and
 * hands out whole frames as jansson objects.  Everything it reads is
 * untrusted, and what it costs the daemon is bounded before anything is
 * built from it:
 *
 *  - the head of every frame must be {"type":"T","id":N (ready: no id), so
 *    type, id and the length allowed for that type are checked from the
 *    first bytes, before the rest of the frame is even buffered;
 *  - the frame must fit what the execution may still send (frame_expect:
 *    a budget of bytes and of frames, set by the caller per execution);
 *  - its JSON is scanned (util/jsoncost.h) for nesting and value count
 *    before jansson parses it: real frames are a handful of keys whose
 *    values are strings, so the tree costs about the frame's length;
 *  - its long strings are decoded by runtime/jstring.h at memory speed and
 *    only the small rest by jansson, so parsing a frame costs about a copy
 *    of it.
 *
 * Any violation is final (the reader stays failed, its buffer freed). */
#ifndef PETRI_FRAME_H
#define PETRI_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define FRAME_MAX	(16u << 20)	/* longest frame either side sends */
#define FRAME_HEAD_MAX	64		/* {"type":...,"id":... lies within this */
#define FRAME_READY_MAX	1024
#define FRAME_DONE_MAX	256
#define FRAME_DIED_MAX	256
/* The driver cuts the error's name, message and traceback to 256 B, 64 KiB
 * and 256 KiB of UTF-8; JSON escapes make a byte at most 6 ("\u001f"). */
#define FRAME_ERROR_MAX	(6u * ((256u << 0) + (64u << 10) + (256u << 10)) + 256u)
#define FRAME_NOTE_MAX	1024		/* the driver's "[further results dropped" */
#define FRAME_NODES_MAX	64		/* values in one frame's tree */
#define FRAME_DEPTH_MAX	2		/* {"data": {...}} */

/* What may come next.  id 0: start-up, only "ready"; else frames of that
 * execution (result, error, done).  "died" may come at any time.  bytes counts each frame's 4-byte
 * header too. */
struct frame_expect {
	long long id;
	size_t bytes;
	size_t frames;
	bool ready;		/* with an id: a "ready" may come among its frames */
};

struct frame_reader {
	struct buf in;
	struct frame_expect expect;
	char nonce[33];		/* marks the strings lifted out of a frame */
	char error[160];	/* set once a violation was seen */
};

/* A reader that expects the "ready" of start-up. */
void frame_reader_init(struct frame_reader *fr);
void frame_reader_release(struct frame_reader *fr);

/* From now on, what may come (replaces the budget left). */
void frame_reader_expect(struct frame_reader *fr, const struct frame_expect *ex);

/* Add bytes read from the socket.  0 or -ENOMEM. */
int frame_reader_feed(struct frame_reader *fr, const void *data, size_t len);

/* Take the next whole frame: returns 1 and a new reference in *out, 0 when
 * more bytes are needed, -EPROTO on a violation (fr->error says which). */
int frame_reader_next(struct frame_reader *fr, json_t **out);

/* Append the frame for obj to out.  0, -ENOMEM, or -E2BIG over FRAME_MAX. */
int frame_encode(const json_t *obj, struct buf *out);

#endif
