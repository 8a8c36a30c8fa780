#include "api/answers.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

/* What MHD copies out of an answer at a time into the connection's own
 * buffer. */
#define BLOCK_SIZE (32u << 10)

struct answers {
	size_t budget;		/* max_answers_mb, in bytes */
	size_t share;		/* the most one tenant may hold before it is refused */
	size_t ntenants;
	double grace_s;		/* http_timeout_s */
	double bytes_per_s;	/* min_read_kbps */
	atomic_size_t held;
	atomic_size_t *per;	/* ntenants counts */
};

/* One answer on its way to its client. */
struct held {
	struct answers *a;
	int tenant;
	char *text;
	size_t len;
	double deadline;	/* monotonic */
	bool cut;
};

int answers_new(const struct petri_config *cfg, struct answers **out)
{
	struct answers *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->budget = (size_t)cfg->max_answers_bytes;
	a->ntenants = cfg->napi_keys;
	/* Equal shares guarantee each key its own room whatever the others
	 * do; with one key (or none) it is the whole budget. */
	a->share = a->ntenants > 1 ? a->budget / a->ntenants : a->budget;
	a->grace_s = cfg->http_timeout_s;
	a->bytes_per_s = (double)cfg->min_read_bytes_per_s;
	if (a->ntenants && !(a->per = calloc(a->ntenants, sizeof(*a->per)))) {
		free(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

void answers_free(struct answers *a)
{
	if (!a)
		return;
	if (atomic_load(&a->held))
		log_warn("http: %zu bytes of answers still held at exit",
			 atomic_load(&a->held));
	free(a->per);
	free(a);
}

static atomic_size_t *tenant_count(const struct answers *a, int tenant)
{
	return tenant >= 0 && (size_t)tenant < a->ntenants ? &a->per[tenant] : NULL;
}

enum answers_room answers_room(struct answers *a, int tenant)
{
	atomic_size_t *t = tenant_count(a, tenant);

	if (t && atomic_load(t) >= a->share)
		return ANSWERS_TENANT_FULL;
	if (atomic_load(&a->held) >= a->budget)
		return ANSWERS_SERVER_FULL;
	return ANSWERS_ROOM;
}

void answers_charge(struct answers *a, int tenant, size_t n)
{
	atomic_size_t *t = tenant_count(a, tenant);

	atomic_fetch_add(&a->held, n);
	if (t)
		atomic_fetch_add(t, n);
	metrics_gauge_add(M_ANSWERS_HELD_BYTES, (long)n);
}

void answers_release(struct answers *a, int tenant, size_t n)
{
	atomic_size_t *t = tenant_count(a, tenant);

	atomic_fetch_sub(&a->held, n);
	if (t)
		atomic_fetch_sub(t, n);
	metrics_gauge_add(M_ANSWERS_HELD_BYTES, -(long)n);
}

double answers_deadline(const struct answers *a, size_t n)
{
	return clock_mono_s() + a->grace_s + (double)n / a->bytes_per_s;
}

size_t answers_held(const struct answers *a)
{
	return atomic_load(&a->held);
}

size_t answers_held_by(const struct answers *a, int tenant)
{
	atomic_size_t *t = tenant_count(a, tenant);

	return t ? atomic_load(t) : 0;
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
		if (!h->cut)
			log_info("http: a client read %llu of %zu bytes of its answer before "
				 "its deadline; connection closed",
				 (unsigned long long)pos, h->len);
		h->cut = true;
		metrics_inc(M_ANSWERS_CUT);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = h->len - (size_t)pos < max ? h->len - (size_t)pos : max;
	memcpy(out, h->text + pos, n);
	return (ssize_t)n;
}

static void release(void *cls)
{
	struct held *h = cls;

	answers_release(h->a, h->tenant, h->len);
	free(h->text);
	free(h);
}

struct MHD_Response *answers_response(struct answers *a, int tenant, char *text, size_t len)
{
	struct held *h = calloc(1, sizeof(*h));
	struct MHD_Response *resp;

	if (!h) {
		free(text);
		return NULL;
	}
	*h = (struct held){ .a = a, .tenant = tenant, .text = text, .len = len,
			    .deadline = answers_deadline(a, len) };
	answers_charge(a, tenant, len);
	resp = MHD_create_response_from_callback(len, BLOCK_SIZE, reader, h, release);
	if (!resp)
		release(h);
	return resp;
}
