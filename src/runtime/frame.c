#include "runtime/frame.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/random.h>

#include "runtime/jstring.h"
#include "util/jsoncost.h"

/* A buffer grown for one big frame is given back once the frame is taken:
 * an idle session keeps at most this much. */
#define FRAME_KEEP (256u << 10)
/* What one read may add after the end of the frame being read. */
#define FRAME_READ_SLACK (64u << 10)
/* Strings longer than this are decoded by jstring.c, not jansson. */
#define FRAME_LIFT_MIN 512

void frame_reader_init(struct frame_reader *fr)
{
	unsigned char raw[16] = { 0 };

	memset(fr, 0, sizeof(*fr));
	/* Unknown to the sandbox, so no string it sends can pass for one
	 * that was lifted out of its frame (lifted_load). */
	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		memset(raw, 0x5a, sizeof(raw));
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(fr->nonce + 2 * i, 3, "%02x", raw[i]);
	fr->expect = (struct frame_expect){ .id = 0, .bytes = 4 + FRAME_READY_MAX, .frames = 1 };
}

void frame_reader_release(struct frame_reader *fr)
{
	buf_release(&fr->in);
}

void frame_reader_expect(struct frame_reader *fr, const struct frame_expect *ex)
{
	fr->expect = *ex;
}

int frame_reader_feed(struct frame_reader *fr, const void *data, size_t len)
{
	if (fr->error[0])
		return 0;	/* nothing more is read after a violation */
	return buf_append(&fr->in, data, len);
}

__attribute__((format(printf, 2, 3)))
static int violation(struct frame_reader *fr, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fr->error, sizeof(fr->error), fmt, ap);
	va_end(ap);
	buf_release(&fr->in);
	return -EPROTO;
}

/* Capacity for exactly need bytes (and buf's NUL): buf_reserve would
 * double it. */
static int make_room(struct buf *b, size_t need)
{
	char *p;

	if (b->cap >= need + 1)
		return 0;
	if (!(p = realloc(b->data, need + 1)))
		return -ENOMEM;
	b->data = p;
	b->cap = need + 1;
	return 0;
}

/* ---- the head: {"type":"T","id":N ------------------------------------ */

struct head {
	char type[16];
	bool has_id;
	long long id;
};

static void skip_space(const char *p, size_t n, size_t *i)
{
	while (*i < n && (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\n' || p[*i] == '\r'))
		(*i)++;
}

/* 1: lit is next (after white space), 0: p ends first, -1: something else. */
static int literal(const char *p, size_t n, size_t *i, const char *lit)
{
	skip_space(p, n, i);
	for (; *lit; lit++, (*i)++) {
		if (*i >= n)
			return 0;
		if (p[*i] != *lit)
			return -1;
	}
	return 1;
}

/* Parse the head of p[0, n).  1 with *h filled, 0 when more bytes are
 * needed, -1 when the frame does not begin as one. */
static int parse_head(const char *p, size_t n, struct head *h)
{
	size_t i = 0, t = 0;
	int r;

	memset(h, 0, sizeof(*h));
	if ((r = literal(p, n, &i, "{")) <= 0 || (r = literal(p, n, &i, "\"type\"")) <= 0 ||
	    (r = literal(p, n, &i, ":")) <= 0 || (r = literal(p, n, &i, "\"")) <= 0)
		return r;
	for (;; i++, t++) {
		if (i >= n)
			return 0;
		if (p[i] == '"')
			break;
		if (p[i] < 'a' || p[i] > 'z' || t + 1 >= sizeof(h->type))
			return -1;
		h->type[t] = p[i];
	}
	i++;
	skip_space(p, n, &i);
	if (i >= n)
		return 0;
	if (p[i] == '}')
		return 1;	/* {"type":"ready"}: no id */
	if (p[i++] != ',')
		return -1;
	if ((r = literal(p, n, &i, "\"id\"")) <= 0)
		return r == 0 ? 0 : 1;	/* < 0: another member comes second, no id */
	if ((r = literal(p, n, &i, ":")) <= 0)
		return r;
	skip_space(p, n, &i);
	if (i < n && p[i] == '-')
		return -1;	/* ids are positive */
	for (t = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++, t++) {
		if (t >= 18)
			return -1;
		h->id = h->id * 10 + (p[i] - '0');
	}
	if (i >= n)
		return 0;
	if (t == 0 || p[i] == '.' || p[i] == 'e' || p[i] == 'E')
		return -1;	/* not an integer: the whole frame is refused */
	h->has_id = true;
	return 1;
}

/* The longest frame of this type that may come now, or 0 with fr->error
 * set if none may. */
static size_t allowed(struct frame_reader *fr, const struct head *h)
{
	const struct frame_expect *ex = &fr->expect;
	size_t max;

	/* The keeper's word that an interpreter ended: at any time, for the
	 * execution it was given last (runtime/box.c checks which). */
	if (strcmp(h->type, "died") == 0)
		return FRAME_DIED_MAX;
	if (ex->id == 0) {
		if (strcmp(h->type, "ready") != 0) {
			violation(fr, "\"%s\" frame before \"ready\"", h->type);
			return 0;
		}
		return FRAME_READY_MAX;
	}
	if (ex->ready && strcmp(h->type, "ready") == 0)
		return FRAME_READY_MAX;
	if (strcmp(h->type, "result") == 0) {
		max = FRAME_MAX;
	} else if (strcmp(h->type, "error") == 0) {
		max = FRAME_ERROR_MAX;
	} else if (strcmp(h->type, "done") == 0) {
		max = FRAME_DONE_MAX;
	} else {
		violation(fr, strcmp(h->type, "ready") == 0 ? "a second \"ready\" frame" :
			  "unknown frame type");
		return 0;
	}
	if (!h->has_id || h->id != ex->id) {
		violation(fr, "frame for another execution");
		return 0;
	}
	return max;
}

/* ---- the body: long strings lifted out, the rest to jansson ---------- */

struct lifted {
	size_t off, len;	/* the token, quotes included */
	json_t *value;
};

static void lifted_free(struct lifted *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(l[i].value);
}

/* The lifted string that marker s stands for, taken out of l; or NULL. */
static json_t *take_lifted(const char *s, const char *nonce, struct lifted *l, size_t n)
{
	size_t nlen = strlen(nonce);
	unsigned long i;
	json_t *v;

	if (!s || strncmp(s, nonce, nlen))
		return NULL;
	i = strtoul(s + nlen, NULL, 10);
	if (i >= n || !l[i].value)
		return NULL;
	v = l[i].value;
	l[i].value = NULL;
	return v;
}

/* Put the lifted strings back where their markers are in j (depth 2 at
 * most, as jsoncost allowed).  Returns how many were put back. */
static size_t put_back(json_t *j, const char *nonce, struct lifted *l, size_t n)
{
	size_t done = 0, i;
	const char *k;
	json_t *v, *s;

	if (json_is_object(j)) {
		json_object_foreach(j, k, v) {
			if ((s = take_lifted(json_string_value(v), nonce, l, n))) {
				json_object_set_new(j, k, s);
				done++;
			} else {
				done += put_back(v, nonce, l, n);
			}
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v) {
			if ((s = take_lifted(json_string_value(v), nonce, l, n))) {
				json_array_set_new(j, i, s);
				done++;
			} else {
				done += put_back(v, nonce, l, n);
			}
		}
	}
	return done;
}

static bool json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Parse body[0, len) as jansson would, at the cost of a copy for its long
 * strings: each is decoded here and a marker (the reader's nonce and its
 * index) stands in its place for jansson.  NULL when it is not valid JSON
 * (*why says so). */
static json_t *lifted_load(struct frame_reader *fr, const char *body, size_t len,
			   const char **why)
{
	struct lifted l[FRAME_NODES_MAX];
	struct buf rest = BUF_INIT;
	size_t n = 0, from = 0;
	json_t *obj = NULL;

	*why = "frame is not valid JSON";
	for (size_t i = 0; i < len;) {
		size_t tl, j;
		long dl;
		char *dec;

		if (body[i] != '"') {
			i++;
			continue;
		}
		if (!(tl = jstring_token_len(body + i, len - i)))
			goto out;	/* unterminated: jansson's error */
		for (j = i + tl; j < len && json_space(body[j]); j++)
			;
		/* Keys stay jansson's (a long one is no real MIME type, and the
		 * frame CPU rate of box.c bounds what parsing it costs). */
		if (tl < FRAME_LIFT_MIN || (j < len && body[j] == ':')) {
			i += tl;
			continue;
		}
		if (n == FRAME_NODES_MAX || !(dec = malloc(tl)))
			goto out;
		dl = jstring_decode(body + i, tl, dec);
		l[n].value = dl < 0 ? NULL : json_stringn_nocheck(dec, (size_t)dl);
		free(dec);
		if (!l[n].value)
			goto out;
		l[n].off = i;
		l[n].len = tl;
		if (buf_append(&rest, body + from, i - from) < 0 ||
		    buf_appendf(&rest, "\"%s%zu\"", fr->nonce, n) < 0) {
			n++;
			goto out;
		}
		n++;
		i += tl;
		from = i;
	}
	if (buf_append(&rest, body + from, len - from) < 0)
		goto out;
	obj = json_loadb(rest.data ? rest.data : "", rest.len, JSON_REJECT_DUPLICATES, NULL);
	if (obj && put_back(obj, fr->nonce, l, n) != n) {
		json_decref(obj);	/* a marker where no string value was */
		obj = NULL;
	}
out:
	lifted_free(l, n);
	buf_release(&rest);
	return obj;
}

int frame_reader_next(struct frame_reader *fr, json_t **out)
{
	static const struct jsoncost_limits cost = { FRAME_NODES_MAX, FRAME_DEPTH_MAX };
	const unsigned char *p = (const unsigned char *)fr->in.data;
	const char *body = fr->in.data + 4;
	struct head h;
	const char *why;
	json_t *obj;
	size_t max, have;
	uint32_t len;
	bool died;
	int r;

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
	/* The head is looked for in the first FRAME_HEAD_MAX bytes only, so
	 * that the answer does not depend on how much was read. */
	have = fr->in.len - 4 < len ? fr->in.len - 4 : len;
	r = parse_head(body, have < FRAME_HEAD_MAX ? have : FRAME_HEAD_MAX, &h);
	if (r == 0 && have < len && have < FRAME_HEAD_MAX)
		return 0;
	if (r <= 0)
		return violation(fr, "frame does not begin with {\"type\": ..., \"id\": ...}");
	if (!(max = allowed(fr, &h)))
		return -EPROTO;
	if (len > max)
		return violation(fr, "%s frame of %u bytes (at most %zu)", h.type, len, max);
	/* "died" is outside the execution's budget (box.c allows one per
	 * interpreter, and each must be followed by a "ready"). */
	died = strcmp(h.type, "died") == 0;
	if (!died && fr->expect.frames == 0)
		return violation(fr, "more frames than an execution may send");
	if (!died && 4 + (size_t)len > fr->expect.bytes)
		return violation(fr, "%s frame of %u bytes: more than the execution may still "
				 "send (%zu bytes)", h.type, len, fr->expect.bytes);
	if (fr->in.len - 4 < len) {
		/* Room for exactly this frame (and a read's worth after it),
		 * not the doubling growth would give. */
		if (make_room(&fr->in, 4 + (size_t)len + FRAME_READ_SLACK) < 0)
			return -ENOMEM;
		return 0;
	}
	if (!jsoncost_within(body, len, &cost, NULL))
		return violation(fr, "frame nests deeper or holds more values than a %s frame",
				 h.type);
	/* jansson (and jstring.c the same) rejects invalid UTF-8 and NUL bytes
	 * in strings: exactly what a frame must not contain. */
	obj = lifted_load(fr, body, len, &why);
	buf_consume(&fr->in, 4 + (size_t)len);
	if (!died) {
		fr->expect.bytes -= 4 + (size_t)len;
		fr->expect.frames--;
	}
	if (fr->in.cap > FRAME_KEEP && fr->in.len < FRAME_KEEP) {
		struct buf rest = BUF_INIT;

		if (buf_append(&rest, fr->in.data, fr->in.len) == 0) {
			buf_release(&fr->in);
			fr->in = rest;
		}
	}
	if (!obj)
		return violation(fr, "%s", why);
	if (!json_is_object(obj) || !json_is_string(json_object_get(obj, "type"))) {
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
