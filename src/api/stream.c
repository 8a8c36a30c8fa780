/* Server-Sent Events for an execution: stdout and stderr chunks as they
 * are printed, each result and the error when they occur, then "done" with
 * the whole result object.
 *
 * A worker thread runs the execution and appends events to a buffer; the
 * connection's thread (MHD's content reader) takes them out.  When the
 * client goes away MHD frees the response: that writes the stream's
 * eventfd, which box_exec() watches, and the execution is interrupted (the
 * session and its variables survive). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "api/http.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/utf8.h"

#define KEEPALIVE_S 10
#define BLOCK_SIZE 16384

struct stream {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct buf out;			/* SSE text not yet sent */
	bool finished;			/* the worker queued its last event */
	bool closed;			/* the client is gone */
	int refs;
	int cancel_fd;
	int client_fd;			/* the connection's socket, to notice a hang-up */
	/* the execution */
	struct smgr *sm;
	struct session *s;
	struct box_exec ex;
	char *code, *language;
	/* a character cut across two chunks waits here for its end */
	char carry[2][4];
	size_t ncarry[2];
};

static void stream_put(struct stream *st)
{
	bool last;

	pthread_mutex_lock(&st->lock);
	last = --st->refs == 0;
	pthread_mutex_unlock(&st->lock);
	if (!last)
		return;
	session_put(st->s);
	close(st->cancel_fd);
	buf_release(&st->out);
	free(st->code);
	free(st->language);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* Queue one event; data is a JSON value (stolen). */
static void emit(struct stream *st, const char *event, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;

	json_decref(data);
	if (!text)
		return;
	pthread_mutex_lock(&st->lock);
	if (!st->closed) {
		buf_appendf(&st->out, "event: %s\ndata: %s\n\n", event, text);
		pthread_cond_broadcast(&st->cond);
	}
	pthread_mutex_unlock(&st->lock);
	free(text);
}

static void on_output(void *ctx, enum box_stream s, const char *data, size_t len)
{
	struct stream *st = ctx;
	int k = s == BOX_STDOUT ? 0 : 1;
	struct buf joined = BUF_INIT, clean = BUF_INIT;
	size_t cut;

	/* Text events must be UTF-8: hold back a character's first bytes
	 * until the rest arrives, replace what can never be valid. */
	if (buf_append(&joined, st->carry[k], st->ncarry[k]) < 0 ||
	    buf_append(&joined, data, len) < 0)
		goto out;
	cut = utf8_cut(joined.data, joined.len);
	st->ncarry[k] = joined.len - cut;
	memcpy(st->carry[k], joined.data + cut, st->ncarry[k]);
	if (cut && utf8_sanitize(&clean, joined.data, cut) == 0)
		emit(st, k ? "stderr" : "stdout",
		     json_pack("{s:s%}", "text", clean.data, clean.len));
out:
	buf_release(&joined);
	buf_release(&clean);
}

static void on_rich(void *ctx, const json_t *bundle)
{
	emit(ctx, "result", json_deep_copy(bundle));
}

static void on_error(void *ctx, const json_t *error)
{
	emit(ctx, "error", json_deep_copy(error));
}

static void *worker(void *arg)
{
	struct stream *st = arg;
	struct box_events ev = { .ctx = st, .output = on_output, .rich = on_rich,
				 .error = on_error };
	struct result res;
	int r;

	if (result_init(&res) < 0) {
		emit(st, "done", json_pack("{s:{s:s, s:s}}", "error", "code", "internal",
					   "message", "out of memory"));
	} else {
		r = session_run(st->sm, st->s, &st->ex, &ev, &res);
		for (int k = 0; k < 2; k++)	/* an unfinished character at the end */
			if (st->ncarry[k]) {
				struct buf clean = BUF_INIT;

				utf8_sanitize(&clean, st->carry[k], st->ncarry[k]);
				emit(st, k ? "stderr" : "stdout",
				     json_pack("{s:s%}", "text", clean.data, clean.len));
				buf_release(&clean);
			}
		emit(st, "done", r < 0 ? json_pack("{s:{s:s, s:s}}", "error", "code",
						   "internal", "message", strerror(-r)) :
					 result_to_json(&res));
		result_release(&res);
	}
	pthread_mutex_lock(&st->lock);
	st->finished = true;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	stream_put(st);
	return NULL;
}

/* Has the client hung up?  Without output to write, MHD would notice only
 * at the next keepalive; we look at the socket every second instead. */
static bool client_gone(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	return fd >= 0 && poll(&pfd, 1, 0) > 0 &&
	       (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *st = cls;
	struct timespec now;
	time_t keepalive_at;
	ssize_t n;

	(void)pos;
	clock_gettime(CLOCK_REALTIME, &now);
	keepalive_at = now.tv_sec + KEEPALIVE_S;
	pthread_mutex_lock(&st->lock);
	while (st->out.len == 0 && !st->finished) {
		struct timespec tick = clock_deadline(1);

		if (pthread_cond_timedwait(&st->cond, &st->lock, &tick) != ETIMEDOUT)
			continue;
		if (client_gone(st->client_fd)) {
			pthread_mutex_unlock(&st->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (tick.tv_sec >= keepalive_at) {
			/* A comment line keeps proxies patient. */
			pthread_mutex_unlock(&st->lock);
			memcpy(out, ": keepalive\n\n", 13);
			return 13;
		}
	}
	if (st->out.len == 0) {
		pthread_mutex_unlock(&st->lock);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	n = (ssize_t)(st->out.len < max ? st->out.len : max);
	memcpy(out, st->out.data, (size_t)n);
	buf_consume(&st->out, (size_t)n);
	pthread_mutex_unlock(&st->lock);
	return n;
}

static void on_free(void *cls)
{
	struct stream *st = cls;
	uint64_t one = 1;

	pthread_mutex_lock(&st->lock);
	st->closed = true;
	if (!st->finished && write(st->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot cancel a streamed execution");
	pthread_mutex_unlock(&st->lock);
	stream_put(st);
}

enum MHD_Result stream_execute(struct api_req *rq, struct session *s,
			       const struct box_exec *ex)
{
	struct MHD_Response *resp;
	struct stream *st;
	pthread_t thread;
	char reason[256] = "";
	enum MHD_Result answered;
	int r;

	/* Claim first, so that busy, gone and over capacity are real HTTP
	 * statuses and not events in a 200 stream. */
	if ((r = session_claim(rq->sm, s, reason, sizeof(reason))) < 0)
		return http_session_error(rq, r, reason);
	st = calloc(1, sizeof(*st));
	if (!st)
		goto fail;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	st->refs = 2;	/* the worker and the response */
	st->sm = rq->sm;
	st->ex = *ex;
	st->code = strdup(ex->code);
	st->language = strdup(ex->language);
	st->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!st->code || !st->language || st->cancel_fd < 0) {
		if (st->cancel_fd < 0)
			st->cancel_fd = -1;
		free(st->code);
		free(st->language);
		free(st);
		goto fail;
	}
	st->ex.code = st->code;
	st->ex.language = st->language;
	st->ex.cancel_fd = st->cancel_fd;
	{
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		st->client_fd = ci ? ci->connect_fd : -1;
	}
	st->s = session_ref(s);	/* the stream outlives this request */
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, reader, st, on_free);
	if (!resp) {
		st->refs = 1;
		stream_put(st);
		goto fail;
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	if (pthread_create(&thread, NULL, worker, st) != 0) {
		MHD_destroy_response(resp);	/* on_free drops one reference */
		stream_put(st);
		session_release(rq->sm, s);
		return http_error(rq, 500, "internal", "cannot start the execution");
	}
	pthread_detach(thread);
	answered = MHD_queue_response(rq->conn, 200, resp);
	MHD_destroy_response(resp);
	return answered;
fail:
	session_release(rq->sm, s);
	return http_error(rq, 500, "internal", "out of memory");
}
