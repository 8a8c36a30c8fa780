/* poolrate — the pool's take rate and target; see poolrate.h. */
#include "session/poolrate.h"

#include <math.h>

/* Fewer takes than this in the window: idle. */
#define IDLE_TAKES 0.5
/* The weight of a new refill time against the past ones. */
#define REFILL_WEIGHT 0.25

void poolrate_init(struct poolrate *r, double window_s)
{
	*r = (struct poolrate){ .window_s = window_s > 0 ? window_s : 1 };
}

/* What is left at now of a unit put in at r->at. */
static double decay(const struct poolrate *r, double now)
{
	return now > r->at ? exp(-(now - r->at) / r->window_s) : 1;
}

double poolrate_rate(const struct poolrate *r, double now)
{
	return r->rate * decay(r, now);
}

double poolrate_misses(const struct poolrate *r, double now)
{
	return r->misses * decay(r, now);
}

void poolrate_take(struct poolrate *r, double now, bool missed)
{
	if (now < r->at)
		now = r->at;
	r->rate = poolrate_rate(r, now) + 1 / r->window_s;
	r->misses = poolrate_misses(r, now) + (missed ? 1 : 0);
	r->at = now;
}

void poolrate_refilled(struct poolrate *r, double seconds)
{
	if (!(seconds >= 0))	/* NaN too */
		return;
	r->refill_s = r->refill_s > 0 ? r->refill_s + REFILL_WEIGHT * (seconds - r->refill_s)
				      : seconds;
}

struct poolrate_target poolrate_target(const struct poolrate *r, double now, unsigned min,
				       unsigned max)
{
	double rate = poolrate_rate(r, now), want;
	struct poolrate_target t = { .idle = rate * r->window_s < IDLE_TAKES };

	if (min > max)
		min = max;
	/* One more than the takes expected while one refill runs, and one
	 * for each recent miss, rounded: in a double, so that a huge rate or
	 * refill time cannot overflow. */
	want = t.idle ? 0 : 1 + floor(rate * r->refill_s + poolrate_misses(r, now) + 0.5);
	t.fill = want <= min ? min : want >= max ? max : (unsigned)want;
	t.keep = t.idle || t.fill == max ? t.fill : t.fill + 1;
	return t;
}
