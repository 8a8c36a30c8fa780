#include "session/watch.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/workspace.h"
#include "util/clock.h"
#include "util/log.h"

#define MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
	      IN_DELETE_SELF | IN_MOVE_SELF)
#define BUCKETS 4096			/* of the wd table; a power of two */
#define TMP_PREFIX ".petri-upload-"	/* files.c's temporary names */

/* One directory of one watch: its inotify descriptor and where it is. */
struct reg {
	int wd;
	char *rel;			/* below the watched directory: "" or "a/b" */
	struct watch *w;
	struct reg *next;		/* in its bucket of the wd table */
};

struct watch {
	struct watch_hub *hub;
	struct session *s;		/* a reference */
	struct watch_sink sink;
	bool recursive;
	struct files_user u;
	int base_fd;			/* the filesystem's, and the path below it */
	char *base_rel;
	struct reg **regs;
	size_t nregs, capregs;
	double tokens, refilled;	/* WATCH_EVENTS_PER_S */
	/* Out of the hub (its end told, or stopped): set under the hub's
	 * lock, read without it by watch_stop(), which may run from the
	 * end's own callback. */
	atomic_bool ended;
	/* session_watch_start() has not returned: an end is its to say
	 * (doomed), not the sink's (h->lock). */
	bool starting, doomed;
	struct watch *ending;		/* the watches one event ends (dispatch) */
	struct watch *prev, *next;	/* in the hub, until it ended */
};

struct watch_hub {
	pthread_mutex_t lock;		/* everything below */
	int ifd, wake_fd;
	struct watch *head;
	struct reg *table[BUCKETS];
	size_t nregs;			/* every watch's, <= WATCH_DIRS_TOTAL */
	atomic_bool stopping;
	bool running;
	pthread_t thread;
};

static size_t bucket(int wd) { return (size_t)wd & (BUCKETS - 1); }

/* Stop watching r's directory for r's watch; the inotify watch itself
 * goes with the last user of its descriptor (h->lock held). */
static void drop_reg(struct watch_hub *h, struct reg *r, bool rm)
{
	struct reg **pp = &h->table[bucket(r->wd)];
	bool shared = false;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
	for (struct reg *o = h->table[bucket(r->wd)]; o; o = o->next)
		shared |= o->wd == r->wd;
	if (rm && !shared)
		inotify_rm_watch(h->ifd, r->wd);
	h->nregs--;
	free(r->rel);
	free(r);
}

/* Take w out of the hub: its directories watched no more (h->lock
 * held).  Its owner frees it (watch_stop()). */
static void unhook(struct watch_hub *h, struct watch *w, bool rm)
{
	if (atomic_load(&w->ended))
		return;
	for (size_t i = 0; i < w->nregs; i++)
		drop_reg(h, w->regs[i], rm);
	w->nregs = 0;
	if (w->prev)
		w->prev->next = w->next;
	else
		h->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	atomic_store(&w->ended, true);
}

static void free_watch(struct watch *w)
{
	session_put(w->s);
	free(w->regs);
	free(w->base_rel);
	free(w);
}

/* w ends by itself: out of the hub, then told (h->lock held).  Its sink
 * may free it (watch_stop() of an ended watch takes no lock). */
static void end_watch(struct watch_hub *h, struct watch *w, const char *why, bool rm)
{
	struct watch_sink sink = w->sink;

	unhook(h, w, rm);
	if (w->starting)
		w->doomed = true;
	else
		sink.end(sink.ctx, why);
}

/* Watch the directory rel (below w's root) for w (h->lock held): 0, or
 * -errno: -E2BIG over a bound. */
static int add_reg(struct watch_hub *h, struct watch *w, const char *rel)
{
	char path[2 * FILES_PATH_MAX + 2];	/* checked below to fit in FILES_PATH_MAX */
	struct reg *r;
	int wd;

	if (w->nregs >= WATCH_DIRS_MAX || h->nregs >= WATCH_DIRS_TOTAL)
		return -E2BIG;
	if (strlen(w->base_rel) + 1 + strlen(rel) > FILES_PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(path, sizeof(path), "%s%s%s", w->base_rel, *w->base_rel && *rel ? "/" : "", rel);
	wd = files_watch(&w->u, w->base_fd, path, h->ifd, MASK);
	if (wd < 0)
		return wd;
	if (w->nregs == w->capregs) {
		size_t cap = w->capregs ? w->capregs * 2 : 8;
		struct reg **v = realloc(w->regs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->regs = v;
		w->capregs = cap;
	}
	if (!(r = calloc(1, sizeof(*r))) || !(r->rel = strdup(rel))) {
		free(r);
		return -ENOMEM;
	}
	r->wd = wd;
	r->w = w;
	r->next = h->table[bucket(wd)];
	h->table[bucket(wd)] = r;
	w->regs[w->nregs++] = r;
	h->nregs++;
	return 0;
}

static void remove_from_watch(struct watch *w, struct reg *r)
{
	for (size_t i = 0; i < w->nregs; i++)
		if (w->regs[i] == r) {
			w->regs[i] = w->regs[--w->nregs];
			return;
		}
}

/* May w tell one more event now? */
static bool take_token(struct watch *w)
{
	double now = clock_mono_s();

	w->tokens += (now - w->refilled) * WATCH_EVENTS_PER_S;
	if (w->tokens > WATCH_EVENTS_PER_S)
		w->tokens = WATCH_EVENTS_PER_S;
	w->refilled = now;
	if (w->tokens < 1)
		return false;
	w->tokens -= 1;
	return true;
}

static void tell(struct watch *w, enum watch_kind kind, const char *name)
{
	if (take_token(w))
		w->sink.event(w->sink.ctx, kind, name);
}

/* One inotify event for registration r (h->lock held); a watch it ends
 * goes on *ending, to end once the event's bucket is walked (ending it
 * frees registrations the walk may be about to visit). */
static void one_event(struct watch_hub *h, struct reg *r, const struct inotify_event *ev,
		      struct watch **ending)
{
	struct watch *w = r->w;
	char name[2 * FILES_PATH_MAX + 2];	/* checked below to fit in FILES_PATH_MAX */
	bool dir = ev->mask & IN_ISDIR;

	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
		if (!(ev->mask & IN_IGNORED))
			return;		/* IN_IGNORED follows */
		remove_from_watch(w, r);
		if (!*r->rel && !w->ending) {	/* the watched directory itself */
			w->ending = *ending ? *ending : w;	/* self: the list's end */
			*ending = w;
		}
		drop_reg(h, r, false);
		return;
	}
	if (!ev->len || !strncmp(ev->name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1))
		return;
	if (strlen(r->rel) + 1 + strlen(ev->name) > FILES_PATH_MAX)
		return;
	snprintf(name, sizeof(name), "%s%s%s", r->rel, *r->rel ? "/" : "", ev->name);
	if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
		tell(w, WATCH_CREATE, name);
		/* A file moved in arrives with its content: made and written,
		 * as a file the client writes in place is told. */
		if ((ev->mask & IN_MOVED_TO) && !dir)
			tell(w, WATCH_WRITE, name);
		if (dir && w->recursive && add_reg(h, w, name) < 0)
			log_debug("watch: cannot watch a new directory");
	}
	if (ev->mask & IN_MODIFY)
		tell(w, WATCH_WRITE, name);
	if (ev->mask & IN_DELETE)
		tell(w, WATCH_REMOVE, name);
	if (ev->mask & IN_MOVED_FROM)
		tell(w, WATCH_RENAME, name);
	if (ev->mask & IN_ATTRIB)
		tell(w, WATCH_CHMOD, name);
}

static void dispatch(struct watch_hub *h, const char *buf, size_t len)
{
	for (size_t off = 0; off + sizeof(struct inotify_event) <= len;) {
		const struct inotify_event *ev = (const void *)(buf + off);
		struct reg *r, *next;

		off += sizeof(*ev) + ev->len;
		if (off > len)
			break;
		struct watch *ending = NULL, *w, *after;

		pthread_mutex_lock(&h->lock);
		for (r = h->table[bucket(ev->wd)]; r; r = next) {
			next = r->next;
			if (r->wd == ev->wd)
				one_event(h, r, ev, &ending);
		}
		for (w = ending; w; w = after) {
			after = w->ending == w ? NULL : w->ending;
			end_watch(h, w, "the watched directory is gone", true);
		}
		pthread_mutex_unlock(&h->lock);
	}
}

static void *reader(void *arg)
{
	struct watch_hub *h = arg;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (!atomic_load(&h->stopping)) {
		struct pollfd pfd[2] = { { .fd = h->ifd, .events = POLLIN },
					 { .fd = h->wake_fd, .events = POLLIN } };
		ssize_t n;

		if (poll(pfd, 2, 1000) <= 0 || !(pfd[0].revents & POLLIN))
			continue;
		n = read(h->ifd, buf, sizeof(buf));
		if (n > 0)
			dispatch(h, buf, (size_t)n);
	}
	return NULL;
}

int watch_hub_new(struct watch_hub **out)
{
	struct watch_hub *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->ifd < 0 || h->wake_fd < 0) {
		int r = -errno;

		watch_hub_free(h);
		return r;
	}
	*out = h;
	return 0;
}

void watch_hub_free(struct watch_hub *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	atomic_store(&h->stopping, true);
	if (h->running) {
		if (write(h->wake_fd, &one, sizeof(one)) < 0)
			log_warn("watch: cannot wake the reader");
		pthread_join(h->thread, NULL);
	}
	pthread_mutex_lock(&h->lock);
	while (h->head)		/* their owners free them */
		end_watch(h, h->head, "petri is stopping", false);
	pthread_mutex_unlock(&h->lock);
	if (h->ifd >= 0)
		close(h->ifd);
	if (h->wake_fd >= 0)
		close(h->wake_fd);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

void watch_hub_session_ended(struct watch_hub *h, struct session *s)
{
	pthread_mutex_lock(&h->lock);
	for (struct watch *w = h->head, *next; w; w = next) {
		next = w->next;
		if (w->s == s)
			end_watch(h, w, "the session ended", true);
	}
	pthread_mutex_unlock(&h->lock);
}

/* ---- a client's calls ------------------------------------------------------ */

struct subdirs {
	struct watch_hub *h;
	struct watch *w;
	size_t below;			/* strlen of the root's rel, and its '/' */
	int err;
};

static int subdir(void *ctx, const struct session_entry *e)
{
	struct subdirs *d = ctx;

	if (!S_ISDIR(e->st->st_mode))
		return 0;
	if (strlen(e->path) <= d->below)
		return 0;
	pthread_mutex_lock(&d->h->lock);
	/* Ended meanwhile (its directory gone, its session ended): no more. */
	d->err = d->w->doomed ? -ESRCH : add_reg(d->h, d->w, e->path + d->below);
	pthread_mutex_unlock(&d->h->lock);
	return d->err < 0 ? d->err : 0;
}

enum sm_result session_watch_start(struct session *s, const char *dir, bool recursive,
				   const struct watch_sink *sink, struct watch **out,
				   char *reason, size_t reasonlen)
{
	struct watch_hub *h = session_watch_hub(s);
	struct subdirs d = { .h = h };
	const char *rel;
	struct watch *w;
	size_t mine = 0;
	int r, fd;

	*out = NULL;
	reason[0] = '\0';
	if (session_ended(s)) {
		snprintf(reason, reasonlen, "the sandbox ended");
		return SM_GONE;
	}
	if ((fd = session_file_at(s, dir, &rel)) < 0) {
		snprintf(reason, reasonlen, "%s", ws_result_message(ws_result_of(fd)));
		return SM_INVALID;
	}
	if (!(w = calloc(1, sizeof(*w))) || !(w->base_rel = strdup(rel))) {
		free(w);
		return SM_NO_MEMORY;
	}
	w->hub = h;
	w->sink = *sink;
	w->recursive = recursive;
	w->base_fd = fd;
	w->tokens = WATCH_EVENTS_PER_S;
	w->refilled = clock_mono_s();
	session_file_owner(s, &w->u.uid, &w->u.gid);
	w->s = session_ref(s);
	w->starting = true;
	pthread_mutex_lock(&h->lock);
	for (struct watch *o = h->head; o; o = o->next)
		mine += o->s == s;
	w->next = h->head;
	if (h->head)
		h->head->prev = w;
	h->head = w;
	r = mine >= WATCHES_PER_SESSION ? -EMFILE : add_reg(h, w, "");
	if (r == 0 && recursive) {
		/* Every subdirectory now; those made later as they come. */
		d.w = w;
		d.below = strlen(dir) + (*dir ? 1 : 0);
		pthread_mutex_unlock(&h->lock);
		r = session_file_walk(s, dir, FILES_TREE_DEPTH, 100000, subdir, &d);
		pthread_mutex_lock(&h->lock);
		if (d.err < 0)
			r = d.err;
	}
	/* Its session ended while it started (watch_hub_session_ended() found
	 * it starting, or ran before it was linked): it ends here. */
	if (r == 0 && (w->doomed || session_ended(s)))
		r = -ESRCH;
	if (r == 0 && !h->running) {
		if (pthread_create(&h->thread, NULL, reader, h) == 0)
			h->running = true;
		else
			r = -EAGAIN;
	}
	if (r < 0)
		unhook(h, w, true);
	w->starting = false;
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		free_watch(w);
	if (r == 0) {
		*out = w;
		return SM_OK;
	}
	if (r == -EMFILE)
		snprintf(reason, reasonlen, "the sandbox has %d watches already: stop one first",
			 WATCHES_PER_SESSION);
	else if (r == -E2BIG || r == -ENOSPC)
		snprintf(reason, reasonlen, "it holds more than %d directories (or the server "
			 "watches %d already): watch a smaller tree", WATCH_DIRS_MAX,
			 WATCH_DIRS_TOTAL);
	else if (r == -ESRCH)
		snprintf(reason, reasonlen, "the sandbox ended, or the directory went");
	else
		snprintf(reason, reasonlen, "%s", ws_result_of(r) == WS_FAILED ? strerror(-r) :
			 ws_result_message(ws_result_of(r)));
	return r == -ESRCH ? SM_GONE : r == -EMFILE || r == -E2BIG || r == -ENOSPC ? SM_CAPACITY :
	       r == -ENOMEM ? SM_NO_MEMORY : r == -EAGAIN ? SM_START_FAILED : SM_INVALID;
}

bool watch_stop(struct watch *w)
{
	struct watch_hub *h = w->hub;
	bool live = false;

	/* Ended: out of the hub already, and maybe called from its own end
	 * (the hub's lock held by this very thread). */
	if (!atomic_load(&w->ended)) {
		pthread_mutex_lock(&h->lock);
		live = !atomic_load(&w->ended);
		if (live)
			unhook(h, w, true);
		pthread_mutex_unlock(&h->lock);
	}
	free_watch(w);
	return live;
}
