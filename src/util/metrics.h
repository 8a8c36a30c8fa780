/* metrics — the daemon's counters, gauges and histograms, one set per
 * process, updated from any thread (atomics and one lock for histograms)
 * and rendered in the Prometheus text format for GET /metrics. */
#ifndef PETRI_METRICS_H
#define PETRI_METRICS_H

#include "util/buf.h"

enum metric_counter {
	M_SESSIONS_CREATED,
	M_SESSIONS_EXPIRED_IDLE,
	M_SESSIONS_EXPIRED_LIFETIME,
	M_SESSIONS_DELETED,
	M_SESSIONS_DIED,
	M_EXEC_OK, M_EXEC_ERROR, M_EXEC_TIMEOUT, M_EXEC_OOM, M_EXEC_KILLED,
	M_REJECT_AUTH, M_REJECT_CAPACITY, M_REJECT_TOO_LARGE, M_REJECT_BAD_REQUEST,
	M_REJECT_BUSY, M_REJECT_NOT_FOUND, M_REJECT_GONE,
	M_SPAWN_FAILED,
	M_ZYGOTE_RESTARTS,
	M_ANSWERS_CUT,		/* answers cut short: their client read too slowly */
	M_ONESHOTS_LIGHT,	/* one-shots forked from the light template */
	/* Destinations of sessions' network (addresses, and names), each
	 * counted once per execution it was seen in (net/router.h). */
	M_NET_CONNECTED, M_NET_REFUSED, M_NET_NAMES, M_NET_NAMES_REFUSED,
	M_COUNTER_COUNT
};

enum metric_gauge {
	M_SESSIONS_LIVE,
	M_EXECUTIONS_RUNNING,
	M_POOL_READY,
	M_POOL_TARGET,		/* what the pool aims to keep ready now */
	M_LIGHT_POOL_READY,	/* the same of the light template's pool */
	M_LIGHT_POOL_TARGET,
	M_ANSWERS_HELD_BYTES,	/* answers made and not yet read (api/answers.h) */
	M_TASKS_BUDGET,		/* processes sessions and one-shots may hold
				 * (session/tables.h) */
	M_TASKS_HELD,		/* the sum of their pids limits now */
	M_NET_LINKS,		/* sessions' network links, from their slot's
				 * taking to its freeing (net/router.h) */
	M_GAUGE_COUNT
};

/* Gauges that are not whole numbers. */
enum metric_value {
	M_POOL_TAKE_RATE,	/* sandboxes asked of the pool a second */
	M_POOL_MISSES,		/* of them, recently found none ready (weighted) */
	M_POOL_REFILL_SECONDS,	/* one refill, smoothed */
	M_VALUE_COUNT
};

enum metric_histogram {
	M_EXEC_DURATION,	/* seconds */
	M_SPAWN_LATENCY,	/* seconds */
	M_HISTOGRAM_COUNT
};

void metrics_inc(enum metric_counter c);
void metrics_add(enum metric_counter c, unsigned long n);
void metrics_gauge_add(enum metric_gauge g, long delta);
void metrics_gauge_set(enum metric_gauge g, long value);
long metrics_gauge_get(enum metric_gauge g);
void metrics_value_set(enum metric_value v, double value);
double metrics_value_get(enum metric_value v);
void metrics_observe(enum metric_histogram h, double seconds);

/* The Prometheus exposition text.  0 or -ENOMEM. */
int metrics_render(struct buf *out);

#endif
