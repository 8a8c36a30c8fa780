/* poolrate — how many warm sandboxes the pool (pool.c) keeps ready: an
 * estimate of the rate at which they are taken, the time one refill takes,
 * and from both a target within the operator's bounds.
 *
 * The rate is an exponentially weighted count of takes: each take adds
 * 1 / window_s and the sum decays as e^(-t / window_s), so rate × window_s
 * is the number of takes of about the last window_s seconds, recent ones
 * weighing more, and a steady stream of λ takes a second settles at λ.
 * While takes come, the pool keeps one more sandbox ready than it expects
 * to be taken during one refill (rate × refill time), and one more for
 * each take of the window that found it empty (misses, weighted the same
 * way).  The misses matter: a client that waits for each answer before it
 * asks again is slowed down by every miss to about one take per refill,
 * so its measured rate alone would never ask for more than two.  Once
 * fewer than half a take is left in the window the pool is idle and falls
 * back to its minimum.
 *
 * Pure arithmetic on the caller's clock readings (CLOCK_MONOTONIC seconds),
 * unit-tested alone (tests/unit/test_poolrate.c).  Not thread-safe: the
 * pool's lock guards its one estimator. */
#ifndef PETRI_POOLRATE_H
#define PETRI_POOLRATE_H

#include <stdbool.h>

struct poolrate {
	double window_s;	/* the time constant; > 0 */
	double rate;		/* takes a second, as of at */
	double misses;		/* weighted count of takes that found none */
	double at;		/* when both were brought up to date */
	double refill_s;	/* one refill, smoothed; 0: none measured yet */
};

/* What the pool aims at.  fill: fork until this many are ready; keep: free
 * the oldest only above this many (one more than fill while takes come,
 * so that a rate on the edge of two targets does not free a sandbox and
 * fork another on every take).  min <= fill <= keep <= max. */
struct poolrate_target {
	unsigned fill, keep;
	bool idle;
};

void poolrate_init(struct poolrate *r, double window_s);
/* A sandbox was asked for at now; missed: none was ready. */
void poolrate_take(struct poolrate *r, double now, bool missed);
/* A refill took seconds (a fork from the template until its driver said
 * ready): smoothed into refill_s. */
void poolrate_refilled(struct poolrate *r, double seconds);
/* Takes a second as of now (>= r->at; an earlier now counts as r->at). */
double poolrate_rate(const struct poolrate *r, double now);
/* The weighted count of misses as of now. */
double poolrate_misses(const struct poolrate *r, double now);
/* The target as of now, within [min, max] (min > max counts as max). */
struct poolrate_target poolrate_target(const struct poolrate *r, double now, unsigned min,
				       unsigned max);

#endif
