#include "session/commands.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/timefmt.h"
#include "util/utf8.h"

/* A waiting read looks at its session this often (its end, the daemon's):
 * the end of its command wakes it at once, this is the backstop. */
#define WAIT_SLICE_S 0.25
#define ENDED_WAIT_S 3.0

/* The latest CMD_KEPT_BYTES a stream wrote: absolute byte i is at
 * buf[i % CMD_KEPT_BYTES] once cap is CMD_KEPT_BYTES; before, while total
 * is below cap, at buf[i].  buf grows as the stream writes. */
struct ring {
	char *buf;
	size_t cap;
	uint64_t total;		/* bytes the stream wrote */
	uint64_t valid_from;	/* none before is kept (memory ran out) */
};

struct command {
	struct commands *set;
	int pid;			/* 0 while it starts */
	json_t *asked;
	double started, ended_at;	/* seconds since the epoch; 0: running */
	struct proc_end end;
	struct ring out[2];		/* stdout, stderr */
	uint64_t unread[2];		/* where the last CMD_UNREAD read got to */
	pthread_cond_t changed;		/* output, its end (CLOCK_REALTIME) */
	unsigned waiting;		/* readers waiting on changed: it stays */
	struct command *next;		/* older */
};

struct commands {
	pthread_mutex_t lock;
	struct command *head;		/* newest first */
	size_t ended;
};

static void command_free(struct command *c)
{
	pthread_cond_destroy(&c->changed);
	free(c->out[0].buf);
	free(c->out[1].buf);
	json_decref(c->asked);
	free(c);
}

void commands_free(struct commands *set)
{
	if (!set)
		return;
	while (set->head) {
		struct command *c = set->head;

		set->head = c->next;
		command_free(c);
	}
	pthread_mutex_destroy(&set->lock);
	free(set);
}

struct commands *commands_new(void)
{
	struct commands *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	pthread_mutex_init(&set->lock, NULL);
	return set;
}

/* ---- the sink: on the pump's thread ------------------------------------------ */

/* Bytes [at, at + len) of r (len at most r->cap): where they start in buf,
 * and how many come before the wrap. */
static size_t ring_at(const struct ring *r, uint64_t at, size_t len, size_t *first)
{
	size_t pos = (size_t)(at % r->cap);

	*first = len < r->cap - pos ? len : r->cap - pos;
	return pos;
}

static void ring_write(struct ring *r, uint64_t at, const char *data, size_t len)
{
	size_t first, pos = ring_at(r, at, len, &first);

	memcpy(r->buf + pos, data, first);
	memcpy(r->buf, data + first, len - first);
}

static void ring_read(const struct ring *r, uint64_t at, char *out, size_t len)
{
	size_t first, pos = ring_at(r, at, len, &first);

	memcpy(out, r->buf + pos, first);
	memcpy(out + first, r->buf, len - first);
}

static void ring_put(struct ring *r, const char *data, size_t len)
{
	uint64_t at = r->total;

	if (!len)
		return;
	r->total += len;
	if (len >= CMD_KEPT_BYTES) {	/* only its last bytes stay */
		at += len - CMD_KEPT_BYTES;
		data += len - CMD_KEPT_BYTES;
		len = CMD_KEPT_BYTES;
	}
	if (r->cap < CMD_KEPT_BYTES && r->total > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		char *grown;

		while (cap < r->total && cap < CMD_KEPT_BYTES)
			cap *= 2;
		if (cap > CMD_KEPT_BYTES)
			cap = CMD_KEPT_BYTES;
		if (!(grown = realloc(r->buf, cap))) {
			r->valid_from = r->total;	/* missed, and said so */
			return;
		}
		r->buf = grown;
		r->cap = cap;
	}
	ring_write(r, at, data, len);
}

static void sink_output(void *ctx, enum exec_stream s, const char *data, size_t len)
{
	struct command *c = ctx;

	pthread_mutex_lock(&c->set->lock);
	ring_put(&c->out[s == EXEC_STDERR], data, len);
	if (c->waiting)
		pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->set->lock);
}

/* An ended ring holds no more than it kept: what it grew past is given
 * back. */
static void ring_trim(struct ring *r)
{
	char *less;

	if (r->total >= r->cap)
		return;
	if (!r->total) {
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
	} else if ((less = realloc(r->buf, (size_t)r->total))) {
		r->buf = less;
		r->cap = (size_t)r->total;
	}
}

/* Its end; the command that ended first, past CMD_ENDED_KEPT, is
 * forgotten (never c, nor one a reader waits on: the next time then). */
static void sink_end(void *ctx, const struct proc_end *e)
{
	struct command *c = ctx, **pp, *first = NULL, **first_pp = NULL;
	struct commands *set = c->set;

	pthread_mutex_lock(&set->lock);
	c->end = *e;
	c->ended_at = clock_wall_s();
	ring_trim(&c->out[0]);
	ring_trim(&c->out[1]);
	/* One that has not said its pid yet (session_command_start() has not
	 * returned) stays too. */
	if (++set->ended > CMD_ENDED_KEPT) {
		for (pp = &set->head; *pp; pp = &(*pp)->next)
			if (*pp != c && (*pp)->ended_at && (*pp)->pid && !(*pp)->waiting &&
			    (!first || (*pp)->ended_at <= first->ended_at)) {
				first = *pp;
				first_pp = pp;
			}
		if (first) {
			*first_pp = first->next;
			command_free(first);
			set->ended--;
		}
	}
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&set->lock);
}

/* What E2B's process List shows of spec (a session's processes are listed
 * to every front end): its cmd, args, envs (not shown) and cwd. */
static json_t *listed_as(const struct proc_spec *spec)
{
	json_t *args = json_array();

	for (size_t i = 1; args && spec->argv[i]; i++)
		if (json_array_append_new(args, json_string(spec->argv[i])) < 0) {
			json_decref(args);
			args = NULL;
		}
	return args ? json_pack("{s:s, s:o, s:{}, s:s}", "cmd", spec->argv[0], "args", args,
				"envs", "cwd", spec->cwd) : NULL;
}

enum sm_result session_command_start(struct session *s, const struct command_request *req,
				     int *pid, char *reason, size_t reasonlen)
{
	struct commands *set = session_commands(s);
	struct command *c = calloc(1, sizeof(*c)), **pp;
	struct proc_spec spec = {
		.argv = req->argv, .env = (const char *const *)req->env, .cwd = req->cwd,
		.stdin = req->stdin, .tag = req->tag, .timeout_s = req->timeout_s,
		.pty = req->pty, .rows = req->rows, .cols = req->cols,
	};
	struct proc *p = NULL;
	enum sm_result r;

	*pid = 0;
	spec.config = listed_as(&spec);
	if (c)
		c->asked = request_command_json(req);
	if (!set || !c || !spec.config || !c->asked) {
		if (c)
			json_decref(c->asked);
		free(c);
		json_decref(spec.config);
		snprintf(reason, reasonlen, "out of memory");
		return SM_NO_MEMORY;
	}
	c->set = set;
	pthread_cond_init(&c->changed, NULL);
	c->started = clock_wall_s();
	pthread_mutex_lock(&set->lock);
	c->next = set->head;
	set->head = c;
	pthread_mutex_unlock(&set->lock);
	r = session_proc_start(s, &spec, &(struct proc_sink){ NULL, sink_output, sink_end, c, true },
			       &p, reason, reasonlen);
	json_decref(spec.config);
	pthread_mutex_lock(&set->lock);
	if (r == SM_OK) {
		c->pid = *pid = proc_pid(p);
	} else {	/* never started: its sink was never called */
		for (pp = &set->head; *pp != c; pp = &(*pp)->next)
			;
		*pp = c->next;
		command_free(c);
	}
	pthread_mutex_unlock(&set->lock);
	proc_put(p);
	return r;
}

/* ---- reading ------------------------------------------------------------------ */

static struct command *find(struct commands *set, int pid)
{
	for (struct command *c = set->head; c; c = c->next)
		if (c->pid == pid)
			return c;
	return NULL;
}

static uint64_t kept_from(const struct ring *r)
{
	uint64_t kept = r->total < r->cap ? r->total : r->cap;

	return r->total - kept > r->valid_from ? r->total - kept : r->valid_from;
}

/* What a read of stream i from from returns, copied out of the ring under
 * the lock (the JSON is made after it). */
struct piece {
	char *text;
	size_t n;
	uint64_t from, start;
};

/* The piece of r from from: its bytes up to the last whole character (at
 * the end, all).  0 or -ENOMEM. */
static int piece_of(const struct ring *r, uint64_t from, bool ended, struct piece *pc)
{
	uint64_t first = kept_from(r);

	pc->from = from;
	pc->start = from > r->total ? r->total : from < first ? first : from;
	pc->n = (size_t)(r->total - pc->start);
	if (!(pc->text = malloc(pc->n + 1)))
		return -ENOMEM;
	if (pc->n)
		ring_read(r, pc->start, pc->text, pc->n);
	/* A character the command has not finished writing waits for the
	 * next read; at its end, what there is is all there will be. */
	if (!ended)
		pc->n = utf8_cut(pc->text, pc->n);
	return 0;
}

/* Would a read of c from from say something new: its end, a whole
 * character past from, or bytes no longer kept since from? */
static bool news(const struct command *c, const uint64_t from[2])
{
	if (c->ended_at)
		return true;
	for (int i = 0; i < 2; i++) {
		const struct ring *r = &c->out[i];
		uint64_t start = from[i] < kept_from(r) ? kept_from(r) : from[i];
		char tail[4];
		size_t n;

		if (r->total <= from[i])
			continue;
		if (start > from[i] || r->total - start > 3)
			return true;
		/* At most three bytes: a character still being written? */
		n = (size_t)(r->total - start);
		ring_read(r, start, tail, n);
		if (utf8_cut(tail, n))
			return true;
	}
	return false;
}

static void time_of(json_t *o, const char *key, double t)
{
	char when[TIMEFMT_LEN];

	json_object_set_new(o, key, t ? json_string(timefmt_rfc3339(t, when)) : json_null());
}

/* What is said of a command besides its output, copied under the lock. */
struct facts {
	int pid;
	json_t *asked;			/* a reference */
	double started, ended_at;
	struct proc_end end;
	uint64_t total[2];
};

static void facts_of(const struct command *c, struct facts *f)
{
	f->pid = c->pid;
	f->asked = json_incref(c->asked);
	f->started = c->started;
	f->ended_at = c->ended_at;
	f->end = c->end;
	f->total[0] = c->out[0].total;
	f->total[1] = c->out[1].total;
}

/* f as JSON (docs/api.md's Command, without its output); takes f's
 * reference of asked. */
static json_t *describe(struct facts *f)
{
	const struct proc_end *e = &f->end;
	bool ended = f->ended_at != 0;
	json_t *o = json_pack("{s:i, s:o, s:b, s:o, s:o, s:b, s:I, s:I}", "pid", f->pid,
			      "asked", f->asked, "running", !ended, "exit_code",
			      ended && e->exited ? json_integer(e->code) : json_null(), "signal",
			      ended && !e->exited ? json_integer(e->signal) : json_null(),
			      "timed_out", ended && e->timed_out,
			      "stdout_bytes", (json_int_t)f->total[0],
			      "stderr_bytes", (json_int_t)f->total[1]);

	f->asked = NULL;
	if (o) {
		time_of(o, "started_at", f->started);
		time_of(o, "ended_at", f->ended_at);
		json_object_set_new(o, "lost", json_boolean(ended && e->lost));
	}
	return o;
}

/* Stream i's piece into o: "stdout" (text), "stdout_offset" (of its first
 * byte), "stdout_missed" (bytes between from and it no longer kept),
 * "stdout_next" (where the next read goes on from). */
static int put_piece(json_t *o, int i, const struct piece *pc)
{
	static const char *const names[2] = { "stdout", "stderr" };
	json_t *str = utf8_json_string(pc->text, pc->n);
	char key[16];

	if (!str || json_object_set_new(o, names[i], str) < 0)
		return -ENOMEM;
	snprintf(key, sizeof(key), "%s_offset", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)pc->start));
	snprintf(key, sizeof(key), "%s_missed", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)(pc->start > pc->from ?
							      pc->start - pc->from : 0)));
	snprintf(key, sizeof(key), "%s_next", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)(pc->start + pc->n)));
	return 0;
}

static enum sm_result no_command(int pid, char *reason, size_t reasonlen)
{
	snprintf(reason, reasonlen, "the session has no command %d (the API's and MCP's commands "
		 "are kept until %d later ones ended)", pid, CMD_ENDED_KEPT);
	return SM_NO_PROCESS;
}

/* Wait (set->lock held) until c has news for a read from from (its end
 * with until_end), the deadline, the session's end or rd's reader gone.
 * c is not forgotten while a reader waits on it.  False: the session's
 * waits are all taken (session_wait_begin()). */
static bool wait_news(struct session *s, struct command *c, const struct command_read *rd,
		      const uint64_t from[2], double deadline)
{
	struct commands *set = c->set;
	bool took = false, refused = false;

	c->waiting++;
	for (;;) {
		double now = clock_mono_s(), slice;
		struct timespec until;
		bool ended, gone;

		if ((rd->until_end ? c->ended_at != 0 : news(c, from)) || now >= deadline)
			break;
		pthread_mutex_unlock(&set->lock);
		refused = !took && !(took = session_wait_begin(s));
		ended = session_ended(s);
		gone = rd->gone && rd->gone(rd->gone_ctx);
		pthread_mutex_lock(&set->lock);
		if (refused || gone)
			break;
		/* The session's end ends its commands within a few seconds
		 * (procs.c's grace): their ends wake this, the rest is a cap. */
		if (ended && deadline > now + ENDED_WAIT_S)
			deadline = now + ENDED_WAIT_S;
		slice = deadline - now < WAIT_SLICE_S ? deadline - now : WAIT_SLICE_S;
		until = clock_deadline(slice);
		pthread_cond_timedwait(&c->changed, &set->lock, &until);
	}
	if (took) {
		pthread_mutex_unlock(&set->lock);
		session_wait_end(s);
		pthread_mutex_lock(&set->lock);
	}
	c->waiting--;
	return !refused;
}

enum sm_result session_command_read(struct session *s, int pid, const struct command_read *rd,
				    json_t **out, char *reason, size_t reasonlen)
{
	struct commands *set = session_commands(s);
	double wait = rd->wait_s > CMD_WAIT_MAX_S ? CMD_WAIT_MAX_S : rd->wait_s;
	struct piece pc[2] = { { NULL, 0, 0, 0 }, { NULL, 0, 0, 0 } };
	struct facts f = { .asked = NULL };
	enum sm_result r = SM_OK;
	struct command *c;
	uint64_t from[2];

	*out = NULL;
	if (!set) {
		snprintf(reason, reasonlen, "out of memory");
		return SM_NO_MEMORY;
	}
	pthread_mutex_lock(&set->lock);
	if (!(c = find(set, pid))) {
		pthread_mutex_unlock(&set->lock);
		return no_command(pid, reason, reasonlen);
	}
	for (int i = 0; i < 2; i++)
		from[i] = rd->from[i] == CMD_UNREAD ? c->unread[i] : rd->from[i];
	if (wait > 0 && !wait_news(s, c, rd, from, clock_mono_s() + wait)) {
		pthread_mutex_unlock(&set->lock);
		snprintf(reason, reasonlen, "too many reads of commands are waiting already: "
			 "read without waiting, or when one has ended");
		return SM_CAPACITY;
	}
	facts_of(c, &f);
	for (int i = 0; i < 2 && r == SM_OK; i++) {
		if (piece_of(&c->out[i], from[i], c->ended_at != 0, &pc[i]) < 0)
			r = SM_NO_MEMORY;
		else if (rd->from[i] == CMD_UNREAD)
			c->unread[i] = pc[i].start + pc[i].n;
	}
	pthread_mutex_unlock(&set->lock);
	session_touch(s);
	if (r == SM_OK && (!(*out = describe(&f)) || put_piece(*out, 0, &pc[0]) < 0 ||
			   put_piece(*out, 1, &pc[1]) < 0))
		r = SM_NO_MEMORY;
	if (r != SM_OK) {
		json_decref(*out);
		*out = NULL;
		snprintf(reason, reasonlen, "out of memory");
	}
	json_decref(f.asked);
	free(pc[0].text);
	free(pc[1].text);
	return r;
}

int session_command_input(struct session *s, int pid, const void *data, size_t len,
			  bool close_after, size_t *written)
{
	struct proc *p;
	int r = 0;

	*written = 0;
	if (len > PROC_INPUT_MAX)
		return -E2BIG;
	if (!(p = session_proc_find(s, pid, NULL)))
		return -ESRCH;
	if (len)
		r = proc_input(p, data, len, CMD_INPUT_WAIT_S, written);
	if (r == 0 && close_after)
		r = proc_close_input(p);
	proc_put(p);
	session_touch(s);
	return r;
}

json_t *session_command_list(struct session *s)
{
	struct commands *set = session_commands(s);
	json_t *list = json_array();
	struct facts *f = NULL;
	size_t n = 0;

	if (!set || !list) {
		json_decref(list);
		return NULL;
	}
	pthread_mutex_lock(&set->lock);
	for (struct command *c = set->head; c; c = c->next)
		n++;
	if ((f = calloc(n ? n : 1, sizeof(*f)))) {
		n = 0;
		for (struct command *c = set->head; c; c = c->next)
			if (c->pid)
				facts_of(c, &f[n++]);
	}
	pthread_mutex_unlock(&set->lock);
	for (size_t i = 0; f && i < n; i++)
		if (list && json_array_append_new(list, describe(&f[i])) < 0) {
			json_decref(list);
			list = NULL;
		}
	for (size_t i = 0; f && i < n; i++)
		json_decref(f[i].asked);
	if (!f) {
		json_decref(list);
		list = NULL;
	}
	free(f);
	return list;
}
