#include "session/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/zygote.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define RETRY_S 30

struct pool {
	struct jail_host *host;
	struct pool_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	struct zygote *z;		/* NULL: none running */
	unsigned users;			/* zygote_fork() calls on z in flight */
	struct box **ready;
	size_t nready;
	bool stopping;
	int stop_fd;			/* readable once stopping: cuts a start short */
	bool warned;			/* the "no warm path" warning was given */
	pthread_t thread;
};

static void wait_for(struct pool *p, double seconds)
{
	struct timespec until = clock_deadline(seconds);

	pthread_cond_timedwait(&p->wake, &p->lock, &until);
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
	int r;

	if (p->z && zygote_alive(p->z))
		return;
	if (p->z) {
		log_warn("the warm template died; starting a new one (sessions already "
			 "forked keep running)");
		metrics_inc(M_ZYGOTE_RESTARTS);
		retire_template(p);
	}
	pthread_mutex_unlock(&p->lock);
	r = zygote_start(p->host, &p->cfg.defaults, p->cfg.preload, p->stop_fd, &z, err,
			 sizeof(err));
	pthread_mutex_lock(&p->lock);
	if (r < 0) {
		if (!p->warned)
			log_warn("no warm path (%s): every sandbox starts cold; retrying "
				 "every %d s", err, RETRY_S);
		p->warned = true;
		return;
	}
	if (p->stopping) {
		pthread_mutex_unlock(&p->lock);
		zygote_free(z);
		pthread_mutex_lock(&p->lock);
		return;
	}
	log_info("warm template ready");
	p->warned = false;
	p->z = z;
}

/* Fork one sandbox for the pool; the lock is dropped meanwhile. */
static void fill_one(struct pool *p)
{
	struct zygote *z = p->z;
	struct box *b = NULL;
	char err[512];
	int r;

	p->users++;
	pthread_mutex_unlock(&p->lock);
	r = zygote_fork(z, &p->cfg.defaults, &b, err, sizeof(err));
	pthread_mutex_lock(&p->lock);
	if (--p->users == 0)
		pthread_cond_broadcast(&p->idle);
	if (r < 0) {
		log_warn("cannot fork a warm sandbox: %s", err);
		return;
	}
	p->ready[p->nready++] = b;
	metrics_gauge_add(M_POOL_READY, 1);
}

static void *run(void *arg)
{
	struct pool *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		size_t room, target;

		ensure_template(p);
		room = p->cfg.room(p->cfg.ctx);
		target = p->cfg.size < room ? p->cfg.size : room;
		/* Over the room the cap leaves: give back the oldest. */
		while (p->nready > target) {
			struct box *b = p->ready[0];

			memmove(p->ready, p->ready + 1, --p->nready * sizeof(*p->ready));
			metrics_gauge_add(M_POOL_READY, -1);
			pthread_mutex_unlock(&p->lock);
			box_free(b);
			pthread_mutex_lock(&p->lock);
		}
		if (p->z && p->nready < target && !p->stopping) {
			fill_one(p);
			continue;
		}
		/* stopping may have been set while the lock was dropped
		 * (a template starting): its wake-up is gone, do not wait. */
		if (!p->stopping)
			wait_for(p, p->z ? 1.0 : RETRY_S);
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
	p->ready = calloc(cfg->size ? cfg->size : 1, sizeof(*p->ready));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->ready || p->stop_fd < 0 || pthread_create(&p->thread, NULL, run, p) != 0) {
		if (p->stop_fd >= 0)
			close(p->stop_fd);
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
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	if (write(p->stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0)
		log_warn("cannot interrupt the template's start");
	pthread_join(p->thread, NULL);
	close(p->stop_fd);
	for (size_t i = 0; i < p->nready; i++)
		box_free(p->ready[i]);
	metrics_gauge_add(M_POOL_READY, -(long)p->nready);
	pthread_mutex_lock(&p->lock);
	if (p->z)
		retire_template(p);
	pthread_mutex_unlock(&p->lock);
	free(p->ready);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int pool_take(struct pool *p, const struct box_config *cfg, bool is_default,
	      struct box **out, char *err, size_t errlen)
{
	struct zygote *z;
	int r;

	*out = NULL;
	pthread_mutex_lock(&p->lock);
	while (is_default && p->nready > 0) {
		struct box *b = p->ready[--p->nready];

		metrics_gauge_add(M_POOL_READY, -1);
		if (box_alive(b)) {
			pthread_cond_signal(&p->wake);	/* refill */
			pthread_mutex_unlock(&p->lock);
			*out = b;
			return 0;
		}
		pthread_mutex_unlock(&p->lock);
		box_free(b);
		pthread_mutex_lock(&p->lock);
	}
	z = p->z;
	if (!z || p->stopping) {
		pthread_mutex_unlock(&p->lock);
		return -EAGAIN;
	}
	p->users++;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	r = zygote_fork(z, cfg, out, err, errlen);
	pthread_mutex_lock(&p->lock);
	if (--p->users == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	return r;
}

/* The thread holds p->lock from reading the room until it waits, so a poke
 * that follows a change of the room is never lost.  Without a template
 * there is nothing to refill from: no poke, or every session's end would
 * retry a template start the thread only retries every RETRY_S. */
void pool_poke(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	if (p->z)
		pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

bool pool_warm(struct pool *p)
{
	bool warm;

	pthread_mutex_lock(&p->lock);
	warm = p->z != NULL;
	pthread_mutex_unlock(&p->lock);
	return warm;
}
