#include "util/clock.h"

static double seconds_of(const struct timespec *ts)
{
	return (double)ts->tv_sec + (double)ts->tv_nsec / 1e9;
}

double clock_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return seconds_of(&ts);
}

double clock_wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return seconds_of(&ts);
}

double clock_thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return seconds_of(&ts);
}

struct timespec clock_deadline(double seconds)
{
	struct timespec ts;
	time_t whole = (time_t)seconds;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += whole;
	ts.tv_nsec += (long)((seconds - (double)whole) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}
