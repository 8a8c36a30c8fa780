#include "mcp/render.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "exec/junit.h"
#include "util/utf8.h"

int render_clip(struct buf *out, const char *s, size_t len, size_t max)
{
	size_t head, tail;

	if (len <= max)
		return utf8_sanitize(out, s, len);
	head = utf8_cut(s, max / 2);
	tail = len - max / 2;
	/* Start the tail on a character, not inside one. */
	while (tail < len && ((unsigned char)s[tail] & 0xC0) == 0x80)
		tail++;
	if (utf8_sanitize(out, s, head) < 0 ||
	    buf_appendf(out, "\n[... %zu bytes left out here, of %zu in all ...]\n",
			tail - head, len) < 0 ||
	    utf8_sanitize(out, s + tail, len - tail) < 0)
		return -ENOMEM;
	return 0;
}

json_t *render_text_item(const char *s, size_t len)
{
	struct buf clean = BUF_INIT;
	json_t *item = NULL;

	if (utf8_sanitize(&clean, s, len) == 0)
		item = json_pack("{s:s, s:s%}", "type", "text", "text",
				 clean.data ? clean.data : "", clean.len);
	buf_release(&clean);
	return item;
}

/* "42 s", "12 min", "3.5 h": how long a process has run. */
static int age(struct buf *b, double s)
{
	if (s < 120)
		return buf_appendf(b, "%6.0f s  ", s);
	if (s < 7200)
		return buf_appendf(b, "%6.0f min", s / 60);
	return buf_appendf(b, "%6.1f h  ", s / 3600);
}

/* s on one line: control characters as '?'. */
static int one_line(struct buf *b, const char *s)
{
	for (size_t n; *s; s += n) {
		n = strcspn(s, "\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10"
			    "\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f");
		if (buf_append(b, s, n) < 0 || (s[n] && buf_append(b, "?", 1) < 0))
			return -ENOMEM;
		n += s[n] != '\0';
	}
	return 0;
}

int render_processes(struct buf *out, const json_t *list)
{
	const json_t *procs = json_object_get(list, "processes"), *p, *arg;
	size_t i = 0, k;
	json_int_t count = json_integer_value(json_object_get(list, "count"));

	if (buf_appendf(out, "%lld process%s besides petri's own (pid 1, the sandbox's init, "
			"and pid 2, the driver running your code):\n", (long long)count,
			count == 1 ? "" : "es") < 0)
		return -ENOMEM;
	if (json_array_size(procs) && buf_append_str(out, "    pid    ppid  state           age     memory  "
				"command\n") < 0)
		return -ENOMEM;
	json_array_foreach(procs, i, p) {
		if (i == RENDER_PROCESSES_MAX)
			break;
		if (buf_appendf(out, "%7lld %7lld  %-12s ",
				(long long)json_integer_value(json_object_get(p, "pid")),
				(long long)json_integer_value(json_object_get(p, "ppid")),
				json_string_value(json_object_get(p, "state"))) < 0 ||
		    age(out, json_number_value(json_object_get(p, "elapsed_s"))) < 0 ||
		    buf_appendf(out, " %6.1f MiB  ",
				(double)json_integer_value(json_object_get(p, "rss_bytes")) /
				(1 << 20)) < 0)
			return -ENOMEM;
		/* Valid UTF-8 already, but chosen by the process: one line. */
		json_array_foreach(json_object_get(p, "command"), k, arg)
			if ((k && buf_append(out, " ", 1) < 0) ||
			    one_line(out, json_string_value(arg)) < 0)
				return -ENOMEM;
		if (!json_array_size(json_object_get(p, "command")) &&
		    (buf_append(out, "[", 1) < 0 ||
		     one_line(out, json_string_value(json_object_get(p, "name"))) < 0 ||
		     buf_append(out, "]", 1) < 0))
			return -ENOMEM;
		if (buf_append_str(out, json_is_true(json_object_get(p, "command_truncated")) ?
				   " [...]\n" : "\n") < 0)
			return -ENOMEM;
	}
	if ((json_int_t)i < count &&
	    buf_appendf(out, "[%lld more not shown]\n", (long long)(count - (json_int_t)i)) < 0)
		return -ENOMEM;
	return 0;
}

/* A section: "--- name ---\n" then the text, ending in a newline. */
static int section(struct buf *b, const char *name, const char *s, size_t len, size_t max)
{
	if (buf_appendf(b, "--- %s ---\n", name) < 0 || render_clip(b, s, len, max) < 0)
		return -ENOMEM;
	if (len && s[len - 1] != '\n' && buf_append_str(b, "\n") < 0)
		return -ENOMEM;
	return 0;
}

static int stream(struct buf *b, const char *name, const struct result_stream *st)
{
	if (st->data.len == 0)
		return 0;
	if (section(b, name, st->data.data, st->data.len, RENDER_STREAM_MAX) < 0)
		return -ENOMEM;
	if (st->truncated &&
	    buf_appendf(b, "[%s: the program wrote %s%llu bytes; petri kept the first %zu]\n",
			name, st->stopped ? "more than " : "", (unsigned long long)st->total,
			st->data.len) < 0)
		return -ENOMEM;
	return 0;
}

int render_command(struct buf *out, const json_t *cmd)
{
	static const char *const names[2] = { "stdout", "stderr" };
	long long pid = json_integer_value(json_object_get(cmd, "pid"));
	const json_t *code = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");
	bool printed = false;
	int r;

	if (json_is_true(json_object_get(cmd, "running")))
		r = buf_appendf(out, "Process %lld is running.\n", pid);
	else if (json_is_integer(code))
		r = buf_appendf(out, "Process %lld exited with code %lld.\n", pid,
				(long long)json_integer_value(code));
	else
		r = buf_appendf(out, "Process %lld was killed by signal %lld (%s)%s.\n", pid,
				(long long)json_integer_value(sig),
				sigdescr_np((int)json_integer_value(sig)) ?
				sigdescr_np((int)json_integer_value(sig)) : "unknown signal",
				json_is_true(json_object_get(cmd, "timed_out")) ? " at its deadline" :
				json_is_true(json_object_get(cmd, "lost")) ?
				", or ended with its sandbox" : "");
	if (r < 0)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		char key[16];
		const char *text;
		long long missed;

		snprintf(key, sizeof(key), "%s_missed", names[i]);
		missed = json_integer_value(json_object_get(cmd, key));
		text = json_string_value(json_object_get(cmd, names[i]));
		if (missed && buf_appendf(out, "[%s: %lld earlier bytes were not kept: petri keeps "
					  "the last 64 KiB]\n", names[i], missed) < 0)
			return -ENOMEM;
		if (text && *text) {
			if (section(out, names[i], text, strlen(text), RENDER_STREAM_MAX) < 0)
				return -ENOMEM;
			printed = true;
		}
	}
	if (!printed && buf_append_str(out, "(nothing new printed)\n") < 0)
		return -ENOMEM;
	return 0;
}

static bool is_image_type(const char *mime)
{
	return !strcmp(mime, "image/png") || !strcmp(mime, "image/jpeg");
}

/* Text results into b, images into content. */
static int results(struct buf *b, json_t *content, const json_t *list)
{
	struct buf text = BUF_INIT;
	size_t i, images = 0, image_bytes = 0, dropped = 0;
	json_t *bundle;
	int r = -ENOMEM;

	json_array_foreach(list, i, bundle) {
		const char *plain = json_string_value(json_object_get(bundle, "text/plain"));
		const char *mime, *image = NULL;
		json_t *v;

		json_object_foreach((json_t *)bundle, mime, v) {
			if (is_image_type(mime) && json_is_string(v) && !image) {
				image = mime;
				if (images >= RENDER_IMAGES_MAX ||
				    image_bytes + json_string_length(v) > RENDER_IMAGE_BYTES_MAX) {
					dropped++;
					continue;
				}
				if (json_array_append_new(content, json_pack(
						"{s:s, s:O, s:s}", "type", "image", "data", v,
						"mimeType", mime)))
					goto out;
				images++;
				image_bytes += json_string_length(v);
			}
		}
		if (image) {
			if (buf_appendf(&text, "[image %zu (%s)%s%s]\n", images + dropped, image,
					plain ? ": " : "", plain ? plain : "") < 0)
				goto out;
		} else if (plain) {
			if (buf_append_str(&text, plain) < 0 || buf_append_str(&text, "\n") < 0)
				goto out;
		}
	}
	if (text.len && section(b, "result", text.data, text.len, RENDER_RESULTS_MAX) < 0)
		goto out;
	if (dropped && buf_appendf(b, "[%zu image(s) not returned: at most %d images and "
				   "%u MiB per execution]\n", dropped, RENDER_IMAGES_MAX,
				   RENDER_IMAGE_BYTES_MAX >> 20) < 0)
		goto out;
	r = 0;
out:
	buf_release(&text);
	return r;
}

static int error_section(struct buf *b, const json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *tb = json_string_value(json_object_get(e, "traceback"));
	struct buf text = BUF_INIT;
	int r = -ENOMEM;

	/* A Python traceback ends with "Name: message" already. */
	if (tb && *tb && name && strcmp(name, "CompileError") != 0) {
		if (buf_append_str(&text, tb) < 0)
			goto out;
	} else {
		if (buf_appendf(&text, "%s: %s\n", name ? name : "Error", msg ? msg : "") < 0)
			goto out;
		if (tb && *tb && buf_append_str(&text, tb) < 0)
			goto out;
	}
	r = section(b, "error", text.data, text.len, RENDER_TRACEBACK_MAX);
out:
	buf_release(&text);
	return r;
}

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

static long long jint(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* One failing case: "FAILED classname::name (file:line)", then its message
 * indented. */
static int case_lines(struct buf *b, const json_t *c)
{
	const char *status = jstr(c, "status"), *cls = jstr(c, "classname");
	const char *file = jstr(c, "file"), *msg = jstr(c, "message");
	struct buf clip = BUF_INIT;
	int r = -ENOMEM;

	if (buf_appendf(b, "%s %s%s%s", strcmp(status, "error") ? "FAILED" : "ERROR", cls,
			*cls ? "::" : "", jstr(c, "name")) < 0 ||
	    (*file && buf_appendf(b, " (%s", file) < 0) ||
	    (*file && jint(c, "line") > 0 && buf_appendf(b, ":%lld", jint(c, "line")) < 0) ||
	    (*file && buf_append_str(b, ")") < 0) || buf_append_str(b, "\n") < 0 ||
	    render_clip(&clip, msg, strlen(msg), RENDER_CASE_MESSAGE_MAX) < 0)
		goto out;
	/* The message indented under its case, line by line. */
	for (const char *p = clip.data ? clip.data : ""; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (buf_append_str(b, "    ") < 0 || buf_append(b, p, n) < 0 ||
		    buf_append_str(b, "\n") < 0)
			goto out;
		p += n + (nl != NULL);
	}
	r = 0;
out:
	buf_release(&clip);
	return r;
}

static const char *plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* "tests: 3 passed, 1 failed, 0 errors, 0 skipped", then the failures and
 * errors (at most RENDER_CASES_MAX); passed cases only as their count. */
static int tests_section(struct buf *b, const json_t *t)
{
	const json_t *cases = json_object_get(t, "cases"), *c;
	const char *error = json_string_value(json_object_get(t, "error"));
	long long errors = jint(t, "errors");
	size_t i, shown = 0, more = 0;

	if (buf_append_str(b, "--- tests ---\n") < 0)
		return -ENOMEM;
	if (json_is_array(cases) &&
	    buf_appendf(b, "tests: %lld passed, %lld failed, %lld %s, %lld skipped\n",
			jint(t, "passed"), jint(t, "failed"), errors,
			plural(errors, "error", "errors"), jint(t, "skipped")) < 0)
		return -ENOMEM;
	json_array_foreach(cases, i, c) {
		const char *status = jstr(c, "status");

		if (strcmp(status, "failed") && strcmp(status, "error"))
			continue;
		if (shown == RENDER_CASES_MAX) {
			more++;
			continue;
		}
		if (case_lines(b, c) < 0)
			return -ENOMEM;
		shown++;
	}
	if (more && buf_appendf(b, "[... %zu more failing %s not shown]\n", more,
				plural((long long)more, "case", "cases")) < 0)
		return -ENOMEM;
	if (json_is_true(json_object_get(t, "truncated")) &&
	    buf_appendf(b, "[the reports held more cases than petri keeps (%d): the counts "
			"are whole, the list is not]\n", JUNIT_CASES_MAX) < 0)
		return -ENOMEM;
	if (error && buf_appendf(b, "[%s]\n", error) < 0)
		return -ENOMEM;
	return 0;
}

static int files_section(struct buf *b, const json_t *files)
{
	size_t i, n = json_array_size(files);
	json_t *f;

	if (n == 0)
		return 0;
	if (buf_append_str(b, "--- files written ---\n") < 0)
		return -ENOMEM;
	json_array_foreach(files, i, f) {
		if (i == 50)
			return buf_appendf(b, "[... and %zu more]\n", n - i);
		if (buf_appendf(b, "/work/%s (%lld bytes)\n",
				json_string_value(json_object_get(f, "path")),
				(long long)json_integer_value(json_object_get(f, "size"))) < 0)
			return -ENOMEM;
	}
	return 0;
}

static const char *stopped_why(enum result_status s)
{
	switch (s) {
	case RESULT_TIMEOUT:
		return "the execution was stopped: time limit";
	case RESULT_OOM:
		return "the execution was stopped: out of memory";
	case RESULT_KILLED:
		return "the execution was killed";
	default:
		return NULL;
	}
}

json_t *render_execution(const struct result *r, bool *is_error)
{
	json_t *content = json_array(), *text = NULL;
	struct buf b = BUF_INIT;
	const char *why = stopped_why(r->status);

	*is_error = r->status != RESULT_OK;
	if (!content)
		return NULL;
	/* The text item goes first: reserve its place. */
	if (json_array_append_new(content, json_null()))
		goto fail;
	if (stream(&b, "stdout", &r->out) < 0 || stream(&b, "stderr", &r->err) < 0 ||
	    results(&b, content, r->results) < 0)
		goto fail;
	if (r->error && error_section(&b, r->error) < 0)
		goto fail;
	if (r->status == RESULT_ERROR && !r->error && r->has_exit_code &&
	    buf_appendf(&b, "--- error ---\nexit status %d\n", r->exit_code) < 0)
		goto fail;
	if (r->tests && tests_section(&b, r->tests) < 0)
		goto fail;
	if (files_section(&b, r->files) < 0)
		goto fail;
	if (why && buf_appendf(&b, "--- %s ---\n%s\n", result_status_name(r->status),
			       r->reason[0] ? r->reason : why) < 0)
		goto fail;
	/* The interpreter ended without a limit status (os._exit, or between
	 * executions): the model must know its variables are gone. */
	if (!why && r->restarted && r->reason[0] &&
	    buf_appendf(&b, "--- restarted ---\n%s\n", r->reason) < 0)
		goto fail;
	if (b.len == 0 && buf_append_str(&b, "(no output: the code ran without error and "
					 "printed nothing)\n") < 0)
		goto fail;
	text = render_text_item(b.data, b.len);
	if (!text || json_array_set_new(content, 0, text))
		goto fail;
	buf_release(&b);
	return content;
fail:
	buf_release(&b);
	json_decref(content);
	return NULL;
}
