/* GET /v1/sessions/{id}/export and GET /v1/executions/export: the
 * execution record as a download (record/export.h, docs/record.md).
 *
 * The handler, on a worker, starts the export (it reads the record once
 * through to find its pages) and answers with a response whose content
 * reader, on an event thread, writes it one entry at a time: each call
 * reads at most one page of EXPORT_PAGE entries from SQLite, as a download
 * reads a file, and never waits on a sandbox.  An export holds one page
 * and one entry as written, whatever the record holds; at most
 * EXPORTS_MAX are sent at once, so that what all of them hold is bounded
 * too.  The first reading stops when the client hangs up (http_gone());
 * the pages after are read only as fast as the client takes them. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "record/export.h"
#include "util/buf.h"
#include "util/timefmt.h"

#define EXPORTS_MAX 4
#define EXPORT_BLOCK 65536

/* Exports being sent, across the server's connections. */
static atomic_int exports_running;

/* What the page's HTML results may do: nothing, and load nothing (the
 * page declares the same itself, for when it is opened from a disk). */
#define HTML_POLICY "default-src 'none'; img-src data:; style-src 'unsafe-inline'; " \
		    "frame-src 'self'; base-uri 'none'; form-action 'none'; sandbox"

struct download {
	struct export *x;
	struct buf pending;	/* one entry as written, not yet sent */
	size_t sent;		/* of pending */
	bool done;
};

static int keep(void *arg, const char *data, size_t len)
{
	struct download *d = arg;

	return buf_append(&d->pending, data, len);
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct download *d = cls;
	size_t n;

	(void)pos;
	while (d->sent == d->pending.len) {
		int r;

		if (d->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		buf_reset(&d->pending);
		d->sent = 0;
		r = export_step(d->x, keep, d);
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		d->done = r == 0;
	}
	n = d->pending.len - d->sent < max ? d->pending.len - d->sent : max;
	memcpy(out, d->pending.data + d->sent, n);
	d->sent += n;
	return (ssize_t)n;
}

static void download_free(void *cls)
{
	struct download *d = cls;

	export_free(d->x);
	buf_release(&d->pending);
	free(d);
	atomic_fetch_sub(&exports_running, 1);
}

/* The `format`, and `since`/`until` where they may be (one-shots). */
static bool export_args(struct api_req *rq, bool times, enum export_format *f,
			struct export_query *q, enum MHD_Result *answered)
{
	static const char *const names[] = { "since", "until" };
	double *at[] = { &q->since, &q->until };
	const char *format = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							  "format");

	if (!export_format_from_name(format, f)) {
		*answered = http_error(rq, 400, "invalid_request",
				       "'format' must be ipynb, html or jsonl");
		return false;
	}
	for (size_t i = 0; i < 2; i++) {
		const char *v = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							     names[i]);

		if (!v)
			continue;
		if (!times) {
			*answered = http_error(rq, 400, "invalid_request", "'%s' applies to the "
					       "one-shot runs (GET /v1/executions/export), not to "
					       "a session", names[i]);
			return false;
		}
		if (!timefmt_parse(v, at[i])) {
			*answered = http_error(rq, 400, "invalid_request", "'%s' must be an RFC 3339 "
					       "time or a date (YYYY-MM-DD)", names[i]);
			return false;
		}
	}
	return true;
}

/* "petri-ses_9d00....ipynb": the id only when it is plain (it is the
 * client's, from the URL). */
static void file_name(const char *id, enum export_format f, char *out, size_t len)
{
	bool plain = id && *id;

	for (const char *p = id; plain && *p; p++)
		plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
	snprintf(out, len, "attachment; filename=\"petri-%s.%s\"",
		 plain ? id : id ? "session" : "oneshots", export_format_name(f));
}

/* Answer with the export of q (x is consumed). */
static enum MHD_Result send_export(struct api_req *rq, struct export *x, enum export_format f,
				   const char *id)
{
	struct download *d = calloc(1, sizeof(*d));
	struct MHD_Response *resp;
	char disposition[160];

	if (!d) {
		export_free(x);
		atomic_fetch_sub(&exports_running, 1);
		return http_error(rq, 500, "internal", "out of memory");
	}
	d->x = x;
	/* From here download_free() owns d, the export and the slot. */
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EXPORT_BLOCK, reader, d,
						 download_free);
	if (!resp) {
		download_free(d);
		return http_error(rq, 500, "internal", "out of memory");
	}
	file_name(id, f, disposition, sizeof(disposition));
	MHD_add_response_header(resp, "Content-Type", export_content_type(f));
	MHD_add_response_header(resp, "Content-Disposition", disposition);
	MHD_add_response_header(resp, "Content-Security-Policy",
				f == EXPORT_HTML ? HTML_POLICY : "sandbox");
	return http_queue(rq, 200, resp);
}

/* Start the export of q, within EXPORTS_MAX: *x, or an answer. */
static bool start(struct api_req *rq, const struct export_query *q, enum export_format f,
		  struct export **x, enum MHD_Result *answered)
{
	int r;

	if (atomic_fetch_add(&exports_running, 1) >= EXPORTS_MAX) {
		atomic_fetch_sub(&exports_running, 1);
		*answered = http_error(rq, 429, "over_capacity", "%d exports are being sent: try "
				       "again when one has ended", EXPORTS_MAX);
		return false;
	}
	if ((r = export_begin(smgr_record(rq->sm), q, f, x)) < 0) {
		atomic_fetch_sub(&exports_running, 1);
		/* A client that hung up is answered nothing: close. */
		*answered = r == -ECANCELED ? MHD_NO :
			    http_error(rq, 500, "internal", "the record cannot be read: %s",
				       strerror(-r));
		return false;
	}
	return true;
}

enum MHD_Result handle_session_export(struct api_req *rq, const char *id)
{
	struct export_query q = { .session = id, .gone = http_gone, .gone_arg = rq };
	enum MHD_Result answered = MHD_NO;
	enum export_format f;
	struct session *s;
	struct export *x;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!export_args(rq, false, &f, &q, &answered) || !start(rq, &q, f, &x, &answered))
		return answered;
	if (export_count(x) == 0) {
		/* As the listing answers: a live session without executions
		 * yet exports empty; no such session is a 404, one that ended
		 * with nothing recorded a 410. */
		s = http_session(rq, id, &answered);
		if (!s) {
			export_free(x);
			atomic_fetch_sub(&exports_running, 1);
			return answered;
		}
		session_put(s);
	}
	return send_export(rq, x, f, id);
}

enum MHD_Result handle_oneshots_export(struct api_req *rq)
{
	struct export_query q = { .gone = http_gone, .gone_arg = rq };
	enum MHD_Result answered = MHD_NO;
	enum export_format f;
	struct export *x;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!export_args(rq, true, &f, &q, &answered) || !start(rq, &q, f, &x, &answered))
		return answered;
	return send_export(rq, x, f, NULL);
}
