/* The work queue (src/util/workq.h): order, several threads at once, the
 * bound, admit before any thread sees an item, and a stop that drains or
 * drops what is queued.  A handler waits for a permit from the test, so
 * the test decides when each item ends and every case is deterministic;
 * a hang is a failure by check's timeout. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "unit.h"
#include "util/workq.h"

#define JOBS 256

struct job {
	struct workq_item item;
	int id;
	bool admitted;			/* by admit(), before any thread saw it */
};

/* What the handlers and drop() did, under its own lock. */
struct trace {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* anything below changed */
	int permits;			/* handlers that may end; INT_MAX: all */
	unsigned running, most_running;
	int handled[JOBS], dropped[JOBS];
	size_t nhandled, ndropped;
	bool admits;			/* every item goes through admit() */
	bool unadmitted;		/* a handler saw an item admit() had not */
	bool dropped_elsewhere;		/* drop() ran on another thread */
	pthread_t closer;		/* the thread that calls workq_close() */
	struct job jobs[JOBS];
};

static void trace_init(struct trace *t, int permits)
{
	*t = (struct trace){ .permits = permits, .closer = pthread_self() };
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	for (int i = 0; i < JOBS; i++)
		t->jobs[i].id = i;
}

static void trace_release(struct trace *t)
{
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}

static void permit(struct trace *t, int n)
{
	pthread_mutex_lock(&t->lock);
	t->permits = n;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* Wait until `running` handlers are waiting for a permit and `handled`
 * have ended. */
static void wait_for(struct trace *t, unsigned running, size_t handled)
{
	pthread_mutex_lock(&t->lock);
	while (t->running != running || t->nhandled != handled)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

static void handle(struct workq_item *item, void *arg)
{
	struct trace *t = arg;
	struct job *j = workq_entry(item, struct job, item);

	pthread_mutex_lock(&t->lock);
	if (t->admits && !j->admitted)
		t->unadmitted = true;
	t->running++;
	if (t->running > t->most_running)
		t->most_running = t->running;
	pthread_cond_broadcast(&t->cond);
	while (t->permits == 0)
		pthread_cond_wait(&t->cond, &t->lock);
	if (t->permits != INT_MAX)
		t->permits--;
	t->running--;
	t->handled[t->nhandled++] = j->id;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void drop(struct workq_item *item, void *arg)
{
	struct trace *t = arg;

	pthread_mutex_lock(&t->lock);
	if (!pthread_equal(pthread_self(), t->closer))
		t->dropped_elsewhere = true;
	t->dropped[t->ndropped++] = workq_entry(item, struct job, item)->id;
	pthread_mutex_unlock(&t->lock);
}

/* Slow on purpose: a thread that could take the item before admit()
 * returned would have time to. */
static void admit(struct workq_item *item, void *arg)
{
	(void)arg;
	usleep(2000);
	workq_entry(item, struct job, item)->admitted = true;
}

static int push(struct workq *q, struct trace *t, int id)
{
	return workq_push(q, &t->jobs[id].item, NULL);
}

static void expect_in_order(const int *ids, size_t n, int first)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ids[i], first + (int)i);
}

/* One thread held in the handler of item 0, items 1 to n - 1 queued. */
static struct workq *one_held(struct trace *t, int n)
{
	struct workq *q;

	trace_init(t, 0);
	ck_assert_int_eq(workq_start(1, 0, handle, t, &q), 1);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(push(q, t, i), 0);
	wait_for(t, 1, 0);
	return q;
}

START_TEST(test_one_thread_keeps_order)
{
	struct trace t;
	struct workq *q;

	trace_init(&t, INT_MAX);
	ck_assert_int_eq(workq_start(1, 0, handle, &t, &q), 1);
	for (int i = 0; i < JOBS; i++)
		ck_assert_int_eq(push(q, &t, i), 0);
	workq_free(q);		/* drains */
	ck_assert_uint_eq(t.nhandled, JOBS);
	expect_in_order(t.handled, t.nhandled, 0);
	ck_assert_uint_eq(t.most_running, 1);
	trace_release(&t);
}
END_TEST

START_TEST(test_several_threads)
{
	bool seen[JOBS] = { false };
	struct trace t;
	struct workq *q;

	trace_init(&t, 0);
	ck_assert_int_eq(workq_start(4, 0, handle, &t, &q), 4);
	/* Four items, four threads: all four run at once. */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(push(q, &t, i), 0);
	wait_for(&t, 4, 0);
	permit(&t, INT_MAX);
	for (int i = 4; i < JOBS; i++)
		ck_assert_int_eq(push(q, &t, i), 0);
	workq_stop(q);
	/* Each exactly once, whichever thread ran it. */
	ck_assert_uint_eq(t.nhandled, JOBS);
	for (size_t i = 0; i < t.nhandled; i++) {
		ck_assert(!seen[t.handled[i]]);
		seen[t.handled[i]] = true;
	}
	ck_assert_uint_eq(t.most_running, 4);
	workq_free(q);		/* stopped already: only frees */
	trace_release(&t);
}
END_TEST

START_TEST(test_close_drains)
{
	struct trace t;
	struct workq *q = one_held(&t, 5);	/* 0 runs, 1 to 4 wait */

	ck_assert_uint_eq(workq_close(q, NULL), 4);
	ck_assert_int_eq(push(q, &t, 5), -ESHUTDOWN);
	permit(&t, INT_MAX);
	workq_stop(q);
	ck_assert_uint_eq(t.nhandled, 5);
	expect_in_order(t.handled, t.nhandled, 0);
	ck_assert_uint_eq(t.ndropped, 0);
	workq_free(q);
	trace_release(&t);
}
END_TEST

START_TEST(test_close_drops)
{
	struct trace t;
	struct workq *q = one_held(&t, 5);

	/* The four waiting come back, oldest first, on this thread; the one
	 * running is left to end. */
	ck_assert_uint_eq(workq_close(q, drop), 0);
	ck_assert_uint_eq(t.ndropped, 4);
	expect_in_order(t.dropped, t.ndropped, 1);
	ck_assert(!t.dropped_elsewhere);
	ck_assert_int_eq(push(q, &t, 5), -ESHUTDOWN);
	permit(&t, INT_MAX);
	workq_free(q);
	ck_assert_uint_eq(t.nhandled, 1);
	ck_assert_int_eq(t.handled[0], 0);
	trace_release(&t);
}
END_TEST

START_TEST(test_drain_turns_into_drop)
{
	struct trace t;
	struct workq *q = one_held(&t, 3);

	ck_assert_uint_eq(workq_close(q, NULL), 2);
	ck_assert_uint_eq(workq_close(q, drop), 0);
	ck_assert_uint_eq(t.ndropped, 2);
	expect_in_order(t.dropped, t.ndropped, 1);
	permit(&t, INT_MAX);
	workq_free(q);
	ck_assert_uint_eq(t.nhandled, 1);
	trace_release(&t);
}
END_TEST

START_TEST(test_push_after_stop)
{
	struct trace t;
	struct workq *q;

	trace_init(&t, INT_MAX);
	ck_assert_int_eq(workq_start(2, 0, handle, &t, &q), 2);
	workq_stop(q);
	/* Refused, and neither the item nor admit() touched. */
	t.jobs[0].item.next = &t.jobs[1].item;
	ck_assert_int_eq(workq_push(q, &t.jobs[0].item, admit), -ESHUTDOWN);
	ck_assert_ptr_eq(t.jobs[0].item.next, &t.jobs[1].item);
	ck_assert(!t.jobs[0].admitted);
	workq_stop(q);		/* again: nothing to do */
	workq_free(q);
	ck_assert_uint_eq(t.nhandled, 0);
	trace_release(&t);
}
END_TEST

START_TEST(test_bound)
{
	struct trace t;
	struct workq *q;

	trace_init(&t, 0);
	ck_assert_int_eq(workq_start(1, 2, handle, &t, &q), 1);
	ck_assert_int_eq(push(q, &t, 0), 0);
	wait_for(&t, 1, 0);		/* running: not counted */
	ck_assert_int_eq(push(q, &t, 1), 0);
	ck_assert_int_eq(push(q, &t, 2), 0);
	ck_assert_int_eq(workq_push(q, &t.jobs[3].item, admit), -EAGAIN);
	ck_assert(!t.jobs[3].admitted);
	/* 0 ends and the thread takes 1: room for one more. */
	permit(&t, 1);
	wait_for(&t, 1, 1);
	ck_assert_int_eq(push(q, &t, 3), 0);
	ck_assert_int_eq(push(q, &t, 4), -EAGAIN);
	permit(&t, INT_MAX);
	workq_free(q);
	ck_assert_uint_eq(t.nhandled, 4);
	expect_in_order(t.handled, t.nhandled, 0);
	trace_release(&t);
}
END_TEST

START_TEST(test_admit_comes_first)
{
	struct trace t;
	struct workq *q;

	trace_init(&t, INT_MAX);
	t.admits = true;
	ck_assert_int_eq(workq_start(3, 0, handle, &t, &q), 3);
	for (int i = 0; i < 30; i++)
		ck_assert_int_eq(workq_push(q, &t.jobs[i].item, admit), 0);
	workq_free(q);
	ck_assert_uint_eq(t.nhandled, 30);
	ck_assert(!t.unadmitted);
	trace_release(&t);
}
END_TEST

START_TEST(test_start_refuses)
{
	struct trace t;
	struct workq *q = (struct workq *)&t;

	trace_init(&t, INT_MAX);
	ck_assert_int_eq(workq_start(0, 0, handle, &t, &q), -EINVAL);
	ck_assert_ptr_null(q);
	ck_assert_int_eq(workq_start(1, 0, NULL, &t, &q), -EINVAL);
	workq_free(NULL);
	trace_release(&t);
}
END_TEST

Suite *workq_suite(void)
{
	Suite *s = suite_create("workq");
	TCase *t = tcase_create("workq");

	tcase_set_timeout(t, 30);	/* a hang is the failure; valgrind is slow */
	tcase_add_test(t, test_one_thread_keeps_order);
	tcase_add_test(t, test_several_threads);
	tcase_add_test(t, test_close_drains);
	tcase_add_test(t, test_close_drops);
	tcase_add_test(t, test_drain_turns_into_drop);
	tcase_add_test(t, test_push_after_stop);
	tcase_add_test(t, test_bound);
	tcase_add_test(t, test_admit_comes_first);
	tcase_add_test(t, test_start_refuses);
	suite_add_tcase(s, t);
	return s;
}
