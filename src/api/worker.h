/* worker — the threads that run the API's handlers that can block.
 *
 * libmicrohttpd's event threads (a small epoll pool) read requests and
 * write responses for every connection; they must never wait on a
 * sandbox.  A request whose handler may wait (a session created, an
 * execution, an MCP call, a delete) is handed over here with its
 * connection suspended; a worker runs the handler, keeps the response in
 * the request, and resumes the connection, whose event thread then queues
 * it.  The queue (util/workq.h, first in first out) holds at most one
 * request per connection, so the connection limit bounds it.  Internal to
 * src/api. */
#ifndef PETRI_API_WORKER_H
#define PETRI_API_WORKER_H

#include "api/http.h"

struct api_workers;

typedef enum MHD_Result (*worker_handler)(struct api_req *rq);

/* Start n threads that run handler.  0 or -errno. */
int workers_start(unsigned n, worker_handler handler, struct api_workers **out);
/* Suspend rq->conn and run rq's handler on a worker.  false when the
 * workers are stopping: then the caller answers. */
bool workers_submit(struct api_workers *w, struct api_req *rq);
/* Run what is queued and wait for every worker; later submissions fail. */
void workers_stop(struct api_workers *w);
/* After the connections are closed. */
void workers_free(struct api_workers *w);

#endif
