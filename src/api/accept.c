/* accept — see accept.h. */
#include "api/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/share.h"
#include "util/cidr.h"
#include "util/log.h"
#include "util/metrics.h"

/* Accepts in a row before the thread looks at its wake-up again. */
#define BURST 64
/* Out of file descriptors or kernel memory: the next try, unless a
 * connection closes first. */
#define RETRY_MS 100

struct slot {
	struct MHD_Daemon *daemon;
	unsigned limit;		/* its part of the acceptor's */
	atomic_uint open;	/* handed over and not yet closed */
};

struct acceptor {
	int listen_fd;
	int wake;		/* eventfd: stop, or a connection closed at the limit */
	struct share *by_addr;	/* connections per client address; NULL: no cap */
	atomic_bool stopping;
	bool short_of_fds;	/* said so; until an accept succeeds again */
	bool running;		/* the thread was started and not yet joined */
	pthread_t thread;
	unsigned nslots;
	struct slot slots[];
};

static void wake(struct acceptor *a)
{
	uint64_t one = 1;

	/* Fails only when the counter is full, and then it is readable anyway. */
	(void)!write(a->wake, &one, sizeof(one));
}

/* Wait for the wake-up, or for the listening socket too when listen; at
 * most ms (-1: no bound).  False once stopping. */
static bool wait_for(struct acceptor *a, bool listen, int ms)
{
	struct pollfd p[2] = { { .fd = a->wake, .events = POLLIN },
			       { .fd = a->listen_fd, .events = POLLIN } };
	uint64_t n;

	if (poll(p, listen ? 2 : 1, ms) > 0 && (p[0].revents & POLLIN))
		(void)!read(a->wake, &n, sizeof(n));
	return !atomic_load(&a->stopping);
}

/* The daemon with the fewest connections, if one has room. */
static struct slot *least_loaded(struct acceptor *a)
{
	struct slot *best = NULL;
	unsigned best_open = 0;

	for (unsigned i = 0; i < a->nslots; i++) {
		unsigned open = atomic_load(&a->slots[i].open);

		if (open < a->slots[i].limit && (!best || open < best_open)) {
			best = &a->slots[i];
			best_open = open;
		}
	}
	return best;
}

/* The tenant sa counts against, or false when it is not counted. */
static bool tenant_of(const struct acceptor *a, const struct sockaddr *sa, struct share_tenant *t)
{
	unsigned char addr[16];

	if (!a->by_addr || !sa || !cidr_addr_of(sa, addr))
		return false;
	share_tenant_of_bytes(addr, -1, t);
	return true;
}

/* A connection of s's, from sa, is gone. */
static void release(struct acceptor *a, struct slot *s, const struct sockaddr *sa)
{
	struct share_tenant t;

	if (tenant_of(a, sa, &t))
		share_give(a->by_addr, &t, 1);
	/* At the limit the thread waits for this; below it, for the socket. */
	if (atomic_fetch_sub(&s->open, 1) >= s->limit)
		wake(a);
}

/* Accept what is waiting, at most a burst, while a daemon has room.
 * False: out of descriptors or memory (or another error), wait before the
 * next try. */
static bool accept_some(struct acceptor *a)
{
	struct slot *s;

	for (int i = 0; i < BURST && (s = least_loaded(a)); i++) {
		struct sockaddr_storage ss;
		struct sockaddr *sa = (struct sockaddr *)&ss;
		socklen_t len = sizeof(ss);
		struct share_tenant t;
		int fd = accept4(a->listen_fd, sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				if (!a->short_of_fds)	/* once, not every retry */
					log_warn("http: cannot accept connections: %s",
						 strerror(errno));
				a->short_of_fds = true;
				return false;
			}
			if (errno == EAGAIN)
				return true;
			/* Unexpected (the socket itself in trouble): not again at
			 * once, or the thread would spin on a readable socket. */
			log_debug("http: accept: %s", strerror(errno));
			return false;
		}
		a->short_of_fds = false;
		if (tenant_of(a, sa, &t) && share_take(a->by_addr, &t, 1) < 0) {
			metrics_inc(M_REJECT_CAPACITY);
			close(fd);	/* the client reads its end */
			continue;
		}
		atomic_fetch_add(&s->open, 1);
		/* Refused (out of memory), libmicrohttpd has closed it.  Taken,
		 * it reports the close (acceptor_closed); a connection it drops
		 * before it starts serving it (out of memory again) keeps its
		 * place counted. */
		if (MHD_add_connection(s->daemon, fd, sa, len) != MHD_YES)
			release(a, s, sa);
	}
	return true;
}

static void *run(void *arg)
{
	struct acceptor *a = arg;
	bool room = true;

	while (wait_for(a, room, room ? -1 : RETRY_MS * 10)) {
		/* The pause may take the stop's wake-up: heed it. */
		if ((room = least_loaded(a) != NULL) && !accept_some(a) &&
		    !wait_for(a, false, RETRY_MS))
			break;
		room = least_loaded(a) != NULL;
	}
	return NULL;
}

int acceptor_start(int listen_fd, struct MHD_Daemon *const *d, unsigned nd, unsigned limit,
		   unsigned per_addr, struct acceptor **out)
{
	struct acceptor *a = calloc(1, sizeof(*a) + nd * sizeof(a->slots[0]));
	int flags, r;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->listen_fd = listen_fd;
	a->nslots = nd;
	for (unsigned i = 0; i < nd; i++) {
		a->slots[i].daemon = d[i];
		a->slots[i].limit = limit / nd + (i < limit % nd);
	}
	a->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->wake < 0 || (flags = fcntl(listen_fd, F_GETFL)) < 0 ||
	    fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		r = -errno;
		goto fail;
	}
	if (per_addr && (r = share_new(UINT64_MAX, per_addr, &a->by_addr)) < 0)
		goto fail;
	/* Before the thread: a connection's close may be reported before
	 * pthread_create() returns. */
	*out = a;
	a->running = true;
	if ((r = pthread_create(&a->thread, NULL, run, a)) != 0) {
		*out = NULL;
		r = -r;
		goto fail;
	}
	return 0;
fail:
	if (a->wake >= 0)
		close(a->wake);
	share_free(a->by_addr);
	free(a);
	return r;
}

void acceptor_closed(struct acceptor *a, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *d = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	const union MHD_ConnectionInfo *addr =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	for (unsigned i = 0; d && i < a->nslots; i++)
		if (a->slots[i].daemon == d->daemon) {
			release(a, &a->slots[i], addr ? addr->client_addr : NULL);
			return;
		}
}

void acceptor_stop(struct acceptor *a)
{
	if (!a || !a->running)
		return;
	atomic_store(&a->stopping, true);
	wake(a);
	pthread_join(a->thread, NULL);
	a->running = false;
}

void acceptor_free(struct acceptor *a)
{
	if (!a)
		return;
	acceptor_stop(a);
	close(a->wake);
	share_free(a->by_addr);
	free(a);
}
