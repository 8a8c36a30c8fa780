/* GET /v1/sessions/{id}/watch?path=DIR&recursive=true: what changes in a
 * directory of the session's sandbox, as Server-Sent Events while the
 * client reads (docs/api.md, "Watching a directory"; session/watch.h does
 * the watching).  The stream is `start`, then a `change` for each file or
 * directory made, written, removed, renamed or changed in its mode, then
 * `end` when the watch ends by itself (its directory went, the session
 * ended, the server stops); the client ends it by hanging up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/http.h"
#include "session/watch.h"
#include "session/workspace.h"

struct watch_stream {
	struct stream *st;
	struct watch *w;		/* NULL once stopped */
};

static const char *const kinds[] = {
	[WATCH_CREATE] = "create", [WATCH_WRITE] = "write", [WATCH_REMOVE] = "remove",
	[WATCH_RENAME] = "rename", [WATCH_CHMOD] = "chmod",
};

static void feed(struct stream *st, const char *event, json_t *data, bool end)
{
	struct buf ev = BUF_INIT;
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;

	json_decref(data);
	if (text && buf_appendf(&ev, "event: %s\ndata: %s\n\n", event, text) == 0) {
		if (end)
			stream_feed_end(st, &ev, false);
		else
			stream_feed(st, &ev, true);
	} else if (end) {
		stream_feed_end(st, &ev, false);
	}
	free(text);
	buf_release(&ev);
}

static void on_event(void *ctx, enum watch_kind kind, const char *name)
{
	struct watch_stream *ws = ctx;

	feed(ws->st, "change", json_pack("{s:s, s:o}", "type", kinds[kind], "name",
					 http_string(name)), false);
}

static void on_end(void *ctx, const char *why)
{
	struct watch_stream *ws = ctx;

	feed(ws->st, "end", json_pack("{s:s}", "reason", why ? why : "the watch ended"), true);
	stream_feed_put(ws->st);
}

/* The client went: the watch stops (unless it ended by itself). */
static void on_closed(void *state)
{
	struct watch_stream *ws = state;
	struct watch *w = ws->w;

	ws->w = NULL;
	if (w && watch_stop(w))
		stream_feed_put(ws->st);
}

static void on_release(void *state)
{
	struct watch_stream *ws = state;

	if (ws->w)	/* ended by itself: its end put the feeder's reference */
		watch_stop(ws->w);
}

static const struct stream_wire watch_wire = {
	.content_type = "text/event-stream",
	.state_size = sizeof(struct watch_stream),
	.keepalive = ": keepalive\n\n",
	.release = on_release,
};

static int is_dir(void *ctx, const struct session_entry *en)
{
	*(bool *)ctx = S_ISDIR(en->st->st_mode);
	return 0;
}

enum MHD_Result handle_watch(struct api_req *rq, struct session *s)
{
	const char *path = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *rec = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
						      "recursive");
	char rel[FILES_PATH_MAX + 1], why[256], reason[512] = "";
	struct watch_stream *ws;
	struct stream *st = NULL;
	enum MHD_Result answered;
	struct watch *w = NULL;
	bool dir = false;
	enum sm_result r;
	int err;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (rec && strcmp(rec, "true") && strcmp(rec, "false"))
		return http_error(rq, 400, "invalid_request", "'recursive' is true or false");
	if (ws_path(path ? path : "", "/work", WS_PATH_ROOT | WS_PATH_SLASH | WS_PATH_ANYWHERE,
		    rel, why, sizeof(why)) != WS_OK)
		return http_error(rq, 400, "invalid_path", "%s", why);
	/* What is not there is a status; what fails later, an event. */
	err = session_file_stat(s, rel, is_dir, &dir);
	if (err == -ENOENT)
		return http_error(rq, 404, "file_not_found", "no such directory: %.300s",
				  path ? path : "/work");
	if (err == -EROFS)
		return http_error(rq, 400, "invalid_path", "%.300s is not on a filesystem of the "
				  "sandbox's own (/work, /tmp, /dev/shm)", path ? path : "/work");
	if ((err == 0 && !dir) || err == -ENOTDIR)
		return http_error(rq, 400, "not_a_directory", "not a directory: %.300s",
				  path ? path : "/work");
	if (err < 0)
		return http_error(rq, 500, "internal", "cannot watch %.300s: %s",
				  path ? path : "/work", strerror(-err));
	answered = stream_open(rq, s, &watch_wire, NULL, on_closed, &st);
	if (!st)
		return answered;
	ws = stream_state(st);
	ws->st = st;
	feed(st, "start", json_pack("{s:s, s:b}", "path", *rel == '/' ? rel : *rel ? rel : ".",
				    "recursive", rec && !strcmp(rec, "true")), false);
	r = session_watch_start(s, rel, rec && !strcmp(rec, "true"),
				&(struct watch_sink){ on_event, on_end, ws }, &w, reason,
				sizeof(reason));
	if (r != SM_OK) {
		feed(st, "end", json_pack("{s:s, s:s}", "code", http_sm_code(r, NULL), "reason",
					  http_sm_message(r, reason)), true);
		stream_feed_put(st);
		return answered;
	}
	ws->w = w;
	return answered;
}
