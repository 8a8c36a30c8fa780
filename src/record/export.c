/* export — the execution record as a notebook, an HTML page or JSON Lines
 * (export.h says how it pages through the record and what it holds). */
#include "record/export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/buf.h"
#include "util/timefmt.h"

#define LANGS_MAX 16		/* languages named in a notebook's metadata */

enum stage { HEAD, BODY, TAIL, DONE };

struct export {
	struct record *rec;
	enum export_format fmt;
	char *session;			/* NULL: the one-shot runs */
	double since, until;
	/* The pages, newest first: each is the EXPORT_PAGE entries before
	 * befores[i]; next: how many are left to read (oldest first). */
	int64_t *befores;
	size_t npages, next;
	json_t *page;			/* oldest first */
	size_t page_at;
	int64_t last_seq;		/* the last entry written */
	size_t count, written;
	enum stage stage;
	struct buf out;			/* one piece, as written */
	json_t *langs;			/* the languages of the entries written */
	bool (*gone)(void *arg);	/* export_query's, during export_begin() */
	void *gone_arg;
};

static const char *const format_names[] = { "ipynb", "html", "jsonl" };
static const char *const content_types[] = {
	"application/x-ipynb+json", "text/html; charset=utf-8", "application/jsonl",
};

bool export_format_from_name(const char *name, enum export_format *out)
{
	for (size_t i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++)
		if (name && !strcmp(name, format_names[i])) {
			*out = (enum export_format)i;
			return true;
		}
	return false;
}

const char *export_format_name(enum export_format f)
{
	return format_names[f];
}

const char *export_content_type(enum export_format f)
{
	return content_types[f];
}

/* ---- reading the record ------------------------------------------------ */

/* The EXPORT_PAGE entries before `before` (0: the newest), oldest first,
 * or NULL (*err: -ENOMEM, -EIO, -ECANCELED). */
static json_t *fetch(struct export *x, int64_t before, bool *truncated, int *err)
{
	struct record_query q = {
		.scope = x->session ? RECORD_SESSION : RECORD_ONESHOTS, .session = x->session,
		.limit = EXPORT_PAGE, .before = before, .gone = x->gone, .gone_arg = x->gone_arg,
	};
	struct buf text = BUF_INIT;
	json_t *list = NULL, *page;
	size_t i;

	*err = record_list_text(x->rec, &q, &text, truncated);
	if (*err == 0 && !(list = json_loadb(text.data, text.len, 0, NULL)))
		*err = -ENOMEM;
	buf_release(&text);
	if (!list || x->session)	/* a session's pages are oldest first already */
		return list;
	page = json_array();
	for (i = json_array_size(list); page && i > 0; i--)
		if (json_array_append(page, json_array_get(list, i - 1))) {
			json_decref(page);
			page = NULL;
		}
	json_decref(list);
	if (!page)
		*err = -ENOMEM;
	return page;
}

static int64_t seq_of(const json_t *e)
{
	return (int64_t)json_integer_value(json_object_get(e, "seq"));
}

static bool in_range(const struct export *x, const json_t *e)
{
	double t;

	if (!x->since && !x->until)
		return true;
	if (!timefmt_parse(json_string_value(json_object_get(e, "started_at")), &t))
		return false;
	return (!x->since || t >= x->since) && (!x->until || t < x->until);
}

/* Walk the record back, newest page first, noting where each page ends. */
static int find_pages(struct export *x)
{
	int64_t before = 0;
	size_t cap = 0;

	for (;;) {
		bool truncated;
		int err;
		json_t *page = fetch(x, before, &truncated, &err), *e;
		size_t n = json_array_size(page), i;

		if (!page)
			return err;
		if (n == 0) {
			json_decref(page);
			return 0;
		}
		if (x->npages == cap) {
			int64_t *more = realloc(x->befores, (cap = cap ? 2 * cap : 16) *
							    sizeof(*more));

			if (!more) {
				json_decref(page);
				return -ENOMEM;
			}
			x->befores = more;
		}
		/* The first page ends after the newest entry: what is added
		 * from now on is not part of this export. */
		x->befores[x->npages++] = before ? before : seq_of(json_array_get(page, n - 1)) + 1;
		json_array_foreach(page, i, e)
			x->count += in_range(x, e);
		before = seq_of(json_array_get(page, 0));
		json_decref(page);
		if ((n < EXPORT_PAGE && !truncated) || before <= 1)
			return 0;
	}
}

int export_begin(struct record *rec, const struct export_query *q, enum export_format f,
		 struct export **out)
{
	struct export *x = calloc(1, sizeof(*x));
	int r;

	*out = NULL;
	if (!x)
		return -ENOMEM;
	x->rec = rec;
	x->fmt = f;
	x->since = q->since;
	x->until = q->until;
	x->langs = json_array();
	if (!x->langs || (q->session && !(x->session = strdup(q->session)))) {
		export_free(x);
		return -ENOMEM;
	}
	x->gone = q->gone;
	x->gone_arg = q->gone_arg;
	r = find_pages(x);
	x->gone = NULL;		/* export_step() asks nobody: its caller stops it */
	x->gone_arg = NULL;
	if (r < 0) {
		export_free(x);
		return r;
	}
	x->next = x->npages;
	*out = x;
	return 0;
}

size_t export_count(const struct export *x)
{
	return x->count;
}

void export_free(struct export *x)
{
	if (!x)
		return;
	json_decref(x->page);
	json_decref(x->langs);
	buf_release(&x->out);
	free(x->befores);
	free(x->session);
	free(x);
}

/* The next entry to write, or NULL at the end (*err: -ENOMEM or 0). */
static json_t *next_entry(struct export *x, int *err)
{
	*err = 0;
	for (;;) {
		json_t *e;

		while (!x->page || x->page_at >= json_array_size(x->page)) {
			bool truncated;

			json_decref(x->page);
			x->page = NULL;
			if (x->next == 0)
				return NULL;
			x->page = fetch(x, x->befores[--x->next], &truncated, err);
			x->page_at = 0;
			if (!x->page)
				return NULL;
		}
		e = json_array_get(x->page, x->page_at++);
		/* Pages overlap when entries were evicted between the reads. */
		if (seq_of(e) > x->last_seq && in_range(x, e)) {
			x->last_seq = seq_of(e);
			return e;
		}
	}
}

/* ---- what the formats share ------------------------------------------- */

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* A media type as a bundle's key: "type/subtype" of token characters. */
static bool mime_like(const char *k)
{
	const char *slash = strchr(k, '/');

	if (!slash || slash == k || !slash[1] || strlen(k) > 127)
		return false;
	for (const char *p = k; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && !strchr("/.+-_", *p))
			return false;
	return strchr(slash + 1, '/') == NULL;
}

static bool json_mime(const char *k)
{
	size_t n = strlen(k);

	return !strcmp(k, "application/json") || (n > 5 && !strcmp(k + n - 5, "+json"));
}

/* An image that travels as base64 (not SVG, which is text). */
static bool base64_image(const char *k)
{
	return !strncmp(k, "image/", 6) && strcmp(k, "image/svg+xml") != 0;
}

static bool valid_image(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       base64_valid(json_string_value(v), json_string_length(v));
}

/* Remember the entry's language (the first one names the notebook's kernel). */
static void note_language(struct export *x, const char *lang)
{
	size_t i;
	json_t *v;

	if (!lang || json_array_size(x->langs) >= LANGS_MAX)
		return;
	json_array_foreach(x->langs, i, v)
		if (!strcmp(json_string_value(v), lang))
			return;
	json_array_append_new(x->langs, json_string(lang));
}

/* ---- ipynb ---------------------------------------------------------------
 *
 * nbformat 4.5: cells with ids.  The record does not say which result was
 * the value of the last expression, so every result is display_data. */

static const struct kernel {
	const char *language, *name, *display, *info_name, *ext, *mime;
} kernels[] = {
	{ "python", "python3", "Python 3 (ipykernel)", "python", ".py", "text/x-python" },
	{ "javascript", "javascript", "JavaScript (Node.js)", "javascript", ".js",
	  "application/javascript" },
	{ "typescript", "tslab", "TypeScript", "typescript", ".ts", "text/typescript" },
	{ "bash", "bash", "Bash", "bash", ".sh", "text/x-sh" },
	{ "r", "ir", "R", "R", ".r", "text/x-r-source" },
	{ "c", "c", "C", "c", ".c", "text/x-csrc" },
};

static json_t *kernel_metadata(const char *lang, json_t **info)
{
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
		const struct kernel *k = &kernels[i];

		if (strcmp(lang, k->language))
			continue;
		*info = json_pack("{s:s, s:s, s:s}", "name", k->info_name, "file_extension", k->ext,
				  "mimetype", k->mime);
		return json_pack("{s:s, s:s, s:s}", "name", k->name, "display_name", k->display,
				 "language", k->language);
	}
	*info = json_pack("{s:s}", "name", lang);
	return json_pack("{s:s, s:s, s:s}", "name", lang, "display_name", lang, "language", lang);
}

/* s split after each newline, the newlines dropped: a traceback's lines. */
static json_t *lines_of(const char *s)
{
	json_t *a = json_array();

	for (const char *p = s; a && p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		json_array_append_new(a, json_stringn(p, n));
		p = nl ? nl + 1 : NULL;
	}
	return a;
}

static void add_stream(json_t *outputs, const json_t *result, const char *name)
{
	const json_t *v = json_object_get(result, name);

	if (json_string_length(v))
		json_array_append_new(outputs, json_pack("{s:s, s:s, s:O}", "output_type", "stream",
							 "name", name, "text", v));
}

/* A bundle's data as nbformat takes it: media types only, text as
 * strings, JSON types as JSON, images only when they are base64.  The
 * record may hold a note in place of an image: into *dropped ({type:
 * note}, new reference, or NULL), and as the text when there is none. */
static json_t *bundle_data(const json_t *bundle, json_t **dropped)
{
	json_t *data = json_object(), *v;
	const char *k, *note = NULL;

	*dropped = NULL;
	json_object_foreach((json_t *)bundle, k, v) {
		if (!data || !mime_like(k))
			continue;
		if (json_mime(k)) {
			json_object_set(data, k, v);
		} else if (base64_image(k) && !valid_image(v)) {
			if (!json_is_string(v))
				continue;
			note = json_string_value(v);
			if (!*dropped)
				*dropped = json_object();
			json_object_set(*dropped, k, v);
		} else if (json_is_string(v)) {
			json_object_set(data, k, v);
		}
	}
	if (data && note && !json_object_get(data, "text/plain"))
		json_object_set_new(data, "text/plain", json_string(note));
	return data;
}

static json_t *cell_outputs(const json_t *entry)
{
	const json_t *result = json_object_get(entry, "result"), *error, *bundle;
	const char *status = str(entry, "status");
	json_t *outputs = json_array();
	size_t i;

	if (!outputs)
		return NULL;
	add_stream(outputs, result, "stdout");
	add_stream(outputs, result, "stderr");
	json_array_foreach(json_object_get(result, "results"), i, bundle) {
		json_t *dropped, *data = bundle_data(bundle, &dropped);

		if (json_object_size(data))
			json_array_append_new(outputs, json_pack("{s:s, s:O, s:o}", "output_type",
								 "display_data", "data", data,
								 "metadata", dropped ?
								 json_pack("{s:{s:O}}", "petri",
									   "not_recorded", dropped) :
								 json_object()));
		json_decref(data);
		json_decref(dropped);
	}
	error = json_object_get(result, "error");
	if (json_is_object(error)) {
		const char *name = str(error, "name"), *msg = str(error, "message");

		json_array_append_new(outputs, json_pack("{s:s, s:s, s:s, s:o}", "output_type",
							 "error", "ename", name ? name : "Error",
							 "evalue", msg ? msg : "", "traceback",
							 lines_of(str(error, "traceback"))));
	} else if (status && strcmp(status, "ok") && strcmp(status, "error")) {
		/* A limit ended it (timeout, oom, killed): say so where
		 * Jupyter shows failures. */
		const char *reason = str(result, "reason");

		json_array_append_new(outputs, json_pack("{s:s, s:s, s:s, s:[]}", "output_type",
							 "error", "ename", status, "evalue",
							 reason ? reason : "", "traceback"));
	}
	return outputs;
}

/* What the record says of the execution, besides code and outputs. */
static json_t *cell_petri(const json_t *entry)
{
	static const char *const from_entry[] = {
		"seq", "session", "language", "started_at", "status", "code_truncated", "limits",
		"engine", "node",
	};
	static const char *const from_result[] = {
		"exit_code", "signal", "duration_ms", "cpu_ms", "memory_peak_bytes", "reason",
		"stdout_truncated", "stderr_truncated", "record_truncated", "files",
	};
	const json_t *result = json_object_get(entry, "result"), *v;
	json_t *p = json_object();

	for (size_t i = 0; p && i < sizeof(from_entry) / sizeof(from_entry[0]); i++)
		if ((v = json_object_get(entry, from_entry[i])))
			json_object_set(p, from_entry[i], (json_t *)v);
	for (size_t i = 0; p && i < sizeof(from_result) / sizeof(from_result[0]); i++)
		if ((v = json_object_get(result, from_result[i])))
			json_object_set(p, from_result[i], (json_t *)v);
	return p;
}

static int ipynb_entry(struct export *x, const json_t *e)
{
	char id[32];
	const char *code = str(e, "code");
	json_t *cell;
	char *text;
	int r;

	snprintf(id, sizeof(id), "petri-%lld", (long long)seq_of(e));
	cell = json_pack("{s:s, s:I, s:s, s:{s:o}, s:o, s:s}", "cell_type", "code",
			 "execution_count", (json_int_t)x->written, "id", id, "metadata", "petri",
			 cell_petri(e), "outputs", cell_outputs(e), "source", code ? code : "");
	text = cell ? json_dumps(cell, JSON_INDENT(1)) : NULL;
	json_decref(cell);
	if (!text)
		return -ENOMEM;
	r = buf_append_str(&x->out, x->written > 1 ? ",\n" : "");
	if (!r)
		r = buf_append_str(&x->out, text);
	free(text);
	return r;
}

static json_t *time_or_null(double t)
{
	char when[TIMEFMT_LEN];

	return t ? json_string(timefmt_rfc3339(t, when)) : json_null();
}

static int ipynb_tail(struct export *x)
{
	const char *lang = json_string_value(json_array_get(x->langs, 0));
	json_t *info, *kernel = kernel_metadata(lang ? lang : "python", &info), *meta;
	char *text;
	int r;

	meta = json_pack("{s:o, s:o, s:{s:o, s:s, s:o, s:o, s:I, s:O}}", "kernelspec", kernel,
			 "language_info", info, "petri", "session",
			 x->session ? json_string(x->session) : json_null(), "scope",
			 x->session ? "session" : "oneshots", "since", time_or_null(x->since),
			 "until", time_or_null(x->until), "executions", (json_int_t)x->written,
			 "languages", x->langs);
	text = meta ? json_dumps(meta, JSON_INDENT(1)) : NULL;
	json_decref(meta);
	if (!text)
		return -ENOMEM;
	r = buf_appendf(&x->out, "%s],\n \"metadata\": %s,\n \"nbformat\": 4,\n"
			" \"nbformat_minor\": 5\n}\n", x->written ? "\n" : "", text);
	free(text);
	return r;
}

/* ---- html ----------------------------------------------------------------
 *
 * Every string of the record is escaped; the page's markup is the only
 * markup.  An HTML result is the srcdoc of an iframe with an empty sandbox
 * attribute (no scripts, an opaque origin), and the page's policy, which a
 * srcdoc frame inherits, forbids scripts anyway. */

#define HTML_CSP "default-src 'none'; img-src data:; style-src 'unsafe-inline'; " \
		 "frame-src 'self'; base-uri 'none'; form-action 'none'"

/* A format: title, title, subtitle (escaped). */
#define HTML_HEAD \
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" \
	"<meta http-equiv=\"Content-Security-Policy\" content=\"" HTML_CSP "\">\n" \
	"<meta name=\"referrer\" content=\"no-referrer\">\n" \
	"<title>%s</title>\n<style>\n" \
	"body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;" \
	"color:#222}\n" \
	"section{border:1px solid #ccc;border-radius:6px;margin:1.5em 0;padding:.5em 1em}\n" \
	"h2{font-size:1.05em;margin:.4em 0}\n" \
	"h3{font-size:.85em;margin:.8em 0 .2em;color:#555}\n" \
	"pre{background:#f6f6f6;padding:.5em;overflow:auto;white-space:pre-wrap;" \
	"word-break:break-word}\n" \
	"pre.code{background:#eef3fb}\n pre.stderr{background:#fff4e5}\n" \
	".error pre,.error p{background:#fdecec}\n" \
	".meta{color:#555;font-size:.85em;margin:.2em 0}\n" \
	".note{color:#8a5a00;font-size:.85em}\n" \
	".st{font-weight:bold;padding:0 .4em;border-radius:4px;background:#ddd}\n" \
	".st-ok .st{background:#d4f5d4}\n .st-error .st{background:#f8d0d0}\n" \
	".st-timeout .st,.st-oom .st,.st-killed .st{background:#f8e2b0}\n" \
	"iframe{width:100%%;height:24em;border:1px solid #ddd;resize:vertical}\n" \
	"img{max-width:100%%}\n" \
	"</style>\n</head>\n<body>\n<h1>%s</h1>\n<p class=\"meta\">%s</p>\n"

/* Append s[0, n) escaped for text and for a quoted attribute. */
static int esc_n(struct buf *b, const char *s, size_t n)
{
	size_t from = 0;
	int r = 0;

	for (size_t i = 0; i < n && !r; i++) {
		const char *rep;

		switch (s[i]) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		case '\0': rep = "\xef\xbf\xbd"; break;	/* U+FFFD */
		default: continue;
		}
		r = buf_append(b, s + from, i - from);
		if (!r)
			r = buf_append_str(b, rep);
		from = i + 1;
	}
	return r ? r : buf_append(b, s + from, n - from);
}

static int esc(struct buf *b, const char *s)
{
	return esc_n(b, s ? s : "", s ? strlen(s) : 0);
}

static int esc_json_string(struct buf *b, const json_t *v)
{
	return esc_n(b, json_string_value(v) ? json_string_value(v) : "", json_string_length(v));
}

/* JSON (indented), escaped. */
static int esc_json(struct buf *b, const json_t *v, size_t flags)
{
	char *text = json_dumps(v, flags | JSON_ENCODE_ANY);
	int r = text ? esc(b, text) : -ENOMEM;

	free(text);
	return r;
}

/* <h3>title</h3><pre class=...>text</pre> when text is not empty. */
static int html_pre(struct buf *b, const char *title, const char *cls, const json_t *text,
		    bool truncated)
{
	int r;

	if (!json_string_length(text))
		return 0;
	r = buf_appendf(b, "<h3>%s</h3>\n<pre class=\"%s\">", title, cls);
	if (!r)
		r = esc_json_string(b, text);
	if (!r)
		r = buf_append_str(b, "</pre>\n");
	if (!r && truncated)
		r = buf_appendf(b, "<p class=\"note\">%s was cut at its limit: the program "
				"wrote more</p>\n", title);
	return r;
}

/* The representations a result is shown as, the richest first. */
static const char *const shown[] = {
	"text/html", "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml",
	"application/json", "text/markdown", "text/latex", "text/plain",
};

static int html_image(struct buf *b, const char *mime, const json_t *v)
{
	char *enc = NULL;
	int r;

	if (!strcmp(mime, "image/svg+xml")) {
		/* Text: as base64, an <img> that can run nothing. */
		enc = base64_encode(json_string_value(v), json_string_length(v), NULL);
		if (!enc)
			return -ENOMEM;
	}
	r = buf_appendf(b, "<img alt=\"%s result\" src=\"data:%s;base64,", mime, mime);
	if (!r)
		r = enc ? esc(b, enc) : esc_json_string(b, v);
	if (!r)
		r = buf_append_str(b, "\">\n");
	free(enc);
	return r;
}

static int html_bundle(struct buf *b, const json_t *bundle)
{
	const char *mime = NULL, *k;
	const json_t *v = NULL, *plain = json_object_get(bundle, "text/plain");
	int r = buf_append_str(b, "<div class=\"result\">\n");

	for (size_t i = 0; !mime && i < sizeof(shown) / sizeof(shown[0]); i++) {
		v = json_object_get(bundle, shown[i]);
		if (!v || (!json_is_string(v) && !json_mime(shown[i])) ||
		    (base64_image(shown[i]) && !valid_image(v)))
			continue;
		mime = shown[i];
	}
	if (r) {
		return r;
	} else if (!mime) {
		r = buf_append_str(b, "<p class=\"note\">a result in");
		json_object_foreach((json_t *)bundle, k, v)
			if (!r && !(r = buf_append_str(b, " ")))
				r = esc(b, k);
		if (!r)
			r = buf_append_str(b, "</p>\n");
	} else if (!strcmp(mime, "text/html")) {
		r = buf_append_str(b, "<iframe sandbox=\"\" title=\"text/html result\" srcdoc=\"");
		if (!r)
			r = esc_json_string(b, v);
		if (!r)
			r = buf_append_str(b, "\"></iframe>\n");
	} else if (!strncmp(mime, "image/", 6)) {
		r = html_image(b, mime, v);
	} else {
		r = buf_append_str(b, "<pre>");
		if (!r)
			r = json_is_string(v) ? esc_json_string(b, v) : esc_json(b, v, JSON_INDENT(2));
		if (!r)
			r = buf_append_str(b, "</pre>\n");
	}
	if (!r && mime && strcmp(mime, "text/plain") && json_string_length(plain)) {
		r = buf_append_str(b, "<details><summary>text/plain</summary><pre>");
		if (!r)
			r = esc_json_string(b, plain);
		if (!r)
			r = buf_append_str(b, "</pre></details>\n");
	}
	/* The note the record keeps in place of an image it did not keep. */
	json_object_foreach((json_t *)bundle, k, v) {
		if (r || !base64_image(k) || !json_is_string(v) || valid_image(v))
			continue;
		r = buf_append_str(b, "<p class=\"note\">");
		if (!r)
			r = esc(b, k);
		if (!r)
			r = buf_append_str(b, ": ");
		if (!r)
			r = esc_json_string(b, v);
		if (!r)
			r = buf_append_str(b, "</p>\n");
	}
	return r ? r : buf_append_str(b, "</div>\n");
}

static int html_error(struct buf *b, const json_t *error)
{
	int r = buf_append_str(b, "<div class=\"error\">\n<h3>error</h3>\n<p><b>");

	if (!r)
		r = esc(b, str(error, "name"));
	if (!r)
		r = buf_append_str(b, "</b>: ");
	if (!r)
		r = esc(b, str(error, "message"));
	if (!r)
		r = buf_append_str(b, "</p>\n");
	if (!r && json_string_length(json_object_get(error, "traceback"))) {
		r = buf_append_str(b, "<pre>");
		if (!r)
			r = esc_json_string(b, json_object_get(error, "traceback"));
		if (!r)
			r = buf_append_str(b, "</pre>\n");
	}
	return r ? r : buf_append_str(b, "</div>\n");
}

/* "12.3 MiB" */
static void human_bytes(double n, char out[32])
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;

	while (n >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		n /= 1024;
		u++;
	}
	snprintf(out, 32, u ? "%.1f %s" : "%.0f %s", n, units[u]);
}

static int html_entry(struct export *x, const json_t *e)
{
	const json_t *res = json_object_get(e, "result"), *bundle;
	const json_t *exit_code = json_object_get(res, "exit_code");
	const json_t *sig = json_object_get(res, "signal");
	struct buf *b = &x->out;
	char mem[32];
	size_t i;
	int r;

	human_bytes((double)json_integer_value(json_object_get(res, "memory_peak_bytes")), mem);
	r = buf_appendf(b, "<section class=\"st-");
	if (!r)
		r = esc(b, str(e, "status"));
	if (!r)
		r = buf_appendf(b, "\" id=\"seq-%lld\">\n<h2>#%zu <span class=\"st\">",
				(long long)seq_of(e), x->written);
	if (!r)
		r = esc(b, str(e, "status"));
	if (!r)
		r = buf_append_str(b, "</span> ");
	if (!r)
		r = esc(b, str(e, "language"));
	if (!r)
		r = buf_appendf(b, "</h2>\n<p class=\"meta\">seq %lld &middot; started ",
				(long long)seq_of(e));
	if (!r)
		r = esc(b, str(e, "started_at"));
	if (!r)
		r = buf_appendf(b, " &middot; %lld ms wall, %lld ms CPU &middot; %s peak memory",
				(long long)json_integer_value(json_object_get(res, "duration_ms")),
				(long long)json_integer_value(json_object_get(res, "cpu_ms")), mem);
	if (!r && json_is_integer(exit_code))
		r = buf_appendf(b, " &middot; exit code %lld",
				(long long)json_integer_value(exit_code));
	if (!r && json_is_integer(sig))
		r = buf_appendf(b, " &middot; signal %lld", (long long)json_integer_value(sig));
	if (!r && str(e, "engine"))
		r = buf_append_str(b, " &middot; petri ");
	if (!r && str(e, "engine"))
		r = esc(b, str(e, "engine"));
	if (!r && str(e, "node"))
		r = buf_append_str(b, " on node ");
	if (!r && str(e, "node"))
		r = esc(b, str(e, "node"));
	if (!r)
		r = buf_append_str(b, "</p>\n");
	if (!r && json_is_object(json_object_get(e, "limits"))) {
		r = buf_append_str(b, "<p class=\"meta\">limits: <code>");
		if (!r)
			r = esc_json(b, json_object_get(e, "limits"), JSON_COMPACT);
		if (!r)
			r = buf_append_str(b, "</code></p>\n");
	}
	if (!r)
		r = buf_append_str(b, "<pre class=\"code\">");
	if (!r)
		r = esc_json_string(b, json_object_get(e, "code"));
	if (!r)
		r = buf_append_str(b, "</pre>\n");
	if (!r && json_is_true(json_object_get(e, "code_truncated")))
		r = buf_append_str(b, "<p class=\"note\">the record keeps only the head of this "
				   "code</p>\n");
	if (!r)
		r = html_pre(b, "stdout", "stdout", json_object_get(res, "stdout"),
			     json_is_true(json_object_get(res, "stdout_truncated")));
	if (!r)
		r = html_pre(b, "stderr", "stderr", json_object_get(res, "stderr"),
			     json_is_true(json_object_get(res, "stderr_truncated")));
	json_array_foreach(json_object_get(res, "results"), i, bundle)
		if (!r && json_is_object(bundle))
			r = html_bundle(b, bundle);
	if (!r && json_is_object(json_object_get(res, "error")))
		r = html_error(b, json_object_get(res, "error"));
	if (!r && str(res, "reason")) {
		r = buf_append_str(b, "<p class=\"note\">");
		if (!r)
			r = esc(b, str(res, "reason"));
		if (!r)
			r = buf_append_str(b, "</p>\n");
	}
	if (!r && json_is_true(json_object_get(res, "record_truncated")))
		r = buf_append_str(b, "<p class=\"note\">the record cut this result to fit its "
				   "bound</p>\n");
	return r ? r : buf_append_str(b, "</section>\n");
}

static int html_begin(struct export *x)
{
	struct buf title = BUF_INIT, sub = BUF_INIT;
	char since[TIMEFMT_LEN], until[TIMEFMT_LEN];
	int r;

	if (x->session) {
		r = buf_append_str(&title, "petri: session ");
		if (!r)
			r = esc(&title, x->session);
		if (!r)
			r = buf_append_str(&sub, "what the session ran, oldest first");
	} else {
		r = buf_append_str(&title, "petri: one-shot runs");
		if (!r)
			r = buf_appendf(&sub, "one-shot runs, oldest first, started from %s until %s",
					x->since ? timefmt_rfc3339(x->since, since) : "the first",
					x->until ? timefmt_rfc3339(x->until, until) : "the last");
	}
	if (!r)
		r = buf_appendf(&x->out, HTML_HEAD, title.data, title.data, sub.data);
	buf_release(&title);
	buf_release(&sub);
	return r;
}

/* ---- the steps ---------------------------------------------------------- */

static int write_entry(struct export *x, const json_t *e)
{
	char *text;
	int r;

	note_language(x, str(e, "language"));
	switch (x->fmt) {
	case EXPORT_IPYNB:
		return ipynb_entry(x, e);
	case EXPORT_HTML:
		return html_entry(x, e);
	case EXPORT_JSONL:
		break;
	}
	if (!(text = json_dumps(e, JSON_COMPACT)))
		return -ENOMEM;
	r = buf_appendf(&x->out, "%s\n", text);
	free(text);
	return r;
}

static int write_head(struct export *x)
{
	switch (x->fmt) {
	case EXPORT_IPYNB:
		return buf_append_str(&x->out, "{\n \"cells\": [\n");
	case EXPORT_HTML:
		return html_begin(x);
	case EXPORT_JSONL:
		break;
	}
	return 0;
}

static int write_tail(struct export *x)
{
	switch (x->fmt) {
	case EXPORT_IPYNB:
		return ipynb_tail(x);
	case EXPORT_HTML:
		return buf_appendf(&x->out, "<p class=\"meta\">%zu execution%s.</p>\n</body>\n"
				   "</html>\n", x->written, x->written == 1 ? "" : "s");
	case EXPORT_JSONL:
		break;
	}
	return 0;
}

int export_step(struct export *x, export_sink sink, void *arg)
{
	json_t *e;
	int r = 0;

	buf_reset(&x->out);
	switch (x->stage) {
	case HEAD:
		r = write_head(x);
		x->stage = BODY;
		break;
	case BODY:
		if ((e = next_entry(x, &r))) {
			x->written++;
			r = write_entry(x, e);
			break;
		}
		if (!r) {
			r = write_tail(x);
			x->stage = TAIL;
		}
		break;
	case TAIL:
	case DONE:
		x->stage = DONE;
		return 0;
	}
	if (!r && x->out.len)
		r = sink(arg, x->out.data, x->out.len);
	if (r < 0) {
		x->stage = DONE;
		return r;
	}
	return x->stage == TAIL ? (x->stage = DONE, 0) : 1;
}

static int file_sink(void *arg, const char *data, size_t len)
{
	return fwrite(data, 1, len, arg) == len ? 0 : -EIO;
}

int export_to_file(struct export *x, FILE *out)
{
	int r;

	while ((r = export_step(x, file_sink, out)) > 0)
		;
	if (!r && fflush(out) != 0)
		r = -EIO;
	return r;
}
