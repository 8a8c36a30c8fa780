/* JUnit XML reports, read with libxml2's SAX parser (junit.h).
 *
 * Theory of operation.  parse() feeds a report to a push parser in chunks,
 * with SAX handlers of our own and none of libxml2's: no tree is built, no
 * entity table exists, and the only declaration a document could make (its
 * DTD) stops the parse in on_doctype().  The handlers follow one <testcase>
 * at a time (struct kase): its attributes when it opens, the first
 * failure/error/skipped child and the system-out/system-err children while
 * it is open, a JSON object when it closes.  Text is kept only inside those
 * children, and only its end (struct tail); a failure's text is also read
 * line by line for a place in a source file (struct scan).  Each report is
 * parsed into a junit of its own and added to the caller's only when the
 * whole report was read. */
#include "exec/junit.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/encoding.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/xmlerror.h>

#include "util/buf.h"
#include "util/utf8.h"

#define FEED_CHUNK	(64u << 10)	/* bytes handed to the parser at a time */
#define SCAN_LINE_MAX	1024		/* longest line looked at for a place */
#define LINE_NUMBER_MAX	1000000000L
#define ELLIPSIS	"\xe2\x80\xa6"	/* U+2026: marks a clipped string */

enum status { PASSED, FAILED, ERROR, SKIPPED };

static const char *const status_names[] = {
	[PASSED] = "passed", [FAILED] = "failed", [ERROR] = "error", [SKIPPED] = "skipped",
};

/* A place in a source file, as a case reports it. */
struct loc {
	char file[JUNIT_NAME_MAX];
	long line;		/* 0: no place */
};

/* The places a failure's text names, read line by line as it arrives.
 * [0]: in /work, [1]: elsewhere (the standard library, node_modules). */
struct scan {
	char line[SCAN_LINE_MAX];
	size_t n;
	bool overlong;		/* the line is longer than line[]: not a place */
	struct loc last[2];	/* the last "path:12:" or 'File "path", line 12' */
	struct loc frame[2];	/* the first "at f (path:12:5)" outside node's own */
	struct buf first;	/* the first line that is not blank */
};

/* The end of a text: at most JUNIT_MESSAGE_MAX bytes of it are kept. */
struct tail {
	struct buf b;
	bool cut;		/* bytes before b were dropped */
};

/* The <testcase> being read. */
struct kase {
	bool open;
	unsigned depth;		/* of its element */
	enum status status;
	bool decided;		/* a failure or an error set status */
	struct buf name, classname, message;
	struct loc attr;	/* its file and line attributes */
	struct tail details, output;
	struct scan scan;
};

enum text { TEXT_NONE, TEXT_DETAILS, TEXT_OUTPUT };

struct parse {
	xmlParserCtxtPtr ctxt;
	struct junit *j;
	bool sniff;		/* stop at the root element */
	bool report;		/* the root element is a report's */
	unsigned depth;
	int refused;		/* 0, or why the handlers stopped the parse */
	char why[256];		/* ... in words */
	char xml_error[256];	/* libxml2's first error */
	int xml_code;		/* ... its code */
	struct kase c;
	enum text text;		/* what character data goes into, if anything */
	unsigned text_depth;
};

/* ---- small pieces ------------------------------------------------------ */

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void trim(const char **s, size_t *n)
{
	while (*n && blank(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && blank((*s)[*n - 1]))
		(*n)--;
}

static bool digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* The number s[0, n) spells, 0 when it is none or out of range. */
static long number(const char *s, size_t n)
{
	long v = 0;

	if (!n || n > 10)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!digit(s[i]))
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	return v <= LINE_NUMBER_MAX ? v : 0;
}

/* s[0, n) trimmed into out (reset first), at most max bytes: a longer text
 * keeps its head and ends in an ellipsis.  0 or -ENOMEM. */
static int clip_head(struct buf *out, const char *s, size_t n, size_t max)
{
	size_t keep;

	buf_reset(out);
	trim(&s, &n);
	if (n <= max)
		return utf8_sanitize(out, s, n);
	keep = utf8_cut(s, max - (sizeof(ELLIPSIS) - 1));
	if (utf8_sanitize(out, s, keep) < 0 || buf_append_str(out, ELLIPSIS) < 0)
		return -ENOMEM;
	return 0;
}

static int tail_add(struct tail *t, const char *s, size_t n)
{
	if (n > JUNIT_MESSAGE_MAX) {
		/* Only the end of this piece can be kept. */
		t->cut = true;
		buf_reset(&t->b);
		s += n - JUNIT_MESSAGE_MAX;
		n = JUNIT_MESSAGE_MAX;
	}
	if (buf_append(&t->b, s, n) < 0)
		return -ENOMEM;
	if (t->b.len > 4 * JUNIT_MESSAGE_MAX) {
		buf_consume(&t->b, t->b.len - JUNIT_MESSAGE_MAX);
		t->cut = true;
	}
	return 0;
}

/* The tail's text, trimmed, at most JUNIT_MESSAGE_MAX bytes: a longer one
 * starts with an ellipsis. */
static int tail_text(struct tail *t, struct buf *out)
{
	const char *s = t->b.data ? t->b.data : "";
	size_t n = t->b.len, max = JUNIT_MESSAGE_MAX - (sizeof(ELLIPSIS) - 1);
	bool cut = t->cut;

	buf_reset(out);
	trim(&s, &n);
	if (n > max) {
		s += n - max;
		n = max;
		cut = true;
	}
	/* Start on a character, not inside one. */
	while (n && ((unsigned char)*s & 0xC0) == 0x80) {
		s++;
		n--;
	}
	trim(&s, &n);
	if (!n)
		return 0;
	if (cut && buf_append_str(out, ELLIPSIS) < 0)
		return -ENOMEM;
	return utf8_sanitize(out, s, n);
}

static void tail_reset(struct tail *t)
{
	buf_reset(&t->b);
	t->cut = false;
}

/* ---- places in a failure's text ---------------------------------------- */

/* A path as a case reports it: "file://" dropped, relative to /work when
 * under it; line 0: none.  False when it cannot be one.  *in_work: in /work
 * (a relative path is taken to be) and not in a dependency. */
static bool place(const char *s, size_t n, long line, struct loc *out, bool *in_work)
{
	if (n >= 7 && !memcmp(s, "file://", 7)) {
		s += 7;
		n -= 7;
	}
	*in_work = true;
	if (n > 6 && !memcmp(s, "/work/", 6)) {
		s += 6;
		n -= 6;
	} else if (n && *s == '/') {
		*in_work = false;
	}
	if (!n || n >= sizeof(out->file))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	if (memmem(s, n, "node_modules/", 13) || memmem(s, n, "site-packages/", 14))
		*in_work = false;
	memcpy(out->file, s, n);
	out->file[n] = '\0';
	out->line = line;
	return true;
}

/* "path:12: ..." or "path:12:5: ..." (pytest, compilers, go test): the
 * first word of the line, its path with a dot in it. */
static bool colon_place(const char *s, size_t n, struct loc *out, bool *in_work)
{
	size_t word = 0;
	long line;

	while (word < n && !blank(s[word]))
		word++;
	for (size_t i = 1; i + 2 < word; i++) {
		size_t d = i + 1;

		if (s[i] != ':' || !digit(s[d]))
			continue;
		while (d < word && digit(s[d]))
			d++;
		if (d == word || s[d] != ':')
			continue;
		line = number(s + i + 1, d - i - 1);
		if (!line || !memchr(s, '.', i) || (i >= 5 && !memcmp(s, "node:", 5)))
			return false;
		return place(s, i, line, out, in_work);
	}
	return false;
}

/* 'File "path", line 12, in f' (a Python traceback). */
static bool python_place(const char *s, size_t n, struct loc *out, bool *in_work)
{
	const char *end = s + n, *path = s + 6, *q, *d;
	long line;

	if (n < 6 || memcmp(s, "File \"", 6))
		return false;
	q = memchr(path, '"', (size_t)(end - path));
	if (!q || end - q < 9 || memcmp(q, "\", line ", 8))
		return false;
	for (d = q + 8; d < end && digit(*d); d++)
		;
	line = number(q + 8, (size_t)(d - (q + 8)));
	return line && place(path, (size_t)(q - path), line, out, in_work);
}

/* "at f (path:12:5)" or "at path:12:5" (a JavaScript stack), not in
 * node's own code. */
static bool frame_place(const char *s, size_t n, struct loc *out, bool *in_work)
{
	const char *open;
	size_t colon, end;
	long line;

	if (n < 4 || memcmp(s, "at ", 3))
		return false;
	s += 3;
	n -= 3;
	if (s[n - 1] == ')' && (open = memrchr(s, '(', n))) {
		n -= (size_t)(open + 1 - s) + 1;
		s = open + 1;
	}
	/* path:line:column, or path:line */
	for (end = n; end && digit(s[end - 1]); end--)
		;
	if (end == n || !end || s[end - 1] != ':')
		return false;
	colon = end - 1;
	line = number(s + end, n - end);
	for (end = colon; end && digit(s[end - 1]); end--)
		;
	if (end < colon && end && s[end - 1] == ':') {
		line = number(s + end, colon - end);
		colon = end - 1;
	}
	if (!colon || !line || *s == '<' || (colon >= 5 && !memcmp(s, "node:", 5)) ||
	    (colon >= 9 && !memcmp(s, "internal/", 9)))
		return false;
	return place(s, colon, line, out, in_work);
}

/* One line of a failure's text, without its newline; cut: only its head
 * (too long to be a place). */
static int scan_line(struct scan *sc, const char *s, size_t n, bool cut)
{
	struct loc l;
	bool in_work;

	trim(&s, &n);
	if (!n)
		return 0;
	if (!sc->first.len && clip_head(&sc->first, s, n, JUNIT_MESSAGE_MAX) < 0)
		return -ENOMEM;
	if (cut)
		return 0;
	if (colon_place(s, n, &l, &in_work) || python_place(s, n, &l, &in_work))
		sc->last[!in_work] = l;
	else if (frame_place(s, n, &l, &in_work) && !sc->frame[!in_work].line)
		sc->frame[!in_work] = l;
	return 0;
}

static int scan_add(struct scan *sc, const char *s, size_t n)
{
	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t piece = nl ? (size_t)(nl - s) : n;
		size_t room = sizeof(sc->line) - sc->n;

		if (!sc->overlong && piece > room) {
			memcpy(sc->line + sc->n, s, room);
			sc->n += room;
			if (scan_line(sc, sc->line, sc->n, true) < 0)
				return -ENOMEM;
			sc->overlong = true;
		} else if (!sc->overlong) {
			memcpy(sc->line + sc->n, s, piece);
			sc->n += piece;
		}
		if (!nl)
			break;
		if (!sc->overlong && scan_line(sc, sc->line, sc->n, false) < 0)
			return -ENOMEM;
		sc->n = 0;
		sc->overlong = false;
		s = nl + 1;
		n -= piece + 1;
	}
	return 0;
}

static int scan_end(struct scan *sc)
{
	int r = sc->overlong ? 0 : scan_line(sc, sc->line, sc->n, false);

	sc->n = 0;
	sc->overlong = false;
	return r;
}

static void scan_reset(struct scan *sc)
{
	buf_reset(&sc->first);
	memset(sc->last, 0, sizeof(sc->last));
	memset(sc->frame, 0, sizeof(sc->frame));
	sc->n = 0;
	sc->overlong = false;
}

/* ---- the cases kept ---------------------------------------------------- */

int junit_init(struct junit *j)
{
	memset(j, 0, sizeof(*j));
	j->cases = json_array();
	return j->cases ? 0 : -ENOMEM;
}

void junit_release(struct junit *j)
{
	json_decref(j->cases);
	memset(j, 0, sizeof(*j));
}

static size_t case_text(const json_t *c)
{
	const char *k;
	size_t n = 0;
	json_t *v;

	json_object_foreach((json_t *)c, k, v)
		n += json_string_length(v);
	return n;
}

static bool case_other(const json_t *c)
{
	const char *s = json_string_value(json_object_get(c, "status"));

	return s && (!strcmp(s, "passed") || !strcmp(s, "skipped"));
}

static bool room(const struct junit *j, size_t bytes)
{
	return json_array_size(j->cases) < JUNIT_CASES_MAX && j->text + bytes <= JUNIT_TEXT_MAX;
}

/* Whether a case of bytes bytes of text (other: passed or skipped) is
 * kept: a failure or an error makes room by dropping the passed and
 * skipped cases kept last; one that does not fit marks j truncated. */
static bool make_room(struct junit *j, size_t bytes, bool other)
{
	while (!room(j, bytes) && !other && j->kept_other) {
		for (size_t i = json_array_size(j->cases); i-- > 0;) {
			json_t *o = json_array_get(j->cases, i);

			if (case_other(o)) {
				j->text -= case_text(o);
				j->kept_other--;
				json_array_remove(j->cases, i);
				break;
			}
		}
		j->truncated = true;
	}
	if (!room(j, bytes))
		j->truncated = true;
	return room(j, bytes);
}

/* Keep c (a reference taken) if make_room() says so.  0 or -ENOMEM. */
static int keep_case(struct junit *j, json_t *c)
{
	size_t bytes = case_text(c);
	bool other = case_other(c);

	if (!make_room(j, bytes, other))
		return 0;
	if (json_array_append(j->cases, c))
		return -ENOMEM;
	j->text += bytes;
	j->kept_other += other;
	return 0;
}

/* Add what one report held to j.  0 or -ENOMEM. */
static int merge(struct junit *j, const struct junit *one)
{
	json_t *c;
	size_t i;

	j->passed += one->passed;
	j->failed += one->failed;
	j->errors += one->errors;
	j->skipped += one->skipped;
	j->truncated = j->truncated || one->truncated;
	json_array_foreach(one->cases, i, c)
		if (keep_case(j, c) < 0)
			return -ENOMEM;
	return 0;
}

json_t *junit_to_json(const struct junit *j)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:O, s:b}",
			 "passed", (json_int_t)j->passed, "failed", (json_int_t)j->failed,
			 "errors", (json_int_t)j->errors, "skipped", (json_int_t)j->skipped,
			 "cases", j->cases, "truncated", j->truncated);
}

/* ---- one <testcase> ---------------------------------------------------- */

static void case_reset(struct kase *c)
{
	c->open = false;
	c->status = PASSED;
	c->decided = false;
	buf_reset(&c->name);
	buf_reset(&c->classname);
	buf_reset(&c->message);
	memset(&c->attr, 0, sizeof(c->attr));
	tail_reset(&c->details);
	tail_reset(&c->output);
	scan_reset(&c->scan);
}

static void case_release(struct kase *c)
{
	buf_release(&c->name);
	buf_release(&c->classname);
	buf_release(&c->message);
	buf_release(&c->details.b);
	buf_release(&c->output.b);
	buf_release(&c->scan.first);
}

/* Where the case failed, or where it is. */
static const struct loc *case_place(const struct kase *c)
{
	const struct loc *order[] = {
		&c->scan.last[0], &c->scan.frame[0], &c->attr, &c->scan.last[1], &c->scan.frame[1],
	};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (order[i]->file[0] && (c->status != PASSED || order[i] == &c->attr))
			return order[i];
	return NULL;
}

static int set_text(json_t *o, const char *key, const struct buf *b)
{
	return json_object_set_new(o, key, json_stringn(b->data ? b->data : "", b->len)) ?
	       -ENOMEM : 0;
}

/* The case as JSON, counted and kept in j.  0 or -ENOMEM. */
static int case_end(struct junit *j, struct kase *c)
{
	const struct loc *l = case_place(c);
	struct buf details = BUF_INIT, output = BUF_INIT;
	const struct buf *message = c->message.len ? &c->message : &c->scan.first;
	json_t *o = NULL;
	int r = -ENOMEM;

	switch (c->status) {
	case PASSED: j->passed++; break;
	case FAILED: j->failed++; break;
	case ERROR: j->errors++; break;
	case SKIPPED: j->skipped++; break;
	}
	if (tail_text(&c->details, &details) < 0 || tail_text(&c->output, &output) < 0)
		goto out;
	/* Counted; past the bound, not built only to be dropped (a report of
	 * 100 000 passed cases costs what reading it does). */
	r = 0;
	if (!make_room(j, c->name.len + c->classname.len + strlen(status_names[c->status]) +
			  message->len + details.len + (l ? strlen(l->file) : 0) + output.len,
		       c->status == PASSED || c->status == SKIPPED))
		goto out;
	r = -ENOMEM;
	if (!(o = json_object()) || set_text(o, "name", &c->name) < 0 ||
	    set_text(o, "classname", &c->classname) < 0 ||
	    json_object_set_new(o, "status", json_string(status_names[c->status])) ||
	    set_text(o, "message", message) < 0 || set_text(o, "details", &details) < 0 ||
	    json_object_set_new(o, "file", l ? json_string(l->file) : json_null()) ||
	    json_object_set_new(o, "line", l && l->line ? json_integer(l->line) : json_null()) ||
	    set_text(o, "output", &output) < 0)
		goto out;
	r = keep_case(j, o);
out:
	json_decref(o);
	buf_release(&details);
	buf_release(&output);
	case_reset(c);
	return r;
}

/* ---- the SAX handlers -------------------------------------------------- */

static void stop(struct parse *p, int why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void stop(struct parse *p, int why, const char *fmt, ...)
{
	va_list ap;

	if (!p->refused) {
		p->refused = why;
		va_start(ap, fmt);
		vsnprintf(p->why, sizeof(p->why), fmt, ap);
		va_end(ap);
	}
	xmlStopParser(p->ctxt);
}

/* An attribute's value among SAX2's (localname, prefix, URI, value, end)
 * quintuples; NULL when absent. */
static const char *attr(const xmlChar **attrs, int n, const char *name, size_t *len)
{
	for (int i = 0; i < n; i++) {
		const xmlChar **a = attrs + 5 * i;

		if (!strcmp((const char *)a[0], name)) {
			*len = (size_t)(a[4] - a[3]);
			return (const char *)a[3];
		}
	}
	*len = 0;
	return NULL;
}

static int attr_head(struct buf *out, const xmlChar **attrs, int n, const char *name,
		     size_t max)
{
	size_t len;
	const char *v = attr(attrs, n, name, &len);

	return clip_head(out, v ? v : "", len, max);
}

static int case_begin(struct parse *p, const xmlChar **attrs, int n)
{
	struct kase *c = &p->c;
	size_t flen, llen;
	const char *file = attr(attrs, n, "file", &flen), *line = attr(attrs, n, "line", &llen);
	bool in_work;

	case_reset(c);
	c->open = true;
	c->depth = p->depth;
	if (file) {
		trim(&file, &flen);
		if (!place(file, flen, line ? number(line, llen) : 0, &c->attr, &in_work))
			memset(&c->attr, 0, sizeof(c->attr));
	}
	return attr_head(&c->name, attrs, n, "name", JUNIT_NAME_MAX) < 0 ||
	       attr_head(&c->classname, attrs, n, "classname", JUNIT_NAME_MAX) < 0 ? -ENOMEM : 0;
}

/* <failure>, <error> or <skipped> in the case. */
static int outcome(struct parse *p, enum status st, const xmlChar **attrs, int n)
{
	struct kase *c = &p->c;

	if (c->decided || (st == SKIPPED && c->status != PASSED))
		return 0;
	c->status = st;
	c->decided = st != SKIPPED;
	tail_reset(&c->details);
	scan_reset(&c->scan);
	p->text = TEXT_DETAILS;
	p->text_depth = p->depth;
	return attr_head(&c->message, attrs, n, "message", JUNIT_MESSAGE_MAX);
}

static void on_start(void *ctx, const xmlChar *localname, const xmlChar *prefix,
		     const xmlChar *uri, int nb_namespaces, const xmlChar **namespaces,
		     int nb_attributes, int nb_defaulted, const xmlChar **attrs)
{
	struct parse *p = ctx;
	const char *name = (const char *)localname;
	int r = 0;

	(void)prefix, (void)uri, (void)nb_namespaces, (void)namespaces, (void)nb_defaulted;
	if (p->refused)
		return;
	if (++p->depth > JUNIT_DEPTH_MAX) {
		stop(p, -EINVAL, "elements nested deeper than %d", JUNIT_DEPTH_MAX);
		return;
	}
	if (p->depth == 1) {
		if (strcmp(name, "testsuites") && strcmp(name, "testsuite"))
			stop(p, -ENOMSG, "its root element is <%.64s>, not <testsuites> or "
			     "<testsuite>", name);
		p->report = !p->refused;
		if (p->sniff)
			xmlStopParser(p->ctxt);
		return;
	}
	if (!p->c.open) {
		if (!strcmp(name, "testcase"))
			r = case_begin(p, attrs, nb_attributes);
	} else if (p->depth == p->c.depth + 1 && p->text == TEXT_NONE) {
		if (!strcmp(name, "failure"))
			r = outcome(p, FAILED, attrs, nb_attributes);
		else if (!strcmp(name, "error"))
			r = outcome(p, ERROR, attrs, nb_attributes);
		else if (!strcmp(name, "skipped"))
			r = outcome(p, SKIPPED, attrs, nb_attributes);
		else if (!strcmp(name, "system-out") || !strcmp(name, "system-err")) {
			p->text = TEXT_OUTPUT;
			p->text_depth = p->depth;
			if (p->c.output.b.len)
				r = tail_add(&p->c.output, "\n", 1);
		}
	}
	if (r < 0)
		stop(p, r, "out of memory");
}

static void on_end(void *ctx, const xmlChar *localname, const xmlChar *prefix,
		   const xmlChar *uri)
{
	struct parse *p = ctx;
	int r = 0;

	(void)localname, (void)prefix, (void)uri;
	if (p->refused)
		return;
	if (p->text != TEXT_NONE && p->depth == p->text_depth) {
		if (p->text == TEXT_DETAILS)
			r = scan_end(&p->c.scan);
		p->text = TEXT_NONE;
	}
	if (r == 0 && p->c.open && p->depth == p->c.depth)
		r = case_end(p->j, &p->c);
	if (r < 0)
		stop(p, r, "out of memory");
	p->depth--;
}

static void on_text(void *ctx, const xmlChar *ch, int len)
{
	struct parse *p = ctx;
	struct kase *c = &p->c;
	int r;

	if (p->refused || p->text == TEXT_NONE || len <= 0)
		return;
	if (p->text == TEXT_OUTPUT)
		r = tail_add(&c->output, (const char *)ch, (size_t)len);
	else if ((r = tail_add(&c->details, (const char *)ch, (size_t)len)) == 0)
		r = scan_add(&c->scan, (const char *)ch, (size_t)len);
	if (r < 0)
		stop(p, r, "out of memory");
}

/* <!DOCTYPE ...>: the only way to declare an entity, or to name a file or
 * a URL for the parser to load.  No report has one. */
static void on_doctype(void *ctx, const xmlChar *name, const xmlChar *external_id,
		       const xmlChar *system_id)
{
	struct parse *p = ctx;
	bool report = !strcmp((const char *)name, "testsuites") ||
		      !strcmp((const char *)name, "testsuite");

	(void)external_id, (void)system_id;
	stop(p, report ? -EINVAL : -ENOMSG, "it has a document type declaration (<!DOCTYPE>), "
	     "which petri does not read");
}

static void on_error(void *ctx, xmlErrorPtr e)
{
	struct parse *p = ctx;

	if (!e || e->level < XML_ERR_ERROR || p->xml_error[0] || e->code == XML_ERR_USER_STOP)
		return;
	p->xml_code = e->code;
	snprintf(p->xml_error, sizeof(p->xml_error), "line %d: %s", e->line,
		 e->message ? e->message : "not well-formed");
	for (char *q = p->xml_error; *q; q++)
		if (*q == '\n')
			*q = ' ';
}

/* libxml2 reports some errors (of encodings) without a parser context, to
 * the thread's handlers: these keep them off the daemon's stderr too. */
static void on_error_silent(void *ctx, xmlErrorPtr e)
{
	(void)ctx, (void)e;
}

static void on_generic_silent(void *ctx, const char *fmt, ...)
{
	(void)ctx, (void)fmt;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The encodings read: those libxml2 decodes itself.  Any other would have
 * libxml2 load one of glibc's iconv modules, and a sandbox would choose
 * which (and feed it): code the daemon has no reason to run for it. */
static const char *const latin1_names[] = {
	"ISO-8859-1", "ISO_8859-1", "ISO8859-1", "LATIN1", "ISO-LATIN-1", "L1", NULL
};
static const char *const utf8_names[] = { "UTF-8", "UTF8", "US-ASCII", "ASCII", NULL };

static bool named(const char *s, size_t n, const char *const *names)
{
	for (size_t i = 0; names[i]; i++)
		if (strlen(names[i]) == n && !strncasecmp(s, names[i], n))
			return true;
	return false;
}

/* The value of the XML declaration's encoding="...", if data (ASCII
 * compatible) starts with a declaration that has one: *n its length. */
static const char *declared_encoding(const char *data, size_t len, size_t *n)
{
	const char *end, *k, *q;

	if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3)) {
		data += 3;
		len -= 3;
	}
	if (len < 5 || memcmp(data, "<?xml", 5) ||
	    !(end = memmem(data, len < 512 ? len : 512, "?>", 2)) ||
	    !(k = memmem(data, (size_t)(end - data), "encoding", 8)))
		return NULL;
	for (k += 8; k < end && blank(*k); k++)
		;
	if (k == end || *k++ != '=')
		return NULL;
	while (k < end && blank(*k))
		k++;
	if (k == end || (*k != '"' && *k != '\'') || !(q = memchr(k + 1, *k, (size_t)(end - k - 1))))
		return NULL;
	*n = (size_t)(q - k - 1);
	return k + 1;
}

/* Whether data is in an encoding read, and which to switch to (NONE: the
 * parser's own choice, UTF-8 or UTF-16 from its first bytes). */
static bool encoding_read(const char *data, size_t len, xmlCharEncoding *force,
			  char *why, size_t whylen)
{
	xmlCharEncoding detected = len >= 4 ? xmlDetectCharEncoding((const xmlChar *)data, 4) :
					      XML_CHAR_ENCODING_NONE;
	const char *name;
	size_t n;

	*force = XML_CHAR_ENCODING_NONE;
	if (detected == XML_CHAR_ENCODING_UTF16LE || detected == XML_CHAR_ENCODING_UTF16BE)
		return true;	/* a declaration cannot change it: XML_PARSE_IGNORE_ENC */
	if (detected != XML_CHAR_ENCODING_NONE && detected != XML_CHAR_ENCODING_UTF8) {
		snprintf(why, whylen, "it is in an encoding petri does not read (UCS-4 or "
			 "EBCDIC): reports are read in UTF-8, UTF-16 or ISO-8859-1");
		return false;
	}
	if (!(name = declared_encoding(data, len, &n)) || named(name, n, utf8_names))
		return true;
	if (named(name, n, latin1_names)) {
		*force = XML_CHAR_ENCODING_8859_1;
		return true;
	}
	snprintf(why, whylen, "its encoding '%.*s' is not one petri reads: reports are read "
		 "in UTF-8, UTF-16 or ISO-8859-1", (int)(n < 40 ? n : 40), name);
	return false;
}

/* The document as code units: bytes (UTF-8 and ISO-8859-1, where every
 * byte below 0x80 is that character) or UTF-16's, for the markup's ASCII. */
struct units {
	const unsigned char *d;
	size_t n;
	int width;		/* 1 or 2 */
	bool big_endian;
};

static unsigned unit(const struct units *u, size_t i)
{
	if (u->width == 1)
		return u->d[i];
	return u->big_endian ? (unsigned)u->d[2 * i] << 8 | u->d[2 * i + 1]
			     : u->d[2 * i] | (unsigned)u->d[2 * i + 1] << 8;
}

static bool units_at(const struct units *u, size_t i, const char *s)
{
	for (; *s; s++, i++)
		if (i >= u->n || unit(u, i) != (unsigned char)*s)
			return false;
	return true;
}

/* Past the first s at or after i (u->n when there is none). */
static size_t units_past(const struct units *u, size_t i, const char *s)
{
	for (; i < u->n; i++)
		if (units_at(u, i, s))
			return i + strlen(s);
	return u->n;
}

/* Where the first start tag of data with more than JUNIT_ATTRS_MAX
 * attributes begins (its '=' outside quoted values; comments, CDATA
 * sections and processing instructions skipped), len when none has, in
 * one pass: libxml2 2.9 compares each attribute of a tag with every one
 * before it, before any handler of ours runs. */
static size_t attrs_excess(const char *data, size_t len)
{
	xmlCharEncoding enc = len >= 4 ? xmlDetectCharEncoding((const xmlChar *)data, 4) :
					 XML_CHAR_ENCODING_NONE;
	struct units u = { .d = (const unsigned char *)data, .width = 1 };

	if (enc == XML_CHAR_ENCODING_UTF16LE || enc == XML_CHAR_ENCODING_UTF16BE) {
		u.width = 2;
		u.big_endian = enc == XML_CHAR_ENCODING_UTF16BE;
	}
	u.n = len / (size_t)u.width;
	for (size_t i = 0; i < u.n;) {
		unsigned quote = 0, attrs = 0;

		if (unit(&u, i) != '<') {
			i++;
		} else if (units_at(&u, i, "<!--")) {
			i = units_past(&u, i + 4, "-->");
		} else if (units_at(&u, i, "<![CDATA[")) {
			i = units_past(&u, i + 9, "]]>");
		} else if (units_at(&u, i, "<?")) {
			i = units_past(&u, i + 2, "?>");
		} else {
			size_t tag = i;

			for (i++; i < u.n; i++) {
				unsigned c = unit(&u, i);

				if (quote) {
					quote = c == quote ? 0 : quote;
				} else if (c == '"' || c == '\'') {
					quote = c;
				} else if (c == '=' && ++attrs > JUNIT_ATTRS_MAX) {
					return tag * (size_t)u.width;
				} else if (c == '>' || c == '<') {
					break;	/* a '<' is the next tag's (malformed) */
				}
			}
		}
	}
	return len;
}

/* err[errlen] = s, valid UTF-8, cut on a character boundary. */
static void set_err(char *err, size_t errlen, const char *s)
{
	struct buf b = BUF_INIT;
	size_t n = strlen(s), keep;

	if (!err || !errlen)
		return;
	trim(&s, &n);
	if (utf8_sanitize(&b, s, n) < 0) {
		snprintf(err, errlen, "out of memory");
		return;
	}
	keep = b.len < errlen ? b.len : utf8_cut(b.data, errlen - 1);
	if (keep)
		memcpy(err, b.data, keep);
	err[keep] = '\0';
	buf_release(&b);
}

static int parse(struct junit *j, const char *data, size_t len, bool sniff, char *err,
		 size_t errlen)
{
	xmlStructuredErrorFunc old_serror = xmlStructuredError;
	void *old_sctx = xmlStructuredErrorContext;
	xmlGenericErrorFunc old_generic = xmlGenericError;
	void *old_gctx = xmlGenericErrorContext;
	struct parse *p = calloc(1, sizeof(*p));
	xmlCharEncoding force;
	xmlSAXHandler sax;
	size_t off;
	int r = -ENOMEM;

	if (err && errlen)
		err[0] = '\0';
	if (!p)
		return -ENOMEM;
	if (len > JUNIT_FILE_MAX) {
		set_err(err, errlen, "larger than the 4 MiB petri reads of a report");
		free(p);
		return -EINVAL;
	}
	pthread_once(&init_once, xmlInitParser);
	if (!encoding_read(data, len, &force, p->why, sizeof(p->why))) {
		set_err(err, errlen, p->why);
		free(p);
		return -ENOMSG;
	}
	if ((off = attrs_excess(data, len)) < len) {
		/* Whether it is a report, from what comes before that tag (a
		 * root that has too many attributes is none). */
		r = !sniff && junit_sniff(data, off < 4096 ? off : 4096) ? -EINVAL : -ENOMSG;
		snprintf(p->why, sizeof(p->why), "an element has more than %d attributes",
			 JUNIT_ATTRS_MAX);
		set_err(err, errlen, p->why);
		free(p);
		return r;
	}
	p->j = j;
	p->sniff = sniff;
	case_reset(&p->c);

	/* Our handlers only: no tree, no entity table, no external subset. */
	memset(&sax, 0, sizeof(sax));
	sax.initialized = XML_SAX2_MAGIC;
	sax.startElementNs = on_start;
	sax.endElementNs = on_end;
	sax.characters = on_text;
	sax.cdataBlock = on_text;
	sax.internalSubset = on_doctype;
	sax.serror = on_error;
	xmlSetStructuredErrorFunc(NULL, on_error_silent);
	xmlSetGenericErrorFunc(NULL, on_generic_silent);

	/* The first bytes tell the encoding (a byte order mark). */
	off = len < 4 ? len : 4;
	p->ctxt = xmlCreatePushParserCtxt(&sax, p, data, (int)off, NULL);
	if (!p->ctxt)
		goto out;
	/* Not XML_PARSE_NOENT (no entity is substituted), XML_PARSE_DTDLOAD,
	 * XML_PARSE_XINCLUDE nor XML_PARSE_HUGE (libxml2's own limits on
	 * names, text and depth stay).  The declared encoding was read
	 * above, not by libxml2. */
	xmlCtxtUseOptions(p->ctxt, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
			  XML_PARSE_IGNORE_ENC);
	if (force != XML_CHAR_ENCODING_NONE)
		xmlSwitchEncoding(p->ctxt, force);
	for (;;) {
		size_t n = len - off < FEED_CHUNK ? len - off : FEED_CHUNK;
		bool last = off + n == len;
		int rc = xmlParseChunk(p->ctxt, n ? data + off : NULL, (int)n, last);

		off += n;
		if (rc || p->refused || last)
			break;
	}
	if (sniff)
		r = p->report ? 0 : -ENOMSG;
	else if (p->refused)
		r = p->refused;
	else if (!p->ctxt->wellFormed)
		r = p->report ? -EINVAL : -ENOMSG;
	else
		r = p->report ? 0 : -ENOMSG;
	/* libxml2's push parser calls a report cut short "extra content". */
	if (r == -EINVAL && !p->refused && p->depth > 0 && p->xml_code == XML_ERR_DOCUMENT_END)
		snprintf(p->xml_error, sizeof(p->xml_error), "it ends inside an element (was it "
			 "cut short?)");
	if (r < 0)
		set_err(err, errlen, p->refused ? p->why :
				     p->xml_error[0] ? p->xml_error : "not well-formed XML");
out:
	if (p->ctxt)
		xmlFreeParserCtxt(p->ctxt);
	xmlSetStructuredErrorFunc(old_sctx, old_serror);
	xmlSetGenericErrorFunc(old_gctx, old_generic);
	xmlResetLastError();
	case_release(&p->c);
	free(p);
	return r;
}

int junit_parse(struct junit *j, const char *data, size_t len, char *err, size_t errlen)
{
	struct junit one;
	int r;

	if (junit_init(&one) < 0)
		return -ENOMEM;
	r = parse(&one, data, len, false, err, errlen);
	if (r == 0)
		r = merge(j, &one);
	junit_release(&one);
	return r;
}

bool junit_sniff(const char *data, size_t len)
{
	struct junit one;
	bool yes;

	if (junit_init(&one) < 0)
		return false;
	yes = parse(&one, data, len < JUNIT_FILE_MAX ? len : JUNIT_FILE_MAX, true, NULL, 0) == 0;
	junit_release(&one);
	return yes;
}
