/* Clock readings as seconds, and deadlines for pthread_cond_timedwait. */
#ifndef PETRI_CLOCK_H
#define PETRI_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC: for intervals, idle times and timeouts. */
double clock_mono_s(void);
/* Seconds since the epoch (CLOCK_REALTIME): for timestamps shown to users. */
double clock_wall_s(void);
/* CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID): what
 * the daemon spends on one sandbox's behalf. */
double clock_thread_cpu_s(void);
/* CLOCK_REALTIME now plus seconds (>= 0), normalised: the absolute time
 * pthread_cond_timedwait() takes with a default condition variable. */
struct timespec clock_deadline(double seconds);

#endif
