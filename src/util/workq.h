/* workq — a queue of work and the long-lived threads that do it.
 *
 * The daemon hands work to threads of its own in several places: the API's
 * workers run the handlers that may wait on a sandbox (src/api/worker.c),
 * the spawner's threads start cold sandboxes (src/session/spawner.c), the
 * disposer tears killed ones down (src/session/session.c), and `petri mcp`
 * runs tool calls off the thread that reads its input (src/mcp/stdio.c).
 * Each is this module: a first-in first-out queue, N threads that each take
 * the oldest item and call the handler on it, and a stop that either lets
 * the threads run what is queued or hands it back to the caller.
 *
 * Theory of operation
 * -------------------
 *
 *   caller                             workq               each of N threads
 *   ------                             -----               -----------------
 *   workq_start(n, max, handler) ----> n threads start --> wait for an item
 *   workq_push(item, admit) ---------> refused once closed
 *                                      or max are waiting;
 *                                      admit(item) under
 *                                      the lock; append;
 *                                      wake one ----------> take the oldest,
 *                                                           handler(item) with
 *                                                           no lock held
 *   workq_close(drop):                 later pushes fail;
 *                                      with drop, the items
 *                                      still queued go to
 *                                      drop() on the caller
 *   workq_stop() --------------------> join --------------> run what is left,
 *                                                           then return
 *   workq_free()
 *
 * Items are the caller's: it embeds a struct workq_item in its own
 * structure, so a push allocates nothing and cannot fail for memory, and
 * the handler finds the structure with workq_entry().  From a successful
 * push until the handler or drop() is called with it, the item belongs to
 * the queue and its memory must stay valid; then it is the caller's again
 * (the handler may free it; the queue never touches it after).
 *
 * Order: items start in the order they were pushed.  With one thread they
 * also end in that order; with several they may end in any order.
 *
 * Locks: the queue's lock is a leaf but for admit().  The handler and
 * drop() are called without it; admit() is called with it held, so it must
 * be short, must not push, and must take no lock that a thread may hold
 * while it pushes.
 *
 * Threads: they live from workq_start() to workq_stop(), so they suit work
 * that must be done by a thread that outlives its result (PR_SET_PDEATHSIG
 * follows the thread that spawned a sandbox: src/jail/jail.h).
 *
 * Errors: functions return 0 (or a count) or a negative errno.
 */
#ifndef PETRI_WORKQ_H
#define PETRI_WORKQ_H

#include <stddef.h>

struct workq;

/* Embedded in each item; the queue's own, not to be touched between a
 * push and the handler's call. */
struct workq_item {
	struct workq_item *next;
};

/* The structure of type `type` whose member `member` is `item`. */
#define workq_entry(item, type, member) \
	((type *)(void *)((char *)(item) - offsetof(type, member)))

/* A handler, an admit or a drop: called with an item and the `arg` given
 * to workq_start(). */
typedef void (*workq_fn)(struct workq_item *item, void *arg);

/* Start nthreads threads that call handler(item, arg) on each item pushed.
 * max_queued bounds the items waiting for a thread (those being handled
 * do not count); 0 leaves it unbounded.  Returns the number of threads
 * started, from 1 to nthreads (the system may refuse some: the caller
 * decides whether fewer will do), or -EINVAL (no thread asked for),
 * -ENOMEM, or pthread_create's error when not even one started. */
int workq_start(unsigned nthreads, size_t max_queued, workq_fn handler, void *arg,
		struct workq **out);

/* Queue item for a thread.  0, -ESHUTDOWN once the queue is closed, or
 * -EAGAIN when max_queued items are waiting already; refused, the item is
 * left alone.  admit, unless NULL, is called with the item once it is
 * accepted and before any thread can take it, under the queue's lock: for
 * what must happen before the handler may run and must not happen when
 * the push is refused (the API suspends the connection that its handler
 * resumes). */
int workq_push(struct workq *q, struct workq_item *item, workq_fn admit);

/* Refuse every later push.  drop NULL: what is queued will still be run
 * (drained), and the number of those items is returned.  drop set: each
 * queued item is taken away and handed to drop(), oldest first, on the
 * calling thread and without the lock, and 0 is returned.  Either way the
 * items being handled are not touched: a caller that wants them cut short
 * does so its own way before workq_stop().  It may be called again (a
 * drain that turns into a drop). */
size_t workq_close(struct workq *q, workq_fn drop);

/* workq_close(q, NULL), then wait for every thread to run what is left and
 * return.  Later pushes fail; calling it again does nothing.  Never from
 * one of the queue's own threads. */
void workq_stop(struct workq *q);

/* workq_stop(), then free the queue.  NULL is a no-op. */
void workq_free(struct workq *q);

/* A call run on a queue's thread while the caller waits: for work that
 * must be done by a long-lived thread of the queue's own (a sandbox
 * spawned, so that its death signal follows that thread; the router's
 * network namespace, which only its thread is in).  Start the queue with
 * workq_run_call as its handler; workq_call() then runs fn(arg, ctx) on
 * one of its threads (ctx: workq_start()'s arg) and returns what fn
 * returned, or workq_push()'s error.  Never from one of the queue's own
 * threads. */
typedef int (*workq_call_fn)(void *arg, void *ctx);
void workq_run_call(struct workq_item *item, void *ctx);
int workq_call(struct workq *q, workq_call_fn fn, void *arg);

#endif
