#include "exec/result.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/utf8.h"

int result_init(struct result *r)
{
	memset(r, 0, sizeof(*r));
	r->main_result = -1;
	r->results = json_array();
	r->files = json_array();
	if (!r->results || !r->files) {
		result_release(r);
		return -ENOMEM;
	}
	return 0;
}

void result_release(struct result *r)
{
	buf_release(&r->out.data);
	buf_release(&r->err.data);
	json_decref(r->results);
	json_decref(r->error);
	json_decref(r->files);
	json_decref(r->tests);
	json_decref(r->network);
	memset(r, 0, sizeof(*r));
}

const char *result_status_name(enum result_status s)
{
	switch (s) {
	case RESULT_OK: return "ok";
	case RESULT_ERROR: return "error";
	case RESULT_TIMEOUT: return "timeout";
	case RESULT_OOM: return "oom";
	case RESULT_KILLED: return "killed";
	}
	return "killed";
}

size_t result_stream_add(struct result_stream *s, const char *data, size_t len,
			 size_t cap)
{
	size_t room, keep;

	s->total += len;
	if (s->truncated)
		return 0;
	room = cap > s->data.len ? cap - s->data.len : 0;
	keep = len < room ? len : room;
	if (keep && buf_append(&s->data, data, keep) < 0) {
		s->truncated = true;
		return 0;
	}
	if (keep < len) {
		/* The end of what is kept is final: cut it where no character
		 * is split, looking across earlier chunks too. */
		size_t cut = utf8_cut(s->data.data, s->data.len);
		size_t dropped = s->data.len - cut;

		s->data.len = cut;
		if (s->data.data)	/* NULL when nothing was ever kept (cap 0) */
			s->data.data[cut] = '\0';
		s->truncated = true;
		keep = keep > dropped ? keep - dropped : 0;
	}
	return keep;
}

void result_set_error(struct result *r, json_t *error)
{
	json_decref(r->error);
	r->error = error;
}

int result_set_error_str(struct result *r, const char *name, const char *message,
			 const char *traceback)
{
	json_t *e = json_pack("{s:s, s:s, s:s}", "name", name, "message", message,
			      "traceback", traceback ? traceback : "");

	if (!e)
		return -ENOMEM;
	result_set_error(r, e);
	return 0;
}

/* Add "<key>" (and "<key>_base64" when the bytes are not UTF-8). */
static int add_text(json_t *obj, const char *key, const struct buf *b)
{
	const char *s = b->data ? b->data : "";
	struct buf clean = BUF_INIT;
	char key64[64];
	char *enc;
	int r = -ENOMEM;

	if (utf8_valid(s, b->len))
		return json_object_set_new(obj, key, json_stringn(s, b->len)) ? -ENOMEM : 0;
	if (utf8_sanitize(&clean, s, b->len) < 0)
		goto out;
	if (json_object_set_new(obj, key, json_stringn(clean.data, clean.len)))
		goto out;
	enc = base64_encode(s, b->len, NULL);
	if (!enc)
		goto out;
	snprintf(key64, sizeof(key64), "%s_base64", key);
	r = json_object_set_new(obj, key64, json_string(enc)) ? -ENOMEM : 0;
	free(enc);
out:
	buf_release(&clean);
	return r;
}

json_t *result_to_json(const struct result *r)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "status", json_string(result_status_name(r->status))) ||
	    json_object_set_new(o, "exit_code",
				r->has_exit_code ? json_integer(r->exit_code) : json_null()) ||
	    json_object_set_new(o, "signal", r->signal ? json_integer(r->signal) : json_null()) ||
	    add_text(o, "stdout", &r->out.data) || add_text(o, "stderr", &r->err.data) ||
	    json_object_set_new(o, "stdout_truncated", json_boolean(r->out.truncated)) ||
	    json_object_set_new(o, "stderr_truncated", json_boolean(r->err.truncated)) ||
	    json_object_set(o, "results", r->results) ||
	    json_object_set(o, "error", r->error ? r->error : json_null()) ||
	    json_object_set(o, "files", r->files) ||
	    json_object_set(o, "tests", r->tests ? r->tests : json_null()) ||
	    json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms)) ||
	    json_object_set_new(o, "cpu_ms", json_integer((json_int_t)r->cpu_ms)) ||
	    json_object_set_new(o, "memory_peak_bytes",
				json_integer((json_int_t)r->memory_peak_bytes)) ||
	    json_object_set_new(o, "reason", r->reason[0] ? json_string(r->reason) : json_null()) ||
	    json_object_set_new(o, "restarted", json_boolean(r->restarted)) ||
	    (r->network && json_object_set(o, "network", r->network))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int result_cli_exit_code(const struct result *r)
{
	switch (r->status) {
	case RESULT_OK:
	case RESULT_ERROR:
		if (r->has_exit_code)
			return r->exit_code & 0xff;
		return r->status == RESULT_OK ? 0 : 1;
	case RESULT_TIMEOUT:
		return 124;
	case RESULT_OOM:
		return 137;
	case RESULT_KILLED:
		return r->signal ? 128 + r->signal : 137;
	}
	return 125;
}
