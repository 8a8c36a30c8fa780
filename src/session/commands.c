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
	uint64_t unread[2];		/* where the last read got to */
	struct command *next;		/* older */
};

struct commands {
	pthread_mutex_t lock;
	pthread_cond_t changed;		/* output, an end (CLOCK_REALTIME) */
	struct command *head;		/* newest first */
	size_t ended;
};

static void command_free(struct command *c)
{
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
	pthread_cond_destroy(&set->changed);
	pthread_mutex_destroy(&set->lock);
	free(set);
}

struct commands *commands_new(void)
{
	struct commands *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	pthread_mutex_init(&set->lock, NULL);
	pthread_cond_init(&set->changed, NULL);
	return set;
}

/* ---- the sink: on the pump's thread ------------------------------------------ */

static void ring_put(struct ring *r, const char *data, size_t len)
{
	uint64_t at = r->total;

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
	for (size_t i = 0; i < len; i++)
		r->buf[(at + i) % r->cap] = data[i];
}

static void sink_output(void *ctx, enum exec_stream s, const char *data, size_t len)
{
	struct command *c = ctx;

	pthread_mutex_lock(&c->set->lock);
	ring_put(&c->out[s == EXEC_STDERR], data, len);
	pthread_cond_broadcast(&c->set->changed);
	pthread_mutex_unlock(&c->set->lock);
}

/* Its end; the oldest ended command past CMD_ENDED_KEPT is forgotten. */
static void sink_end(void *ctx, const struct proc_end *e)
{
	struct command *c = ctx, **pp, *last = NULL, **last_pp = NULL;
	struct commands *set = c->set;

	pthread_mutex_lock(&set->lock);
	c->end = *e;
	c->ended_at = clock_wall_s();
	/* One that has not said its pid yet (session_command_start() has not
	 * returned) is not forgotten: it is newer than those that have. */
	if (++set->ended > CMD_ENDED_KEPT) {
		for (pp = &set->head; *pp; pp = &(*pp)->next)
			if ((*pp)->ended_at && (*pp)->pid) {
				last = *pp;
				last_pp = pp;
			}
		if (last) {
			*last_pp = last->next;
			command_free(last);
			set->ended--;
		}
	}
	pthread_cond_broadcast(&set->changed);
	pthread_mutex_unlock(&set->lock);
}

enum sm_result session_command_start(struct session *s, const struct proc_spec *spec,
				     json_t *asked, int *pid, char *reason, size_t reasonlen)
{
	struct commands *set = session_commands(s);
	struct command *c = calloc(1, sizeof(*c)), **pp;
	struct proc *p = NULL;
	enum sm_result r;

	*pid = 0;
	if (!set || !c) {
		free(c);
		snprintf(reason, reasonlen, "out of memory");
		return SM_NO_MEMORY;
	}
	c->set = set;
	c->asked = asked ? json_incref(asked) : json_object();
	c->started = clock_wall_s();
	pthread_mutex_lock(&set->lock);
	c->next = set->head;
	set->head = c;
	pthread_mutex_unlock(&set->lock);
	r = session_proc_start(s, spec, &(struct proc_sink){ NULL, sink_output, sink_end, c, true }, &p,
			       reason, reasonlen);
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

/* ---- reading (set->lock held) ----------------------------------------------- */

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

/* What a read from rd would return now, or the command's end. */
static bool ready(const struct command *c, const uint64_t from[2], bool until_end)
{
	if (c->ended_at)
		return true;
	return !until_end && (c->out[0].total > from[0] || c->out[1].total > from[1]);
}

static void time_of(json_t *o, const char *key, double t)
{
	char when[TIMEFMT_LEN];

	json_object_set_new(o, key, t ? json_string(timefmt_rfc3339(t, when)) : json_null());
}

/* c without its output. */
static json_t *describe(const struct command *c)
{
	const struct proc_end *e = &c->end;
	bool ended = c->ended_at != 0;
	json_t *o = json_pack("{s:i, s:O, s:b, s:o, s:o, s:b, s:I, s:I}", "pid", c->pid,
			      "asked", c->asked, "running", !ended, "exit_code",
			      ended && e->exited ? json_integer(e->code) : json_null(), "signal",
			      ended && !e->exited ? json_integer(e->signal) : json_null(),
			      "timed_out", ended && e->timed_out,
			      "stdout_bytes", (json_int_t)c->out[0].total,
			      "stderr_bytes", (json_int_t)c->out[1].total);

	if (o) {
		time_of(o, "started_at", c->started);
		time_of(o, "ended_at", c->ended_at);
		json_object_set_new(o, "lost", json_boolean(ended && e->lost));
	}
	return o;
}

/* Stream i of c from *from into o: "stdout" (text), "stdout_offset" (of
 * its first byte), "stdout_missed" (bytes between from and it no longer
 * kept), "stdout_next" (where the next read goes on from). */
static int output_of(json_t *o, struct command *c, int i, uint64_t from)
{
	static const char *const names[2] = { "stdout", "stderr" };
	const struct ring *r = &c->out[i];
	uint64_t start = from > r->total ? r->total : from, first = kept_from(r), end = r->total;
	size_t n, at = 0;
	char key[16], *text;
	json_t *str;

	if (start < first)
		start = first;
	n = (size_t)(end - start);
	if (!(text = malloc(n + 1)))
		return -1;
	for (uint64_t b = start; b < end; b++)
		text[at++] = r->buf[b % r->cap];
	/* A character the command has not finished writing waits for the
	 * next read; at its end, what there is is all there will be. */
	if (!c->ended_at)
		n = utf8_cut(text, n);
	str = utf8_json_string(text, n);
	free(text);
	if (!str)
		return -1;
	json_object_set_new(o, names[i], str);
	snprintf(key, sizeof(key), "%s_offset", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)start));
	snprintf(key, sizeof(key), "%s_missed", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)(start - (from < start ? from : start))));
	snprintf(key, sizeof(key), "%s_next", names[i]);
	json_object_set_new(o, key, json_integer((json_int_t)(start + n)));
	c->unread[i] = start + n;
	return 0;
}

enum sm_result session_command_read(struct session *s, int pid, const struct command_read *rd,
				    json_t **out, char *reason, size_t reasonlen)
{
	struct commands *set = session_commands(s);
	double wait = rd->wait_s > CMD_WAIT_MAX_S ? CMD_WAIT_MAX_S : rd->wait_s;
	double deadline = clock_mono_s() + (wait > 0 ? wait : 0);
	enum sm_result r = SM_OK;
	struct command *c;
	uint64_t from[2];

	*out = NULL;
	if (!set) {
		snprintf(reason, reasonlen, "out of memory");
		return SM_NO_MEMORY;
	}
	pthread_mutex_lock(&set->lock);
	for (;;) {
		double now = clock_mono_s(), slice;
		struct timespec until;
		bool ended;

		if (!(c = find(set, pid))) {
			snprintf(reason, reasonlen, "the session has no command %d (the API's and "
				 "MCP's commands are kept until %d later ones ended)", pid,
				 CMD_ENDED_KEPT);
			r = SM_NO_PROCESS;
			break;
		}
		for (int i = 0; i < 2; i++)
			from[i] = rd->from[i] == CMD_UNREAD ? c->unread[i] : rd->from[i];
		if (ready(c, from, rd->until_end) || now >= deadline)
			break;
		pthread_mutex_unlock(&set->lock);
		ended = session_ended(s);
		pthread_mutex_lock(&set->lock);
		/* The session's end ends its commands within a few seconds
		 * (procs.c's grace): their ends wake this, the rest is a cap. */
		if (ended && deadline > now + ENDED_WAIT_S)
			deadline = now + ENDED_WAIT_S;
		slice = deadline - now < WAIT_SLICE_S ? deadline - now : WAIT_SLICE_S;
		until = clock_deadline(slice);
		pthread_cond_timedwait(&set->changed, &set->lock, &until);
	}
	if (r == SM_OK) {
		session_touch(s);
		*out = describe(c);
		if (!*out || output_of(*out, c, 0, from[0]) < 0 || output_of(*out, c, 1, from[1]) < 0) {
			json_decref(*out);
			*out = NULL;
			snprintf(reason, reasonlen, "out of memory");
			r = SM_NO_MEMORY;
		}
	}
	pthread_mutex_unlock(&set->lock);
	return r;
}

json_t *session_command_list(struct session *s)
{
	struct commands *set = session_commands(s);
	json_t *list = json_array();

	if (!set || !list) {
		json_decref(list);
		return NULL;
	}
	pthread_mutex_lock(&set->lock);
	for (struct command *c = set->head; c && list; c = c->next)
		if (c->pid && json_array_append_new(list, describe(c)) < 0) {
			json_decref(list);
			list = NULL;
		}
	pthread_mutex_unlock(&set->lock);
	return list;
}
