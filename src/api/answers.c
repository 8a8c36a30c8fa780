#include "api/answers.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

/* What MHD copies out of an answer at a time into the connection's own
 * buffer. */
#define BLOCK_SIZE (32u << 10)

struct answers {
	struct share *held;	/* max_answers_mb, shared between tenants */
	double grace_s;		/* http_timeout_s */
	double bytes_per_s;	/* min_read_kbps */
	pthread_mutex_t trim_lock;
	double trimmed_at;	/* monotonic */
};

/* One answer on its way to its client. */
struct held {
	struct answers *a;
	struct share_tenant tenant;
	char *text;
	size_t len;
	double deadline;	/* monotonic */
	bool cut;
	bool charged;
};

int answers_new(const struct petri_config *cfg, struct answers **out)
{
	struct answers *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a || share_new(cfg->max_answers_bytes, config_share_of(cfg, cfg->max_answers_bytes),
			    &a->held) < 0) {
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_init(&a->trim_lock, NULL);
	a->grace_s = cfg->http_timeout_s;
	a->bytes_per_s = (double)cfg->min_read_bytes_per_s;
	*out = a;
	return 0;
}

void answers_free(struct answers *a)
{
	if (!a)
		return;
	if (share_held(a->held, NULL))
		log_warn("http: %llu bytes of answers still held at exit",
			 (unsigned long long)share_held(a->held, NULL));
	share_free(a->held);
	pthread_mutex_destroy(&a->trim_lock);
	free(a);
}

enum answers_room answers_room(struct answers *a, const struct share_tenant *t)
{
	switch (share_room(a->held, t)) {
	case -EDQUOT:
		return ANSWERS_TENANT_FULL;
	case -EBUSY:
		return ANSWERS_SERVER_FULL;
	default:
		return ANSWERS_ROOM;
	}
}

bool answers_charge(struct answers *a, const struct share_tenant *t, size_t n)
{
	/* Out of memory for the tenant's entry: the answer is sent all the
	 * same, uncounted (the server has worse trouble then). */
	if (share_charge(a->held, t, n) < 0)
		return false;
	metrics_gauge_add(M_ANSWERS_HELD_BYTES, (long)n);
	return true;
}

/* How often, at most, memory is handed back to the kernel. */
#define TRIM_EVERY_S 5.0

void answers_release(struct answers *a, const struct share_tenant *t, size_t n)
{
	share_give(a->held, t, n);
	metrics_gauge_add(M_ANSWERS_HELD_BYTES, -(long)n);
	/* Every answer read: what a burst of them left in malloc's arenas
	 * (small blocks of listings and trees, which have no mapping of their
	 * own to give back) goes back to the kernel, now and then. */
	if (share_held(a->held, NULL) == 0) {
		double now = clock_mono_s();

		pthread_mutex_lock(&a->trim_lock);
		if (now - a->trimmed_at >= TRIM_EVERY_S) {
			a->trimmed_at = now;
			pthread_mutex_unlock(&a->trim_lock);
			malloc_trim(0);
		} else {
			pthread_mutex_unlock(&a->trim_lock);
		}
	}
}

double answers_deadline(const struct answers *a, size_t n)
{
	return clock_mono_s() + a->grace_s + (double)n / a->bytes_per_s;
}

size_t answers_held(struct answers *a, const struct share_tenant *t)
{
	return (size_t)share_held(a->held, t);
}

/* MHD's content reader, on an event thread: the next block, or the end of
 * a client too slow for its deadline (MHD then closes the connection and
 * frees the response). */
static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct held *h = cls;
	size_t n;

	if (pos >= h->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (clock_mono_s() > h->deadline) {
		if (!h->cut) {
			log_info("http: a client read %llu of %zu bytes of its answer before "
				 "its deadline; connection closed",
				 (unsigned long long)pos, h->len);
			metrics_inc(M_ANSWERS_CUT);
		}
		h->cut = true;
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = h->len - (size_t)pos < max ? h->len - (size_t)pos : max;
	memcpy(out, h->text + pos, n);
	return (ssize_t)n;
}

static void release(void *cls)
{
	struct held *h = cls;

	if (h->charged)
		answers_release(h->a, &h->tenant, h->len);
	free(h->text);
	free(h);
}

struct MHD_Response *answers_response(struct answers *a, const struct share_tenant *t,
				      char *text, size_t len)
{
	struct held *h = calloc(1, sizeof(*h));
	struct MHD_Response *resp;

	if (!h) {
		free(text);
		return NULL;
	}
	*h = (struct held){ .a = a, .tenant = *t, .text = text, .len = len,
			    .deadline = a ? answers_deadline(a, len) : INFINITY };
	h->charged = a && answers_charge(a, t, len);
	resp = MHD_create_response_from_callback(len, BLOCK_SIZE, reader, h, release);
	if (!resp)
		release(h);
	return resp;
}
