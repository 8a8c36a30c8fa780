/* workq — a queue of work and the threads that do it (workq.h). */
#include "util/workq.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct workq {
	pthread_mutex_t lock;		/* everything below but the constants */
	pthread_cond_t wake;		/* an item was queued, or the queue closed */
	struct workq_item *head, *tail;
	size_t queued;			/* items between head and tail */
	bool closed;			/* workq_close(): no more pushes */
	size_t max_queued;		/* 0: no bound */
	workq_fn handler;
	void *arg;
	unsigned nthreads;		/* started and not yet joined */
	pthread_t threads[];
};

/* The oldest item, taken off the queue; NULL once the queue is closed and
 * empty: the thread's cue to return. */
static struct workq_item *take(struct workq *q)
{
	struct workq_item *item;

	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->closed)
		pthread_cond_wait(&q->wake, &q->lock);
	item = q->head;
	if (item) {
		q->head = item->next;
		if (!q->head)
			q->tail = NULL;
		item->next = NULL;
		q->queued--;
	}
	pthread_mutex_unlock(&q->lock);
	return item;
}

static void *loop(void *arg)
{
	struct workq *q = arg;
	struct workq_item *item;

	while ((item = take(q)))
		q->handler(item, q->arg);
	return NULL;
}

int workq_start(unsigned nthreads, size_t max_queued, workq_fn handler, void *arg,
		struct workq **out)
{
	struct workq *q;
	int r = 0;

	*out = NULL;
	if (nthreads == 0 || !handler)
		return -EINVAL;
	q = calloc(1, sizeof(*q) + nthreads * sizeof(q->threads[0]));
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	q->max_queued = max_queued;
	q->handler = handler;
	q->arg = arg;
	for (; q->nthreads < nthreads; q->nthreads++)
		if ((r = pthread_create(&q->threads[q->nthreads], NULL, loop, q)) != 0)
			break;
	if (q->nthreads == 0) {
		workq_free(q);
		return -r;
	}
	*out = q;
	return (int)q->nthreads;
}

int workq_push(struct workq *q, struct workq_item *item, workq_fn admit)
{
	int r = 0;

	pthread_mutex_lock(&q->lock);
	if (q->closed)
		r = -ESHUTDOWN;
	else if (q->max_queued && q->queued >= q->max_queued)
		r = -EAGAIN;
	if (r < 0)
		goto out;
	if (admit)
		admit(item, q->arg);
	item->next = NULL;
	if (q->tail)
		q->tail->next = item;
	else
		q->head = item;
	q->tail = item;
	q->queued++;
	pthread_cond_signal(&q->wake);
out:
	pthread_mutex_unlock(&q->lock);
	return r;
}

size_t workq_close(struct workq *q, workq_fn drop)
{
	struct workq_item *dropped = NULL;
	size_t left;

	pthread_mutex_lock(&q->lock);
	q->closed = true;
	if (drop) {
		dropped = q->head;
		q->head = q->tail = NULL;
		q->queued = 0;
	}
	left = q->queued;
	/* Every idle thread wakes, finds the queue closed, and returns once
	 * nothing is left. */
	pthread_cond_broadcast(&q->wake);
	pthread_mutex_unlock(&q->lock);
	while (dropped) {
		struct workq_item *item = dropped;

		dropped = item->next;
		item->next = NULL;
		drop(item, q->arg);
	}
	return left;
}

void workq_stop(struct workq *q)
{
	workq_close(q, NULL);
	for (; q->nthreads > 0; q->nthreads--)
		pthread_join(q->threads[q->nthreads - 1], NULL);
}

void workq_free(struct workq *q)
{
	if (!q)
		return;
	workq_stop(q);
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* One workq_call(), on the stack of the thread that waits for it. */
struct call {
	struct workq_item work;
	workq_call_fn fn;
	void *arg;
	int result;
	bool done;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* done */
};

void workq_run_call(struct workq_item *item, void *ctx)
{
	struct call *c = workq_entry(item, struct call, work);
	int result = c->fn(c->arg, ctx);

	pthread_mutex_lock(&c->lock);
	c->result = result;
	c->done = true;
	/* The waiter may return, and its call go, once the lock is dropped. */
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int workq_call(struct workq *q, workq_call_fn fn, void *arg)
{
	struct call c = { .fn = fn, .arg = arg };
	int r;

	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	r = workq_push(q, &c.work, NULL);
	if (r == 0) {
		pthread_mutex_lock(&c.lock);
		while (!c.done)
			pthread_cond_wait(&c.cond, &c.lock);
		pthread_mutex_unlock(&c.lock);
		r = c.result;
	}
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
	return r;
}
