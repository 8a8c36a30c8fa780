/* spawner — box_start() on long-lived threads (spawner.h). */
#include "session/spawner.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/workq.h"

/* One box_start() asked for, on the stack of the thread that waits for it. */
struct request {
	struct workq_item work;		/* in the spawner's queue */
	const struct box_config *cfg;
	char *err;
	size_t errlen;
	/* Set by the spawner thread, then done, under the spawner's lock. */
	struct box *box;
	int result;
	bool done;
	pthread_cond_t cond;		/* done */
};

struct spawner {
	struct jail_host *host;
	struct workq *q;		/* of struct request */
	pthread_mutex_t lock;		/* every request's done (a leaf) */
};

static void start_box(struct workq_item *item, void *arg)
{
	struct spawner *sp = arg;
	struct request *rq = workq_entry(item, struct request, work);
	struct box *box = NULL;
	int result = box_start(sp->host, rq->cfg, &box, rq->err, rq->errlen);

	pthread_mutex_lock(&sp->lock);
	rq->box = box;
	rq->result = result;
	rq->done = true;
	/* The waiter may return and free rq once the lock is dropped. */
	pthread_cond_signal(&rq->cond);
	pthread_mutex_unlock(&sp->lock);
}

int spawner_new(struct jail_host *host, unsigned threads, struct spawner **out)
{
	struct spawner *sp = calloc(1, sizeof(*sp));
	int r;

	*out = NULL;
	if (!sp)
		return -ENOMEM;
	sp->host = host;
	pthread_mutex_init(&sp->lock, NULL);
	r = workq_start(threads, 0, start_box, sp, &sp->q);
	if (r < 0) {
		spawner_free(sp);
		return r;
	}
	*out = sp;
	return 0;
}

void spawner_free(struct spawner *sp)
{
	if (!sp)
		return;
	workq_free(sp->q);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}

int spawner_box_start(struct spawner *sp, const struct box_config *cfg,
		      struct box **out, char *err, size_t errlen)
{
	struct request rq = { .cfg = cfg, .err = err, .errlen = errlen };
	int r;

	*out = NULL;
	pthread_cond_init(&rq.cond, NULL);
	r = workq_push(sp->q, &rq.work, NULL);
	if (r == 0) {
		pthread_mutex_lock(&sp->lock);
		while (!rq.done)
			pthread_cond_wait(&rq.cond, &sp->lock);
		pthread_mutex_unlock(&sp->lock);
		*out = rq.box;
		r = rq.result;
	}
	pthread_cond_destroy(&rq.cond);
	return r;
}
