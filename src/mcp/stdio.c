#include "mcp/stdio.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/log.h"
#include "util/workq.h"

#define READ_CHUNK 65536
#define MCP_SERVER_BUSY (-32000)

/* A tool call waiting for the worker. */
struct queued {
	struct workq_item work;
	json_t *msg;
};

struct stdio_conn {
	struct mcp_conn *conn;
	int out_fd;
	pthread_mutex_t write_lock;
	bool out_broken;		/* the client stopped reading */
	struct workq *calls;		/* one thread, of struct queued */
};

static void send_msg(struct stdio_conn *sc, json_t *msg)
{
	char *text;
	size_t len, off = 0;

	if (!msg)
		return;
	text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text) {
		log_err("mcp: cannot encode a response: out of memory");
		return;
	}
	len = strlen(text);
	text[len] = '\n';	/* json_dumps leaves room for its NUL */
	len++;
	pthread_mutex_lock(&sc->write_lock);
	while (!sc->out_broken && off < len) {
		ssize_t n = write(sc->out_fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_info("mcp: the client stopped reading: %s",
				 n < 0 ? strerror(errno) : "closed");
			sc->out_broken = true;
			break;
		}
		off += (size_t)n;
	}
	pthread_mutex_unlock(&sc->write_lock);
	free(text);
}

/* Is this a message that may take long (a tool call, alone or in a
 * batch)?  Those go to the worker. */
static bool slow(json_t *msg)
{
	size_t i;
	json_t *m;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			if (slow(m))
				return true;
		return false;
	}
	return json_is_object(msg) && json_object_get(msg, "id") &&
	       json_is_string(json_object_get(msg, "method")) &&
	       !strcmp(json_string_value(json_object_get(msg, "method")), "tools/call");
}

static bool out_broken(struct stdio_conn *sc)
{
	bool broken;

	pthread_mutex_lock(&sc->write_lock);
	broken = sc->out_broken;
	pthread_mutex_unlock(&sc->write_lock);
	return broken;
}

/* Let go of a call: answered, or dropped unrun (stopped, or nobody to
 * answer). */
static void free_call(struct workq_item *item, void *arg)
{
	struct queued *q = workq_entry(item, struct queued, work);

	(void)arg;
	json_decref(q->msg);
	free(q);
}

/* The worker's handler: run the call, answer it. */
static void run_call(struct workq_item *item, void *arg)
{
	struct stdio_conn *sc = arg;
	struct queued *q = workq_entry(item, struct queued, work);

	send_msg(sc, mcp_conn_handle(sc->conn, q->msg));
	free_call(item, arg);
}

/* Hand a message to the worker (steals msg). */
static void enqueue(struct stdio_conn *sc, json_t *msg)
{
	struct queued *q = calloc(1, sizeof(*q));

	if (q)
		q->msg = msg;
	/* Full (MCP_STDIO_QUEUE_MAX waiting), or no memory. */
	if (!q || workq_push(sc->calls, &q->work, NULL) < 0) {
		free(q);
		send_msg(sc, mcp_error(json_is_object(msg) ? json_object_get(msg, "id") : NULL,
				       MCP_SERVER_BUSY, "too many tool calls are waiting (at most "
				       "%d): wait for answers before sending more",
				       MCP_STDIO_QUEUE_MAX));
		json_decref(msg);
	}
}

static void handle_line(struct stdio_conn *sc, const char *line, size_t len)
{
	json_t *msg, *err;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	while (len && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	if (len == 0)
		return;
	msg = mcp_parse(line, len, &err);
	if (!msg) {
		send_msg(sc, err);
		return;
	}
	if (slow(msg)) {
		enqueue(sc, msg);
		return;
	}
	send_msg(sc, mcp_conn_handle(sc->conn, msg));
	mcp_conn_answered(sc->conn, msg);
	json_decref(msg);
}

/* Read lines until end of input, a read error, or stop_fd. */
static int read_loop(struct stdio_conn *sc, int in_fd, int stop_fd)
{
	struct buf line = BUF_INIT;
	bool skipping = false;	/* inside a line that is too long */
	char *chunk = malloc(READ_CHUNK);
	int r = 0;

	if (!chunk)
		return -ENOMEM;
	for (;;) {
		struct pollfd p[2] = { { .fd = in_fd, .events = POLLIN },
				       { .fd = stop_fd, .events = POLLIN } };
		ssize_t n;
		char *start, *nl;

		if (poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (stop_fd >= 0 && p[1].revents) {
			r = 1;
			break;
		}
		n = read(in_fd, chunk, READ_CHUNK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		if (out_broken(sc))
			break;
		start = chunk;
		while ((nl = memchr(start, '\n', (size_t)(chunk + n - start)))) {
			size_t part = (size_t)(nl - start);

			if (skipping) {
				skipping = false;
			} else if (line.len) {
				if (buf_append(&line, start, part) < 0) {
					r = -ENOMEM;
					goto out;
				}
				handle_line(sc, line.data, line.len);
				buf_reset(&line);
			} else {
				handle_line(sc, start, part);
			}
			start = nl + 1;
		}
		if (start < chunk + n && !skipping) {
			size_t part = (size_t)(chunk + n - start);

			if (line.len + part > MCP_MESSAGE_MAX) {
				/* Answer now; the rest of the line is dropped. */
				send_msg(sc, mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: "
						       "a message longer than %u MiB",
						       MCP_MESSAGE_MAX >> 20));
				buf_release(&line);
				skipping = true;
			} else if (buf_append(&line, start, part) < 0) {
				r = -ENOMEM;
				goto out;
			}
		}
	}
	/* A last line without its newline is still a message. */
	if (r == 0 && line.len && !skipping)
		handle_line(sc, line.data, line.len);
out:
	buf_release(&line);
	free(chunk);
	return r;
}

int mcp_stdio_serve(struct mcp_conn *c, int in_fd, int out_fd, int stop_fd)
{
	struct stdio_conn sc = { .conn = c, .out_fd = out_fd };
	int r;

	pthread_mutex_init(&sc.write_lock, NULL);
	r = workq_start(1, MCP_STDIO_QUEUE_MAX, run_call, &sc, &sc.calls);
	if (r < 0) {
		mcp_conn_close(c);
		pthread_mutex_destroy(&sc.write_lock);
		return r;
	}
	r = read_loop(&sc, in_fd, stop_fd);

	if (r != 0 || out_broken(&sc)) {
		/* Stopped, or nobody to answer: drop what waits, kill what runs. */
		workq_close(sc.calls, free_call);
		mcp_conn_close(c);
	} else {
		log_info("mcp: end of input: finishing %zu queued call(s)",
			 workq_close(sc.calls, NULL));
	}
	workq_free(sc.calls);	/* after the call that runs, if any */
	mcp_conn_close(c);

	pthread_mutex_destroy(&sc.write_lock);
	return r < 0 ? r : r == 1 ? 1 : 0;
}
