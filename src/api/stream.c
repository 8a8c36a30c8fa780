/* A streamed execution: stdout and stderr chunks as they are printed,
 * each result and the error when they occur, then the end with the whole
 * result.  How each is written is the wire's (struct stream_wire): the
 * native API's Server-Sent Events here, E2B's NDJSON and Connect streams in
 * e2b_*.c; everything else is the same for all of them.
 *
 * The request's worker (worker.c) queues the response, then runs the
 * execution, appending events to a buffer; MHD's content reader, on an
 * event thread, takes them out.  The reader never waits: with nothing to
 * send it suspends the connection, and new events, the end, or the hub's
 * tick (each second: keepalives, and a look at the socket for a client that
 * hung up) resume it.  When the client goes away MHD frees the response:
 * that writes the stream's eventfd, which box_exec() watches, and the
 * execution is interrupted (the session and its variables survive).  A
 * client that reads too slowly loses live events past PENDING_MAX, and is
 * told so; it never makes the daemon hold what the code prints.
 *
 * The hub's tick also serves downloads (files.c), which must notice an
 * ended session while their client reads nothing.
 *
 * Locks: the hub's, then a stream's or a download's; emit() takes only the
 * stream's. */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "api/answers.h"
#include "api/http.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/utf8.h"

#define KEEPALIVE_S 10
#define BLOCK_SIZE 16384
/* What a stream holds for a client that reads slower than the code prints
 * (or not at all): past this, live output and result events are dropped,
 * counted, until the client has read half of it; then a "notice" event says
 * how many were lost.  Without it a client that never reads would make the
 * daemon hold every byte the execution prints, up to six times over (JSON
 * escapes a control byte as \u0001).  "error" and "done" are always kept:
 * "done" carries the whole result, as the answer without SSE does. */
#define PENDING_MAX (4u << 20)
/* A fed stream's (a process's output, a watch's events): a client that
 * follows several of them holds this much of each at most. */
#define FEED_PENDING_MAX (256u << 10)

struct stream_hub {
	pthread_mutex_t lock;
	pthread_cond_t tick;
	struct stream *head;		/* every stream not yet freed */
	struct hub_watch *watches;	/* downloads (files.c), ticked too */
	atomic_bool stopping;		/* readers end instead of suspending */
	bool ticker_running;
	pthread_t ticker;
};

struct stream {
	pthread_mutex_t lock;
	const struct stream_wire *wire;
	void *wire_state;		/* wire->state_size bytes, the wire's own */
	struct buf out;			/* bytes not yet sent */
	struct utf8_carry carry[2];	/* for wire->text: stdout, stderr */
	unsigned long long dropped;	/* live events dropped since the last notice */
	size_t cap;			/* PENDING_MAX, or FEED_PENDING_MAX */
	bool finished;			/* the worker queued its last event */
	bool cut;			/* ... and the connection ends without an end */
	bool closed;			/* the client is gone */
	bool suspended;			/* the reader suspended conn */
	int refs;
	int cancel_fd;
	int client_fd;			/* the connection's socket, to notice a hang-up */
	struct MHD_Connection *conn;	/* NULL once the response is freed */
	double keepalive_at;		/* monotonic */
	struct stream_hub *hub;
	struct stream *prev, *next;	/* in the hub */
	/* What it holds once the execution ended, charged to its key until it
	 * is freed, and when its client must have read it (answers.h). */
	struct answers *answers;
	struct share_tenant tenant;
	size_t charged;
	double deadline;
	/* the execution */
	struct smgr *sm;
	struct session *s;
	struct exec_request ex;
	char *code, *language, *context, *cwd, *input;	/* ex's copies */
	char **env;			/* ex.env's copy */
	/* A fed stream (stream_open()): told once when its client goes. */
	void (*on_close)(void *arg);
	void *close_arg;
};

static void stream_put(struct stream *st)
{
	bool last;

	pthread_mutex_lock(&st->lock);
	last = --st->refs == 0;
	pthread_mutex_unlock(&st->lock);
	if (!last)
		return;
	pthread_mutex_lock(&st->hub->lock);
	if (st->prev)
		st->prev->next = st->next;
	else
		st->hub->head = st->next;
	if (st->next)
		st->next->prev = st->prev;
	pthread_mutex_unlock(&st->hub->lock);
	if (st->charged)
		answers_release(st->answers, &st->tenant, st->charged);
	session_put(st->s);
	close(st->cancel_fd);
	buf_release(&st->out);
	free(st->code);
	free(st->language);
	free(st->context);
	free(st->cwd);
	free(st->input);
	if (st->wire_state && st->wire->release)
		st->wire->release(st->wire_state);
	free(st->wire_state);
	exec_env_free(st->env);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* Resume a reader that waits for something to send (st->lock held). */
static void wake(struct stream *st)
{
	if (st->suspended && st->conn) {
		st->suspended = false;
		MHD_resume_connection(st->conn);
	}
}

/* May a live event of len bytes be queued (st->lock held)?  While events
 * are being dropped, not before the client has read half the cap: one
 * notice per gap, not one per event.  An event bigger than the cap goes
 * into an empty buffer (a large result must reach a client that reads). */
static bool room_for(const struct stream *st, size_t len)
{
	size_t limit = st->dropped ? st->cap / 2 : st->cap;

	return st->out.len == 0 || (st->out.len <= limit && st->out.len + len <= st->cap);
}

/* Append ev for the client (with st->lock held); a live event that finds
 * no room is dropped and counted, and the count said before the next. */
static void append(struct stream *st, const struct buf *ev, bool live)
{
	struct buf notice = BUF_INIT;

	if (st->closed || !ev->len)
		return;
	if (live && !room_for(st, ev->len)) {
		st->dropped++;
		return;
	}
	if (st->dropped && (!st->wire->dropped ||
			    st->wire->dropped(st->wire_state, &notice, st->dropped) == 0)) {
		buf_append(&st->out, notice.data, notice.len);
		st->dropped = 0;
	}
	buf_release(&notice);
	buf_append(&st->out, ev->data, ev->len);
	wake(st);
}

/* Queue what a wire callback wrote into ev (consumed).  live: an output
 * or result event, which a client too far behind loses. */
static void queue(struct stream *st, struct buf *ev, bool live)
{
	pthread_mutex_lock(&st->lock);
	append(st, ev, live);
	pthread_mutex_unlock(&st->lock);
	buf_release(ev);
}

/* The end event (end: may be empty), and what the client has yet to read
 * charged to its key, in one step: a client that has read the end finds
 * the charge made, so its key's next request is judged with it.  The
 * execution's slot is free again by now, but what its client has yet to
 * read counts against its key until it is read. */
static void finish(struct stream *st, struct buf *end)
{
	pthread_mutex_lock(&st->lock);
	append(st, end, false);
	st->finished = true;
	st->charged = answers_charge(st->answers, &st->tenant, st->out.len) ? st->out.len : 0;
	st->deadline = answers_deadline(st->answers, st->charged);
	wake(st);
	pthread_mutex_unlock(&st->lock);
	buf_release(end);
}

/* Nobody to send it to: spare the work (a done event can be 100 MiB). */
static bool gone(struct stream *st)
{
	bool closed;

	pthread_mutex_lock(&st->lock);
	closed = st->closed;
	pthread_mutex_unlock(&st->lock);
	return closed;
}

/* Text for a wire that takes it: what the code wrote, up to the last whole
 * character (the rest waits for the next chunk, or for the end). */
static void text_event(struct stream *st, enum exec_stream s, const char *data, size_t len,
		       bool end)
{
	struct utf8_carry *c = &st->carry[s == EXEC_STDOUT ? 0 : 1];
	struct buf clean = BUF_INIT, ev = BUF_INIT;
	int r = end ? utf8_carry_flush(c, &clean) : utf8_carry_take(c, data, len, &clean);

	if (r == 0 && clean.len &&
	    st->wire->text(st->wire_state, &ev, s, clean.data, clean.len) == 0)
		queue(st, &ev, !end);
	buf_release(&ev);
	buf_release(&clean);
}

static void on_output(void *ctx, enum exec_stream s, const char *data, size_t len)
{
	struct stream *st = ctx;
	struct buf ev = BUF_INIT;

	if (gone(st))
		return;
	if (st->wire->text)
		text_event(st, s, data, len, false);
	else if (st->wire->output(st->wire_state, &ev, s, data, len) == 0)
		queue(st, &ev, true);
	buf_release(&ev);
}

static void on_rich(void *ctx, const json_t *bundle, bool main)
{
	struct stream *st = ctx;
	struct buf ev = BUF_INIT;

	if (!gone(st) && st->wire->rich(st->wire_state, &ev, bundle, main) == 0)
		queue(st, &ev, true);
	buf_release(&ev);
}

static void on_error(void *ctx, const json_t *error)
{
	struct stream *st = ctx;
	struct buf ev = BUF_INIT;

	if (!gone(st) && st->wire->error(st->wire_state, &ev, error) == 0)
		queue(st, &ev, false);
	buf_release(&ev);
}

/* Runs on the request's worker once the response is queued. */
static void run_stream(void *arg)
{
	struct stream *st = arg;
	struct exec_events ev = { .ctx = st, .output = on_output, .rich = on_rich,
				 .error = on_error };
	char reason[256] = "";
	struct buf end = BUF_INIT;
	struct result res;
	bool have = result_init(&res) == 0;
	enum sm_result r;

	if (!have) {
		session_release(st->sm, st->s);	/* the claim, given back */
		r = SM_NO_MEMORY;
	} else {
		r = session_run(st->sm, st->s, &st->ex, &ev, &res, reason, sizeof(reason));
	}
	if (st->wire->text && !gone(st)) {	/* an unfinished character at the end */
		text_event(st, EXEC_STDOUT, NULL, 0, true);
		text_event(st, EXEC_STDERR, NULL, 0, true);
	}
	if (st->wire->cut_when_deleted && session_deleted(st->s)) {
		/* Deleted under the execution: what E2B's SDKs take for a
		 * sandbox killed (http.h). */
		pthread_mutex_lock(&st->lock);
		st->cut = true;
		pthread_mutex_unlock(&st->lock);
	} else if (!gone(st) && st->wire->done(st->wire_state, &end, r, reason,
					       r == SM_OK ? &res : NULL) != 0) {
		buf_release(&end);
	}
	if (have)
		result_release(&res);
	finish(st, &end);
	stream_put(st);
}

bool http_client_gone(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	return fd >= 0 && poll(&pfd, 1, 0) > 0 &&
	       (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *st = cls;
	const char *keepalive = st->wire->keepalive;	/* keeps proxies patient */
	size_t klen = !keepalive ? 0 : st->wire->keepalive_len ? st->wire->keepalive_len :
		      strlen(keepalive);
	ssize_t n = 0;

	(void)pos;
	pthread_mutex_lock(&st->lock);
	if (st->finished && st->out.len && clock_mono_s() > st->deadline) {
		/* Too slow to read what the ended execution left: let it go. */
		metrics_inc(M_ANSWERS_CUT);
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (st->out.len) {
		n = (ssize_t)(st->out.len < max ? st->out.len : max);
		memcpy(out, st->out.data, (size_t)n);
		buf_consume(&st->out, (size_t)n);
		st->keepalive_at = clock_mono_s() + KEEPALIVE_S;
	} else if (st->finished) {
		n = st->cut ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
	} else if (http_client_gone(st->client_fd) || atomic_load(&st->hub->stopping)) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (klen && clock_mono_s() >= st->keepalive_at && max >= klen) {
		n = (ssize_t)klen;
		memcpy(out, keepalive, klen);
		st->keepalive_at = clock_mono_s() + KEEPALIVE_S;
	} else {
		/* Nothing yet: give the event thread back until wake(). */
		st->suspended = true;
		MHD_suspend_connection(st->conn);
	}
	pthread_mutex_unlock(&st->lock);
	return n;
}

static void on_free(void *cls)
{
	struct stream *st = cls;
	uint64_t one = 1;
	bool tell;

	pthread_mutex_lock(&st->lock);
	st->closed = true;
	st->conn = NULL;
	st->suspended = false;
	if (!st->finished && write(st->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot cancel a streamed execution");
	tell = st->on_close && !st->finished;
	pthread_mutex_unlock(&st->lock);
	if (tell)	/* outside the lock: the feeder takes its own first */
		st->on_close(st->close_arg);
	stream_put(st);
}

static char *dup_or_null(const char *v, bool *failed)
{
	char *d = v ? strdup(v) : NULL;

	if (v && !d)
		*failed = true;
	return d;
}

/* A stream for rq, in its hub, its wire's state made (a copy of init or
 * zeroed), held by two (the response and whoever fills it), the session
 * referenced; NULL when out of memory (nothing made then). */
static struct stream *stream_new(struct api_req *rq, struct session *s,
				 const struct stream_wire *wire, const void *init, size_t cap)
{
	struct stream_hub *hub = rq->streams;
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->wire_state = calloc(1, wire->state_size ? wire->state_size : 1);
	st->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!st->wire_state || st->cancel_fd < 0) {
		if (st->cancel_fd >= 0)
			close(st->cancel_fd);
		free(st->wire_state);
		free(st);
		return NULL;
	}
	if (init)
		memcpy(st->wire_state, init, wire->state_size);
	pthread_mutex_init(&st->lock, NULL);
	st->refs = 2;
	st->cap = cap;
	st->sm = rq->sm;
	st->hub = hub;
	st->answers = rq->answers;
	st->tenant = rq->tenant;
	st->wire = wire;
	st->s = session_ref(s);	/* the stream outlives this request */
	pthread_mutex_lock(&hub->lock);
	st->next = hub->head;
	if (hub->head)
		hub->head->prev = st;
	hub->head = st;
	pthread_mutex_unlock(&hub->lock);
	return st;
}

/* st's response, read by reader() from st's connection: NULL when out of
 * memory (then st is let go: the caller answers an error). */
static struct MHD_Response *stream_response(struct api_req *rq, struct stream *st)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct MHD_Response *resp;

	st->client_fd = ci ? ci->connect_fd : -1;
	st->conn = rq->conn;
	st->keepalive_at = clock_mono_s() + KEEPALIVE_S;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, reader, st, on_free);
	if (!resp) {
		st->refs = 1;
		stream_put(st);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", st->wire->content_type);
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return resp;
}

enum MHD_Result stream_execute_with(struct api_req *rq, struct session *s,
				    const struct exec_request *ex, const struct stream_wire *wire,
				    const void *init)
{
	struct buf begin = BUF_INIT;
	struct MHD_Response *resp;
	struct stream *st;
	char reason[256] = "";
	bool failed = false;
	enum sm_result r;

	/* Claim first, so that busy, gone and over capacity are real HTTP
	 * statuses and not events in a 200 stream. */
	if ((r = session_claim(rq->sm, s, reason, sizeof(reason))) != SM_OK)
		return wire->refuse ? wire->refuse(rq, r, reason) :
				      http_session_error(rq, r, reason);
	if (!rq->deferred)	/* the execution needs this worker */
		goto fail;
	/* held by the worker and the response */
	if (!(st = stream_new(rq, s, wire, init, PENDING_MAX)))
		goto fail;
	st->ex = *ex;
	st->code = dup_or_null(ex->code, &failed);
	st->language = dup_or_null(ex->language, &failed);
	st->context = dup_or_null(ex->context, &failed);
	st->cwd = dup_or_null(ex->cwd, &failed);
	st->input = dup_or_null(ex->input, &failed);	/* no NUL (request.c) */
	st->env = exec_env_dup(ex->env);
	if (failed || !st->env || (wire->begin && wire->begin(st->wire_state, &begin) < 0)) {
		st->refs = 1;
		stream_put(st);
		goto fail;
	}
	buf_append(&st->out, begin.data, begin.len);
	buf_release(&begin);
	st->ex.code = st->code;
	st->ex.language = st->language;
	st->ex.context = st->context;
	st->ex.cwd = st->cwd;
	st->ex.input = st->input;
	st->ex.env = (const char *const *)st->env;
	st->ex.cancel_fd = st->cancel_fd;
	if (!(resp = stream_response(rq, st)))
		goto fail;
	rq->after = run_stream;
	rq->after_arg = st;
	return http_queue(rq, 200, resp);
fail:
	buf_release(&begin);
	session_release(rq->sm, s);
	return wire->refuse ? wire->refuse(rq, SM_NO_MEMORY, "out of memory") :
			      http_error(rq, 500, "internal", "out of memory");
}

/* ---- a stream another thread feeds ---------------------------------------- */

enum MHD_Result stream_open(struct api_req *rq, struct session *s,
			    const struct stream_wire *wire, const void *init,
			    void (*on_close)(void *arg), struct stream **out)
{
	struct MHD_Response *resp;
	struct stream *st;

	*out = NULL;
	/* held by the feeder and the response */
	if (!(st = stream_new(rq, s, wire, init, FEED_PENDING_MAX)))
		return http_error(rq, 500, "internal", "out of memory");
	st->on_close = on_close;
	st->close_arg = st->wire_state;
	if (!(resp = stream_response(rq, st)))
		return http_error(rq, 500, "internal", "out of memory");
	*out = st;
	return http_queue(rq, 200, resp);
}

void *stream_state(struct stream *st) { return st->wire_state; }

void stream_feed(struct stream *st, struct buf *ev, bool live)
{
	queue(st, ev, live);
}

bool stream_takes(struct stream *st, size_t len)
{
	bool takes;

	pthread_mutex_lock(&st->lock);
	takes = !st->closed && room_for(st, len);
	pthread_mutex_unlock(&st->lock);
	return takes;
}

void stream_feed_end(struct stream *st, struct buf *end, bool cut)
{
	if (cut) {
		pthread_mutex_lock(&st->lock);
		st->cut = true;
		pthread_mutex_unlock(&st->lock);
	}
	finish(st, end);
}

void stream_feed_put(struct stream *st)
{
	stream_put(st);
}

enum MHD_Result stream_execute_as(struct api_req *rq, struct session *s,
				  const struct exec_request *ex, const struct stream_wire *wire)
{
	return stream_execute_with(rq, s, ex, wire, NULL);
}

/* ---- the native API's wire: Server-Sent Events --------------------------- */

static int sse_event(struct buf *out, const char *event, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	int r = text ? buf_appendf(out, "event: %s\ndata: %s\n\n", event, text) : -ENOMEM;

	json_decref(data);
	free(text);
	return r;
}

static int sse_text(void *state, struct buf *out, enum exec_stream s, const char *text,
		    size_t len)
{
	(void)state;
	return sse_event(out, s == EXEC_STDOUT ? "stdout" : "stderr",
			 json_pack("{s:s%}", "text", text, len));
}

static int sse_rich(void *state, struct buf *out, const json_t *bundle, bool main)
{
	(void)state;
	(void)main;
	return sse_event(out, "result", json_deep_copy(bundle));
}

static int sse_error(void *state, struct buf *out, const json_t *error)
{
	(void)state;
	return sse_event(out, "error", json_deep_copy(error));
}

static int sse_dropped(void *state, struct buf *out, unsigned long long n)
{
	(void)state;
	return buf_appendf(out, "event: notice\ndata: {\"dropped_events\":%llu,\"reason\":\"the "
			   "client read too slowly: %llu output or result events were dropped "
			   "here; the done event has the whole result\"}\n\n", n, n);
}

static int sse_done(void *state, struct buf *out, enum sm_result r, const char *reason,
		    const struct result *res)
{
	(void)state;
	return sse_event(out, "done", res ? result_to_json(res) :
			 json_pack("{s:{s:s, s:s}}", "error", "code", http_sm_code(r, NULL),
				   "message", http_sm_message(r, reason)));
}

static const struct stream_wire sse_wire = {
	.content_type = "text/event-stream",
	.text = sse_text,
	.rich = sse_rich,
	.error = sse_error,
	.dropped = sse_dropped,
	.done = sse_done,
	.keepalive = ": keepalive\n\n",
};

enum MHD_Result stream_execute(struct api_req *rq, struct session *s,
			       const struct exec_request *ex)
{
	return stream_execute_as(rq, s, ex, &sse_wire);
}

/* ---- the hub ---------------------------------------------------------- */

static void wake_all(struct stream_hub *h)
{
	pthread_mutex_lock(&h->lock);
	for (struct stream *st = h->head; st; st = st->next) {
		pthread_mutex_lock(&st->lock);
		wake(st);
		pthread_mutex_unlock(&st->lock);
	}
	pthread_mutex_unlock(&h->lock);
}

void stream_hub_watch(struct stream_hub *h, struct hub_watch *w)
{
	pthread_mutex_lock(&h->lock);
	w->prev = NULL;
	w->next = h->watches;
	if (h->watches)
		h->watches->prev = w;
	h->watches = w;
	pthread_mutex_unlock(&h->lock);
}

void stream_hub_unwatch(struct stream_hub *h, struct hub_watch *w)
{
	pthread_mutex_lock(&h->lock);
	if (w->prev)
		w->prev->next = w->next;
	else
		h->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
	pthread_mutex_unlock(&h->lock);
}

static void tick_watches(struct stream_hub *h)
{
	pthread_mutex_lock(&h->lock);
	for (struct hub_watch *w = h->watches; w; w = w->next)
		w->tick(w);
	pthread_mutex_unlock(&h->lock);
}

static void *ticker(void *arg)
{
	struct stream_hub *h = arg;

	while (!atomic_load(&h->stopping)) {
		struct timespec at = clock_deadline(1);

		pthread_mutex_lock(&h->lock);
		if (!atomic_load(&h->stopping))
			pthread_cond_timedwait(&h->tick, &h->lock, &at);
		pthread_mutex_unlock(&h->lock);
		wake_all(h);
		tick_watches(h);
	}
	return NULL;
}

int stream_hub_new(struct stream_hub **out)
{
	struct stream_hub *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->tick, NULL);
	if (pthread_create(&h->ticker, NULL, ticker, h) != 0) {
		stream_hub_free(h);
		return -EAGAIN;
	}
	h->ticker_running = true;
	*out = h;
	return 0;
}

void stream_hub_stop(struct stream_hub *h)
{
	pthread_mutex_lock(&h->lock);
	atomic_store(&h->stopping, true);
	pthread_cond_broadcast(&h->tick);
	pthread_mutex_unlock(&h->lock);
	if (h->ticker_running)
		pthread_join(h->ticker, NULL);
	h->ticker_running = false;
	wake_all(h);	/* each reader ends at its next call */
}

void stream_hub_free(struct stream_hub *h)
{
	if (h->ticker_running)
		stream_hub_stop(h);
	if (h->head || h->watches)
		log_warn("http: a stream outlived the server");
	pthread_cond_destroy(&h->tick);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
