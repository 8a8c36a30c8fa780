/* The warm pool's take rate and target (src/session/poolrate.h): pure
 * arithmetic on given times, so every case here is exact and instant. */
#include <math.h>

#include "session/poolrate.h"
#include "unit.h"

/* n takes, one every 1/per_s seconds from t; returns the last one's time. */
static double stream(struct poolrate *r, double t, double per_s, int n, bool missed)
{
	for (int i = 0; i < n; i++, t += 1 / per_s)
		poolrate_take(r, t, missed);
	return t - 1 / per_s;
}

/* An estimator with window_s and, unless 0, one refill measured. */
static struct poolrate fresh(double window_s, double refill_s)
{
	struct poolrate r;

	poolrate_init(&r, window_s);
	if (refill_s > 0)
		poolrate_refilled(&r, refill_s);
	return r;
}

static void expect(struct poolrate_target t, unsigned fill, unsigned keep)
{
	ck_assert_uint_eq(t.fill, fill);
	ck_assert_uint_eq(t.keep, keep);
}

START_TEST(test_idle_is_min)
{
	struct poolrate r = fresh(10, 0);
	struct poolrate_target t;

	t = poolrate_target(&r, 1000, 2, 8);
	ck_assert(t.idle);
	expect(t, 2, 2);
	t = poolrate_target(&r, 1000, 0, 8);
	ck_assert_uint_eq(t.fill, 0);
	/* pool_min above pool_max counts as pool_max. */
	expect(poolrate_target(&r, 1000, 5, 3), 3, 3);
}
END_TEST

START_TEST(test_steady_rate)
{
	struct poolrate r = fresh(5, 0);
	double last;

	/* 20 takes a second for ten windows: the estimate settles at 20
	 * (a little above: it was just bumped by the last take). */
	last = stream(&r, 100, 20, 1000, false);
	ck_assert(fabs(poolrate_rate(&r, last) - 20) < 0.5);
	ck_assert(poolrate_misses(&r, last) == 0);
	/* It decays by e per window of silence. */
	ck_assert(fabs(poolrate_rate(&r, last + 5) / poolrate_rate(&r, last) - exp(-1)) < 1e-9);
	/* A clock read before the last take counts as the last take. */
	ck_assert(poolrate_rate(&r, last - 3) == poolrate_rate(&r, last));
	poolrate_take(&r, last - 3, false);
	ck_assert(r.at == last);
}
END_TEST

START_TEST(test_target_follows_rate)
{
	struct poolrate r = fresh(5, 0.3);
	struct poolrate_target t;
	double last;

	ck_assert(r.refill_s == 0.3);
	last = stream(&r, 0, 10, 200, false);
	/* ~10 takes a second, 0.3 s a refill: 3 in the pipe, one more ready. */
	t = poolrate_target(&r, last, 1, 8);
	ck_assert(!t.idle);
	expect(t, 4, 5);
	/* Bounded by pool_max; keep never above it. */
	t = poolrate_target(&r, last, 1, 3);
	expect(t, 3, 3);
	/* Bounded below by pool_min. */
	t = poolrate_target(&r, last, 6, 8);
	expect(t, 6, 7);
	/* Silence: it shrinks step by step, then is idle and back at the
	 * minimum (about 50 takes in the window: idle after ln(100)
	 * windows, about 4.6). */
	ck_assert_uint_eq(poolrate_target(&r, last + 5, 1, 8).fill, 2);
	t = poolrate_target(&r, last + 5 * 4, 1, 8);
	ck_assert(!t.idle);
	ck_assert_uint_eq(t.keep, 2);
	t = poolrate_target(&r, last + 5 * 5, 1, 8);
	expect(t, 1, 1);
	ck_assert(t.idle);
}
END_TEST

START_TEST(test_misses_grow_it)
{
	struct poolrate r = fresh(10, 0.4);
	double last;

	/* A client that waits for every answer and is slowed to one take
	 * per refill by the misses: its rate alone would ask for two. */
	last = stream(&r, 0, 2.5, 100, false);
	ck_assert_uint_eq(poolrate_target(&r, last, 2, 8).fill, 2);
	r = fresh(10, 0.4);
	last = stream(&r, 0, 2.5, 4, true);
	ck_assert_uint_eq(poolrate_target(&r, last, 2, 8).fill, 5);
	last = stream(&r, last + 0.4, 2.5, 100, true);
	ck_assert_uint_eq(poolrate_target(&r, last, 2, 8).fill, 8);
	ck_assert_uint_eq(poolrate_target(&r, last, 2, 100).fill, 27);
	/* Misses fade like takes: long after, idle again. */
	ck_assert(poolrate_target(&r, last + 100, 2, 8).idle);
}
END_TEST

START_TEST(test_refill_estimate)
{
	struct poolrate r = fresh(0, 0);	/* no window: one second */

	ck_assert(r.window_s == 1);
	ck_assert(r.refill_s == 0);
	poolrate_refilled(&r, NAN);
	poolrate_refilled(&r, -1);
	ck_assert(r.refill_s == 0);
	poolrate_refilled(&r, 0.2);
	ck_assert(r.refill_s == 0.2);	/* the first is taken as it is */
	poolrate_refilled(&r, 1.0);
	ck_assert(fabs(r.refill_s - 0.4) < 1e-12);	/* a quarter of the way */
	/* A refill so slow that any take would overflow an integer: max. */
	poolrate_refilled(&r, 1e300);
	poolrate_take(&r, 1, false);
	ck_assert_uint_eq(poolrate_target(&r, 1, 0, 1000).fill, 1000);
}
END_TEST

Suite *poolrate_suite(void)
{
	Suite *s = suite_create("poolrate");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_idle_is_min);
	tcase_add_test(tc, test_steady_rate);
	tcase_add_test(tc, test_target_follows_rate);
	tcase_add_test(tc, test_misses_grow_it);
	tcase_add_test(tc, test_refill_estimate);
	suite_add_tcase(s, tc);
	return s;
}
