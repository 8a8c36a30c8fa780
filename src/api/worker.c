/* worker — the API's handlers that can block, on a work queue (worker.h). */
#include "api/worker.h"

#include <errno.h>
#include <stdlib.h>

#include "util/log.h"
#include "util/workq.h"

struct api_workers {
	struct workq *q;		/* of struct api_req, by its `work` */
	worker_handler handler;
};

static void run_one(struct workq_item *item, void *arg)
{
	struct api_workers *w = arg;
	struct api_req *rq = workq_entry(item, struct api_req, work);
	struct MHD_Connection *conn = rq->conn;
	void (*after)(void *);
	void *after_arg;

	rq->deferred = true;
	rq->result = w->handler(rq);
	after = rq->after;
	after_arg = rq->after_arg;
	rq->ran = true;
	/* From here the event thread owns rq and may free it. */
	MHD_resume_connection(conn);
	if (after)
		after(after_arg);
}

/* Under the queue's lock, before a worker can take rq: a handler that ends
 * at once resumes a connection that is suspended already. */
static void suspend(struct workq_item *item, void *arg)
{
	(void)arg;
	MHD_suspend_connection(workq_entry(item, struct api_req, work)->conn);
}

int workers_start(unsigned n, worker_handler handler, struct api_workers **out)
{
	struct api_workers *w = calloc(1, sizeof(*w));
	int r;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->handler = handler;
	/* Unbounded: at most one request per connection is queued. */
	r = workq_start(n, 0, run_one, w, &w->q);
	if (r < 0) {
		free(w);
		return r;
	}
	if ((unsigned)r < n)
		log_warn("http: started %d of %u worker threads", r, n);
	*out = w;
	return 0;
}

bool workers_submit(struct api_workers *w, struct api_req *rq)
{
	return workq_push(w->q, &rq->work, suspend) == 0;
}

void workers_stop(struct api_workers *w)
{
	if (w)
		workq_stop(w->q);
}

void workers_free(struct api_workers *w)
{
	if (!w)
		return;
	workq_free(w->q);
	free(w);
}
