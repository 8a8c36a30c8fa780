#include "util/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static const double buckets[] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct histogram {
	unsigned long long counts[NBUCKETS];
	unsigned long long count;
	double sum;
};

static atomic_ullong counters[M_COUNTER_COUNT];
static atomic_long gauges[M_GAUGE_COUNT];
static _Atomic double values[M_VALUE_COUNT];
static struct histogram histograms[M_HISTOGRAM_COUNT];
static pthread_mutex_t hlock = PTHREAD_MUTEX_INITIALIZER;

void metrics_inc(enum metric_counter c) { atomic_fetch_add(&counters[c], 1); }
void metrics_add(enum metric_counter c, unsigned long n) { atomic_fetch_add(&counters[c], n); }
void metrics_gauge_add(enum metric_gauge g, long d) { atomic_fetch_add(&gauges[g], d); }
void metrics_gauge_set(enum metric_gauge g, long v) { atomic_store(&gauges[g], v); }
long metrics_gauge_get(enum metric_gauge g) { return atomic_load(&gauges[g]); }
void metrics_value_set(enum metric_value v, double x) { atomic_store(&values[v], x); }
double metrics_value_get(enum metric_value v) { return atomic_load(&values[v]); }

void metrics_observe(enum metric_histogram h, double s)
{
	pthread_mutex_lock(&hlock);
	for (size_t i = 0; i < NBUCKETS; i++)
		if (s <= buckets[i])
			histograms[h].counts[i]++;
	histograms[h].count++;
	histograms[h].sum += s;
	pthread_mutex_unlock(&hlock);
}

static unsigned long long get(enum metric_counter c) { return atomic_load(&counters[c]); }

static int render_histogram(struct buf *o, const char *name, const char *help,
			    const struct histogram *h)
{
	int r = buf_appendf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);

	for (size_t i = 0; r == 0 && i < NBUCKETS; i++)
		r = buf_appendf(o, "%s_bucket{le=\"%g\"} %llu\n", name, buckets[i], h->counts[i]);
	if (r == 0)
		r = buf_appendf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n",
				name, h->count, name, h->sum, name, h->count);
	return r;
}

int metrics_render(struct buf *o)
{
	struct histogram h[M_HISTOGRAM_COUNT];
	int r;

	pthread_mutex_lock(&hlock);
	memcpy(h, histograms, sizeof(h));
	pthread_mutex_unlock(&hlock);

	r = buf_appendf(o,
		"# HELP petri_sessions_live Sessions alive now.\n"
		"# TYPE petri_sessions_live gauge\n"
		"petri_sessions_live %ld\n"
		"# HELP petri_executions_running Executions in flight now.\n"
		"# TYPE petri_executions_running gauge\n"
		"petri_executions_running %ld\n"
		"# HELP petri_pool_ready Pre-forked sandboxes waiting in the pool.\n"
		"# TYPE petri_pool_ready gauge\n"
		"petri_pool_ready %ld\n"
		"# HELP petri_pool_target Sandboxes the pool aims to keep ready now (from the take rate, within pool_min and pool_max and the room max_sessions leaves).\n"
		"# TYPE petri_pool_target gauge\n"
		"petri_pool_target %ld\n"
		"# HELP petri_pool_take_rate Sandboxes asked of the pool a second (exponentially weighted over pool_window_s).\n"
		"# TYPE petri_pool_take_rate gauge\n"
		"petri_pool_take_rate %.4f\n"
		"# HELP petri_pool_misses Recent takes that found the pool empty (weighted over pool_window_s like the rate).\n"
		"# TYPE petri_pool_misses gauge\n"
		"petri_pool_misses %.4f\n"
		"# HELP petri_pool_refill_seconds Time one refill of the pool takes (smoothed).\n"
		"# TYPE petri_pool_refill_seconds gauge\n"
		"petri_pool_refill_seconds %.4f\n"
		"# HELP petri_light_pool_ready Pre-forked sandboxes of the light template (nothing preloaded) waiting for one-shots.\n"
		"# TYPE petri_light_pool_ready gauge\n"
		"petri_light_pool_ready %ld\n"
		"# HELP petri_light_pool_target Sandboxes the light template's pool aims to keep ready now.\n"
		"# TYPE petri_light_pool_target gauge\n"
		"petri_light_pool_target %ld\n"
		"# HELP petri_oneshots_light_total One-shots run in a sandbox of the light template: their code named no preloaded module.\n"
		"# TYPE petri_oneshots_light_total counter\n"
		"petri_oneshots_light_total %llu\n"
		"# HELP petri_sessions_created_total Sessions created.\n"
		"# TYPE petri_sessions_created_total counter\n"
		"petri_sessions_created_total %llu\n"
		"# HELP petri_sessions_ended_total Sessions ended, by why.\n"
		"# TYPE petri_sessions_ended_total counter\n"
		"petri_sessions_ended_total{reason=\"idle\"} %llu\n"
		"petri_sessions_ended_total{reason=\"lifetime\"} %llu\n"
		"petri_sessions_ended_total{reason=\"deleted\"} %llu\n"
		"petri_sessions_ended_total{reason=\"died\"} %llu\n"
		"# HELP petri_sessions_expired_total Sessions ended by idle timeout or maximum lifetime.\n"
		"# TYPE petri_sessions_expired_total counter\n"
		"petri_sessions_expired_total %llu\n"
		"# HELP petri_executions_total Executions finished, by status.\n"
		"# TYPE petri_executions_total counter\n"
		"petri_executions_total{status=\"ok\"} %llu\n"
		"petri_executions_total{status=\"error\"} %llu\n"
		"petri_executions_total{status=\"timeout\"} %llu\n"
		"petri_executions_total{status=\"oom\"} %llu\n"
		"petri_executions_total{status=\"killed\"} %llu\n"
		"# HELP petri_requests_rejected_total Requests refused, by why.\n"
		"# TYPE petri_requests_rejected_total counter\n"
		"petri_requests_rejected_total{reason=\"auth\"} %llu\n"
		"petri_requests_rejected_total{reason=\"capacity\"} %llu\n"
		"petri_requests_rejected_total{reason=\"too_large\"} %llu\n"
		"petri_requests_rejected_total{reason=\"bad_request\"} %llu\n"
		"petri_requests_rejected_total{reason=\"busy\"} %llu\n"
		"petri_requests_rejected_total{reason=\"not_found\"} %llu\n"
		"petri_requests_rejected_total{reason=\"gone\"} %llu\n"
		"# HELP petri_sandbox_spawn_failures_total Sandboxes that failed to start.\n"
		"# TYPE petri_sandbox_spawn_failures_total counter\n"
		"petri_sandbox_spawn_failures_total %llu\n"
		"# HELP petri_zygote_restarts_total Warm templates restarted after dying.\n"
		"# TYPE petri_zygote_restarts_total counter\n"
		"petri_zygote_restarts_total %llu\n",
		metrics_gauge_get(M_SESSIONS_LIVE), metrics_gauge_get(M_EXECUTIONS_RUNNING),
		metrics_gauge_get(M_POOL_READY), metrics_gauge_get(M_POOL_TARGET),
		metrics_value_get(M_POOL_TAKE_RATE), metrics_value_get(M_POOL_MISSES),
		metrics_value_get(M_POOL_REFILL_SECONDS),
		metrics_gauge_get(M_LIGHT_POOL_READY), metrics_gauge_get(M_LIGHT_POOL_TARGET),
		get(M_ONESHOTS_LIGHT),
		get(M_SESSIONS_CREATED),
		get(M_SESSIONS_EXPIRED_IDLE), get(M_SESSIONS_EXPIRED_LIFETIME),
		get(M_SESSIONS_DELETED), get(M_SESSIONS_DIED),
		get(M_SESSIONS_EXPIRED_IDLE) + get(M_SESSIONS_EXPIRED_LIFETIME),
		get(M_EXEC_OK), get(M_EXEC_ERROR), get(M_EXEC_TIMEOUT), get(M_EXEC_OOM),
		get(M_EXEC_KILLED), get(M_REJECT_AUTH), get(M_REJECT_CAPACITY),
		get(M_REJECT_TOO_LARGE), get(M_REJECT_BAD_REQUEST), get(M_REJECT_BUSY),
		get(M_REJECT_NOT_FOUND), get(M_REJECT_GONE), get(M_SPAWN_FAILED),
		get(M_ZYGOTE_RESTARTS));
	if (r == 0)
		r = buf_appendf(o,
			"# HELP petri_answers_held_bytes Answers made and not yet read by their clients.\n"
			"# TYPE petri_answers_held_bytes gauge\n"
			"petri_answers_held_bytes %ld\n"
			"# HELP petri_answers_cut_total Answers cut short because their client read too slowly (min_read_kbps).\n"
			"# TYPE petri_answers_cut_total counter\n"
			"petri_answers_cut_total %llu\n"
			"# HELP petri_sandbox_tasks_budget Processes and threads sessions and one-shots may hold together (the sum of their pids limits; from kernel.pid_max and threads-max).\n"
			"# TYPE petri_sandbox_tasks_budget gauge\n"
			"petri_sandbox_tasks_budget %ld\n"
			"# HELP petri_sandbox_tasks_held The sum of the pids limits of the live sessions and one-shots.\n"
			"# TYPE petri_sandbox_tasks_held gauge\n"
			"petri_sandbox_tasks_held %ld\n"
			"# HELP petri_network_links Sessions holding a network link now (its slot is taken from before the link is made until after its rules, resolver and connections are gone).\n"
			"# TYPE petri_network_links gauge\n"
			"petri_network_links %ld\n"
			"# HELP petri_network_destinations_total Addresses sessions' code connected to, or was refused, each counted once in each execution it was seen in.\n"
			"# TYPE petri_network_destinations_total counter\n"
			"petri_network_destinations_total{outcome=\"connected\"} %llu\n"
			"petri_network_destinations_total{outcome=\"refused\"} %llu\n"
			"# HELP petri_network_names_total Names sessions' code had resolved, or refused by its policy, each counted once in each execution it was asked in.\n"
			"# TYPE petri_network_names_total counter\n"
			"petri_network_names_total{outcome=\"resolved\"} %llu\n"
			"petri_network_names_total{outcome=\"refused\"} %llu\n",
			metrics_gauge_get(M_ANSWERS_HELD_BYTES), get(M_ANSWERS_CUT),
			metrics_gauge_get(M_TASKS_BUDGET), metrics_gauge_get(M_TASKS_HELD),
			metrics_gauge_get(M_NET_LINKS),
			get(M_NET_CONNECTED), get(M_NET_REFUSED), get(M_NET_NAMES),
			get(M_NET_NAMES_REFUSED));
	if (r == 0)
		r = render_histogram(o, "petri_execution_duration_seconds",
				     "Wall time of executions.", &h[M_EXEC_DURATION]);
	if (r == 0)
		r = render_histogram(o, "petri_sandbox_spawn_seconds",
				     "Time to get a ready sandbox for a session.",
				     &h[M_SPAWN_LATENCY]);
	return r;
}
