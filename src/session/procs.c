#include "session/procs.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/box.h"
#include "util/clock.h"
#include "util/log.h"

/* After its exit, what a process's pipes may still hold is waited for this
 * long: a child it left behind may hold them open for ever. */
#define EXIT_GRACE_S 0.5
#define READ_CHUNK 65536
#define TICK_S 1.0
/* Killed at its deadline, a process whose end the keeper does not say
 * within this long ends anyway (a keeper the sandbox stopped). */
#define KILL_GRACE_S 2.0
/* What the pump reads of one process's output, at most: a process that
 * writes faster waits on its full pipe, as it would writing to a slow
 * terminal, and the daemon's CPU for it stays small (reading 8 GB in 5 s
 * took the pump 2 s of CPU).  A burst of as much goes at once. */
#define OUTPUT_RATE ((double)(16u << 20))

enum { W_OUT, W_ERR, W_STATUS, W_N };

struct watch {
	struct proc *p;
	int which;
};

struct proc {
	struct procs_hub *hub;
	struct session *s;		/* a reference */
	int pid;
	char *tag;
	json_t *config;
	int in;				/* the daemon's ends; -1 once closed */
	int tty;			/* a terminal's master (in and out are dups) */
	int fd[W_N];
	struct watch watch[W_N];
	pthread_mutex_t lock;		/* the sinks, in, and what the end says */
	struct proc_sink sinks[PROC_SINKS_MAX];
	size_t nsinks;
	bool exit_known;		/* the keeper said "exit" */
	int wait_status;
	char line[32];			/* of the status pipe, so far */
	size_t line_len;
	double deadline, exit_at;	/* monotonic; 0: none, not yet */
	bool timed_out;
	double tokens, refilled;	/* bytes it may still write now (OUTPUT_RATE) */
	bool paused;			/* over its rate: its output not watched */
	bool starting;			/* counted, not yet started: seen by no one */
	bool ended;			/* its end was said: listed no more */
	atomic_int refs;
	struct proc *prev, *next;	/* in the hub, until it ended */
};

struct procs_hub {
	pthread_mutex_t lock;
	struct proc *head;
	size_t n;
	int epfd, wake_fd;
	atomic_bool stopping;
	bool running;
	pthread_t thread;
};

static void proc_free(struct proc *p)
{
	if (p->tty >= 0)
		close(p->tty);
	if (p->in >= 0)
		close(p->in);
	for (int i = 0; i < W_N; i++)
		if (p->fd[i] >= 0)
			close(p->fd[i]);
	session_put(p->s);
	json_decref(p->config);
	free(p->tag);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void proc_put(struct proc *p)
{
	if (p && atomic_fetch_sub(&p->refs, 1) == 1)
		proc_free(p);
}

int proc_pid(const struct proc *p) { return p->pid; }

struct proc *proc_ref(struct proc *p)
{
	atomic_fetch_add(&p->refs, 1);
	return p;
}

static void wake(struct procs_hub *h)
{
	uint64_t one = 1;

	if (write(h->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("procs: cannot wake the pump: %s", strerror(errno));
}

/* Link p into h (h->lock held). */
static void link_proc(struct procs_hub *h, struct proc *p)
{
	p->next = h->head;
	if (h->head)
		h->head->prev = p;
	h->head = p;
	h->n++;
}

static void unlink_proc(struct procs_hub *h, struct proc *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		h->head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->prev = p->next = NULL;
	h->n--;
}

/* ---- the pump --------------------------------------------------------------- */

/* The end of p (once): said to whoever follows it, its descriptors closed,
 * out of the hub. */
static void end_proc(struct proc *p, bool lost)
{
	struct procs_hub *h = p->hub;
	struct proc_end e = { .lost = lost };
	struct proc_sink sinks[PROC_SINKS_MAX];
	size_t n;

	if (!lost && p->exit_known && WIFEXITED(p->wait_status)) {
		e.exited = true;
		e.code = WEXITSTATUS(p->wait_status);
	} else {
		e.signal = !lost && p->exit_known && WIFSIGNALED(p->wait_status) ?
			   WTERMSIG(p->wait_status) : SIGKILL;
	}
	pthread_mutex_lock(&h->lock);
	unlink_proc(h, p);
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_lock(&p->lock);
	e.timed_out = p->timed_out;
	p->ended = true;
	n = p->nsinks;
	memcpy(sinks, p->sinks, sizeof(sinks));
	p->nsinks = 0;
	for (size_t i = 0; i < n; i++)
		sinks[i].end(sinks[i].ctx, &e);
	if (p->in >= 0)
		close(p->in);
	p->in = -1;
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < W_N; i++)
		if (p->fd[i] >= 0) {
			epoll_ctl(h->epfd, EPOLL_CTL_DEL, p->fd[i], NULL);
			close(p->fd[i]);
			p->fd[i] = -1;
		}
	session_touch(p->s);
	proc_put(p);	/* the hub's */
}

/* The process ended, or the keeper can say nothing more of it: listed no
 * more, and its end due once its output is drained.  Under the hub's lock,
 * which the listing threads read it under. */
static void mark_exit(struct proc *p)
{
	pthread_mutex_lock(&p->hub->lock);
	if (!p->exit_at)
		p->exit_at = clock_mono_s();
	pthread_mutex_unlock(&p->hub->lock);
}

static void stop_watching(struct proc *p, int which)
{
	epoll_ctl(p->hub->epfd, EPOLL_CTL_DEL, p->fd[which], NULL);
	close(p->fd[which]);
	p->fd[which] = -1;
}

/* The keeper's line on the status pipe: "exit STATUS". */
static void status_line(struct proc *p)
{
	char *end;
	long v;

	if (strncmp(p->line, "exit ", 5))
		return;
	v = strtol(p->line + 5, &end, 10);
	if (end == p->line + 5 || *end || v < 0 || v > 0xffff)
		return;
	p->exit_known = true;
	p->wait_status = (int)v;
}

/* Its output watched (or not, paused) by the pump. */
static void watch_output(struct proc *p, bool on)
{
	for (int i = W_OUT; i <= W_ERR; i++) {
		struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = &p->watch[i] };

		if (p->fd[i] >= 0)
			epoll_ctl(p->hub->epfd, EPOLL_CTL_MOD, p->fd[i], &ev);
	}
	p->paused = !on;
}

/* Refill p's tokens to now. */
static void refill(struct proc *p, double now)
{
	p->tokens += (now - p->refilled) * OUTPUT_RATE;
	if (p->tokens > OUTPUT_RATE)
		p->tokens = OUTPUT_RATE;
	p->refilled = now;
}

static void readable(struct proc *p, int which)
{
	static char chunk[READ_CHUNK];	/* the pump's thread only */
	bool followed;
	ssize_t n = read(p->fd[which], chunk, which == W_STATUS ? 1 : sizeof(chunk));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {	/* a terminal says EIO once its last process let go */
		stop_watching(p, which);
		if (which == W_STATUS)
			mark_exit(p);
		return;
	}
	if (which == W_STATUS) {
		/* A byte at a time: a line is short, and a keeper that says too
		 * much is heard no more. */
		if (chunk[0] == '\n') {
			/* The keeper's one line after "pid": heard, then no more. */
			p->line[p->line_len] = '\0';
			status_line(p);
			stop_watching(p, which);
			mark_exit(p);
		} else if (p->line_len < sizeof(p->line) - 1) {
			p->line[p->line_len++] = chunk[0];
		} else {
			stop_watching(p, which);
			mark_exit(p);
		}
		return;
	}
	pthread_mutex_lock(&p->lock);
	followed = false;
	for (size_t i = 0; i < p->nsinks; i++)
		followed |= !p->sinks[i].keeps;
	for (size_t i = 0; i < p->nsinks; i++)
		p->sinks[i].output(p->sinks[i].ctx, which == W_OUT ? EXEC_STDOUT : EXEC_STDERR,
				   chunk, (size_t)n);
	pthread_mutex_unlock(&p->lock);
	if (followed)	/* output a client reads is use of its session */
		session_touch(p->s);
	refill(p, clock_mono_s());
	p->tokens -= (double)n;
	if (p->tokens < 0)
		watch_output(p, false);	/* due() watches it again */
}

/* Deadlines and ends due now; how long until the next, in ms. */
static int due(struct procs_hub *h)
{
	double now = clock_mono_s(), next = now + TICK_S;
	struct proc *ending[64];
	size_t n = 0;

	pthread_mutex_lock(&h->lock);
	for (struct proc *p = h->head; p; p = p->next) {
		bool drained = p->fd[W_OUT] < 0 && p->fd[W_ERR] < 0;

		if (p->starting)
			continue;
		if (p->paused) {
			refill(p, now);
			if (p->tokens >= 0)
				watch_output(p, true);
			else if (now - p->tokens / OUTPUT_RATE < next)
				next = now - p->tokens / OUTPUT_RATE;
		}
		if (p->timed_out && !p->exit_at && now >= p->deadline + KILL_GRACE_S)
			p->exit_at = now;	/* killed; its end may never be said */
		else if (p->timed_out && !p->exit_at && p->deadline + KILL_GRACE_S < next)
			next = p->deadline + KILL_GRACE_S;
		if (p->deadline && now >= p->deadline && !p->timed_out && !p->exit_at) {
			char why[128];

			p->timed_out = true;
			session_signal_process(p->s, p->pid, SIGKILL, why, sizeof(why));
		} else if (p->deadline && !p->timed_out && p->deadline < next) {
			next = p->deadline;
		}
		if (p->exit_at && (drained || now >= p->exit_at + EXIT_GRACE_S)) {
			if (n < sizeof(ending) / sizeof(ending[0]))
				ending[n++] = p;
		} else if (p->exit_at && p->exit_at + EXIT_GRACE_S < next) {
			next = p->exit_at + EXIT_GRACE_S;
		}
	}
	pthread_mutex_unlock(&h->lock);
	for (size_t i = 0; i < n; i++)
		end_proc(ending[i], !ending[i]->exit_known);
	if (n == sizeof(ending) / sizeof(ending[0]))
		return 0;
	return next <= now ? 0 : (int)((next - now) * 1000) + 1;
}

static void *pump(void *arg)
{
	struct procs_hub *h = arg;
	struct epoll_event ev[64];
	int timeout = (int)(TICK_S * 1000);

	while (!atomic_load(&h->stopping)) {
		int n = epoll_wait(h->epfd, ev, 64, timeout);

		for (int i = 0; i < n; i++) {
			struct watch *w = ev[i].data.ptr;
			uint64_t v;

			if (!w) {
				if (read(h->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_warn("procs: %s", strerror(errno));
				continue;
			}
			if (w->p->fd[w->which] >= 0)
				readable(w->p, w->which);
		}
		timeout = due(h);
	}
	return NULL;
}

int procs_hub_new(struct procs_hub **out)
{
	struct procs_hub *h = calloc(1, sizeof(*h));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	*out = NULL;
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->epfd < 0 || h->wake_fd < 0 ||
	    epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->wake_fd, &ev) < 0) {
		procs_hub_free(h);
		return -errno;
	}
	*out = h;
	return 0;
}

void procs_hub_free(struct procs_hub *h)
{
	if (!h)
		return;
	atomic_store(&h->stopping, true);
	if (h->running) {
		wake(h);
		pthread_join(h->thread, NULL);
	}
	while (h->head)
		end_proc(h->head, true);
	if (h->epfd >= 0)
		close(h->epfd);
	if (h->wake_fd >= 0)
		close(h->wake_fd);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* ---- a client's calls ------------------------------------------------------ */

static size_t count_of(struct procs_hub *h, struct session *s)
{
	size_t n = 0;

	for (struct proc *p = h->head; p; p = p->next)
		n += p->s == s;
	return n;
}

/* The processes of key's sessions (h->lock held). */
static size_t count_of_key(struct procs_hub *h, int key)
{
	size_t n = 0, share;

	for (struct proc *p = h->head; p; p = p->next)
		n += session_key_of(p->s, PROCS_MAX, &share) == key;
	return n;
}

/* A terminal for spec: its master (the daemon's) and its slave, sized. */
static int open_tty(struct session *s, const struct proc_spec *spec, int *master, int *slave)
{
	struct winsize ws = { .ws_row = spec->rows ? spec->rows : 24,
			      .ws_col = spec->cols ? spec->cols : 80 };
	int r = session_open_pty(s, master, slave);

	if (r == 0 && ioctl(*master, TIOCSWINSZ, &ws) < 0) {
		r = -errno;
		close(*master);
		close(*slave);
		*master = *slave = -1;
	}
	return r == -EAGAIN ? -ENOSPC : r;
}

/* A started process's ends on its terminal: in and out, dups of the
 * master, non-blocking (err: none). */
static int tty_ends(int master, struct box_proc *bp)
{
	bp->in = fcntl(master, F_DUPFD_CLOEXEC, 0);
	bp->out = fcntl(master, F_DUPFD_CLOEXEC, 0);
	bp->err = -1;
	if (bp->in < 0 || bp->out < 0) {
		if (bp->in >= 0)
			close(bp->in);
		if (bp->out >= 0)
			close(bp->out);
		return -EMFILE;
	}
	fcntl(master, F_SETFL, O_NONBLOCK);	/* the one open file of all three */
	return 0;
}

/* Why a start failed, in reason; its result. */
static enum sm_result start_failed(int r, const struct proc_spec *spec, char *reason,
				   size_t reasonlen)
{
	if (r == -ENOENT)
		snprintf(reason, reasonlen, "no such directory: %.300s", spec->cwd);
	else if (r == -ENOTTY || r == -ENOSPC)
		snprintf(reason, reasonlen, "the sandbox has no terminal left (its limit of "
			 "terminals, or none at all)");
	else if (r == -EINVAL)
		snprintf(reason, reasonlen, "the command, its arguments or variables are not UTF-8");
	else if (r == -E2BIG)
		snprintf(reason, reasonlen, "the command, its arguments and variables take more "
			 "than 256 KiB");
	else if (r == -EAGAIN)
		snprintf(reason, reasonlen, "the sandbox is at its process limit");
	else if (r == -EPIPE || r == -ESRCH)
		snprintf(reason, reasonlen, "the sandbox ended");
	else
		snprintf(reason, reasonlen, "cannot start the process: %s", strerror(-r));
	return r == -ENOENT || r == -EINVAL || r == -E2BIG ? SM_INVALID :
	       r == -EAGAIN || r == -ENOTTY || r == -ENOSPC ? SM_CAPACITY :
	       r == -EPIPE || r == -ESRCH ? SM_GONE : r == -ENOTCONN ? SM_NOT_FOUND :
	       SM_START_FAILED;
}

enum sm_result session_proc_start(struct session *s, const struct proc_spec *spec,
				  const struct proc_sink *sink, struct proc **out,
				  char *reason, size_t reasonlen)
{
	struct procs_hub *h = session_procs_hub(s);
	struct box_spawn sp = { spec->argv, spec->env, spec->cwd, -1 };
	static const char *const none[] = { NULL };
	struct box_proc bp = { .pid = -1, .in = -1, .out = -1, .err = -1, .status = -1 };
	int master = -1, r = 0;
	size_t share;
	int key = session_key_of(s, PROCS_MAX, &share);
	struct proc *p;

	*out = NULL;
	reason[0] = '\0';
	if (!sp.env)
		sp.env = none;
	p = calloc(1, sizeof(*p));
	if (!p || (spec->tag && !(p->tag = strdup(spec->tag)))) {
		free(p);
		return SM_NO_MEMORY;
	}
	p->hub = h;
	p->in = p->tty = -1;
	for (int i = 0; i < W_N; i++)
		p->fd[i] = -1;
	pthread_mutex_init(&p->lock, NULL);
	atomic_init(&p->refs, 2);	/* the hub's and the caller's */
	p->s = session_ref(s);
	/* Counted from now, while it starts: concurrent starts see it. */
	p->starting = true;
	pthread_mutex_lock(&h->lock);
	/* The server's, the session's, and with several API keys its key's
	 * share of the server's: one tenant cannot take them all. */
	r = h->n >= PROCS_MAX ? -ENFILE : count_of(h, s) >= PROCS_PER_SESSION ? -EMFILE :
	    key && count_of_key(h, key) >= share ? -EDQUOT : 0;
	if (r == 0 && !h->running) {
		if (pthread_create(&h->thread, NULL, pump, h) == 0)
			h->running = true;
		else
			r = -EAGAIN;
	}
	if (r == 0)
		link_proc(h, p);
	pthread_mutex_unlock(&h->lock);
	if (r < 0) {
		if (r == -ENFILE || r == -EMFILE)
			snprintf(reason, reasonlen, "%s runs %d processes already: stop one first",
				 r == -EMFILE ? "the sandbox" : "the server",
				 r == -EMFILE ? PROCS_PER_SESSION : PROCS_MAX);
		else if (r == -EDQUOT)
			snprintf(reason, reasonlen, "this API key's sessions run %zu processes already, "
				 "its share of the server's %d: stop one first", share, PROCS_MAX);
		else
			snprintf(reason, reasonlen, "cannot start the processes' pump");
		proc_free(p);
		return r == -EAGAIN ? SM_START_FAILED : SM_CAPACITY;
	}
	if (spec->pty && (r = open_tty(s, spec, &master, &sp.tty)) == 0) {
		r = session_spawn(s, &sp, &bp);
		close(sp.tty);
		if (r == 0)
			r = tty_ends(master, &bp);
	} else if (!spec->pty) {
		r = session_spawn(s, &sp, &bp);
	}
	if (r < 0) {
		if (master >= 0)
			close(master);
		if (bp.status >= 0)	/* started: it ends with its terminal */
			close(bp.status);
		pthread_mutex_lock(&h->lock);
		unlink_proc(h, p);
		pthread_mutex_unlock(&h->lock);
		proc_free(p);
		return start_failed(r, spec, reason, reasonlen);
	}
	p->tty = master;
	p->pid = bp.pid;
	p->config = json_incref(spec->config);
	p->in = bp.in;
	p->tokens = OUTPUT_RATE;
	p->refilled = clock_mono_s();
	if (!spec->stdin) {
		close(p->in);
		p->in = -1;
	}
	if (spec->timeout_s > 0)
		p->deadline = clock_mono_s() + spec->timeout_s;
	if (sink) {
		p->sinks[p->nsinks++] = *sink;
		if (sink->start)
			sink->start(sink->ctx, p);
	}
	pthread_mutex_lock(&h->lock);
	p->fd[W_OUT] = bp.out;
	p->fd[W_ERR] = bp.err;
	p->fd[W_STATUS] = bp.status;
	p->starting = false;
	for (int i = 0; i < W_N; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->watch[i] };

		p->watch[i] = (struct watch){ p, i };
		if (p->fd[i] >= 0 && epoll_ctl(h->epfd, EPOLL_CTL_ADD, p->fd[i], &ev) < 0) {
			/* Unheard, it would never end: it is killed and ends now. */
			log_warn("procs: cannot watch process %d: %s", p->pid, strerror(errno));
			close(p->fd[i]);
			p->fd[i] = -1;
			p->timed_out = true;
			p->deadline = clock_mono_s() - KILL_GRACE_S;
		}
	}
	pthread_mutex_unlock(&h->lock);
	wake(h);	/* its deadline */
	session_touch(s);
	*out = p;
	return SM_OK;
}

struct proc *session_proc_find(struct session *s, int pid, const char *tag)
{
	struct procs_hub *h = session_procs_hub(s);
	struct proc *found = NULL;

	pthread_mutex_lock(&h->lock);
	for (struct proc *p = h->head; p && !found; p = p->next)
		if (p->s == s && !p->exit_at && !p->starting &&
		    (tag ? p->tag && !strcmp(p->tag, tag) : p->pid == pid)) {
			found = p;
			atomic_fetch_add(&p->refs, 1);
		}
	pthread_mutex_unlock(&h->lock);
	return found;
}

json_t *session_proc_list(struct session *s)
{
	struct procs_hub *h = session_procs_hub(s);
	json_t *list = json_array();

	pthread_mutex_lock(&h->lock);
	for (struct proc *p = h->head; list && p; p = p->next) {
		json_t *e;

		if (p->s != s || p->exit_at || p->starting)
			continue;
		e = json_pack("{s:i, s:O}", "pid", p->pid, "config", p->config ? p->config :
			      json_null());
		if (e && p->tag)
			json_object_set_new(e, "tag", json_string(p->tag));
		if (!e || json_array_append_new(list, e) < 0) {
			json_decref(list);
			list = NULL;
		}
	}
	pthread_mutex_unlock(&h->lock);
	return list;
}

int proc_follow(struct proc *p, const struct proc_sink *sink)
{
	int r = 0;

	pthread_mutex_lock(&p->lock);
	if (p->ended)
		r = -ESRCH;
	else if (p->nsinks == PROC_SINKS_MAX)
		r = -ENOSPC;
	else
		p->sinks[p->nsinks++] = *sink;
	pthread_mutex_unlock(&p->lock);
	return r;
}

bool proc_unfollow(struct proc *p, void *ctx)
{
	bool found = false;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nsinks && !found; i++)
		if (p->sinks[i].ctx == ctx) {
			p->sinks[i] = p->sinks[--p->nsinks];
			found = true;
		}
	pthread_mutex_unlock(&p->lock);
	return found;
}

int proc_input(struct proc *p, const void *data, size_t len, double timeout_s,
	       size_t *written)
{
	double deadline = clock_mono_s() + timeout_s;
	size_t off = 0;

	*written = 0;
	if (len > PROC_INPUT_MAX)
		return -E2BIG;
	while (off < len) {
		struct pollfd pfd = { .events = POLLOUT };
		ssize_t n;

		pthread_mutex_lock(&p->lock);
		pfd.fd = p->in;
		n = p->in < 0 ? -1 : write(p->in, (const char *)data + off, len - off);
		if (n < 0 && p->in < 0)
			errno = EPIPE;
		pthread_mutex_unlock(&p->lock);
		if (n > 0) {
			off += (size_t)n;
			*written = off;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return errno == EPIPE ? -EPIPE : -errno;
		if (clock_mono_s() > deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, 50);
	}
	return 0;
}

int proc_close_input(struct proc *p)
{
	int r = 0;

	pthread_mutex_lock(&p->lock);
	if (p->in < 0)
		r = -EPIPE;
	else
		close(p->in);
	p->in = -1;
	pthread_mutex_unlock(&p->lock);
	return r;
}

bool proc_is_pty(const struct proc *p) { return p->tty >= 0; }

int proc_resize(struct proc *p, unsigned short rows, unsigned short cols)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	int r = 0;

	if (p->tty < 0)
		return -ENOTTY;
	pthread_mutex_lock(&p->lock);
	if (p->ended)
		r = -ESRCH;
	else if (ioctl(p->tty, TIOCSWINSZ, &ws) < 0)
		r = -errno;
	pthread_mutex_unlock(&p->lock);
	return r;
}

int proc_signal(struct proc *p, int sig)
{
	char why[128];
	bool ended;

	pthread_mutex_lock(&p->lock);
	ended = p->ended;
	pthread_mutex_unlock(&p->lock);
	if (ended)
		return -ESRCH;
	return session_signal_process(p->s, p->pid, sig, why, sizeof(why)) == SM_OK ? 0 : -ESRCH;
}
