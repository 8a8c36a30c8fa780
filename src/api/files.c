/* /v1/sessions/{id}/files: upload, download, list, delete.  Paths are
 * checked here for a clear 400 (ws_path(), src/workspace/ws.h), then
 * resolved inside the sandbox's /work by src/workspace/files.c (openat2,
 * RESOLVE_IN_ROOT). */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "api/http.h"
#include "util/clock.h"
#include "util/log.h"
#include "session/workspace.h"


unsigned http_ws_sentence(const struct http_ws_words *w, int err, const char *path,
			  const struct petri_limits *lim, char *out, size_t len)
{
	const char *before = w->before ? w->before : "", *after = w->after ? w->after : "";

	if (!w->status) {
		snprintf(out, len, "'%.300s': %s", path, strerror(-err));
		return 500;
	}
	switch (w->about) {
	case HTTP_ABOUT_PATH:
		snprintf(out, len, "%s'%.300s'%s", before, path, after);
		break;
	case HTTP_ABOUT_NOTHING:
		snprintf(out, len, "%s%s", before, after);
		break;
	case HTTP_ABOUT_DISK:
	case HTTP_ABOUT_MEMORY:
	case HTTP_ABOUT_PIDS:
		snprintf(out, len, "%s%u%s", before, w->about == HTTP_ABOUT_DISK ? lim->disk_mb :
			 w->about == HTTP_ABOUT_MEMORY ? lim->memory_mb : lim->pids, after);
		break;
	}
	return w->status;
}

/* The API's words for a workspace result: its status and sentence (the
 * code is ws_result_code()'s); the rest are 500, internal. */
static const struct http_ws_words words[WS_RESULTS] = {
	[WS_NOT_FOUND] = { 404, .before = "no such file: " },
	[WS_IS_DIR] = { 400, .after = " is a directory" },
	[WS_NOT_DIR] = { 400, .before = "a component of ", .after = " is not a directory" },
	[WS_SYMLINK] = { 400, .after = " is a symbolic link, which is not written through" },
	[WS_LEAVES] = { 400, .after = " leads outside /work" },
	[WS_NOT_REGULAR] = { 400, .after = " is not a regular file (FIFOs, sockets and devices "
			     "are refused)" },
	[WS_NOT_EMPTY] = { 409, .after = " is a directory that is not empty" },
	[WS_TOO_LONG] = { 400, .before = "the path is too long", .about = HTTP_ABOUT_NOTHING },
	[WS_DENIED] = { 403, .after = ": permission denied (its mode does not let the "
			"sandbox's user, as whom every file operation runs)" },
	[WS_FULL] = { 413, .before = "the session's workspace is full",
		      .about = HTTP_ABOUT_NOTHING },
	[WS_CHANGING] = { 503, .before = "the workspace is changing too fast to look up ",
			  .after = " safely (renames or mounts in the sandbox raced every try); "
			  "retry" },
	[WS_WRITER_FAILED] = { 500, .before = "the upload's writer failed",
			       .about = HTTP_ABOUT_NOTHING },
};

static enum MHD_Result file_error(struct api_req *rq, int err, const char *path)
{
	enum ws_result r = ws_result_of(err);
	unsigned status;
	char msg[512];

	/* Two sentences say what the route was for: a file to download, a
	 * directory to list. */
	if (r == WS_IS_DIR && !strcmp(rq->method, "GET"))
		return http_error(rq, 400, "is_a_directory", "'%.300s' is a directory; list it "
				  "with GET .../files?path=%.300s", path, path);
	if (r == WS_NOT_DIR && strstr(rq->url, "/files/") == NULL)
		return http_error(rq, 400, "not_a_directory", "'%.300s' is not a directory", path);
	status = http_ws_sentence(&words[r], err, path, NULL, msg, sizeof(msg));
	return http_error(rq, status, ws_result_code(r), "%s", msg);
}

/* ---- downloads ----------------------------------------------------------
 *
 * A download's open file keeps its sandbox's /work (a tmpfs) alive, whole,
 * for as long as it is open: after the session ends its pages would be
 * charged to the daemon, outside max_sessions, for as long as a client
 * reads slowly.  So the file is read here (pread, which never blocks on
 * tmpfs) and let go as soon as the session ends: by the reader, when the
 * client reads; by the stream hub's tick, each second, when it does not
 * (MHD calls no reader for a client that reads nothing).  The response then
 * ends with an error: the client sees a truncated body, never a wrong one. */

#define DOWNLOAD_BLOCK (32u << 10)
/* An archive's reader waits suspended at most this long for its writer
 * before it looks again (at the session, too). */
#define DOWNLOAD_WAIT_S 1.0

struct download {
	struct hub_watch watch;		/* first: the tick is given &watch */
	struct stream_hub *hub;
	struct files_waiter *waiter;	/* resumes an archive's connection */
	struct MHD_Connection *conn;
	int client_fd;			/* the connection's socket (MHD's); -1 */
	pthread_mutex_t lock;
	int fd;				/* -1 once let go */
	struct ws_archiver *aw;		/* instead of fd: an archive's writer; NULL */
	struct session *s;		/* a reference while fd or aw is open */
	uint64_t size;
};

static void reap_archiver_later(struct files_waiter *w, struct ws_archiver *aw);
static int wait_readable(struct files_waiter *w, struct MHD_Connection *conn, int fd,
			 double timeout_s);

/* Close the file or kill the archive's writer, and drop the session
 * (d->lock held); the session is returned for the caller to put once
 * unlocked. */
static struct session *download_let_go(struct download *d)
{
	struct session *s = d->s;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	if (d->aw) {
		session_archive_cancel(d->aw);
		reap_archiver_later(d->waiter, d->aw);
	}
	d->aw = NULL;
	d->s = NULL;
	return s;
}

static void download_tick(struct hub_watch *w)
{
	struct download *d = (struct download *)w;
	struct session *s = NULL;

	pthread_mutex_lock(&d->lock);
	if (d->s && session_ended(d->s))
		s = download_let_go(d);
	pthread_mutex_unlock(&d->lock);
	session_put(s);
}

static ssize_t download_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct download *d = cls;
	struct session *s = NULL;
	ssize_t n = MHD_CONTENT_READER_END_WITH_ERROR;

	pthread_mutex_lock(&d->lock);
	if (d->s && session_ended(d->s))
		s = download_let_go(d);
	if (d->fd >= 0 && pos < d->size) {
		if (max > d->size - pos)
			max = (size_t)(d->size - pos);
		n = pread(d->fd, out, max, (off_t)pos);
		/* Shrunk under us (the code truncated it): what was promised
		 * cannot be sent.  0 would make MHD call again at once. */
		if (n <= 0)
			n = MHD_CONTENT_READER_END_WITH_ERROR;
	}
	pthread_mutex_unlock(&d->lock);
	session_put(s);
	return n;
}

/* An archive's next bytes, as its writer made them: what its pipe holds,
 * the end, or an error that cuts the stream (the client sees a chunked
 * body end without its last chunk).  Nothing made yet: the connection is
 * suspended until the pipe is readable (the waiter thread resumes it), so
 * MHD does not call again at once, and nothing here waits.  A suspended
 * connection is one MHD does not watch, nor time out: the waiter resumes
 * it each DOWNLOAD_WAIT_S, and a client gone by then ends the download
 * here, its writer killed (a starved or stopped writer would otherwise keep
 * its listing and buffers, and the connection, until the writer wrote
 * again). */
static ssize_t archive_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct download *d = cls;
	struct session *s = NULL;
	ssize_t n = MHD_CONTENT_READER_END_WITH_ERROR;

	(void)pos;
	pthread_mutex_lock(&d->lock);
	if (d->s && session_ended(d->s))
		s = download_let_go(d);
	if (d->aw) {
		n = session_archive_read(d->aw, out, max);
		if ((n == -EAGAIN || n == -EINPROGRESS) && http_client_gone(d->client_fd))
			n = MHD_CONTENT_READER_END_WITH_ERROR;
		else if (n == -EAGAIN || n == -EINPROGRESS)
			n = wait_readable(d->waiter, d->conn, n == -EAGAIN ?
					  session_archive_fd(d->aw) : session_archive_exit_fd(d->aw),
					  DOWNLOAD_WAIT_S) < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
		else if (n <= 0)
			n = n == 0 ? MHD_CONTENT_READER_END_OF_STREAM
				   : MHD_CONTENT_READER_END_WITH_ERROR;
	}
	pthread_mutex_unlock(&d->lock);
	session_put(s);
	return n;
}

static void download_free(void *cls)
{
	struct download *d = cls;

	stream_hub_unwatch(d->hub, &d->watch);	/* no tick after this */
	session_put(download_let_go(d));
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* A response that sends fd (size bytes) or what aw writes (to its end) of
 * s, owning it from here, even when it fails (NULL). */
static struct MHD_Response *download_new(struct api_req *rq, struct session *s, int fd,
					 struct ws_archiver *aw, uint64_t size)
{
	struct download *d = calloc(1, sizeof(*d));
	const union MHD_ConnectionInfo *ci;
	struct MHD_Response *resp;

	if (!d) {
		if (fd >= 0)
			close(fd);
		if (aw) {
			session_archive_cancel(aw);
			reap_archiver_later(rq->waiter, aw);
		}
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->watch.tick = download_tick;
	d->hub = rq->streams;
	d->waiter = rq->waiter;
	d->conn = rq->conn;
	ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	d->client_fd = ci ? ci->connect_fd : -1;
	d->fd = fd;
	d->aw = aw;
	d->s = session_ref(s);
	d->size = size;
	stream_hub_watch(d->hub, &d->watch);
	/* From here download_free() owns d, the file and the reference. */
	resp = aw ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, DOWNLOAD_BLOCK,
						      archive_read, d, download_free)
		  : MHD_create_response_from_callback(size, DOWNLOAD_BLOCK, download_read, d,
						      download_free);
	if (!resp)
		download_free(d);
	return resp;
}

int files_send(struct api_req *rq, struct session *s, const char *path,
	       enum MHD_Result *queued)
{
	struct MHD_Response *resp;
	struct session_file f;
	int r;

	if ((r = session_file_open(s, path, &f)) < 0)
		return r;
	if (f.size > rq->cfg->max_file_bytes) {
		close(f.fd);
		return -EFBIG;
	}
	if (!(resp = download_new(rq, s, f.fd, NULL, f.size)))
		return -ENOMEM;
	MHD_add_response_header(resp, "Content-Type", f.type);
	/* Code wrote it: never let a browser run it in our origin. */
	MHD_add_response_header(resp, "Content-Security-Policy", "sandbox");
	*queued = http_queue(rq, 200, resp);
	return 0;
}

static enum MHD_Result download(struct api_req *rq, struct session *s, const char *path)
{
	enum MHD_Result queued;
	int r = files_send(rq, s, path, &queued);

	if (r == -EFBIG)
		return http_error(rq, 413, "too_large", "'%.300s' is larger than the %llu MiB "
				  "download limit", path,
				  (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	if (r == -ENOMEM)
		return http_error(rq, 500, "internal", "out of memory");
	return r < 0 ? file_error(rq, r, path) : queued;
}

/* ---- streamed uploads ---------------------------------------------------
 *
 * The body of PUT /v1/sessions/{id}/files/{path} is never held whole: on
 * the request's first call (server.c) files_upload_start() begins a session
 * upload, and each chunk libmicrohttpd delivers is offered to the session's
 * writer (session_upload_offer(), which never waits).  What the daemon
 * holds per upload is a constant: MHD's read buffer and one socket buffer.
 * When the upload cannot start (no such session, a bad path) the body is
 * read and dropped, and the route answers as for any other request; when
 * it fails half-way, the rest is dropped and the answer says why.  The old
 * file is replaced only by a complete body.
 *
 * These run on an event thread, which never waits on a sandbox: begin does
 * not wait for the writer, a writer that stopped taking bytes is asked why
 * by finish (upload(), on a worker), and an abort kills the writer and
 * leaves reaping it to the waiter thread. */

struct api_upload {
	struct session_upload *up;	/* NULL: the body is dropped */
	/* POST .../archive: the name the archive is written under, for the
	 * driver to extract (session_unpack()); "" for a file. */
	char archive[EXEC_ARCHIVE_NAME_LEN];
	struct petri_limits limits;	/* the session's, for the messages */
	char id[SESSION_ID_LEN + 1];	/* the session's, for the cap per session */
	int err;			/* why the upload failed; 0 */
	uint64_t size;
	bool too_large;
	bool dropping;			/* the writer stopped: finish says why */
	bool stalled;			/* set by the waiter: no progress in time */
};

/* PUT "/v1/sessions/<id>/files/<path>": the id and the path; POST
 * "/v1/sessions/<id>/archive": the id and "" (*archive set); else NULL. */
static const char *upload_target(const char *method, const char *url,
				 char id[SESSION_ID_LEN + 1], bool *archive)
{
	const char *p = url + 13, *slash;

	*archive = false;
	if (strncmp(url, "/v1/sessions/", 13) || !(slash = strchr(p, '/')) ||
	    slash == p || (size_t)(slash - p) > SESSION_ID_LEN)
		return NULL;
	if (!strcmp(method, "POST") && !strcmp(slash, "/archive"))
		*archive = true;
	else if (strcmp(method, "PUT") || strncmp(slash, "/files/", 7) || !slash[7])
		return NULL;
	memcpy(id, p, (size_t)(slash - p));
	id[slash - p] = '\0';
	return *archive ? "" : slash + 7;
}

bool files_upload_wanted(const struct api_req *rq)
{
	char id[SESSION_ID_LEN + 1];
	bool archive;

	return upload_target(rq->method, rq->url, id, &archive) != NULL;
}

static void reap_later(struct files_waiter *w, struct session_upload *sup);

/* Abort: the writer is killed, and reaped by the waiter thread. */
static void upload_stop(struct api_req *rq)
{
	struct api_upload *up = rq->upload;

	if (!up->up)
		return;
	session_upload_cancel(up->up);
	reap_later(rq->waiter, up->up);
	up->up = NULL;
}

enum MHD_Result files_upload_start(struct api_req *rq)
{
	const char *cl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Content-Length");
	char id[SESSION_ID_LEN + 1], why[160], rel[FILES_PATH_MAX + 1];
	bool archive;
	const char *path = upload_target(rq->method, rq->url, id, &archive);
	struct api_upload *up;
	struct session *s;

	if (cl && strtoull(cl, NULL, 10) > rq->cfg->max_file_bytes)
		return http_error(rq, 413, "too_large", "the file is larger than the %llu MiB "
				  "upload limit", (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	up = calloc(1, sizeof(*up));
	if (!up)
		return MHD_NO;
	rq->upload = up;
	if (archive) {
		/* A name of its own in /work, which the driver looks for. */
		if ((up->err = exec_archive_name(up->archive)) < 0)
			return MHD_YES;	/* the upload fails: not started */
		path = up->archive;
	}
	if (!path || ws_path(path, NULL, 0, rel, why, sizeof(why)) != WS_OK ||
	    smgr_lookup(rq->sm, id, &s, why, sizeof(why)) != SM_OK)
		return MHD_YES;
	memcpy(up->id, id, sizeof(id));
	up->limits = *session_limits(s);
	up->err = session_upload_begin(rq->sm, s, rel, NULL, &up->up);
	session_put(s);
	return MHD_YES;
}

/* ---- waiting for a writer, without holding an event thread ----------- *
 *
 * When a session's writer is behind (the sandbox is slow: its CPU quota,
 * its memory reclaim), the upload's connection is suspended with what was
 * not taken left to libmicrohttpd, and this thread resumes it once the
 * writer's socket is writable again: an event thread never waits on a
 * sandbox.  A writer that dies makes its socket readable-hung-up, which
 * resumes the connection too (the next offer reports why).  A connection
 * waits at most http_timeout_s for one step of progress (suspended, MHD's
 * own timeout does not run), then is resumed to fail; and one session has
 * at most WAITING_PER_SESSION waiting, so a tenant with slow writers
 * cannot take every slot of WAITER_MAX from the others.
 *
 * An archive download waits the other way: its reader found the writer's
 * pipe empty, and is resumed when it is readable (or after
 * DOWNLOAD_WAIT_S, to look again).
 *
 * The thread also reaps the writers of aborted uploads, killed without
 * waiting by upload_stop(), and of archives whose client went or whose
 * session ended: when one's exit fd is readable (or every REAP_POLL_MS on
 * a kernel without pidfds), session_upload_reap() frees it and removes its
 * temporary file, session_archive_reap() frees it. */

#define WAITER_MAX 1024
#define WAITING_PER_SESSION 4
#define REAP_POLL_MS 100

struct waiting {
	struct MHD_Connection *conn;
	struct api_upload *up;	/* NULL: an archive's reader, not an upload */
	int fd;
	short events;		/* POLLOUT: an upload's writer; POLLIN: an archive's */
	double deadline;	/* CLOCK_MONOTONIC seconds */
};

/* A killed writer to reap: an upload's, or an archive's. */
struct reapable {
	struct session_upload *up;
	struct ws_archiver *aw;
};

struct files_waiter {
	pthread_mutex_t lock;
	struct waiting *v;
	size_t n, cap;
	struct reapable *reap;		/* aborted, their writers killed */
	size_t nreap, reap_cap;
	struct pollfd *pfd;		/* the thread's own */
	size_t pfd_cap;
	struct reapable *ready;		/* the thread's own: to reap now */
	size_t ready_cap;
	int wake[2];		/* a byte: the list changed, or stop */
	bool stop;
	pthread_t thread;
};

static bool grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t c;
	void *p;

	if (n < *cap)
		return true;
	c = *cap ? *cap * 2 : 16;
	if (!(p = realloc(*v, c * size)))
		return false;
	*v = p;
	*cap = c;
	return true;
}

static void wake(struct files_waiter *w)
{
	if (write(w->wake[1], "x", 1) < 0 && errno != EAGAIN)
		log_warn("cannot wake the upload waiter");
}

static int reapable_exit_fd(const struct reapable *r)
{
	return r->up ? session_upload_exit_fd(r->up) : session_archive_exit_fd(r->aw);
}

static bool reapable_reap(struct reapable *r)
{
	return r->up ? session_upload_reap(r->up) : session_archive_reap(r->aw);
}

/* Reap r now: at shutdown, or when it cannot be queued.  Its writer was
 * killed, so this waits for a death, not for the sandbox's pace. */
static void reap_now(struct reapable r)
{
	while (!reapable_reap(&r)) {
		struct pollfd pfd = { .fd = reapable_exit_fd(&r), .events = POLLIN };

		poll(&pfd, pfd.fd >= 0 ? 1 : 0, REAP_POLL_MS);
	}
}

static void reap_queue(struct files_waiter *w, struct reapable r)
{
	bool queued = false;

	pthread_mutex_lock(&w->lock);
	if (!w->stop && grow((void **)&w->reap, &w->reap_cap, w->nreap, sizeof(*w->reap))) {
		w->reap[w->nreap++] = r;
		queued = true;
	}
	pthread_mutex_unlock(&w->lock);
	if (queued)
		wake(w);
	else
		reap_now(r);
}

static void reap_later(struct files_waiter *w, struct session_upload *sup)
{
	reap_queue(w, (struct reapable){ .up = sup });
}

static void reap_archiver_later(struct files_waiter *w, struct ws_archiver *aw)
{
	/* Often dead already: then nothing is queued. */
	if (!session_archive_reap(aw))
		reap_queue(w, (struct reapable){ .aw = aw });
}

static void *waiter_main(void *arg)
{
	struct files_waiter *w = arg;

	for (;;) {
		size_t n, nr, nready;
		int timeout = 1000;
		double now;
		char drain[64];

		pthread_mutex_lock(&w->lock);
		if (w->stop) {
			pthread_mutex_unlock(&w->lock);
			return NULL;
		}
		n = w->n;
		nr = w->nreap;
		if (!grow((void **)&w->pfd, &w->pfd_cap, n + nr + 1, sizeof(*w->pfd)) ||
		    !grow((void **)&w->ready, &w->ready_cap, nr, sizeof(*w->ready))) {
			pthread_mutex_unlock(&w->lock);
			poll(NULL, 0, REAP_POLL_MS);	/* for memory */
			continue;
		}
		now = clock_mono_s();
		for (size_t i = 0; i < n; i++) {
			double left = w->v[i].deadline - now;
			int ms = left <= 0 ? 0 : left * 1000 < timeout ? (int)(left * 1000) + 1 : timeout;

			w->pfd[i] = (struct pollfd){ .fd = w->v[i].fd, .events = w->v[i].events };
			timeout = ms < timeout ? ms : timeout;
		}
		for (size_t i = 0; i < nr; i++) {
			int fd = reapable_exit_fd(&w->reap[i]);

			w->pfd[n + i] = (struct pollfd){ .fd = fd, .events = POLLIN };
			if (fd < 0 && timeout > REAP_POLL_MS)
				timeout = REAP_POLL_MS;
		}
		pthread_mutex_unlock(&w->lock);
		w->pfd[n + nr] = (struct pollfd){ .fd = w->wake[0], .events = POLLIN };
		if (poll(w->pfd, n + nr + 1, timeout) < 0 && errno != EINTR)
			continue;
		if (w->pfd[n + nr].revents)
			while (read(w->wake[0], drain, sizeof(drain)) > 0)
				;
		now = clock_mono_s();
		pthread_mutex_lock(&w->lock);
		/* The first n (nr) are still those polled: entries are added at
		 * the end and removed here alone (or all at once by stop). */
		if (n > w->n)
			n = w->n;
		if (nr > w->nreap)
			nr = w->nreap;
		for (size_t i = n; i-- > 0;) {
			bool late = now >= w->v[i].deadline;

			if (w->pfd[i].revents || late) {
				if (w->v[i].up)
					w->v[i].up->stalled = late && !w->pfd[i].revents;
				MHD_resume_connection(w->v[i].conn);
				w->v[i] = w->v[--w->n];
			}
		}
		/* Reaped outside the lock: the last reference to a session may
		 * go with its upload, and ending a session takes a while. */
		nready = 0;
		for (size_t i = nr; i-- > 0;)
			if (w->pfd[n + i].revents || w->pfd[n + i].fd < 0) {
				w->ready[nready++] = w->reap[i];
				w->reap[i] = w->reap[--w->nreap];
			}
		pthread_mutex_unlock(&w->lock);
		for (size_t i = 0; i < nready; i++)
			if (!reapable_reap(&w->ready[i]))
				reap_queue(w, w->ready[i]);	/* not dead yet */
	}
}

int files_waiter_new(struct files_waiter **out)
{
	struct files_waiter *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(w);
		return -errno;
	}
	if (pthread_create(&w->thread, NULL, waiter_main, w) != 0) {
		close(w->wake[0]);
		close(w->wake[1]);
		free(w);
		return -EAGAIN;
	}
	*out = w;
	return 0;
}

/* Resume every waiting connection, end the thread and reap what is left:
 * before MHD stops (whose closing connections then reap their own). */
void files_waiter_stop(struct files_waiter *w)
{
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	for (size_t i = 0; i < w->n; i++)
		MHD_resume_connection(w->v[i].conn);
	w->n = 0;
	pthread_mutex_unlock(&w->lock);
	wake(w);
	pthread_join(w->thread, NULL);
	for (size_t i = 0; i < w->nreap; i++)
		reap_now(w->reap[i]);
	w->nreap = 0;
}

void files_waiter_free(struct files_waiter *w)
{
	if (!w)
		return;
	close(w->wake[0]);
	close(w->wake[1]);
	free(w->v);
	free(w->reap);
	free(w->ready);
	free(w->pfd);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Suspend rq's connection until fd is writable, or http_timeout_s.  0, or
 * why it cannot wait: -EBUSY (too many waiting, stopping, no memory),
 * -EUSERS (too many of its session's): the caller fails the upload. */
static int wait_for_writer(struct api_req *rq, int fd)
{
	struct files_waiter *w = rq->waiter;
	struct api_upload *up = rq->upload;
	size_t mine = 0, uploads = 0;
	int r = -EBUSY;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n; i++) {
		uploads += w->v[i].up != NULL;
		mine += w->v[i].up && !strcmp(w->v[i].up->id, up->id);
	}
	if (mine >= WAITING_PER_SESSION) {
		r = -EUSERS;
	} else if (!w->stop && uploads < WAITER_MAX &&
		   grow((void **)&w->v, &w->cap, w->n, sizeof(*w->v))) {
		/* Suspended before the waiter can see it, under its lock:
		 * it cannot resume a connection that is not suspended. */
		MHD_suspend_connection(rq->conn);
		w->v[w->n++] = (struct waiting){ rq->conn, up, fd, POLLOUT,
						 clock_mono_s() + rq->cfg->http_timeout_s };
		r = 0;
	}
	pthread_mutex_unlock(&w->lock);
	if (r == 0)
		wake(w);
	return r;
}

/* Suspend conn (from its content reader) until fd is readable, or
 * timeout_s: an archive's writer has made nothing yet.  Not counted in
 * WAITER_MAX, which is the uploads' (each download waiting is one of
 * max_connections already): slow writers of one tenant's archives cannot
 * take the slots of others' uploads.  0, or -EBUSY (stopping, no memory):
 * the caller cuts the stream. */
static int wait_readable(struct files_waiter *w, struct MHD_Connection *conn, int fd,
			 double timeout_s)
{
	int r = -EBUSY;

	pthread_mutex_lock(&w->lock);
	if (!w->stop && grow((void **)&w->v, &w->cap, w->n, sizeof(*w->v))) {
		MHD_suspend_connection(conn);
		w->v[w->n++] = (struct waiting){ conn, NULL, fd, POLLIN,
						 clock_mono_s() + timeout_s };
		r = 0;
	}
	pthread_mutex_unlock(&w->lock);
	if (r == 0)
		wake(w);
	return r;
}

enum MHD_Result files_upload_chunk(struct api_req *rq, const char *data, size_t *size)
{
	struct api_upload *up = rq->upload;
	size_t taken = *size;
	int r;

	if (up->stalled && up->up) {
		up->err = -ETIMEDOUT;
		upload_stop(rq);
	}
	if (!up->too_large && up->size + *size > rq->cfg->max_file_bytes) {
		up->too_large = true;
		upload_stop(rq);
	}
	/* A writer that stopped taking bytes is not waited for here: finish,
	 * on a worker, reaps it and says why; the rest is dropped. */
	if (up->up && !up->dropping && session_upload_offer(up->up, data, *size, &taken) < 0) {
		up->dropping = true;
		taken = *size;
	}
	up->size += taken;
	*size -= taken;
	/* What was not taken stays with MHD, offered again on resume. */
	if (*size && (r = wait_for_writer(rq, session_upload_fd(up->up))) < 0) {
		up->err = r;
		upload_stop(rq);
		up->size += *size;
		*size = 0;
	}
	return MHD_YES;
}

void files_upload_end(struct api_req *rq)
{
	if (!rq->upload)
		return;
	upload_stop(rq);
	free(rq->upload);
	rq->upload = NULL;
}
static enum MHD_Result upload_failed(struct api_req *rq, const char *path, int r,
				     bool ended);

/* Commit the upload that streamed in: 0, or why not (what upload_failed()
 * answers). */
static int upload_commit(struct api_req *rq, bool *ended)
{
	struct api_upload *up = rq->upload;
	int r;

	*ended = false;
	if (!up)
		return -ECHILD;
	if (up->too_large)
		return -EFBIG;
	r = up->err;
	if (!r && !up->up)	/* the session appeared between start and route */
		r = -EAGAIN;
	if (!r) {
		r = session_upload_finish(up->up, true, ended);
		up->up = NULL;
	}
	return r;
}

static enum MHD_Result upload(struct api_req *rq, const char *path)
{
	bool ended;
	int r = upload_commit(rq, &ended);

	if (r < 0)
		return upload_failed(rq, path, r, ended);
	return http_json(rq, 201, json_pack("{s:s, s:I}", "path", path, "size",
					    (json_int_t)rq->upload->size));
}

static enum MHD_Result upload_failed(struct api_req *rq, const char *path, int r,
				     bool ended)
{
	struct api_upload *up = rq->upload;

	if (!up)
		return http_error(rq, 500, "internal", "the upload was not started");
	switch (r) {
	case -EFBIG:
		return http_error(rq, 413, "too_large", "the %s is larger than the %llu MiB "
				  "upload limit", up->archive[0] ? "archive" : "file",
				  (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	case -ENOMEM:
		return http_error(rq, 413, "out_of_memory", "the file does not fit in the "
				  "session's memory limit (%u MiB, which /work counts against): %s",
				  up->limits.memory_mb, ended ? "the session ran out of "
				  "memory and was ended" : "the upload was refused");
	case -EBUSY:
		return http_error(rq, 503, "busy", "too many uploads are waiting for their "
				  "sandboxes; retry later");
	case -EUSERS:
		return http_error(rq, 503, "busy", "this session has %d uploads waiting for its "
				  "sandbox already; retry when one is done", WAITING_PER_SESSION);
	case -ETIMEDOUT:
		return http_error(rq, 503, "upload_stalled", "the sandbox took no byte of the "
				  "upload for %g s (http_timeout_s): it is stopped or starved; the "
				  "old file is untouched", rq->cfg->http_timeout_s);
	case -EAGAIN:
		return http_error(rq, 409, "too_many_processes", "the session is at its process "
				  "limit (%u): an upload needs one process of it", up->limits.pids);
	default:
		return file_error(rq, r, path);
	}
}

/* data[0, len) to the writer of up (NULL: to no one), waiting at most
 * timeout_ms for each step of its progress: 0, -EPIPE (the writer stopped
 * taking bytes: finish says why) or -ETIMEDOUT. */
static int feed(struct session_upload *up, const void *data, size_t len, int timeout_ms)
{
	const char *p = data;

	while (up && len) {
		struct pollfd pfd = { .fd = session_upload_fd(up), .events = POLLOUT };
		size_t taken;

		if (session_upload_offer(up, p, len, &taken) < 0)
			return -EPIPE;
		p += taken;
		len -= taken;
		if (len && poll(&pfd, 1, timeout_ms) == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/* A gzip stream (one member or several, as gzip -c a b makes) inflated a
 * piece at a time into feed(): never whole in memory, at most max bytes of
 * it (-EFBIG past them), -EBADMSG when it is not gzip, is corrupt, is cut
 * or has anything after its last member.  Its work is bounded by its input
 * and max: deflate makes at most 1032 bytes of one. */
#define INFLATE_PIECE (64u << 10)
#define GUNZIP_FREE (16ull << 20)	/* inflated whatever the ratio */
static int feed_gunzip(struct session_upload *up, const void *data, size_t len, uint64_t max,
		       int timeout_ms)
{
	const unsigned char *in = data;
	z_stream z = { .zalloc = Z_NULL };
	unsigned char *out = malloc(INFLATE_PIECE);
	uint64_t made = 0;
	int r = 0, zr;

	if (!out || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return -ENOMEM;
	}
	for (;;) {
		size_t got;

		if (z.avail_in == 0 && len) {	/* avail_in is 32 bits */
			z.next_in = (unsigned char *)in;
			z.avail_in = len > (1u << 30) ? (1u << 30) : (unsigned)len;
			in += z.avail_in;
			len -= z.avail_in;
		}
		z.next_out = out;
		z.avail_out = INFLATE_PIECE;
		zr = inflate(&z, Z_NO_FLUSH);
		got = INFLATE_PIECE - z.avail_out;
		if (zr == Z_MEM_ERROR) {
			r = -ENOMEM;
			break;
		}
		if (zr != Z_OK && zr != Z_STREAM_END && (zr != Z_BUF_ERROR || z.avail_in || len)) {
			r = -EBADMSG;	/* Z_BUF_ERROR with nothing left: cut short */
			break;
		}
		if (got > max - made) {
			r = -EFBIG;
			break;
		}
		made += got;
		if ((r = feed(up, out, got, timeout_ms)) < 0)
			break;
		if (zr == Z_BUF_ERROR) {
			r = -EBADMSG;
			break;
		}
		if (zr == Z_STREAM_END && !z.avail_in && !len)
			break;		/* the last member */
		if (zr == Z_STREAM_END && inflateReset(&z) != Z_OK) {
			r = -EBADMSG;
			break;
		}
	}
	inflateEnd(&z);
	free(out);
	return r;
}

int files_put(struct api_req *rq, struct session *s, const char *path, const void *data,
	      size_t len, const struct files_put_how *how, bool *ended)
{
	int timeout_ms = (int)(rq->cfg->http_timeout_s * 1000);
	uint64_t max = rq->cfg->max_file_bytes;
	bool gzip = how && how->gzip;

	/* The daemon inflates: past 16 MiB, at most archive_max_ratio times
	 * what the client sent (its CPU per byte received is bounded). */
	if (gzip && max > GUNZIP_FREE && max / rq->cfg->archive_max_ratio > len) {
		uint64_t ratio = (uint64_t)len * rq->cfg->archive_max_ratio;

		max = ratio > GUNZIP_FREE ? ratio : GUNZIP_FREE;
	}
	struct session_upload *up;
	int r;

	*ended = false;
	/* A stream that is not gzip, or inflates past the limit, is refused
	 * before the writer starts: it writes nothing, no directory either.
	 * It is inflated twice then, each time bounded as above. */
	if (gzip && (r = feed_gunzip(NULL, data, len, max, timeout_ms)) < 0)
		return r;
	if ((r = session_upload_begin(rq->sm, s, path, how ? how->meta : NULL, &up)) < 0)
		return r;
	r = gzip ? feed_gunzip(up, data, len, max, timeout_ms) : feed(up, data, len, timeout_ms);
	if (r == -ETIMEDOUT || r == -ENOMEM || r == -EFBIG || r == -EBADMSG) {
		/* A stopped or starved sandbox does not keep this worker: the
		 * writer is killed, its temporary file removed by the reaper. */
		session_upload_cancel(up);
		reap_later(rq->waiter, up);
		return r;
	}
	return session_upload_finish(up, true, ended);	/* -EPIPE: the writer's reason */
}

enum MHD_Result handle_files(struct api_req *rq, struct session *s, const char *path,
			     bool is_list)
{
	const char *m = rq->method;
	char why[160], rel[FILES_PATH_MAX + 1];

	if (is_list) {
		const char *dir = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "path");
		json_t *list;
		bool truncated;
		int r;

		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		if (ws_path(dir ? dir : "", NULL, WS_PATH_ROOT | WS_PATH_SLASH, rel, why,
			    sizeof(why)) != WS_OK)
			return http_error(rq, 400, "invalid_path", "%s", why);
		if ((r = session_file_list(s, rel, &list, &truncated)) < 0)
			return file_error(rq, r, rel);
		return http_json(rq, 200, json_pack("{s:s, s:o, s:b}", "path", rel, "files", list,
						    "truncated", truncated));
	}
	if (ws_path(path, NULL, 0, rel, why, sizeof(why)) != WS_OK)
		return http_error(rq, 400, "invalid_path", "%s", why);
	if (!strcmp(m, "GET"))
		return download(rq, s, rel);
	if (!strcmp(m, "PUT"))
		return upload(rq, rel);
	if (!strcmp(m, "DELETE")) {
		int r = session_file_remove(s, rel);

		if (r < 0)
			return file_error(rq, r, rel);
		return http_empty(rq, 204);
	}
	return http_not_allowed(rq, "GET, PUT, DELETE");
}

/* ---- archives: POST and GET /v1/sessions/{id}/archive -------------------
 *
 * An archive streams in as an upload does, to a name of its own in /work
 * (charged to the session), and is then extracted by the session's driver,
 * inside the sandbox (session_unpack()): its parsing, its checks and its
 * cost are the session's.  A download is made here, as the stream goes
 * (src/workspace/archive.h), and let go like a file's when the session ends. */

static enum MHD_Result archive_out(struct api_req *rq, struct session *s, const char *dir)
{
	const char *format = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							 "format");
	struct MHD_Response *resp;
	struct ws_archiver *aw;
	char why[512];
	size_t entries;
	bool gzip;
	int r;

	if (!format || !strcmp(format, "tar.gz") || !strcmp(format, "tgz"))
		gzip = true;
	else if (!strcmp(format, "tar"))
		gzip = false;
	else
		return http_error(rq, 400, "invalid_request", "format is tar.gz (the default) "
				  "or tar, not '%.40s'", format);
	/* Listed, then compressed, by a writer charged to the session; this
	 * worker waits for the listing's outcome (an answer, not a cut
	 * stream), and the event thread only copies what the writer made. */
	r = session_archive_start(s, dir, gzip, rq->cfg->archive_max_entries,
				  rq->cfg->http_timeout_s, &aw, &entries, why, sizeof(why));
	if (r < 0 && aw)
		reap_archiver_later(rq->waiter, aw);
	if (r < 0 && !aw)
		return http_error(rq, 500, "internal", "%s", why);
	if (r == -EAGAIN)
		return http_error(rq, 429, "too_many_processes", "%s", why);
	if (r == -ETIMEDOUT || r == -EBUSY)
		return http_error(rq, 503, "busy", "%s", why);
	if (r == -ENOMEM || r == -E2BIG)
		return http_error(rq, 413, "too_large", "%s", why);
	if (r < 0)
		return file_error(rq, r, dir);
	log_debug("http: an archive of '%.300s': %zu entries", dir, entries);
	if (!(resp = download_new(rq, s, -1, aw, 0)))
		return http_error(rq, 500, "internal", "out of memory");
	MHD_add_response_header(resp, "Content-Type", gzip ? "application/gzip"
							   : "application/x-tar");
	MHD_add_response_header(resp, "Content-Disposition", gzip
				? "attachment; filename=\"workspace.tar.gz\""
				: "attachment; filename=\"workspace.tar\"");
	MHD_add_response_header(resp, "Content-Security-Policy", "sandbox");
	return http_queue(rq, 200, resp);
}

static enum MHD_Result archive_in(struct api_req *rq, struct session *s, const char *dir)
{
	struct api_upload *up = rq->upload;
	json_t *summary;
	char err[512] = "";
	enum sm_result r;
	bool ended;
	int w = upload_commit(rq, &ended);

	if (w < 0)
		return upload_failed(rq, "the archive", w, ended);
	r = session_unpack(rq->sm, s, up->archive, dir, &summary, err, sizeof(err));
	switch (r) {
	case SM_OK:
		json_object_set_new(summary, "path", json_string(dir));
		json_object_set_new(summary, "size", json_integer((json_int_t)up->size));
		return http_json(rq, 201, summary);
	case SM_INVALID:
		return http_error(rq, 400, "invalid_archive", "%s", err);
	case SM_TOO_LARGE:
		return http_error(rq, 413, "archive_too_large", "%s", err);
	default:
		return http_session_error(rq, r, err);
	}
}

enum MHD_Result handle_archive(struct api_req *rq, struct session *s)
{
	const char *path = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "path");
	char why[160], dir[FILES_PATH_MAX + 1];

	if (ws_path(path ? path : "", NULL, WS_PATH_ROOT | WS_PATH_SLASH, dir, why,
		    sizeof(why)) != WS_OK)
		return http_error(rq, 400, "invalid_path", "%s", why);
	if (!strcmp(rq->method, "GET"))
		return archive_out(rq, s, dir);
	if (!strcmp(rq->method, "POST"))
		return archive_in(rq, s, dir);
	return http_not_allowed(rq, "GET, POST");
}
