#include "cluster/agent.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/listen.h"
#include "util/log.h"

#define AGENT_BACKLOG 64

struct node_agent {
	struct smgr *sm;
	int fd, stop_fd;	/* the listening socket; an eventfd that ends the thread */
	atomic_bool stopping;
	pthread_t thread;
	char address[128];
};

void agent_line(const struct smgr_health *h, char *out, size_t len)
{
	size_t free_ = h->sessions < h->max_sessions ? h->max_sessions - h->sessions : 0;

	if (h->stopping)
		snprintf(out, len, "down\n");
	else if (h->draining)
		snprintf(out, len, "drain\n");
	else
		snprintf(out, len, "ready up %zu%%\n",
			 h->max_sessions ? free_ * 100 / h->max_sessions : 0);
}

static void answer(struct node_agent *a, int c)
{
	struct smgr_health h;
	char line[32];

	smgr_health(a->sm, &h);
	h.stopping = h.stopping || atomic_load(&a->stopping);
	agent_line(&h, line, sizeof(line));
	/* A fresh socket's buffer holds a line: a client that reads nothing
	 * costs no wait (the socket is non-blocking), and its answer is lost. */
	if (send(c, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
		log_debug("agent: %s", strerror(errno));
	close(c);
}

static void *serve(void *arg)
{
	struct node_agent *a = arg;
	struct pollfd p[2] = { { .fd = a->fd, .events = POLLIN }, { .fd = a->stop_fd, .events = POLLIN } };

	for (;;) {
		int c;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c >= 0)
			answer(a, c);
		else if (errno == EMFILE || errno == ENFILE)
			usleep(100000);	/* the daemon's fds are spent: the API's first */
	}
	return NULL;
}

int agent_open(const char *listen_at, struct node_agent **out, char *err, size_t errlen)
{
	struct node_agent *a = calloc(1, sizeof(*a));
	char why[256];
	int r;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->stop_fd = -1;
	a->fd = listen_tcp(listen_at, AGENT_BACKLOG, a->address, sizeof(a->address), why,
			   sizeof(why));
	if (a->fd < 0) {
		r = a->fd;
		snprintf(err, errlen, "[cluster] agent_listen: %s", why);
		free(a);
		return r;
	}
	*out = a;
	return 0;
}

int agent_start(struct node_agent *a, struct smgr *sm, char *err, size_t errlen)
{
	int r = 0;

	a->sm = sm;
	if ((a->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
		r = -errno;
	else if ((r = pthread_create(&a->thread, NULL, serve, a)) != 0)
		r = -r;
	if (r < 0) {
		snprintf(err, errlen, "[cluster] agent_listen: cannot start the agent: %s",
			 strerror(-r));
		if (a->stop_fd >= 0)
			close(a->stop_fd);
		close(a->fd);
		free(a);
		return r;
	}
	return 0;
}

const char *agent_address(const struct node_agent *a)
{
	return a->address;
}

void agent_stopping(struct node_agent *a)
{
	if (a)
		atomic_store(&a->stopping, true);
}

void agent_stop(struct node_agent *a)
{
	uint64_t one = 1;

	if (!a)
		return;
	if (write(a->stop_fd, &one, sizeof(one)) != sizeof(one)) {
		/* The thread runs on: leave it what it reads. */
		log_warn("agent: cannot stop its thread: %s", strerror(errno));
		return;
	}
	pthread_join(a->thread, NULL);
	close(a->stop_fd);
	close(a->fd);
	free(a);
}
