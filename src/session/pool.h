/* pool — warm sandboxes: a template (src/runtime/zygote.h) and a few
 * sandboxes forked from it in advance, so that a new session or a one-shot
 * run never waits for a fork.
 *
 * One thread keeps the template running (restarting it when it dies, saying
 * so in the log and the metrics) and the pool full, in the background.  How
 * full follows demand (session/poolrate.h): about the sandboxes taken while
 * one refill runs, plus one, within [min, max]; back to min once idle, the
 * oldest freed first.  The pool never holds more than the room the session
 * cap leaves (room()): each ready sandbox counts against it.
 *
 * The thread refills as soon as something changes, never on a tick: a take
 * (pool_take), a sandbox leaving (pool_poke), a ready sandbox dying (it
 * watches their status descriptors).  Only the template's liveness and the
 * slow shrink after a burst are looked at once a second.
 *
 * A ready sandbox has said "ready" (box_adopt()), which its driver says
 * only after its warm-up (driver.py's warm_up(): one execution through the
 * driver's own frame reader and writer, on a socket pair of its own, that
 * pays the first run's copy-on-write faults): the fork and the warm-up are
 * the pool thread's time, and a take costs no round trip with the sandbox. */
#ifndef PETRI_POOL_H
#define PETRI_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "jail/jail.h"
#include "runtime/box.h"

struct pool;

struct pool_config {
	unsigned min, max;			/* sandboxes kept ready: bounds */
	double window_s;			/* the take rate's window
						 * (poolrate.h) */
	struct box_config defaults;		/* what a pooled sandbox has */
	/* The CPU weight of the template and of the sandboxes it forks
	 * ahead, until pool_take() hands one out with the weight its
	 * caller asks (box_config.limits.cpu_weight): refills yield to
	 * executions.  0: the defaults' own. */
	uint32_t cpu_weight;
	/* The light template's pool (config_light_template()): its own
	 * gauges (petri_light_pool_*), and the take rate's stay the main
	 * pool's. */
	bool light;
	const char *const *preload;		/* what the template imports
						 * (zygote_start); must outlive
						 * the pool */
	size_t (*room)(void *ctx);		/* sandboxes the cap still allows */
	void *ctx;
};

/* Starts the pool's thread; the template starts in the background (a
 * host without a warm path just leaves everything to the cold path). */
int pool_new(struct jail_host *host, const struct pool_config *cfg, struct pool **out);
void pool_free(struct pool *p);

/* A sandbox for cfg: a ready one when is_default (cfg is the pool's
 * configuration), else forked from the template now.  -EAGAIN when there
 * is no template: the caller takes the cold path. */
int pool_take(struct pool *p, const struct box_config *cfg, bool is_default,
	      struct box **out, char *err, size_t errlen);

/* The room grew (a sandbox left): wake the pool's thread to refill now.
 * pool_take() wakes it itself.  Takes no lock: any thread may call it,
 * holding any lock. */
void pool_poke(struct pool *p);

/* Is a template running? */
bool pool_warm(struct pool *p);

/* The warm path's state, for /healthz: starting (the first template, or
 * one replacing a template that died), ready (a template runs), failed (it
 * could not start: every sandbox starts cold until a retry succeeds). */
enum pool_state { POOL_STARTING, POOL_READY, POOL_FAILED };

/* The state and the ready sandboxes now.  Lock-free (atomics): /healthz
 * reads them on the HTTP thread while the pool's thread may hold its lock
 * for a start. */
enum pool_state pool_state(const struct pool *p);
size_t pool_ready(const struct pool *p);
/* How many it would aim to hold ready now with room enough (what
 * petri_pool_target says before the room caps it). */
unsigned pool_target(const struct pool *p);

/* Wait at most seconds for a template while one is starting: true when
 * one is ready (at once if it was), false when it is not (still starting
 * after seconds, failed, or the pool stops). */
bool pool_wait_ready(struct pool *p, double seconds);

#endif
