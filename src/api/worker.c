#include "api/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/log.h"

struct api_workers {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct api_req *head, *tail;
	bool stopping;
	worker_handler handler;
	unsigned nthreads;
	pthread_t *threads;
};

static void run_one(struct api_workers *w, struct api_req *rq)
{
	struct MHD_Connection *conn = rq->conn;
	void (*after)(void *);
	void *arg;

	rq->deferred = true;
	rq->result = w->handler(rq);
	after = rq->after;
	arg = rq->after_arg;
	rq->ran = true;
	/* From here the event thread owns rq and may free it. */
	MHD_resume_connection(conn);
	if (after)
		after(arg);
}

static void *loop(void *arg)
{
	struct api_workers *w = arg;

	for (;;) {
		struct api_req *rq;

		pthread_mutex_lock(&w->lock);
		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->wake, &w->lock);
		rq = w->head;
		if (rq) {
			w->head = rq->next;
			if (!w->head)
				w->tail = NULL;
			rq->next = NULL;
		}
		pthread_mutex_unlock(&w->lock);
		if (!rq)
			return NULL;	/* stopping, and nothing is left */
		run_one(w, rq);
	}
}

int workers_start(unsigned n, worker_handler handler, struct api_workers **out)
{
	struct api_workers *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || !(w->threads = calloc(n, sizeof(*w->threads)))) {
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	w->handler = handler;
	for (; w->nthreads < n; w->nthreads++)
		if (pthread_create(&w->threads[w->nthreads], NULL, loop, w) != 0)
			break;
	if (w->nthreads == 0) {
		workers_free(w);
		return -EAGAIN;
	}
	if (w->nthreads < n)
		log_warn("http: started %u of %u worker threads", w->nthreads, n);
	*out = w;
	return 0;
}

bool workers_submit(struct api_workers *w, struct api_req *rq)
{
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		return false;
	}
	MHD_suspend_connection(rq->conn);
	rq->next = NULL;
	if (w->tail)
		w->tail->next = rq;
	else
		w->head = rq;
	w->tail = rq;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	return true;
}

void workers_stop(struct api_workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	w->nthreads = 0;
}

void workers_free(struct api_workers *w)
{
	if (!w)
		return;
	workers_stop(w);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w->threads);
	free(w);
}
