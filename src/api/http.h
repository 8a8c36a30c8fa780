/* http — what the API's handlers share: the request, and the ways to
 * answer it.  Internal to src/api and to the adapter beside it (src/e2b),
 * which answers on the same server.
 *
 * The files of src/api, by the thread that runs them (docs/architecture.md
 * has the whole table of threads and the order of their locks):
 *
 *   event threads (libmicrohttpd, epoll; never wait on a sandbox)
 *     server.c    listening, routing, authentication, bodies and their
 *                 budgets; /healthz, /readyz, /metrics and the OpenAPI
 *                 document answered here
 *     guard.c     what the headers alone condemn (framing, Host, Origin)
 *     clients.c   who the client is: its address, or a trusted router's
 *                 forwarded one, and its requests in flight
 *     share.c     a budget shared fairly between tenants (bodies, streams)
 *     answers.c   answers held until their clients have read them
 *     web.c       the web page's files
 *     the content readers of stream.c, export.c and files.c's downloads,
 *     which copy what is ready, and files.c's uploads, offered to their
 *     writer a chunk at a time: neither ever waits
 *   workers (worker.c: a work queue, the connection suspended meanwhile)
 *     handlers.c  sessions, executions and one-shots
 *     files.c     files and archives of a session's /work (through
 *                 session/workspace.h)
 *     record.c    the whole record's listing; export.c starts exports
 *     mcp.c       /mcp, MCP's Streamable HTTP transport (src/mcp does MCP)
 *     src/e2b     E2B's control plane, envd and /execute, over the same
 *                 session API (e2b_route())
 *   threads of their own
 *     accept.c    accepts connections and hands them to the event threads
 *     stream.c    the stream hub's tick: keepalives, clients gone
 *     events.c    fed on the thread that recorded an execution
 *     files.c     the upload waiter: resumes suspended uploads and
 *                 downloads, reaps the writers of aborted ones
 *
 * A handler that may block is handed to a worker by server.c: it answers
 * with http_error(), http_json() or http_queue() as any other, and the
 * response is queued by the event thread when the connection resumes. */
#ifndef PETRI_API_HTTP_H
#define PETRI_API_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>

#include "api/share.h"
#include "config/config.h"
#include "session/session.h"
#include "util/buf.h"
#include "util/workq.h"

struct api_server;
struct mcp_registry;
struct stream_hub;
struct files_waiter;
struct e2b;
struct events;
struct answers;

/* One request, from its headers to on_completed (server.c owns it).  A
 * handler that can block runs on a worker (worker.c) while MHD keeps the
 * connection suspended: then the response it queues is kept in resp and
 * queued by the event thread when the connection resumes. */
struct api_req {
	struct api_server *srv;
	const struct petri_config *cfg;
	struct smgr *sm;
	struct mcp_registry *mcp;	/* MCP connections (mcp.c) */
	struct stream_hub *streams;	/* SSE streams (stream.c) */
	struct files_waiter *waiter;	/* uploads waiting for a writer (files.c) */
	struct e2b *e2b;		/* E2B sandboxes (e2b.c) */
	struct events *events;		/* GET /v1/events (events.c) */
	struct answers *answers;	/* answers not yet read (answers.h) */
	int e2b_kind;			/* enum e2b_kind: E2B_NONE, or which E2B route */
	char e2b_sid[SESSION_ID_LEN + 1];	/* the sandbox its token opened */
	bool e2b_port_host;		/* E2B_PORT named by its Host (e2b_kind_of()) */
	bool opaque_body;		/* a body the handler parses (multipart,
					 * Connect envelopes), not JSON */
	int key_index;			/* the API key it came with, in the
					 * configuration's list; -1: no keys,
					 * or none sent; on E2B's data plane,
					 * the key that made the sandbox */
	bool turn;			/* holds one of its key's turns (server.c) */
	bool read_slot;			/* holds one of the expensive reads'
					 * slots (server.c) */
	int client_fd;			/* its socket, once http_gone() looked */
	struct MHD_Connection *conn;
	/* Its client's address (util/cidr.h bytes; has_client false on a
	 * unix socket): the peer's, or the one a trusted router forwarded
	 * (clients.h), which holds one of its requests in flight. */
	unsigned char client[16];
	bool has_client, forwarded, client_held;
	struct share_tenant tenant;	/* who it is charged to (share.h) */
	const char *method;
	const char *url;
	struct buf body;
	uint64_t body_max;	/* the cap of this body: JSON or upload */
	size_t reserved;	/* bytes of the server's body budget held */
	bool raw_upload;	/* a raw file body, not JSON: streamed */
	struct api_upload *upload;	/* its state (files.c) */
	bool too_large;
	bool too_busy;		/* the server's body budget was spent */
	bool over_share;	/* its tenant's share of the budget was */
	double body_since;	/* when its body began (monotonic) */
	bool answered;		/* a response is queued or kept */
	bool counted;		/* in the server's active count */
	/* on a worker */
	bool deferred;		/* keep the response in resp, do not queue it */
	bool ran;		/* the worker is done with the handler */
	enum MHD_Result result;	/* what the handler returned */
	unsigned status;
	struct MHD_Response *resp;
	/* Run on the worker once the connection resumed (the request may be
	 * gone by then): a streamed execution. */
	void (*after)(void *arg);
	void *after_arg;
	struct workq_item work;	/* in the workers' queue (worker.c) */
};

/* Compare secrets in time that depends only on their lengths, not on where
 * the first difference is. */
bool http_same_secret(const char *a, const char *b);
/* Is key one of the server's API keys (or are there none)? */
bool http_key_ok(const struct petri_config *cfg, const char *key);
/* The same, and which: its index into cfg->api_keys, -1 when there are no
 * keys (or it is not one). */
bool http_key_find(const struct petri_config *cfg, const char *key, int *index);

/* All return the MHD result of queueing the response. */
/* Queue resp (consumed; NULL: fail) with the common headers. */
enum MHD_Result http_queue(struct api_req *rq, unsigned status, struct MHD_Response *resp);
enum MHD_Result http_json(struct api_req *rq, unsigned status, json_t *body);
/* The same with one more header (name NULL: none). */
enum MHD_Result http_json_header(struct api_req *rq, unsigned status, json_t *body,
				 const char *name, const char *value);
enum MHD_Result http_error(struct api_req *rq, unsigned status, const char *code,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
enum MHD_Result http_text(struct api_req *rq, unsigned status, const char *type,
			  const char *text, size_t len);
/* The same with text consumed (freed with the response, or now); every
 * answer is charged to the request's key until it is read (answers.h). */
enum MHD_Result http_answer(struct api_req *rq, unsigned status, const char *type,
			    char *text, size_t len);
enum MHD_Result http_empty(struct api_req *rq, unsigned status);
/* 405 with an Allow header listing the methods that are. */
enum MHD_Result http_not_allowed(struct api_req *rq, const char *allow);
/* /healthz or /readyz: the probes, answered to anyone (no key, any Host,
 * never E2B's) on the event thread. */
bool http_is_probe(const char *url);

/* s as a JSON string whatever its bytes (a message may quote what a client
 * or a sandbox sent): what is not UTF-8 becomes U+FFFD, as utf8_sanitize()
 * does, instead of jansson refusing it.  NULL when out of memory. */
json_t *http_string(const char *s);

/* Parse the body as a JSON object ({} when empty).  On failure answers 400
 * itself and returns NULL (then return *answered). */
json_t *http_body_object(struct api_req *rq, enum MHD_Result *answered);
/* Is every key of obj in allowed (NULL-terminated)?  If not, answers 400
 * naming the key and returns false. */
bool http_only_keys(struct api_req *rq, json_t *obj, const char *const *allowed,
		    enum MHD_Result *answered);

/* Refuse at header time what the request's headers already condemn:
 * conflicting framing (400), a foreign Host or Origin (403), a body that is
 * not JSON on a JSON route (415).  true: the request may go on; false: it
 * was answered (*answered). */
bool guard_request(struct api_req *rq, const char *listen_host, enum MHD_Result *answered);

/* An error for /mcp in JSON-RPC form (mcp.c). */
enum MHD_Result mcp_http_refuse(struct api_req *rq, unsigned status, const char *msg);

/* Has the client of a stream whose socket is fd hung up?  Without output
 * to write, MHD would notice only at the next keepalive; the streams look
 * at their sockets each second instead (stream.c). */
bool http_client_gone(int fd);

/* Has the client of rq hung up?  For a handler on a worker (the
 * connection is suspended: MHD does not notice meanwhile) whose work is
 * for the client alone, to stop it when nobody waits: the record's
 * listings and exports (record_query.gone). */
bool http_gone(void *rq);

/* Does the client want Server-Sent Events? */
bool http_wants_sse(struct api_req *rq);

/* Handlers (handlers.c, files.c, commands.c, ports.c, stream.c, record.c, export.c). */
enum MHD_Result handle_sessions(struct api_req *rq);
/* GET /v1/executions: the whole record, newest first. */
enum MHD_Result handle_executions(struct api_req *rq);
enum MHD_Result handle_session(struct api_req *rq, const char *id, const char *rest);
/* GET /v1/sessions/{id}/export and GET /v1/executions/export (the one-shot
 * runs): the record as a notebook, a page or JSON Lines (export.c). */
enum MHD_Result handle_session_export(struct api_req *rq, const char *id);
enum MHD_Result handle_oneshots_export(struct api_req *rq);
enum MHD_Result handle_oneshot(struct api_req *rq);
/* GET (a tar.gz of ?path=) and POST (an archive extracted into ?path=)
 * /v1/sessions/{id}/archive (files.c). */
enum MHD_Result handle_archive(struct api_req *rq, struct session *s);
enum MHD_Result handle_files(struct api_req *rq, struct session *s, const char *path,
			     bool is_list);
/* /v1/sessions/{id}/commands[/{pid}[/stdin]], rest after "/commands/"
 * ("" for the collection) (commands.c). */
enum MHD_Result handle_commands(struct api_req *rq, struct session *s, const char *rest);
/* ANY /v1/sessions/{id}/ports/{port}[/path], rest after "/ports/": a
 * request to a server the session runs (ports.c). */
enum MHD_Result handle_ports(struct api_req *rq, struct session *s, const char *rest);
/* GET /v1/sessions/{id}/watch: a directory's changes as Server-Sent Events
 * (watch.c). */
enum MHD_Result handle_watch(struct api_req *rq, struct session *s);
/* Is url a request to a session's port (any body, any Content-Type)? */
bool http_is_port(const char *url);
/* The request rq, its path path (with rq's query), to the server s runs
 * on port; prefix: where it is mounted ("" for the root), told to it as
 * X-Forwarded-Prefix (ports.c; E2B's getHost() too). */
enum MHD_Result http_port_request(struct api_req *rq, struct session *s, unsigned short port,
				  const char *path, const char *prefix);
enum MHD_Result handle_mcp(struct api_req *rq);
/* The web page's static files (web.c): is url one of them, and serve it. */
bool web_is_asset(const char *url);
enum MHD_Result handle_web(struct api_req *rq);
/* Answer with a stream; the execution runs on this worker afterwards
 * (rq->after).  Busy, gone and over capacity are answered as errors before
 * any byte of the stream.  stream_execute(): the native API's Server-Sent
 * Events (docs/api.md). */
enum MHD_Result stream_execute(struct api_req *rq, struct session *s,
			       const struct exec_request *ex);

/* How a stream is written.  Each callback appends the bytes of one event
 * to out (0, or <0 to write nothing); state is the wire's own, state_size
 * bytes per stream, zeroed or copied from stream_execute_with()'s init.
 * output: raw bytes as the code wrote them (a UTF-8 character may be cut
 * across two calls); or, for a wire that wants text, text: the same as
 * whole UTF-8 (invalid bytes as U+FFFD, a cut character held until its
 * end arrives, or the execution's).  done: the end, with res when the execution ran
 * (r == SM_OK), else why not; it is not called when the client is gone.
 * dropped: the note that n live events were lost on a client that read
 * too slowly (NULL: none).  keepalive: bytes to send after 10 s of silence
 * (NULL: none), keepalive_len of them (0: strlen; a binary frame may hold
 * NULs).  Optional: refuse answers, in the wire's own words, an
 * execution that cannot start (busy, gone, out of memory; NULL: the native
 * API's errors); release frees what state holds when the stream ends,
 * whether or not done was called. */
struct stream_wire {
	const char *content_type;
	size_t state_size;
	int (*begin)(void *state, struct buf *out);	/* optional */
	int (*output)(void *state, struct buf *out, enum exec_stream s, const char *data,
		      size_t len);
	int (*text)(void *state, struct buf *out, enum exec_stream s, const char *text,
		    size_t len);
	int (*rich)(void *state, struct buf *out, const json_t *bundle, bool main);
	int (*error)(void *state, struct buf *out, const json_t *error);
	int (*dropped)(void *state, struct buf *out, unsigned long long n);
	int (*done)(void *state, struct buf *out, enum sm_result r, const char *reason,
		    const struct result *res);
	const char *keepalive;
	size_t keepalive_len;
	enum MHD_Result (*refuse)(struct api_req *rq, enum sm_result r, const char *reason);
	void (*release)(void *state);
	/* When the session was deleted while the execution ran: no done; the
	 * connection is closed after the events sent so far, without the
	 * response's proper end.  E2B's SDKs read a cut connection, then a
	 * sandbox that answers 502, as a sandbox killed under the request. */
	bool cut_when_deleted;
};
enum MHD_Result stream_execute_as(struct api_req *rq, struct session *s,
				  const struct exec_request *ex, const struct stream_wire *wire);
/* The same with the wire's state starting as a copy of init (state_size
 * bytes; NULL: zeroed). */
enum MHD_Result stream_execute_with(struct api_req *rq, struct session *s,
				    const struct exec_request *ex, const struct stream_wire *wire,
				    const void *init);

/* A stream another thread feeds (a process's output: e2b/envd.c), with
 * the same reader, caps, keepalives and charge as an execution's: queued
 * as the response now (200, wire's content type), *out the stream, or NULL
 * when it could not be (then an error is the answer).  The wire's state
 * (state_size bytes, a copy of init or zeroed: stream_state()) is the
 * feeder's, freed with the stream by wire->release.  on_close(state) is
 * called once, on an event thread, when the client goes before the end
 * was fed: the feeder stops feeding then.  feed: an event (consumed; a
 * live one is dropped past the stream's cap); end: the last event
 * (consumed), cut: the connection closes after it without the response's
 * proper end.  What a client has not read is bounded at 256 KiB (less
 * than an execution's stream: a client may follow many).  The feeder holds a reference from open: put it when it
 * will feed no more (after end, or when on_close says so). */
struct stream;
enum MHD_Result stream_open(struct api_req *rq, struct session *s,
			    const struct stream_wire *wire, const void *init,
			    void (*on_close)(void *state), struct stream **out);
void *stream_state(struct stream *st);
void stream_feed(struct stream *st, struct buf *ev, bool live);
/* Would a live event of about len bytes be sent (the client there, and
 * not being dropped for)?  A feeder skips making one that would not. */
bool stream_takes(struct stream *st, size_t len);
void stream_feed_end(struct stream *st, struct buf *end, bool cut);
void stream_feed_put(struct stream *st);

/* The server's SSE streams: a tick resumes each suspended one for its
 * keepalive and to notice a client that hung up; stop ends them all so
 * that MHD can close their connections. */
int stream_hub_new(struct stream_hub **out);
void stream_hub_stop(struct stream_hub *h);
void stream_hub_free(struct stream_hub *h);
/* Something else that the hub's tick calls, each second, on its thread
 * and under its lock (tick must not block, nor call the hub): a download
 * that must let go of an ended session even while its client reads
 * nothing.  After unwatch returns, tick is not called again. */
struct hub_watch {
	void (*tick)(struct hub_watch *w);
	struct hub_watch *prev, *next;
};
void stream_hub_watch(struct stream_hub *h, struct hub_watch *w);
void stream_hub_unwatch(struct stream_hub *h, struct hub_watch *w);

/* Streamed uploads (files.c), hooked into server.c: is this request one
 * (PUT /v1/sessions/{id}/files/{path})?  start: on its first call, after
 * authentication (may answer 413 at once); chunk: each piece of the body;
 * end: when the request is done, whatever happened. */
struct api_upload;
bool files_upload_wanted(const struct api_req *rq);
enum MHD_Result files_upload_start(struct api_req *rq);
enum MHD_Result files_upload_chunk(struct api_req *rq, const char *data, size_t *size);
void files_upload_end(struct api_req *rq);
/* For other front ends (e2b_envd.c), in their own words.  send: the file
 * at path in s's /work as the response, read as the sandbox's user and let
 * go when the session ends (as GET .../files/{path}); 0 with the response
 * queued (*queued), or -errno before anything is: session_file_open()'s,
 * -EFBIG (over max_file_bytes), -ENOMEM.  put: data[0, len) written to path as an
 * upload is, by a writer charged to the sandbox, on a worker, waiting at
 * most http_timeout_s for each step of its progress; how (NULL: plain) gives
 * the new file's metadata and says whether data is gzip, inflated on the
 * way; 0 or -errno: session_upload_finish()'s (-ENOSPC, -ENOMEM with
 * *ended...), -EAGAIN (at the session's pids limit), -ETIMEDOUT (the writer
 * took nothing), and for gzip, before anything is written, -EBADMSG (not a
 * whole gzip stream) or -EFBIG (over max_file_bytes inflated). */
struct files_meta;
struct files_put_how {
	const struct files_meta *meta;	/* NULL: none */
	bool gzip;
};
int files_send(struct api_req *rq, struct session *s, const char *path,
	       enum MHD_Result *queued);
int files_put(struct api_req *rq, struct session *s, const char *path, const void *data,
	      size_t len, const struct files_put_how *how, bool *ended);

/* How an HTTP front end words a workspace result (workspace/ws.h): a table
 * of these, indexed by enum ws_result, one per front end.  The sentence is
 * before, its subject, after; the subject is the path, quoted ('x'), a
 * limit of the session's, or nothing.  A row with no status is a result
 * the front end has no words for: 500 and "'path': strerror(err)". */
enum http_ws_about {
	HTTP_ABOUT_PATH,	/* 'x' */
	HTTP_ABOUT_NOTHING,
	HTTP_ABOUT_DISK,	/* its disk_mb */
	HTTP_ABOUT_MEMORY,	/* its memory_mb */
	HTTP_ABOUT_PIDS,	/* its pids */
};
struct http_ws_words {
	unsigned short status;		/* HTTP (E2B: its REST routes) */
	unsigned short rpc_status;	/* E2B: a Connect unary call's */
	const char *code;		/* E2B: Connect's code */
	const char *before, *after;	/* NULL: "" */
	enum http_ws_about about;
};
/* The sentence of w (a row of such a table) for err, 0 or -errno, at path
 * (lim: the session's limits, for a row about one), into out; its status,
 * 500 for a row without one. */
unsigned http_ws_sentence(const struct http_ws_words *w, int err, const char *path,
			  const struct petri_limits *lim, char *out, size_t len);
/* The thread that resumes uploads whose writer caught up; stop resumes
 * them all (before MHD stops). */
int files_waiter_new(struct files_waiter **out);
void files_waiter_stop(struct files_waiter *w);
void files_waiter_free(struct files_waiter *w);

/* A session lookup answered the API's way: 404 or 410 on failure. */
struct session *http_session(struct api_req *rq, const char *id, enum MHD_Result *answered);

/* A session layer's answer in the API's words: the error code and the
 * HTTP status (docs/api.md's table), and the message. */
const char *http_sm_code(enum sm_result r, int *status);
const char *http_sm_message(enum sm_result r, const char *reason);
/* The error of a session call, answered: 404, 409, 410, 429, 503... with
 * the reason where the session layer gave one. */
enum MHD_Result http_session_error(struct api_req *rq, enum sm_result r, const char *reason);
/* The HTTP status of a request the request model refused (exec/request.h):
 * 400; 403 for a network beyond what the server lets a client ask; 500 when
 * the daemon ran out of memory deciding.  For every front end's wire. */
int http_request_status(const struct request_error *e);
/* Such a request, answered with that status. */
enum MHD_Result http_request_error(struct api_req *rq, const struct request_error *e);

/* The `limit` (1 to 1000, default 100) and `before` (a seq, 0: none) of a
 * listing of the execution record, into q (record.c).  On a bad one
 * answers 400 and returns false (then return *answered). */
bool http_list_args(struct api_req *rq, struct record_query *q, enum MHD_Result *answered);
/* Read q's listing for rq, watching its client (http_gone()): true with
 * the entries' JSON array appended to out, or false with an answer in
 * *answered (500; MHD_NO, which closes, for a client that hung up). */
bool http_list(struct api_req *rq, struct record_query *q, struct buf *out, bool *truncated,
	       enum MHD_Result *answered);
/* Answer status with the JSON text in b (taken: b is left empty). */
enum MHD_Result http_json_buf(struct api_req *rq, unsigned status, struct buf *b);

#endif
