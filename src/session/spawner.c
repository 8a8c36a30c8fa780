#include "session/spawner.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct request {
	const struct box_config *cfg;
	struct box *box;
	char *err;
	size_t errlen;
	int result;
	bool done;
	pthread_cond_t cond;
	struct request *next;
};

struct spawner {
	struct jail_host *host;
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct request *head, *tail;
	bool stopping;
	unsigned nthreads;
	pthread_t *threads;
};

static void *worker(void *arg)
{
	struct spawner *sp = arg;

	pthread_mutex_lock(&sp->lock);
	for (;;) {
		struct request *rq;

		while (!sp->head && !sp->stopping)
			pthread_cond_wait(&sp->work, &sp->lock);
		if (!sp->head)
			break;
		rq = sp->head;
		sp->head = rq->next;
		if (!sp->head)
			sp->tail = NULL;
		pthread_mutex_unlock(&sp->lock);

		rq->result = box_start(sp->host, rq->cfg, &rq->box, rq->err, rq->errlen);

		pthread_mutex_lock(&sp->lock);
		rq->done = true;
		pthread_cond_signal(&rq->cond);
	}
	pthread_mutex_unlock(&sp->lock);
	return NULL;
}

int spawner_new(struct jail_host *host, unsigned threads, struct spawner **out)
{
	struct spawner *sp = calloc(1, sizeof(*sp));

	*out = NULL;
	if (!sp)
		return -ENOMEM;
	sp->host = host;
	pthread_mutex_init(&sp->lock, NULL);
	pthread_cond_init(&sp->work, NULL);
	sp->threads = calloc(threads, sizeof(*sp->threads));
	if (!sp->threads) {
		free(sp);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < threads; i++) {
		if (pthread_create(&sp->threads[i], NULL, worker, sp) != 0)
			break;
		sp->nthreads++;
	}
	if (sp->nthreads == 0) {
		spawner_free(sp);
		return -EAGAIN;
	}
	*out = sp;
	return 0;
}

void spawner_free(struct spawner *sp)
{
	if (!sp)
		return;
	pthread_mutex_lock(&sp->lock);
	sp->stopping = true;
	pthread_cond_broadcast(&sp->work);
	pthread_mutex_unlock(&sp->lock);
	for (unsigned i = 0; i < sp->nthreads; i++)
		pthread_join(sp->threads[i], NULL);
	free(sp->threads);
	pthread_cond_destroy(&sp->work);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}

int spawner_box_start(struct spawner *sp, const struct box_config *cfg,
		      struct box **out, char *err, size_t errlen)
{
	struct request rq = { .cfg = cfg, .err = err, .errlen = errlen };

	*out = NULL;
	pthread_cond_init(&rq.cond, NULL);
	pthread_mutex_lock(&sp->lock);
	if (sp->stopping) {
		pthread_mutex_unlock(&sp->lock);
		pthread_cond_destroy(&rq.cond);
		return -ESHUTDOWN;
	}
	if (sp->tail)
		sp->tail->next = &rq;
	else
		sp->head = &rq;
	sp->tail = &rq;
	pthread_cond_signal(&sp->work);
	while (!rq.done)
		pthread_cond_wait(&rq.cond, &sp->lock);
	pthread_mutex_unlock(&sp->lock);
	pthread_cond_destroy(&rq.cond);
	*out = rq.box;
	return rq.result;
}
