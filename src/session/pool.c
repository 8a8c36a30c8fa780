/* pool — the template and the ready sandboxes; see pool.h.
 *
 * The thread's loop, with the lock held except where it says:
 *
 *   start the template if there is none (or it died) and a retry is due;
 *   drop ready sandboxes that died (their status descriptor is readable);
 *   compute the target (poolrate.h) and bound it by the room the cap leaves;
 *   free the oldest above it, or fork one more below it (lock dropped);
 *   else wait in poll() (lock dropped) on wake_fd and the ready sandboxes'
 *   status descriptors, at most a second (the template's liveness, the
 *   shrink after a burst).
 *
 * wake_fd is an eventfd that pool_take() and pool_poke() write and the
 * thread empties before it looks at anything: a wake-up that comes while
 * the thread is busy leaves it readable, so none is lost, without a lock. */
#include "session/pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/zygote.h"
#include "session/poolrate.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define RETRY_S 30		/* no template: try to start one again */
#define LOOK_S 1.0		/* the template's liveness; the slow shrink */

struct pool {
	struct jail_host *host;
	struct pool_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	pthread_cond_t started;		/* a start ended (ready or failed), or stopping */
	_Atomic int state;		/* enum pool_state, read without the lock */
	atomic_size_t nready_now;	/* nready, read without the lock */
	atomic_uint target_now;		/* the last fill target before the room
					 * capped it, likewise */
	struct zygote *z;		/* NULL: none running */
	unsigned users;			/* zygote_fork() calls on z in flight */
	struct box **ready;		/* oldest first; cfg.max slots */
	size_t nready;
	struct pollfd *pfd;		/* the thread's: wake_fd and one per ready */
	struct poolrate rate;
	double retry_at;		/* no template: when to try again */
	bool stopping;
	int stop_fd;			/* readable once stopping: cuts a start short */
	int wake_fd;			/* readable: look again now (see above) */
	bool warned;			/* the "no warm path" warning was given */
	pthread_t thread;
};

/* In the log: "the warm template", "the light template". */
static const char *kind(const struct pool *p)
{
	return p->cfg.light ? "light" : "warm";
}

/* Each pool's own gauges (the take rate's are the main pool's alone). */
static enum metric_gauge ready_gauge(const struct pool *p)
{
	return p->cfg.light ? M_LIGHT_POOL_READY : M_POOL_READY;
}

static enum metric_gauge target_gauge(const struct pool *p)
{
	return p->cfg.light ? M_LIGHT_POOL_TARGET : M_POOL_TARGET;
}

static void wake(struct pool *p)
{
	if (write(p->wake_fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0 && errno != EAGAIN)
		log_warn("cannot wake the pool's thread: %s", strerror(errno));
}

/* Dead, or dying: its driver has exited (pid 1 reported it on the status
 * descriptor) or pid 1 itself is gone (end of file there).  One poll(),
 * no round trip with the sandbox. */
static bool gone(struct box *b)
{
	struct pollfd pfd = { .fd = jail_status_fd(box_jail(b)), .events = POLLIN };

	return !box_alive(b) || poll(&pfd, 1, 0) > 0;
}

/* With the lock held: take z away from everyone, then stop it. */
static void retire_template(struct pool *p)
{
	struct zygote *z = p->z;

	p->z = NULL;
	while (p->users)
		pthread_cond_wait(&p->idle, &p->lock);
	pthread_mutex_unlock(&p->lock);
	zygote_free(z);
	pthread_mutex_lock(&p->lock);
}

static void ensure_template(struct pool *p)
{
	struct zygote *z;
	char err[512];
	double t0;
	int r;

	if (p->z && zygote_alive(p->z))
		return;
	if (p->z) {
		log_warn("the %s template died; starting a new one (sessions already "
			 "forked keep running)", kind(p));
		metrics_inc(M_ZYGOTE_RESTARTS);
		atomic_store(&p->state, POOL_STARTING);
		retire_template(p);
	} else if (clock_mono_s() < p->retry_at) {
		return;
	}
	t0 = clock_mono_s();
	pthread_mutex_unlock(&p->lock);
	r = zygote_start(p->host, &p->cfg.defaults, p->cfg.preload, p->stop_fd, &z, err,
			 sizeof(err));
	pthread_mutex_lock(&p->lock);
	if (r == -ECANCELED || (r == 0 && p->stopping)) {
		/* Stopped while it started: nothing failed. */
		log_info("the %s template was still starting when the pool stopped", kind(p));
		if (r == 0) {
			pthread_mutex_unlock(&p->lock);
			zygote_free(z);
			pthread_mutex_lock(&p->lock);
		}
		return;
	}
	if (r < 0) {
		if (!p->warned && p->cfg.light)
			log_warn("no light template (%s): one-shots go to the warm one; retrying "
				 "every %d s", err, RETRY_S);
		else if (!p->warned)
			log_warn("no warm path (%s): every sandbox starts cold; retrying "
				 "every %d s", err, RETRY_S);
		p->warned = true;
		p->retry_at = clock_mono_s() + RETRY_S;
		atomic_store(&p->state, POOL_FAILED);
		pthread_cond_broadcast(&p->started);
		return;
	}
	log_info("%s template ready in %.0f ms", kind(p), (clock_mono_s() - t0) * 1000);
	p->warned = false;
	p->z = z;
	atomic_store(&p->state, POOL_READY);
	pthread_cond_broadcast(&p->started);
}

/* With the lock held: take ready[i] out and free it (lock dropped). */
static void discard(struct pool *p, size_t i)
{
	struct box *b = p->ready[i];

	memmove(p->ready + i, p->ready + i + 1, (--p->nready - i) * sizeof(*p->ready));
	metrics_gauge_add(ready_gauge(p), -1);
	atomic_store(&p->nready_now, p->nready);
	pthread_mutex_unlock(&p->lock);
	box_free(b);
	pthread_mutex_lock(&p->lock);
}

static void drop_dead(struct pool *p)
{
	for (size_t i = 0; i < p->nready;) {
		if (!gone(p->ready[i])) {
			i++;
			continue;
		}
		log_warn("a %s sandbox died while it waited in the pool; forking another",
			 kind(p));
		discard(p, i);
		i = 0;	/* the lock was dropped: look at them all again */
	}
}

/* Fork one sandbox for the pool; the lock is dropped meanwhile. */
static void fill_one(struct pool *p)
{
	struct zygote *z = p->z;
	struct box *b = NULL;
	char err[512];
	double t0 = clock_mono_s();
	int r;

	p->users++;
	pthread_mutex_unlock(&p->lock);
	r = zygote_fork(z, &p->cfg.defaults, &b, err, sizeof(err));
	pthread_mutex_lock(&p->lock);
	if (--p->users == 0)
		pthread_cond_broadcast(&p->idle);
	if (r < 0) {
		log_warn("cannot fork a %s sandbox: %s", kind(p), err);
		return;
	}
	poolrate_refilled(&p->rate, clock_mono_s() - t0);
	p->ready[p->nready++] = b;
	metrics_gauge_add(ready_gauge(p), 1);
	atomic_store(&p->nready_now, p->nready);
}

/* The lock is dropped while it waits; wake_fd is emptied before it takes
 * the lock again, so that whatever woke it is seen. */
static void wait_event(struct pool *p, double seconds)
{
	nfds_t n = 0;
	uint64_t count;

	p->pfd[n++] = (struct pollfd){ .fd = p->wake_fd, .events = POLLIN };
	for (size_t i = 0; i < p->nready; i++)
		p->pfd[n++] = (struct pollfd){ .fd = jail_status_fd(box_jail(p->ready[i])),
					       .events = POLLIN };
	pthread_mutex_unlock(&p->lock);
	/* A descriptor closed meanwhile (its sandbox taken and freed) is at
	 * worst a spurious wake-up: drop_dead() looks again with the lock. */
	if (poll(p->pfd, n, (int)(seconds * 1000) + 1) < 0 && errno != EINTR)
		log_warn("the pool's thread cannot wait: %s", strerror(errno));
	if (read(p->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		log_warn("the pool's thread cannot read its wake-ups: %s", strerror(errno));
	pthread_mutex_lock(&p->lock);
}

static void *run(void *arg)
{
	struct pool *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		double now;
		size_t room;
		struct poolrate_target t;

		ensure_template(p);
		drop_dead(p);
		now = clock_mono_s();
		room = p->cfg.room(p->cfg.ctx);
		t = poolrate_target(&p->rate, now, p->cfg.min, p->cfg.max);
		/* What it would hold with room enough (pool_target()). */
		atomic_store(&p->target_now, t.fill);
		if (t.fill > room)
			t.fill = (unsigned)room;
		if (t.keep > room)
			t.keep = (unsigned)room;
		metrics_gauge_set(target_gauge(p), (long)t.fill);
		if (!p->cfg.light) {
			metrics_value_set(M_POOL_TAKE_RATE, poolrate_rate(&p->rate, now));
			metrics_value_set(M_POOL_MISSES, poolrate_misses(&p->rate, now));
			metrics_value_set(M_POOL_REFILL_SECONDS, p->rate.refill_s);
		}
		if (p->nready > t.keep) {
			discard(p, 0);		/* the oldest */
			continue;
		}
		if (p->z && p->nready < t.fill && !p->stopping) {
			fill_one(p);
			continue;
		}
		/* stopping may have been set while the lock was dropped
		 * (a template starting): do not wait then. */
		if (!p->stopping) {
			double until_retry = p->retry_at - now;

			if (p->z || until_retry > LOOK_S)
				wait_event(p, LOOK_S);
			else
				wait_event(p, until_retry > 0 ? until_retry : 0);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int pool_new(struct jail_host *host, const struct pool_config *cfg, struct pool **out)
{
	struct pool *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->host = host;
	p->cfg = *cfg;
	if (cfg->cpu_weight)
		p->cfg.defaults.limits.cpu_weight = cfg->cpu_weight;
	if (p->cfg.min > p->cfg.max)
		p->cfg.min = p->cfg.max;
	poolrate_init(&p->rate, cfg->window_s);
	p->ready = calloc(cfg->max ? cfg->max : 1, sizeof(*p->ready));
	p->pfd = calloc((size_t)cfg->max + 1, sizeof(*p->pfd));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	pthread_cond_init(&p->started, NULL);
	atomic_init(&p->state, POOL_STARTING);
	atomic_init(&p->nready_now, 0);
	atomic_init(&p->target_now, 0);
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->ready || !p->pfd || p->stop_fd < 0 || p->wake_fd < 0 ||
	    pthread_create(&p->thread, NULL, run, p) != 0) {
		if (p->stop_fd >= 0)
			close(p->stop_fd);
		if (p->wake_fd >= 0)
			close(p->wake_fd);
		pthread_cond_destroy(&p->idle);
		pthread_cond_destroy(&p->started);
		pthread_mutex_destroy(&p->lock);
		free(p->pfd);
		free(p->ready);
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->started);
	pthread_mutex_unlock(&p->lock);
	wake(p);
	if (write(p->stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0)
		log_warn("cannot interrupt the template's start");
	pthread_join(p->thread, NULL);
	close(p->stop_fd);
	close(p->wake_fd);
	for (size_t i = 0; i < p->nready; i++)
		box_free(p->ready[i]);
	metrics_gauge_add(ready_gauge(p), -(long)p->nready);
	metrics_gauge_set(target_gauge(p), 0);
	if (!p->cfg.light) {
		metrics_value_set(M_POOL_TAKE_RATE, 0);
		metrics_value_set(M_POOL_MISSES, 0);
	}
	pthread_mutex_lock(&p->lock);
	if (p->z)
		retire_template(p);
	pthread_mutex_unlock(&p->lock);
	free(p->pfd);
	free(p->ready);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->started);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int pool_take(struct pool *p, const struct box_config *cfg, bool is_default,
	      struct box **out, char *err, size_t errlen)
{
	struct zygote *z;
	double t0;
	int r;

	*out = NULL;
	pthread_mutex_lock(&p->lock);
	/* The newest first: the oldest go when the pool shrinks. */
	while (is_default && p->nready > 0) {
		struct box *b = p->ready[--p->nready];

		metrics_gauge_add(ready_gauge(p), -1);
		atomic_store(&p->nready_now, p->nready);
		if (!gone(b)) {
			poolrate_take(&p->rate, clock_mono_s(), false);
			pthread_mutex_unlock(&p->lock);
			wake(p);	/* refill */
			/* From a refill's share to a session's. */
			if (cfg->limits.cpu_weight &&
			    (r = jail_set_cpu_weight(box_jail(b), cfg->limits.cpu_weight)) < 0)
				log_warn("cannot give a warm sandbox its CPU weight: %s",
					 strerror(-r));
			*out = b;
			return 0;
		}
		pthread_mutex_unlock(&p->lock);
		box_free(b);
		pthread_mutex_lock(&p->lock);
	}
	if (is_default)
		poolrate_take(&p->rate, clock_mono_s(), true);
	z = p->z;
	if (!z || p->stopping) {
		pthread_mutex_unlock(&p->lock);
		return -EAGAIN;
	}
	p->users++;
	pthread_mutex_unlock(&p->lock);
	wake(p);
	t0 = clock_mono_s();
	r = zygote_fork(z, cfg, out, err, errlen);
	pthread_mutex_lock(&p->lock);
	if (r == 0 && is_default)
		poolrate_refilled(&p->rate, clock_mono_s() - t0);
	if (--p->users == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	return r;
}

void pool_poke(struct pool *p)
{
	wake(p);
}

bool pool_warm(struct pool *p)
{
	bool warm;

	pthread_mutex_lock(&p->lock);
	warm = p->z != NULL;
	pthread_mutex_unlock(&p->lock);
	return warm;
}

enum pool_state pool_state(const struct pool *p)
{
	return (enum pool_state)atomic_load(&p->state);
}

size_t pool_ready(const struct pool *p)
{
	return atomic_load(&p->nready_now);
}

unsigned pool_target(const struct pool *p)
{
	return atomic_load(&p->target_now);
}

bool pool_wait_ready(struct pool *p, double seconds)
{
	struct timespec until = clock_deadline(seconds);
	bool ready;

	pthread_mutex_lock(&p->lock);
	while (!p->z && !p->stopping && atomic_load(&p->state) == POOL_STARTING &&
	       pthread_cond_timedwait(&p->started, &p->lock, &until) != ETIMEDOUT)
		;
	ready = p->z != NULL && !p->stopping;
	pthread_mutex_unlock(&p->lock);
	return ready;
}
