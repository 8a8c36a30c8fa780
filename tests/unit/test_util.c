/* Small helpers of src/util that the other suites do not cover. */
#include <time.h>

#include "unit.h"
#include "util/clock.h"

START_TEST(test_clock_deadline)
{
	const double steps[] = { 0, 0.001, 0.25, 0.999999999, 1, 2.5, 600 };

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct timespec before, d;
		double ahead;

		clock_gettime(CLOCK_REALTIME, &before);
		d = clock_deadline(steps[i]);
		ck_assert_int_ge(d.tv_nsec, 0);
		ck_assert_int_lt(d.tv_nsec, 1000000000L);
		ahead = (double)(d.tv_sec - before.tv_sec) +
			(double)(d.tv_nsec - before.tv_nsec) / 1e9;
		/* At least the step ahead of a reading taken before (less a
		 * nanosecond of rounding); a wall-clock step or a slow machine
		 * can only make it later, so there is no upper bound here. */
		ck_assert(ahead >= steps[i] - 1e-9);
	}
}
END_TEST

START_TEST(test_clock_readings)
{
	double m0 = clock_mono_s(), m1 = clock_mono_s();

	ck_assert(m1 >= m0);
	/* The wall clock is seconds since the epoch: after 2020. */
	ck_assert(clock_wall_s() > 1577836800.0);
}
END_TEST

Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_clock_deadline);
	tcase_add_test(tc, test_clock_readings);
	suite_add_tcase(s, tc);
	return s;
}
