/* GET /v1/events: what happens on the server, as Server-Sent Events, for
 * the web page (docs/web.md) and anyone else who watches: an execution
 * recorded, a session created or ended (by any front end, or by expiry or
 * death), and a heartbeat.
 * Events name what changed, never what it holds: a watcher reads the
 * entries themselves from the listings, with the same key.
 *
 *   event: execution  data: {"seq", "session" (null: one-shot), "language", "status"}
 *   event: session    data: {"id", "state": "created" | "deleted" | "ended",
 *                            "reason" (ended only)}
 *   event: heartbeat  data: {"sessions": N}        every HEARTBEAT_S
 *   event: resync     data: {"dropped": N}         the watcher fell behind
 *
 * Cost: at most EVENTS_MAX streams at once (429 past it), one tenant (an
 * API key, or a client's address without keys: share.h) at most its share
 * of them (429 too: one key cannot take every stream), each holding at
 * most PENDING_MAX bytes not yet read; past that its events are dropped and
 * one resync says so (the page then reloads the listings).  No thread per
 * stream: MHD's content reader never waits; with nothing to send it
 * suspends the connection, and an event, the stream hub's tick (each
 * second, to notice a client that hung up and to send heartbeats) or
 * events_stop() resume it.
 *
 * The sources are the record's hook (record_on_add, via smgr_on_record)
 * and the session manager's (smgr_on_session): each runs on the thread that
 * recorded the execution or made or ended the session, under the record's
 * or the manager's lock, and only appends a few bytes here.
 *
 * Locks: the record's, then ev->lock; the manager's, then ev->lock; the
 * hub's, then ev->lock.  The reader takes ev->lock alone (the session count
 * is read before it). */
#include "api/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

#define EVENTS_MAX 32
#define PENDING_MAX (64u << 10)
#define HEARTBEAT_S 10
#define BLOCK_SIZE 4096

struct watcher {
	struct events *ev;
	struct MHD_Connection *conn;	/* NULL once its response is freed */
	struct buf out;			/* bytes not yet sent */
	unsigned long long dropped;	/* events lost since the last resync */
	bool suspended;
	int client_fd;
	struct share_tenant tenant;	/* holds one of ev->streams for it */
	double heartbeat_at;		/* monotonic */
	struct watcher *prev, *next;
};

struct events {
	pthread_mutex_t lock;
	struct smgr *sm;
	struct stream_hub *hub;
	struct hub_watch tick;
	struct watcher *head;
	struct share *streams;		/* EVENTS_MAX, shared between tenants */
	bool stopping;
};

/* Resume a reader that waits for something to send (ev->lock held). */
static void wake(struct watcher *w)
{
	if (w->suspended && w->conn) {
		w->suspended = false;
		MHD_resume_connection(w->conn);
	}
}

/* Append one event of text to every watcher (ev->lock held). */
static void broadcast(struct events *ev, const char *text, size_t len)
{
	for (struct watcher *w = ev->head; w; w = w->next) {
		if (w->dropped || w->out.len + len > PENDING_MAX ||
		    buf_append(&w->out, text, len) < 0)
			w->dropped++;
		wake(w);
	}
}

/* Dump data as "event: name" (consumed) and send it to all. */
static void publish(struct events *ev, const char *name, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	char head[64];
	struct buf b = BUF_INIT;

	json_decref(data);
	snprintf(head, sizeof(head), "event: %s\ndata: ", name);
	if (text && buf_appendf(&b, "%s%s\n\n", head, text) == 0) {
		pthread_mutex_lock(&ev->lock);
		broadcast(ev, b.data, b.len);
		pthread_mutex_unlock(&ev->lock);
	}
	buf_release(&b);
	free(text);
}

static void on_record(void *arg, const struct record_added *a)
{
	publish(arg, "execution",
		json_pack("{s:I, s:o, s:s, s:s}", "seq", (json_int_t)a->seq,
			  "session", a->session ? json_string(a->session) : json_null(),
			  "language", a->language, "status", a->status));
}

static void on_session(void *arg, const char *id, const char *state, const char *reason)
{
	json_t *data = json_pack("{s:s, s:s}", "id", id, "state", state);

	if (data && reason)
		json_object_set_new(data, "reason", json_string(reason));
	publish(arg, "session", data);
}

/* Each second (the hub's thread, under its lock): let every waiting
 * reader look at its socket and at the time. */
static void on_tick(struct hub_watch *hw)
{
	struct events *ev = (struct events *)((char *)hw - offsetof(struct events, tick));

	pthread_mutex_lock(&ev->lock);
	for (struct watcher *w = ev->head; w; w = w->next)
		wake(w);
	pthread_mutex_unlock(&ev->lock);
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct watcher *w = cls;
	struct events *ev = w->ev;
	size_t sessions = smgr_count(ev->sm);	/* before ev->lock: see Locks */
	ssize_t n = 0;

	(void)pos;
	pthread_mutex_lock(&ev->lock);
	if (w->dropped && !w->out.len) {
		buf_appendf(&w->out, "event: resync\ndata: {\"dropped\":%llu}\n\n", w->dropped);
		w->dropped = 0;
	}
	if (!w->out.len && !ev->stopping && clock_mono_s() >= w->heartbeat_at)
		buf_appendf(&w->out, "event: heartbeat\ndata: {\"sessions\":%zu}\n\n", sessions);
	if (w->out.len) {
		n = (ssize_t)(w->out.len < max ? w->out.len : max);
		memcpy(out, w->out.data, (size_t)n);
		buf_consume(&w->out, (size_t)n);
		w->heartbeat_at = clock_mono_s() + HEARTBEAT_S;
	} else if (ev->stopping) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else if (http_client_gone(w->client_fd)) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else {
		w->suspended = true;
		MHD_suspend_connection(w->conn);
	}
	pthread_mutex_unlock(&ev->lock);
	return n;
}

static void on_free(void *cls)
{
	struct watcher *w = cls;
	struct events *ev = w->ev;

	pthread_mutex_lock(&ev->lock);
	if (w->prev)
		w->prev->next = w->next;
	else
		ev->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&ev->lock);
	share_give(ev->streams, &w->tenant, 1);
	buf_release(&w->out);
	free(w);
}

enum MHD_Result handle_events(struct api_req *rq)
{
	struct events *ev = rq->events;
	const union MHD_ConnectionInfo *ci;
	struct MHD_Response *resp;
	struct watcher *w;
	int r = 0;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	w = calloc(1, sizeof(*w));
	if (!w)
		return http_error(rq, 500, "internal", "out of memory");
	ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	w->ev = ev;
	w->conn = rq->conn;
	w->client_fd = ci ? ci->connect_fd : -1;
	w->tenant = rq->tenant;
	/* The first bytes at once: a client knows it is connected. */
	w->heartbeat_at = 0;
	pthread_mutex_lock(&ev->lock);
	if (ev->stopping || (r = share_take(ev->streams, &w->tenant, 1)) < 0) {
		bool stopping = ev->stopping;

		pthread_mutex_unlock(&ev->lock);
		free(w);
		if (stopping)
			return http_error(rq, 503, "shutting_down", "the server is shutting down");
		if (r == -EDQUOT)
			return http_error(rq, 429, "too_many_streams", "this %s has %llu event "
					  "streams open, its share of the server's %u; close one or "
					  "retry later", rq->key_index >= 0 ? "API key" : "client",
					  (unsigned long long)share_per_tenant(ev->streams),
					  EVENTS_MAX);
		return http_error(rq, 429, "too_many_streams", "at most %u event streams are open "
				  "at once; close one or retry later", EVENTS_MAX);
	}
	w->next = ev->head;
	if (ev->head)
		ev->head->prev = w;
	ev->head = w;
	pthread_mutex_unlock(&ev->lock);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, reader, w, on_free);
	if (!resp) {
		on_free(w);
		return http_error(rq, 500, "internal", "out of memory");
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_queue(rq, 200, resp);
}

int events_new(const struct petri_config *cfg, struct smgr *sm, struct stream_hub *hub,
	       struct events **out)
{
	struct events *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev || share_new(EVENTS_MAX, config_share_of(cfg, EVENTS_MAX), &ev->streams) < 0) {
		free(ev);
		return -ENOMEM;
	}
	pthread_mutex_init(&ev->lock, NULL);
	ev->sm = sm;
	ev->hub = hub;
	ev->tick.tick = on_tick;
	stream_hub_watch(hub, &ev->tick);
	smgr_on_record(sm, on_record, ev);
	smgr_on_session(sm, on_session, ev);
	*out = ev;
	return 0;
}

void events_stop(struct events *ev)
{
	if (!ev)
		return;
	pthread_mutex_lock(&ev->lock);
	ev->stopping = true;
	for (struct watcher *w = ev->head; w; w = w->next)
		wake(w);
	pthread_mutex_unlock(&ev->lock);
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	smgr_on_record(ev->sm, NULL, NULL);
	smgr_on_session(ev->sm, NULL, NULL);
	stream_hub_unwatch(ev->hub, &ev->tick);
	if (ev->head)
		log_warn("http: an event stream outlived the server");
	share_free(ev->streams);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}
