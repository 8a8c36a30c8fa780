#include "session/session.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "net/router.h"
#include "record/record.h"
#include "workspace/files.h"
#include "runtime/processes.h"
#include "session/pool.h"
#include "session/probe.h"
#include "session/spawner.h"
#include "session/tables.h"
#include "session/commands.h"
#include "session/procs.h"
#include "session/watch.h"
#include "session/workspace.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/timefmt.h"
#include "util/workq.h"

#define TOMBSTONES 4096
#define TOMBSTONE_TTL_S 3600.0
#define REAPER_TICK_MS 500
#define MAX_SESSION_ENV 64

struct session {
	struct smgr *m;
	char id[SESSION_ID_LEN + 1];
	char language[LANG_NAME_MAX + 1];
	struct petri_limits limits;
	int key;			/* session_params.key */
	double idle_timeout_s, max_lifetime_s;
	double created, last_used;	/* CLOCK_REALTIME seconds */
	struct box *box;
	pthread_mutex_t lock;
	bool busy;
	bool dead;			/* runtime gone: reason in dead_reason */
	char dead_reason[256];
	bool deleted;			/* by smgr_delete(): its sandbox is killed */
	struct commands *commands;	/* commands.h; NULL until the first */
	/* Its network: the policy (NULL: none, loopback only) and its link
	 * to the router (net/router.h), removed with its sandbox. */
	struct net_policy *network;	/* under lock */
	struct net_link *net;
	/* Do its sandbox's pip and npm use the operator's package index
	 * (package_env())?  Not where its client set their index itself. */
	bool pip_index, npm_index;	/* under net_lock */
	bool pip_own, npm_own;
	pthread_mutex_t net_lock;	/* one change of network at a time */
	atomic_int refs;
};

struct tombstone {
	char id[SESSION_ID_LEN + 1];
	char reason[256];
	double ended;
	bool deleted;			/* deleted by a client: "not found" */
};

struct smgr {
	const struct petri_config *cfg;
	struct probe *probe;		/* what the sandboxes have; NULL until asked */
	struct probe_cache found_cache;	/* where the probe's findings are kept */
	const char **found_dirs;	/* found_cache.dirs */
	struct jail_host *host;
	struct spawner *spawner;
	/* NULL: cold path only (warm off, or not started yet: smgr_warm_start);
	 * atomic, as a front end may start it while sessions are made. */
	struct pool *_Atomic pool;
	/* The light template's pool, for one-shots that need none of the
	 * preloads (config_light_template()); NULL: none. */
	struct pool *_Atomic light;
	atomic_bool light_failed;	/* it could not start: none */
	atomic_bool pool_failed;	/* warm on, but the pool could not start */
	atomic_bool pool_started;	/* smgr_warm_start() was called */
	atomic_size_t live;		/* n, read without the lock (/healthz) */
	struct record *record;		/* every execution (record.h) */
	struct procs_hub *procs;	/* every session's processes (procs.h) */
	struct watch_hub *watches;	/* every session's watched directories (watch.h) */
	/* The sessions' network (net/router.h), started by the first session
	 * whose policy allows one; NULL until then. */
	struct net_router *router;
	pthread_mutex_t router_lock;	/* its start */
	/* Its last failed start (monotonic seconds, 0: none) and why: tried
	 * again only ROUTER_RETRY_S later, so a host that cannot make one
	 * does not spawn an uplink for every session asked. */
	double router_failed;
	char router_err[256];
	const char **pool_env;		/* the operator's env, for pooled sandboxes */
	pthread_mutex_t lock;
	struct session **v;
	size_t n, cap;
	size_t oneshots;		/* reserved or running */
	size_t probes;			/* petri's own one-shots (probe.c): outside
					 * max_sessions, inside the uid range */
	struct box **oneshot_boxes;	/* running, killed on shutdown */
	size_t noneshot_boxes, caponeshot_boxes;
	size_t starting;		/* sessions being spawned */
	/* The host's tasks (tables.h): what sessions and one-shots may hold
	 * together (UINT64_MAX: the tables could not be read), and what they
	 * hold (the sum of their pids limits). */
	uint64_t tasks_budget, tasks_held;
	/* With several API keys: what each holds (index: key - 1), and the
	 * share of max_sessions and of tasks_budget each may. */
	struct key_hold {
		size_t sandboxes;
		uint64_t tasks;
		size_t waits;		/* session_wait_begin() */
	} *keys;
	size_t nkeys, key_sandboxes;
	/* Reads of commands waiting (commands.h), and how many may, in all
	 * and per key. */
	size_t waits, waits_max, key_waits;
	uint64_t key_tasks;
	struct tombstone *tomb;		/* ring of TOMBSTONES */
	size_t tomb_next;
	session_hook on_session;	/* smgr_on_session() */
	void *on_session_arg;
	atomic_uint executions;
	pthread_t reaper;
	pthread_cond_t stop_cond;
	/* smgr_shutdown() has begun (set under the lock); smgr_drain().  Both
	 * are also read without the lock (/healthz, the agent). */
	atomic_bool stopping, draining;
	/* Sandboxes to tear down (reap, remove the cgroup) off the request
	 * path: they are killed at once, cleaned up on its thread. */
	struct workq *disposer;		/* of struct doomed */
};

/* A killed sandbox in the disposer's queue. */
struct doomed {
	struct workq_item work;
	struct box *box;
	struct net_link *net;		/* its link to the router, or NULL */
};

static json_t *time_json(double t)
{
	char s[TIMEFMT_LEN];

	return json_string(timefmt_rfc3339(t, s));
}

const char *sm_result_code(enum sm_result r)
{
	static const char *const codes[] = {
		[SM_OK] = "internal",
		[SM_NOT_FOUND] = "session_not_found",
		[SM_GONE] = "session_gone",
		[SM_BUSY] = "session_busy",
		[SM_CAPACITY] = "over_capacity",
		[SM_STOPPING] = "shutting_down",
		[SM_START_FAILED] = "sandbox_failed",
		[SM_INVALID] = "invalid_request",
		[SM_TOO_LARGE] = "too_large",
		[SM_NO_MEMORY] = "internal",
		[SM_NO_PROCESS] = "process_not_found",
		[SM_PROTECTED] = "process_protected",
		[SM_HOST_FULL] = "over_capacity",
		[SM_KEY_SHARE] = "over_capacity",
		[SM_DRAINING] = "draining",
	};

	return (size_t)r < sizeof(codes) / sizeof(codes[0]) && codes[r] ? codes[r] : "internal";
}

const char *sm_result_message(enum sm_result r)
{
	switch (r) {
	case SM_OK:
		return "done";
	case SM_NOT_FOUND:
		return "no such session";
	case SM_GONE:
		return "the session has ended";
	case SM_BUSY:
		return "an execution is already running in this session; wait for it to finish "
		       "(one at a time per session)";
	case SM_CAPACITY:
		return "the server is at its limit of sessions or concurrent executions; retry "
		       "later";
	case SM_STOPPING:
		return "the server is shutting down";
	case SM_START_FAILED:
		return "the sandbox could not be started";
	case SM_INVALID:
		return "the request cannot run";
	case SM_TOO_LARGE:
		return "a file does not fit in the sandbox's /work";
	case SM_NO_MEMORY:
		return "out of memory";
	case SM_NO_PROCESS:
		return "the session has no such process";
	case SM_PROTECTED:
		return "the process is petri's own: it ends with the session";
	case SM_HOST_FULL:
		return "the live sandboxes hold the processes this host leaves to sandboxes "
		       "(kernel.pid_max); retry later, or ask for fewer pids";
	case SM_KEY_SHARE:
		return "this API key holds its share of the server's sandboxes (max_sessions) "
		       "or of the host's processes, divided among the keys; retry later, end "
		       "sessions it no longer needs, or ask for fewer pids";
	case SM_DRAINING:
		return "this node is draining: it takes no new sessions while its sessions run "
		       "on; ask again and a router sends it to another node";
	}
	return "unknown";
}

/* ---- limits -> sandbox config ----------------------------------------- */

static void box_config_of(const struct smgr *m, const struct petri_limits *lim,
			  struct box_config *bc)
{
	memset(bc, 0, sizeof(*bc));
	limits_to_jail(lim, &bc->limits);
	bc->limits.ptys = m->cfg->ptys;
	bc->limits.cpu_weight = m->cfg->cpu_weight;
	bc->ro_binds = (const char *const *)m->cfg->ro_binds;
	bc->python_path = (const char *const *)m->cfg->python_path;
	bc->wheelhouse = m->cfg->wheelhouse[0] ? m->cfg->wheelhouse : NULL;
	bc->cache_files = m->cfg->cache_files;
	bc->ncache_files = m->cfg->ncache_files;
}

/* The operator's env first, then the session's (which may not override). */
static const char **merge_env(const struct smgr *m, const char *const *extra)
{
	size_t n = m->cfg->nenv, k = 0;
	const char **v;

	for (size_t i = 0; extra && extra[i]; i++)
		n++;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < m->cfg->nenv; i++)
		v[k++] = m->cfg->env[i];
	for (size_t i = 0; extra && extra[i]; i++)
		v[k++] = extra[i];
	v[k] = NULL;
	return v;
}

/* ---- references ------------------------------------------------------- */

/* Room under the cap was given back (a sandbox left, or a reservation
 * that got none): the pool refills now, not on a tick. */
static void room_grew(struct smgr *m)
{
	struct pool *pool = m->pool, *light = m->light;

	if (pool)
		pool_poke(pool);
	if (light)
		pool_poke(light);
}

/* Kill b now; reap it, remove its cgroup and then its link to the router
 * (net, or NULL) on the disposer thread.  The sandbox no longer counts
 * against the cap. */
static void dispose(struct smgr *m, struct box *b, struct net_link *net)
{
	struct doomed *d;

	if (!b) {
		net_detach(net);
		return;
	}
	jail_stop(box_jail(b));
	room_grew(m);
	d = malloc(sizeof(*d));
	if (d) {
		d->box = b;
		d->net = net;
	}
	if (!d || workq_push(m->disposer, &d->work, NULL) < 0) {
		free(d);
		box_free(b);	/* no memory, or no disposer any more: here and now */
		net_detach(net);
	}
}

/* The disposer's handler. */
static void tear_down(struct workq_item *item, void *arg)
{
	struct doomed *d = workq_entry(item, struct doomed, work);

	(void)arg;
	box_free(d->box);
	net_detach(d->net);
	free(d);
}

static void session_free(struct session *s)
{
	commands_free(s->commands);
	dispose(s->m, s->box, s->net);
	free(s->network);
	pthread_mutex_destroy(&s->net_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void session_put(struct session *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		session_free(s);
}

static struct session *session_get(struct session *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

struct session *session_ref(struct session *s)
{
	return session_get(s);
}

/* ---- the table (callers hold m->lock) ---------------------------------- */

/* A session ended (every end comes through here): its reason is kept for
 * whoever asks next, and the watcher told. */
static void tombstone_add(struct smgr *m, const char *id, const char *reason, bool deleted)
{
	struct tombstone *t = &m->tomb[m->tomb_next++ % TOMBSTONES];

	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->reason, sizeof(t->reason), "%s", reason);
	t->ended = clock_wall_s();
	t->deleted = deleted;
	if (m->on_session)
		m->on_session(m->on_session_arg, id, deleted ? "deleted" : "ended",
			      deleted ? NULL : reason);
}

static const struct tombstone *tombstone_find(struct smgr *m, const char *id)
{
	double now = clock_wall_s();

	for (size_t i = 0; i < TOMBSTONES; i++) {
		const struct tombstone *t = &m->tomb[i];

		if (t->id[0] && !strcmp(t->id, id) && now - t->ended < TOMBSTONE_TTL_S)
			return t;
	}
	return NULL;
}

/* What key (session_params.key) holds, when there are several keys. */
static struct key_hold *key_of(struct smgr *m, int key)
{
	return m->keys && key >= 1 && (size_t)key <= m->nkeys ? &m->keys[key - 1] : NULL;
}

/* A sandbox of pids processes of key's ends: give back what reserve() took
 * (m->lock held). */
static void tasks_give(struct smgr *m, uint32_t pids, int key)
{
	struct key_hold *k = key_of(m, key);

	m->tasks_held -= pids;
	metrics_gauge_set(M_TASKS_HELD, (long)m->tasks_held);
	if (k) {
		k->sandboxes--;
		k->tasks -= pids;
	}
}

/* Take s out of the table; the table's reference goes to the caller. */
static void table_remove(struct smgr *m, size_t i)
{
	tasks_give(m, m->v[i]->limits.pids, m->v[i]->key);
	m->v[i] = m->v[--m->n];
	atomic_store(&m->live, m->n);
	metrics_gauge_add(M_SESSIONS_LIVE, -1);
}

static ssize_t table_find(struct smgr *m, const char *id)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->v[i]->id, id))
			return (ssize_t)i;
	return -1;
}

/* ---- the reaper ------------------------------------------------------- */

static double expires_at(const struct session *s)
{
	double idle = s->last_used + s->idle_timeout_s;
	double life = s->created + s->max_lifetime_s;

	return idle < life ? idle : life;
}

static void *reaper(void *arg)
{
	struct smgr *m = arg;

	pthread_mutex_lock(&m->lock);
	while (!m->stopping) {
		struct timespec ts;
		struct session *ended[64];
		size_t nended = 0;
		double now = clock_wall_s();

		for (size_t i = 0; i < m->n && nended < 64;) {
			struct session *s = m->v[i];
			bool lifetime = now >= s->created + s->max_lifetime_s;
			const char *why = lifetime ?
				"the session reached its maximum lifetime and was ended" :
				"the session was idle too long and was ended";
			bool expired;

			/* Decided under the session's lock, and made final there:
			 * a claim that comes after sees a dead session (410 with
			 * this reason), never an execution killed as "expired".
			 * A running execution is bounded by its own timeout; the
			 * session expires when it is over. */
			pthread_mutex_lock(&s->lock);
			expired = !s->busy && !s->dead && now >= expires_at(s);
			if (expired) {
				s->dead = true;
				snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", why);
			}
			pthread_mutex_unlock(&s->lock);
			if (!expired) {
				i++;
				continue;
			}
			tombstone_add(m, s->id, why, false);
			metrics_inc(lifetime ? M_SESSIONS_EXPIRED_LIFETIME : M_SESSIONS_EXPIRED_IDLE);
			log_info("session %s expired (%s)", s->id, lifetime ? "lifetime" : "idle");
			table_remove(m, i);
			ended[nended++] = s;
		}
		pthread_mutex_unlock(&m->lock);
		for (size_t i = 0; i < nended; i++) {
			box_stop(ended[i]->box, "the session expired");
			watch_hub_session_ended(m->watches, ended[i]);
			session_put(ended[i]);
		}
		pthread_mutex_lock(&m->lock);
		ts = clock_deadline(REAPER_TICK_MS / 1000.0);
		if (!m->stopping)
			pthread_cond_timedwait(&m->stop_cond, &m->lock, &ts);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* ---- manager ---------------------------------------------------------- */

/* How many more sandboxes the session cap allows a pool beside the other
 * one, which holds theirs (0 without one).  With the light template's
 * pool, the two hold at most pool_max between them (the budget of the
 * host's uids and tasks counts no more), and the main pool comes first:
 * the light one keeps only what the main one does not aim to hold.  A
 * light sandbox not pooled is forked when asked, which costs little.
 * Called by a pool's thread; the other pool is read under m->lock, which
 * smgr_free() takes to unhook a pool before it frees it. */
static size_t room_beside(struct smgr *m, bool light)
{
	size_t used, room, cap, ready = 0, theirs = 0;
	struct pool *other;

	pthread_mutex_lock(&m->lock);
	other = light ? m->pool : m->light;
	if (other) {
		size_t target = light ? pool_target(other) : 0;

		ready = pool_ready(other);
		theirs = ready > target ? ready : target;
	}
	used = m->n + m->oneshots + m->starting + ready;
	room = used < m->cfg->max_sessions ? m->cfg->max_sessions - used : 0;
	pthread_mutex_unlock(&m->lock);
	cap = theirs < m->cfg->pool_max ? m->cfg->pool_max - theirs : 0;
	return other && room > cap ? cap : room;
}

static size_t room_left(void *ctx)
{
	return room_beside(ctx, false);
}

static size_t room_left_light(void *ctx)
{
	return room_beside(ctx, true);
}

static int start_pool(struct smgr *m)
{
	struct pool_config pc = { .min = m->cfg->pool_min, .max = m->cfg->pool_max,
				  .window_s = m->cfg->pool_window_s, .room = room_left,
				  .ctx = m, .preload = config_preload(m->cfg),
				  .cpu_weight = m->cfg->pool_cpu_weight };
	struct pool *pool;
	int r;

	m->pool_env = merge_env(m, NULL);
	if (!m->pool_env)
		return -ENOMEM;
	box_config_of(m, &m->cfg->defaults, &pc.defaults);
	pc.defaults.env = m->pool_env;
	if ((r = pool_new(m->host, &pc, &pool)) < 0)
		return r;
	m->pool = pool;
	if (config_light_template(m->cfg)) {
		static const char *const none[] = { NULL };

		pc.preload = none;
		pc.light = true;
		pc.room = room_left_light;
		/* Without it one-shots go to the main pool, as before. */
		if ((r = pool_new(m->host, &pc, &pool)) < 0) {
			log_warn("cannot start the light template's pool: %s", strerror(-r));
			atomic_store(&m->light_failed, true);
		} else {
			m->light = pool;
		}
	}
	return 0;
}

void smgr_warm_start(struct smgr *m)
{
	if (!m->cfg->warm || atomic_exchange(&m->pool_started, true))
		return;
	pthread_mutex_lock(&m->lock);
	if (!m->stopping && start_pool(m) < 0) {
		atomic_store(&m->pool_failed, true);
		log_warn("cannot start the warm pool: every sandbox starts cold");
	}
	pthread_mutex_unlock(&m->lock);
}

void smgr_health(struct smgr *m, struct smgr_health *h)
{
	static const char *const names[] = {
		[POOL_STARTING] = "starting", [POOL_READY] = "ready", [POOL_FAILED] = "failed",
	};
	struct pool *pool = m->pool, *light = m->light;

	h->warm = "off";
	h->pool = 0;
	h->light = light ? names[pool_state(light)] :
		   !config_light_template(m->cfg) ? "off" :
		   atomic_load(&m->pool_failed) || atomic_load(&m->light_failed) ? "failed" :
		   atomic_load(&m->pool_started) ? "starting" : "off";
	if (pool) {
		h->warm = names[pool_state(pool)];
		h->pool = pool_ready(pool);
	} else if (atomic_load(&m->pool_failed)) {
		h->warm = "failed";
	} else if (atomic_load(&m->pool_started)) {
		h->warm = "starting";	/* being set up this instant */
	}
	h->sessions = atomic_load(&m->live);
	h->max_sessions = m->cfg->max_sessions;
	h->draining = atomic_load(&m->draining);
	h->stopping = atomic_load(&m->stopping);
}

bool smgr_draining(struct smgr *m)
{
	return atomic_load(&m->draining);
}

void smgr_drain(struct smgr *m, bool on)
{
	if (atomic_exchange(&m->draining, on) != on)
		log_info("%s: %s", on ? "draining" : "no longer draining",
			 on ? "no new sessions; the live ones run on" : "new sessions welcome");
}

/* The host's tables against what the configuration lets the sandboxes
 * hold (tables.h): -E2BIG with err when max_sessions sandboxes at the
 * default limits do not fit; else the budget of the sessions and one-shots
 * in m.  The warm pools' sandboxes (at the default limits, at most
 * pool_max between them, and one more with a light template's: see
 * check_uid_range() in config.c) and petri's probe have their room set
 * aside. */
static int budget_tables(struct smgr *m, const char *proc, char *err, size_t errlen)
{
	const struct petri_config *c = m->cfg;
	unsigned pool = c->warm ? c->pool_max + config_light_template(c) : 0;
	uint64_t aside = (uint64_t)(pool + 1) * c->defaults.pids;
	uint64_t tasks, ptys, sandboxes = (uint64_t)c->max_sessions + pool + 1;
	struct host_tables t;
	int r;

	m->tasks_budget = UINT64_MAX;
	if ((r = host_tables_read(proc, &t)) < 0) {
		log_warn("cannot read the host's pid and pty tables under %s/sys/kernel (%s): "
			 "sandboxes are not budgeted against them", proc, strerror(-r));
		return 0;
	}
	tasks = host_tasks_budget(&t);
	ptys = host_ptys_budget(&t);
	if ((uint64_t)c->max_sessions * c->defaults.pids + aside > tasks) {
		snprintf(err, errlen, "max_sessions = %u, a warm pool of up to %u and petri's probe "
			 "at [limits] pids = %u could hold %llu processes: more than the %llu "
			 "this host's kernel.pid_max (%llu) and kernel.threads-max (%llu) leave to "
			 "sandboxes; lower max_sessions, pool_max or pids, or raise kernel.pid_max",
			 c->max_sessions, pool, c->defaults.pids,
			 (unsigned long long)((uint64_t)c->max_sessions * c->defaults.pids + aside),
			 (unsigned long long)tasks, (unsigned long long)t.pid_max,
			 (unsigned long long)t.threads_max);
		return -E2BIG;
	}
	if (sandboxes * c->ptys > ptys) {
		snprintf(err, errlen, "max_sessions = %u, a warm pool of up to %u and petri's probe "
			 "at [sandbox] ptys = %u could hold %llu ptys: more than the %llu this "
			 "host's kernel.pty.max (%llu, %llu of them reserved to the host) leaves to "
			 "sandboxes; lower max_sessions, pool_max or ptys, or raise kernel.pty.max",
			 c->max_sessions, pool, c->ptys, (unsigned long long)(sandboxes * c->ptys),
			 (unsigned long long)ptys, (unsigned long long)t.pty_max,
			 (unsigned long long)t.pty_reserve);
		return -E2BIG;
	}
	m->tasks_budget = tasks - aside;
	metrics_gauge_set(M_TASKS_BUDGET, (long)m->tasks_budget);
	log_info("host tables: sessions and one-shots may hold %llu processes of pid_max %llu "
		 "(%llu sessions at pids %u, the most one may ask); each sandbox %u of the %llu "
		 "ptys left to sandboxes", (unsigned long long)m->tasks_budget,
		 (unsigned long long)t.pid_max,
		 (unsigned long long)(m->tasks_budget / c->max.pids), c->max.pids, c->ptys,
		 (unsigned long long)ptys);
	return 0;
}

/* Where the probe keeps what it found (probe.h): found.json in the state
 * directory, stale once what the sandboxes see changes: the binds, the
 * [python] path and the wheelhouse (their names here, their contents by
 * the directories' stamps). */
static int found_cache_init(struct smgr *m)
{
	const struct petri_config *c = m->cfg;
	struct buf ctx = BUF_INIT;
	size_t n = 0;
	int r = buf_append_str(&ctx, "found-v1\n");

	m->found_dirs = calloc(c->nro_binds + c->npython_path + 2, sizeof(*m->found_dirs));
	if (!m->found_dirs) {
		buf_release(&ctx);
		return -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < c->nro_binds; i++) {
		m->found_dirs[n++] = c->ro_binds[i];
		r = buf_appendf(&ctx, "ro_bind=%s\n", c->ro_binds[i]);
	}
	for (size_t i = 0; r == 0 && i < c->npython_path; i++) {
		m->found_dirs[n++] = c->python_path[i];
		r = buf_appendf(&ctx, "path=%s\n", c->python_path[i]);
	}
	if (r == 0 && c->wheelhouse[0]) {
		m->found_dirs[n++] = c->wheelhouse;
		r = buf_appendf(&ctx, "wheelhouse=%s\n", c->wheelhouse);
	}
	if (r < 0) {
		buf_release(&ctx);
		return -ENOMEM;
	}
	m->found_cache.context = ctx.data;
	m->found_cache.dirs = m->found_dirs;
	if (!config_state_path("found.json", m->found_cache.path, sizeof(m->found_cache.path)))
		m->found_cache.path[0] = '\0';
	return 0;
}

int smgr_new(const struct petri_config *cfg, struct jail_host *host,
	     struct smgr **out, char *err, size_t errlen)
{
	struct smgr *m = calloc(1, sizeof(*m));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t workers;
	int r;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->host = host;
	m->tomb = calloc(TOMBSTONES, sizeof(*m->tomb));
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->router_lock, NULL);
	pthread_cond_init(&m->stop_cond, NULL);
	if (!m->tomb) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = budget_tables(m, "/proc", err, errlen)) < 0)
		goto fail;
	if ((r = found_cache_init(m)) < 0)
		goto fail;
	/* As many waiting reads as the API server lets expensive reads be in
	 * flight (api/server.c): half the workers beside max_executions. */
	workers = cfg->http_workers ? cfg->http_workers : cfg->max_executions + 16;
	m->waits_max = workers > cfg->max_executions ? (workers - cfg->max_executions) / 2 : 0;
	if (m->waits_max < 1)
		m->waits_max = 1;
	m->key_waits = config_share_of(cfg, m->waits_max);
	if (cfg->napi_keys > 1) {
		m->keys = calloc(cfg->napi_keys, sizeof(*m->keys));
		if (!m->keys) {
			r = -ENOMEM;
			goto fail;
		}
		m->nkeys = cfg->napi_keys;
		m->key_sandboxes = config_share_of(cfg, cfg->max_sessions);
		m->key_tasks = config_share_of(cfg, m->tasks_budget);
	}
	if ((r = record_open(&(struct record_options){
			.path = cfg->record, .make_dir = cfg->record_default,
			.max_bytes = (int64_t)cfg->record_max_bytes,
			.keep_days = cfg->record_keep_days,
			.attachment_max = cfg->record_max_attachment_bytes,
			.node = cfg->node,
		     }, &m->record, err, errlen)) < 0)
		goto fail;
	r = spawner_new(host, ncpu > 0 ? (unsigned)(ncpu * 2) : 2, &m->spawner);
	if (r < 0) {
		snprintf(err, errlen, "cannot start the spawner threads");
		goto fail;
	}
	r = workq_start(1, 0, tear_down, m, &m->disposer);
	if (r < 0) {
		snprintf(err, errlen, "cannot start the disposer thread");
		goto fail;
	}
	if ((r = procs_hub_new(&m->procs)) < 0) {
		snprintf(err, errlen, "cannot make the processes' hub");
		goto fail;
	}
	if ((r = watch_hub_new(&m->watches)) < 0) {
		snprintf(err, errlen, "cannot make the watches' hub (inotify): %s", strerror(-r));
		goto fail;
	}
	if (pthread_create(&m->reaper, NULL, reaper, m) != 0) {
		r = -EAGAIN;
		snprintf(err, errlen, "cannot start the reaper thread");
		goto fail;
	}
	*out = m;
	return 0;
fail:
	net_router_stop(m->router);
	procs_hub_free(m->procs);
	watch_hub_free(m->watches);
	spawner_free(m->spawner);
	workq_free(m->disposer);
	record_close(m->record);
	free(m->found_cache.context);
	free(m->found_dirs);
	free(m->keys);
	free(m->tomb);
	pthread_cond_destroy(&m->stop_cond);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->router_lock);
	free(m);
	return r;
}

void smgr_shutdown(struct smgr *m)
{
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->stop_cond);
	/* Kill everything at once: all sandboxes die in parallel. */
	for (size_t i = 0; i < m->n; i++)
		box_stop(m->v[i]->box, "the server is shutting down");
	for (size_t i = 0; i < m->noneshot_boxes; i++)
		box_stop(m->oneshot_boxes[i], "the server is shutting down");
	pthread_mutex_unlock(&m->lock);
}

bool smgr_stopping(struct smgr *m)
{
	bool stopping;

	pthread_mutex_lock(&m->lock);
	stopping = m->stopping;
	pthread_mutex_unlock(&m->lock);
	return stopping;
}

json_t *smgr_found(struct smgr *m, double wait_s)
{
	struct probe *p;

	pthread_mutex_lock(&m->lock);
	if (!m->probe && !m->stopping)
		m->probe = probe_start(m, &m->cfg->defaults, &m->found_cache, wait_s >= 0);
	p = m->probe;
	pthread_mutex_unlock(&m->lock);
	if (!p && wait_s < 0)
		return probe_describe(NULL, "still finding out what the sandboxes have: ask again");
	return probe_wait(p, wait_s < 0 ? 0 : wait_s);
}

void smgr_free(struct smgr *m)
{
	struct pool *pool, *light;

	if (!m)
		return;
	smgr_shutdown(m);
	probe_free(m->probe);		/* its one-shot ends with the shutdown */
	free(m->found_cache.context);
	free(m->found_dirs);
	pthread_join(m->reaper, NULL);
	procs_hub_free(m->procs);	/* before the sessions they hold */
	watch_hub_free(m->watches);
	/* Unhooked first: each pool's thread reads the other (room_beside()). */
	pthread_mutex_lock(&m->lock);
	light = m->light;
	pool = m->pool;
	m->light = NULL;
	m->pool = NULL;		/* the sessions put below dispose without it */
	pthread_mutex_unlock(&m->lock);
	pool_free(light);
	pool_free(pool);
	free(m->pool_env);
	atomic_store(&m->live, 0);
	for (size_t i = 0; i < m->n; i++)
		session_put(m->v[i]);
	metrics_gauge_add(M_SESSIONS_LIVE, -(long)m->n);
	spawner_free(m->spawner);
	workq_free(m->disposer);	/* after it emptied the queue */
	net_router_stop(m->router);	/* every link detached by now */
	record_close(m->record);
	free(m->v);
	free(m->oneshot_boxes);
	free(m->keys);
	free(m->tomb);
	pthread_cond_destroy(&m->stop_cond);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->router_lock);
	free(m);
}


/* Reserve room for one more sandbox of key's, of pids processes, under the
 * caps: the session cap and the host's tasks, and key's share of both.
 * Given back with tasks_give() (a probe's: probes--). */
enum reserve_for { FOR_SESSION, FOR_ONESHOT, FOR_PROBE };

static enum sm_result reserve(struct smgr *m, enum reserve_for what, uint32_t pids, int key,
			      bool continues)
{
	struct key_hold *k;
	enum sm_result r = SM_OK;

	pthread_mutex_lock(&m->lock);
	k = key_of(m, key);
	if (m->stopping)
		r = SM_STOPPING;
	else if (what != FOR_PROBE && !continues && atomic_load(&m->draining))
		r = SM_DRAINING;
	else if (what == FOR_PROBE)
		m->probes++;	/* never a client's slot (config.c counts its uid) */
	else if (m->n + m->oneshots + m->starting >= m->cfg->max_sessions)
		r = SM_CAPACITY;
	else if (k && k->sandboxes >= m->key_sandboxes)
		r = SM_KEY_SHARE;
	else if (pids > m->tasks_budget - m->tasks_held)
		r = SM_HOST_FULL;
	else if (k && pids > m->key_tasks - k->tasks)
		r = SM_KEY_SHARE;
	else if (what == FOR_ONESHOT)
		m->oneshots++;
	else
		m->starting++;
	if (r == SM_OK && what != FOR_PROBE) {
		m->tasks_held += pids;
		metrics_gauge_set(M_TASKS_HELD, (long)m->tasks_held);
		if (k) {
			k->sandboxes++;
			k->tasks += pids;
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (r != SM_OK && r != SM_STOPPING && r != SM_DRAINING)
		metrics_inc(M_REJECT_CAPACITY);
	return r;
}

static bool same_limits(const struct petri_limits *a, const struct petri_limits *b)
{
	return a->memory_mb == b->memory_mb && a->cpu == b->cpu && a->pids == b->pids &&
	       a->disk_mb == b->disk_mb;
}

/* While the template is starting, wait for it at most [sessions]
 * warm_wait_s: a fork of it once it is ready beats tens of seconds of a
 * cold start competing with its imports.  The log says which it was. */
static void wait_warm(struct smgr *m, struct pool *pool)
{
	double t0 = clock_mono_s();
	bool ready;

	if (m->cfg->warm_wait_s <= 0 || pool_state(pool) != POOL_STARTING)
		return;
	ready = pool_wait_ready(pool, m->cfg->warm_wait_s);
	if (ready)
		log_info("a sandbox waited %.0f ms for the warm template to be ready",
			 (clock_mono_s() - t0) * 1000);
	else
		log_info("a sandbox went cold: the warm template was not ready after %.0f ms "
			 "([sessions] warm_wait_s = %g)", (clock_mono_s() - t0) * 1000,
			 m->cfg->warm_wait_s);
}

/* A ready sandbox: warm from the pool (or forked from the template) when
 * there is one, else started cold by a spawner thread; light: from the
 * light template's pool first, where there is one and it is ready.
 * SM_OK, SM_START_FAILED with err, SM_NO_MEMORY. */
static enum sm_result spawn(struct smgr *m, const struct petri_limits *lim,
			    const char *const *env, bool light, struct box **out, char *err,
			    size_t errlen)
{
	struct box_config bc;
	const char **merged = merge_env(m, env);
	bool is_default = same_limits(lim, &m->cfg->defaults) && (!env || !env[0]);
	double t0 = clock_mono_s();
	struct pool *pool = m->pool, *lp = light && is_default ? m->light : NULL;
	int r = -EAGAIN;

	if (!merged)
		return SM_NO_MEMORY;
	box_config_of(m, lim, &bc);
	bc.env = merged;
	if (lp) {
		r = pool_take(lp, &bc, true, out, err, errlen);
		if (r == 0)
			metrics_inc(M_ONESHOTS_LIGHT);
		else if (r != -EAGAIN)
			log_warn("light sandbox failed (%s); taking a warm one", err);
	}
	if (r < 0 && pool) {
		wait_warm(m, pool);
		r = pool_take(pool, &bc, is_default, out, err, errlen);
		if (r < 0 && r != -EAGAIN)
			log_warn("warm sandbox failed (%s); starting one cold", err);
	}
	if (r < 0)
		r = spawner_box_start(m->spawner, &bc, out, err, errlen);
	free(merged);
	if (r < 0) {
		metrics_inc(M_SPAWN_FAILED);
		log_err("cannot start a sandbox: %s", err);
		return SM_START_FAILED;
	}
	metrics_observe(M_SPAWN_LATENCY, clock_mono_s() - t0);
	return SM_OK;
}

#define ROUTER_RETRY_S 30.0

/* The router, started on first use (a server whose sessions never ask for
 * a network never makes one); NULL with the reason in err. */
static struct net_router *router_get(struct smgr *m, char *err, size_t errlen)
{
	struct net_router *r;

	pthread_mutex_lock(&m->router_lock);
	if (!m->router && m->router_failed && clock_mono_s() < m->router_failed + ROUTER_RETRY_S) {
		snprintf(err, errlen, "%s", m->router_err);
	} else if (!m->router &&
		   net_router_start(&m->cfg->network, &m->router, err, errlen) < 0) {
		log_err("net: %s (tried again in %.0f s)", err, ROUTER_RETRY_S);
		m->router_failed = clock_mono_s();
		snprintf(m->router_err, sizeof(m->router_err), "%s", err);
	}
	r = m->router;
	pthread_mutex_unlock(&m->router_lock);
	return r;
}

/* A link to the router for s's sandbox under policy p (not none). */
static enum sm_result link_to_router(struct smgr *m, struct session *s,
				     const struct net_policy *p, struct net_link **out,
				     char *err, size_t errlen)
{
	struct net_router *r;
	int fd, e;

	*out = NULL;
	if (!(r = router_get(m, err, errlen)))
		return SM_START_FAILED;
	if ((fd = jail_netns(box_jail(s->box))) < 0) {
		snprintf(err, errlen, "the sandbox ended before its network was set up");
		return SM_START_FAILED;
	}
	e = net_attach(r, fd, p, out, err, errlen);
	close(fd);
	if (e == -EAGAIN)
		return SM_CAPACITY;
	return e < 0 ? SM_START_FAILED : SM_OK;
}

/* Point s's pip and npm at the operator's package index ([network]
 * package_index, npm_registry) when its policy p (NULL: none) reaches it,
 * and back to offline when p no longer does: variables the sandbox's
 * keeper and interpreter take from the next process and execution on (an
 * execution running now keeps its own).  Called under net_lock.  0, or
 * -errno with a sentence in err. */
static int package_env(struct smgr *m, struct session *s, const struct net_policy *p,
		       char *err, size_t errlen)
{
	const struct net_config *c = &m->cfg->network;
	bool pip = p && !s->pip_own && c->pip.url[0] && net_policy_reaches(p, &c->pip.host);
	bool npm = p && !s->npm_own && c->npm.url[0] && net_policy_reaches(p, &c->npm.host);
	char index[32 + NET_URL_MAX], trusted[32 + sizeof(c->pip.hostport)];
	char registry[32 + NET_URL_MAX];
	const char *env[16];
	size_t n = 0;
	int e;

	if (pip != s->pip_index) {
		snprintf(index, sizeof(index), "PIP_INDEX_URL=%s", c->pip.url);
		snprintf(trusted, sizeof(trusted), "PIP_TRUSTED_HOST=%s", c->pip.hostport);
		env[n++] = pip ? "PIP_NO_INDEX=0" : "PIP_NO_INDEX=1";
		if (pip) {
			env[n++] = index;
			if (c->pip.plain)	/* pip refuses plain http otherwise */
				env[n++] = trusted;
		}
	}
	if (npm != s->npm_index) {
		snprintf(registry, sizeof(registry), "NPM_CONFIG_REGISTRY=%s", c->npm.url);
		env[n++] = npm ? "NPM_CONFIG_OFFLINE=false" : "NPM_CONFIG_OFFLINE=true";
		if (npm) {
			env[n++] = registry;
			/* Its cache out of the workspace, and no calls home. */
			env[n++] = "NPM_CONFIG_CACHE=/tmp/.cache/npm";
			env[n++] = "NPM_CONFIG_UPDATE_NOTIFIER=false";
			env[n++] = "NPM_CONFIG_AUDIT=false";
			env[n++] = "NPM_CONFIG_FUND=false";
		}
	}
	env[n] = NULL;
	if (!n)
		return 0;
	if ((e = box_send_env(s->box, env)) < 0) {
		snprintf(err, errlen, "the sandbox ended before its package index was set");
		return e;
	}
	s->pip_index = pip;
	s->npm_index = npm;
	return 0;
}

/* Did the client set pip's or npm's index in s's environment (env: its
 * variables at creation)?  Then package_env() leaves that tool alone. */
static void own_indexes(struct session *s, const char *const *env)
{
	static const char *const pip[] = { "PIP_INDEX_URL=", "PIP_NO_INDEX=",
					   "PIP_EXTRA_INDEX_URL=", NULL };
	static const char *const npm[] = { "NPM_CONFIG_REGISTRY=", "npm_config_registry=",
					   "NPM_CONFIG_OFFLINE=", "npm_config_offline=", NULL };

	for (size_t i = 0; env && env[i]; i++) {
		for (size_t k = 0; pip[k]; k++)
			s->pip_own |= !strncmp(env[i], pip[k], strlen(pip[k]));
		for (size_t k = 0; npm[k]; k++)
			s->npm_own |= !strncmp(env[i], npm[k], strlen(npm[k]));
	}
}

/* Give s, while it is made, the network its policy allows (asked, or the
 * operator's default): nothing for none; else a link to the router. */
static enum sm_result network_up(struct smgr *m, struct session *s,
				 const struct net_policy *asked, char *err, size_t errlen)
{
	const struct net_policy *p = asked ? asked : &m->cfg->network.deflt;
	enum sm_result r;

	if (p->mode == NET_NONE)
		return SM_OK;
	if (!(s->network = malloc(sizeof(*s->network))))
		return SM_NO_MEMORY;
	*s->network = *p;
	if ((r = link_to_router(m, s, p, &s->net, err, errlen)) != SM_OK)
		return r;
	return package_env(m, s, p, err, errlen) < 0 ? SM_START_FAILED : SM_OK;
}

enum sm_result session_set_network(struct session *s, const struct net_policy *asked,
				   char *reason, size_t reasonlen)
{
	const struct net_policy *p = asked ? asked : &s->m->cfg->network.deflt;
	struct net_policy *copy = NULL, *old;
	enum sm_result r = SM_OK;

	if (p->mode != NET_NONE) {
		if (!(copy = malloc(sizeof(*copy))))
			return SM_NO_MEMORY;
		*copy = *p;
	}
	pthread_mutex_lock(&s->net_lock);
	pthread_mutex_lock(&s->lock);
	if (s->dead || s->deleted) {
		snprintf(reason, reasonlen, "%s", s->dead ? s->dead_reason : "deleted");
		r = SM_GONE;
	}
	pthread_mutex_unlock(&s->lock);
	if (r != SM_OK)
		goto out;
	if (!copy) {
		net_detach(s->net);
		s->net = NULL;
	} else if (s->net) {
		if (net_update(s->net, copy, reason, reasonlen) < 0)
			r = SM_START_FAILED;
	} else
		r = link_to_router(s->m, s, copy, &s->net, reason, reasonlen);
	if (r != SM_OK)
		goto out;
	/* The router applies the new policy: the session says so, whatever
	 * comes next. */
	pthread_mutex_lock(&s->lock);
	old = s->network;
	s->network = copy;
	s->last_used = clock_wall_s();
	pthread_mutex_unlock(&s->lock);
	log_info("session %s: network now %s", s->id, net_mode_name(p->mode));
	if (package_env(s->m, s, copy, reason, reasonlen) < 0)
		r = SM_GONE;
	copy = old;
out:
	pthread_mutex_unlock(&s->net_lock);
	free(copy);
	return r;
}

enum sm_result smgr_create(struct smgr *m, const struct session_params *p,
			   struct session **out, char *err, size_t errlen)
{
	struct session *s;
	enum sm_result r;

	*out = NULL;
	if ((r = reserve(m, FOR_SESSION, p->limits.pids, p->key, p->continues)) != SM_OK)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s || id_make(s->id, sizeof(s->id), "ses", m->cfg->node, 32) < 0) {
		free(s);
		r = SM_NO_MEMORY;
		goto unreserve;
	}
	s->m = m;
	snprintf(s->language, sizeof(s->language), "%s", p->language ? p->language : "python");
	s->limits = p->limits;
	s->key = p->key;
	s->idle_timeout_s = p->idle_timeout_s;
	s->max_lifetime_s = p->max_lifetime_s;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->net_lock, NULL);
	atomic_init(&s->refs, 1);
	own_indexes(s, p->env);
	if ((r = spawn(m, &p->limits, p->env, false, &s->box, err, errlen)) != SM_OK ||
	    (r = network_up(m, s, p->network, err, errlen)) != SM_OK) {
		session_free(s);
		goto unreserve;
	}
	s->created = s->last_used = clock_wall_s();

	pthread_mutex_lock(&m->lock);
	m->starting--;
	if (m->stopping) {
		/* smgr_shutdown() came while the sandbox started: it killed
		 * every sandbox but this one, which it could not see. */
		tasks_give(m, p->limits.pids, p->key);
		pthread_mutex_unlock(&m->lock);
		session_put(s);
		return SM_STOPPING;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct session **v = realloc(m->v, cap * sizeof(*v));

		if (!v) {
			tasks_give(m, p->limits.pids, p->key);
			pthread_mutex_unlock(&m->lock);
			session_put(s);
			return SM_NO_MEMORY;
		}
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = s;
	atomic_store(&m->live, m->n);
	metrics_gauge_add(M_SESSIONS_LIVE, 1);
	metrics_inc(M_SESSIONS_CREATED);
	if (m->on_session)
		m->on_session(m->on_session_arg, s->id, "created", NULL);
	pthread_mutex_unlock(&m->lock);
	log_info("session %s created", s->id);
	*out = session_get(s);
	return SM_OK;

unreserve:
	pthread_mutex_lock(&m->lock);
	m->starting--;
	tasks_give(m, p->limits.pids, p->key);
	pthread_mutex_unlock(&m->lock);
	room_grew(m);
	return r;
}

enum sm_result smgr_lookup(struct smgr *m, const char *id, struct session **out,
			   char *reason, size_t reasonlen)
{
	const struct tombstone *t;
	enum sm_result r = SM_NOT_FOUND;
	ssize_t i;

	*out = NULL;
	pthread_mutex_lock(&m->lock);
	i = table_find(m, id);
	if (i >= 0) {
		*out = session_get(m->v[i]);
		r = SM_OK;
	} else if ((t = tombstone_find(m, id)) && !t->deleted) {
		snprintf(reason, reasonlen, "%s", t->reason);
		r = SM_GONE;
	}
	pthread_mutex_unlock(&m->lock);
	if (r != SM_OK)
		metrics_inc(r == SM_GONE ? M_REJECT_GONE : M_REJECT_NOT_FOUND);
	return r;
}

enum sm_result smgr_delete(struct smgr *m, const char *id)
{
	struct session *s = NULL;
	ssize_t i;

	pthread_mutex_lock(&m->lock);
	i = table_find(m, id);
	if (i >= 0) {
		s = m->v[i];
		table_remove(m, (size_t)i);
		tombstone_add(m, id, "deleted", true);
	}
	pthread_mutex_unlock(&m->lock);
	if (!s)
		return SM_NOT_FOUND;
	metrics_inc(M_SESSIONS_DELETED);
	log_info("session %s deleted", id);
	pthread_mutex_lock(&s->lock);
	s->deleted = true;
	pthread_mutex_unlock(&s->lock);
	/* Kill now even if an execution holds a reference: it ends as
	 * killed, and the last reference frees the sandbox. */
	box_stop(s->box, "the session was deleted");
	watch_hub_session_ended(m->watches, s);
	session_put(s);
	return SM_OK;
}

bool smgr_cgroups(struct smgr *m)
{
	return m->host && jail_host_info(m->host)->cgroup != JAIL_CG_NONE;
}

size_t smgr_count(struct smgr *m)
{
	return atomic_load(&m->live);
}

json_t *smgr_list_json(struct smgr *m)
{
	json_t *list = json_array();
	struct session **v;
	size_t n;

	if (!list)
		return NULL;
	pthread_mutex_lock(&m->lock);
	n = m->n;
	v = calloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = session_get(m->v[i]);
	pthread_mutex_unlock(&m->lock);
	if (!v) {
		json_decref(list);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(list, session_json(v[i]));
		session_put(v[i]);
	}
	free(v);
	return list;
}

/* ---- one session ------------------------------------------------------ */

const char *session_id(const struct session *s) { return s->id; }
const char *session_language(const struct session *s) { return s->language; }
const struct petri_limits *session_limits(const struct session *s) { return &s->limits; }
int session_work_fd(struct session *s) { return jail_work_fd(box_jail(s->box)); }
struct jail *session_jail(struct session *s) { return box_jail(s->box); }

void session_file_owner(struct session *s, uid_t *uid, gid_t *gid)
{
	jail_owner(box_jail(s->box), uid, gid);	/* each sandbox has its own */
}

void session_touch(struct session *s)
{
	pthread_mutex_lock(&s->lock);
	s->last_used = clock_wall_s();
	pthread_mutex_unlock(&s->lock);
}

void session_times(struct session *s, double *created, double *last_used,
		   double *idle_timeout_s, double *max_lifetime_s)
{
	pthread_mutex_lock(&s->lock);
	*created = s->created;
	*last_used = s->last_used;
	*idle_timeout_s = s->idle_timeout_s;
	*max_lifetime_s = s->max_lifetime_s;
	pthread_mutex_unlock(&s->lock);
}

int session_usage(struct session *s, struct session_usage *u)
{
	struct jail_usage ju;
	struct statfs fs;
	int r;

	memset(u, 0, sizeof(*u));
	if ((r = jail_usage(box_jail(s->box), &ju)) < 0)
		return r;
	u->cpu_ns = ju.cpu_ns;
	u->memory_bytes = ju.memory_current;
	/* /work is a tmpfs of its own: what the kernel counts of it */
	if (fstatfs(session_work_fd(s), &fs) == 0) {
		u->work_total_bytes = (uint64_t)fs.f_blocks * (uint64_t)fs.f_bsize;
		u->work_used_bytes = (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
	}
	pthread_mutex_lock(&s->net_lock);
	if (s->net)
		net_usage(s->net, &u->net_sent_bytes, &u->net_received_bytes);
	pthread_mutex_unlock(&s->net_lock);
	return 0;
}

/* Is s alive (s->lock held)?  Then it is marked used now: SM_OK; else
 * SM_NOT_FOUND (deleted) or SM_GONE with the reason. */
static enum sm_result use_locked(struct session *s, char *reason, size_t reasonlen)
{
	if (s->deleted)
		return SM_NOT_FOUND;
	if (s->dead) {
		snprintf(reason, reasonlen, "%s", s->dead_reason);
		return SM_GONE;
	}
	s->last_used = clock_wall_s();
	return SM_OK;
}

static enum sm_result use(struct session *s, char *reason, size_t reasonlen)
{
	enum sm_result r;

	pthread_mutex_lock(&s->lock);
	r = use_locked(s, reason, reasonlen);
	pthread_mutex_unlock(&s->lock);
	return r;
}

enum sm_result session_set_lifetime(struct session *s, double idle_timeout_s,
				    double max_lifetime_s, char *reason, size_t reasonlen)
{
	enum sm_result r;

	pthread_mutex_lock(&s->lock);
	r = use_locked(s, reason, reasonlen);
	if (r == SM_OK && idle_timeout_s > 0)
		s->idle_timeout_s = idle_timeout_s;
	if (r == SM_OK && max_lifetime_s > 0)
		s->max_lifetime_s = max_lifetime_s;
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* What processes_list() or processes_signal() said, for s. */
static enum sm_result processes_result(struct session *s, int rc, char *reason,
				       size_t reasonlen)
{
	enum sm_result r;

	if (rc == 0)
		return SM_OK;
	if (rc == -ENOMEM)
		return SM_NO_MEMORY;
	if (rc == -ESRCH && !reason[0])
		snprintf(reason, reasonlen, "the session has no such process");
	if (rc == -ESRCH)
		return SM_NO_PROCESS;
	if (rc == -EPERM)
		return SM_PROTECTED;
	if ((r = use(s, reason, reasonlen)) != SM_OK)	/* it ended meanwhile */
		return r;
	snprintf(reason, reasonlen, "the processes of this session cannot be seen: %s",
		 strerror(-rc));
	return SM_INVALID;
}

enum sm_result session_processes(struct session *s, json_t **out, char *reason,
				 size_t reasonlen)
{
	enum sm_result r = use(s, reason, reasonlen);

	*out = NULL;
	if (r != SM_OK)
		return r;
	reason[0] = '\0';
	return processes_result(s, processes_list(s->box, out), reason, reasonlen);
}

enum sm_result session_signal_process(struct session *s, int pid, int sig, char *reason,
				      size_t reasonlen)
{
	enum sm_result r = use(s, reason, reasonlen);

	if (r != SM_OK)
		return r;
	reason[0] = '\0';
	return processes_result(s, processes_signal(s->box, pid, sig, reason, reasonlen),
				reason, reasonlen);
}

/* ---- the session layer's own, for procs.c -------------------------------- */

static void end_session(struct smgr *m, struct session *s, const char *reason);

struct procs_hub *session_procs_hub(struct session *s) { return s->m->procs; }
struct watch_hub *session_watch_hub(struct session *s) { return s->m->watches; }

int session_key_of(struct session *s, size_t total, size_t *share)
{
	struct key_hold *k = key_of(s->m, s->key);

	*share = k ? config_share_of(s->m->cfg, total) : total;
	return k ? s->key : 0;
}

bool session_wait_begin(struct session *s)
{
	struct smgr *m = s->m;
	struct key_hold *k;
	bool ok;

	pthread_mutex_lock(&m->lock);
	k = key_of(m, s->key);
	ok = m->waits < m->waits_max && (!k || k->waits < m->key_waits);
	if (ok) {
		m->waits++;
		if (k)
			k->waits++;
	}
	pthread_mutex_unlock(&m->lock);
	return ok;
}

void session_wait_end(struct session *s)
{
	struct smgr *m = s->m;
	struct key_hold *k;

	pthread_mutex_lock(&m->lock);
	k = key_of(m, s->key);
	m->waits--;
	if (k)
		k->waits--;
	pthread_mutex_unlock(&m->lock);
}

struct commands *session_commands(struct session *s)
{
	struct commands *c;

	pthread_mutex_lock(&s->lock);
	if (!s->commands)
		s->commands = commands_new();
	c = s->commands;
	pthread_mutex_unlock(&s->lock);
	return c;
}

int session_spawn(struct session *s, const struct box_spawn *sp, struct box_proc *out)
{
	char reason[256];
	enum sm_result r = use(s, reason, sizeof(reason));

	int rc;

	if (r != SM_OK)
		return r == SM_NOT_FOUND ? -ENOTCONN : -EPIPE;
	rc = box_spawn(s->box, sp, out);
	/* A keeper that took no frame or gave no answer was stopped with its
	 * sandbox (box_spawn()): the session ends now, as for a dead box. */
	if (rc == -ETIMEDOUT || rc == -EPROTO || rc == -EPIPE)
		end_session(s->m, s, rc == -EPIPE ? "the sandbox ended" :
			    "the sandbox's keeper stopped answering (a process of the sandbox "
			    "stopped or broke it)");
	return rc;
}

int session_open_pty(struct session *s, int *master, int *slave)
{
	char reason[256];

	*master = *slave = -1;
	if (use(s, reason, sizeof(reason)) != SM_OK)
		return -EPIPE;
	return jail_open_pty(box_jail(s->box), master, slave);
}

enum sm_result session_connect(struct session *s, unsigned short port, int *fd,
			       char *reason, size_t reasonlen)
{
	enum sm_result r = use(s, reason, reasonlen);
	int e;

	*fd = -1;
	if (r != SM_OK)
		return r;
	e = jail_connect(box_jail(s->box), port, fd);
	if (e == 0)
		return SM_OK;
	if (e == -ECONNREFUSED)
		snprintf(reason, reasonlen, "nothing listens on port %u in the sandbox (a server "
			 "must listen on 127.0.0.1 or 0.0.0.0 there)", port);
	else if (e == -EAGAIN)
		snprintf(reason, reasonlen, "the sandbox is at its process limit");
	else if (e == -ESRCH)
		snprintf(reason, reasonlen, "the sandbox ended");
	else
		snprintf(reason, reasonlen, "cannot connect to port %u in the sandbox: %s", port,
			 strerror(-e));
	return e == -ECONNREFUSED ? SM_NO_PROCESS : e == -EAGAIN ? SM_CAPACITY :
	       e == -ESRCH ? SM_GONE : SM_START_FAILED;
}

bool session_ended(struct session *s)
{
	bool ended;

	pthread_mutex_lock(&s->lock);
	ended = s->dead || s->deleted;
	pthread_mutex_unlock(&s->lock);
	return ended;
}

bool session_deleted(struct session *s)
{
	bool deleted;

	pthread_mutex_lock(&s->lock);
	deleted = s->deleted;
	pthread_mutex_unlock(&s->lock);
	return deleted;
}

void session_note_write(struct session *s)
{
	box_note_host_write(s->box);
}

struct session_upload {
	struct session *s;
	struct files_sink *sink;
	uint64_t oom_kills;		/* the sandbox's, when the upload began */
};

/* End a live session now for reason, which later calls are told (as the
 * reaper ends an expired one). */
static void end_session(struct smgr *m, struct session *s, const char *reason)
{
	bool removed = false;
	ssize_t i;

	pthread_mutex_lock(&s->lock);
	if (!s->dead) {
		s->dead = true;
		snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", reason);
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&m->lock);
	i = table_find(m, s->id);
	if (i >= 0 && m->v[i] == s) {
		table_remove(m, (size_t)i);
		tombstone_add(m, s->id, reason, false);
		removed = true;
	}
	pthread_mutex_unlock(&m->lock);
	box_stop(s->box, reason);
	watch_hub_session_ended(m->watches, s);
	if (removed) {
		metrics_inc(M_SESSIONS_DIED);
		log_info("session %s died: %s", s->id, reason);
		session_put(s);
	}
}

static uint64_t oom_kills(struct session *s)
{
	struct jail_usage u;

	return jail_usage(box_jail(s->box), &u) == 0 ? u.oom_kills : 0;
}

int session_upload_begin(struct smgr *m, struct session *s, const char *path,
			 const struct files_meta *meta, struct session_upload **out)
{
	struct session_upload *up = calloc(1, sizeof(*up));
	struct files_user u;
	const char *rel;
	int fd, r;

	*out = NULL;
	if (!up)
		return -ENOMEM;
	if ((fd = session_file_at(s, path, &rel)) < 0) {
		free(up);
		return fd;
	}
	session_file_owner(s, &u.uid, &u.gid);
	up->oom_kills = oom_kills(s);
	if ((r = files_sink_begin(&u, box_jail(s->box), fd, rel, meta, &up->sink)) < 0) {
		free(up);
		return r;
	}
	up->s = session_ref(s);
	*out = up;
	return 0;
}

int session_upload_write(struct session_upload *up, const void *data, size_t len)
{
	return files_sink_write(up->sink, data, len);
}

int session_upload_offer(struct session_upload *up, const void *data, size_t len,
			 size_t *taken)
{
	return files_sink_offer(up->sink, data, len, taken);
}

int session_upload_fd(const struct session_upload *up)
{
	return files_sink_fd(up->sink);
}

int session_upload_finish(struct session_upload *up, bool commit, bool *ended)
{
	struct session *s = up->s;
	int r = files_sink_finish(up->sink, commit);

	*ended = false;
	if (commit)
		session_note_write(s);
	if (r == 0)
		session_touch(s);
	/* The kernel killed processes of the session for the memory the upload
	 * took: what is left of it is not what its code expects. */
	if (r == -ENOMEM && oom_kills(s) > up->oom_kills) {
		char reason[160];

		snprintf(reason, sizeof(reason), "out of memory: an upload went over the session's "
			 "memory limit (%u MiB) and the kernel killed its processes",
			 s->limits.memory_mb);
		end_session(s->m, s, reason);
		*ended = true;
	}
	session_put(s);
	free(up);
	return r;
}

void session_upload_cancel(struct session_upload *up)
{
	files_sink_cancel(up->sink);
}

int session_upload_exit_fd(const struct session_upload *up)
{
	return files_sink_exit_fd(up->sink);
}

bool session_upload_reap(struct session_upload *up)
{
	if (!files_sink_reap(up->sink))
		return false;
	session_put(up->s);
	free(up);
	return true;
}

json_t *session_json(struct session *s)
{
	json_t *j;

	pthread_mutex_lock(&s->lock);
	j = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:f, s:{s:i, s:f, s:i, s:i, s:f, s:i},"
		      " s:s}",
		      "id", s->id, "language", s->language,
		      "status", s->dead ? "dead" : s->busy ? "busy" : "idle",
		      "created_at", time_json(s->created),
		      "last_used_at", time_json(s->last_used),
		      "expires_at", time_json(expires_at(s)),
		      "idle_timeout_s", s->idle_timeout_s, "max_lifetime_s", s->max_lifetime_s,
		      "limits", "memory_mb", (int)s->limits.memory_mb, "cpu", s->limits.cpu,
		      "pids", (int)s->limits.pids, "disk_mb", (int)s->limits.disk_mb,
		      "timeout_s", s->limits.timeout_s, "output_kb", (int)s->limits.output_kb,
		      "python_version", box_python_version(s->box));
	if (j)
		json_object_set_new(j, "network", request_network_json(s->network));
	pthread_mutex_unlock(&s->lock);
	return j;
}

/* Take an execution slot (SM_CAPACITY when none are left); give it back
 * with exec_slot_give(). */
static enum sm_result exec_slot_take(struct smgr *m)
{
	unsigned cur = atomic_load(&m->executions);

	do {
		if (cur >= m->cfg->max_executions) {
			metrics_inc(M_REJECT_CAPACITY);
			return SM_CAPACITY;
		}
	} while (!atomic_compare_exchange_weak(&m->executions, &cur, cur + 1));
	metrics_gauge_add(M_EXECUTIONS_RUNNING, 1);
	return SM_OK;
}

static void exec_slot_give(struct smgr *m)
{
	atomic_fetch_sub(&m->executions, 1);
	metrics_gauge_add(M_EXECUTIONS_RUNNING, -1);
}

static json_t *limits_json(const struct petri_limits *l)
{
	return json_pack("{s:i, s:f, s:i, s:i, s:f, s:i}", "memory_mb", (int)l->memory_mb,
			 "cpu", l->cpu, "pids", (int)l->pids, "disk_mb", (int)l->disk_mb,
			 "timeout_s", l->timeout_s, "output_kb", (int)l->output_kb);
}

/* Count a finished execution in the metrics (by status, duration) and add
 * it to the execution record; session NULL for a one-shot. */
static void finished(struct smgr *m, struct session *s, const struct exec_request *ex,
		     const struct petri_limits *lim, double started_at,
		     const struct result *res)
{
	static const enum metric_counter by_status[] = {
		[RESULT_OK] = M_EXEC_OK, [RESULT_ERROR] = M_EXEC_ERROR,
		[RESULT_TIMEOUT] = M_EXEC_TIMEOUT, [RESULT_OOM] = M_EXEC_OOM,
		[RESULT_KILLED] = M_EXEC_KILLED,
	};
	struct record_entry e = {
		.session = s ? s->id : NULL, .language = ex->language, .code = ex->code,
		.started_at = started_at, .limits = limits_json(lim), .result = res,
	};

	metrics_inc(by_status[res->status]);
	metrics_observe(M_EXEC_DURATION, (double)res->duration_ms / 1000.0);
	if (record_add(m->record, &e) < 0)
		log_warn("cannot add an execution to the record");
	json_decref(e.limits);
}

json_t *smgr_executions(struct smgr *m, const char *id, int limit, int64_t before,
			bool *truncated)
{
	return record_list(m->record, id, limit, before, truncated);
}

int smgr_list_executions(struct smgr *m, const struct record_query *q, struct buf *out,
			 bool *truncated)
{
	return record_list_text(m->record, q, out, truncated);
}

void smgr_on_record(struct smgr *m, record_hook fn, void *arg)
{
	record_on_add(m->record, fn, arg);
}

void smgr_on_session(struct smgr *m, session_hook fn, void *arg)
{
	pthread_mutex_lock(&m->lock);
	m->on_session = fn;
	m->on_session_arg = arg;
	pthread_mutex_unlock(&m->lock);
}

struct record *smgr_record(struct smgr *m)
{
	return m->record;
}

enum sm_result session_claim(struct smgr *m, struct session *s, char *reason,
			     size_t reasonlen)
{
	enum sm_result r;

	pthread_mutex_lock(&s->lock);
	/* Through a reference taken before the deletion: as a lookup after
	 * it, not found. */
	if (s->deleted) {
		pthread_mutex_unlock(&s->lock);
		metrics_inc(M_REJECT_NOT_FOUND);
		return SM_NOT_FOUND;
	}
	if (s->dead) {
		snprintf(reason, reasonlen, "%s", s->dead_reason);
		pthread_mutex_unlock(&s->lock);
		metrics_inc(M_REJECT_GONE);
		return SM_GONE;
	}
	if (s->busy) {
		pthread_mutex_unlock(&s->lock);
		metrics_inc(M_REJECT_BUSY);
		return SM_BUSY;
	}
	if ((r = exec_slot_take(m)) != SM_OK) {
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	s->busy = true;
	s->last_used = clock_wall_s();
	pthread_mutex_unlock(&s->lock);
	return SM_OK;
}

enum sm_result session_interrupt(struct session *s, bool *running, char *reason,
				 size_t reasonlen)
{
	enum sm_result r = SM_OK;

	*running = false;
	pthread_mutex_lock(&s->lock);
	if (s->deleted) {
		r = SM_NOT_FOUND;
	} else if (s->dead) {
		snprintf(reason, reasonlen, "%s", s->dead_reason);
		r = SM_GONE;
	} else {
		/* Only while busy: session_run() withdraws it under this lock
		 * when the execution ends, so it never reaches the next one. */
		*running = s->busy;
		if (s->busy)
			box_interrupt(s->box);
		s->last_used = clock_wall_s();
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void session_release(struct smgr *m, struct session *s)
{
	pthread_mutex_lock(&s->lock);
	s->busy = false;
	box_interrupt_withdraw(s->box);
	pthread_mutex_unlock(&s->lock);
	exec_slot_give(m);
}

enum sm_result session_exec(struct smgr *m, struct session *s, const struct exec_request *ex,
			    const struct exec_events *ev, struct result *res,
			    char *reason, size_t reasonlen)
{
	enum sm_result r = session_claim(m, s, reason, reasonlen);

	return r != SM_OK ? r : session_run(m, s, ex, ev, res, reason, reasonlen);
}

/* box_exec()'s answer as the session layer's. */
static enum sm_result exec_result(int r)
{
	switch (r) {
	case 0:
		return SM_OK;
	case -EINVAL:
		return SM_INVALID;
	case -EPIPE:
		return SM_GONE;
	default:
		return SM_NO_MEMORY;
	}
}

/* s's sandbox died (s->dead set by the caller, which found it so):
 * dead, never silently replaced: out of the table, and its reason stays
 * for whoever asks next. */
static void bury(struct smgr *m, struct session *s)
{
	ssize_t i;
	bool removed = false;

	pthread_mutex_lock(&m->lock);
	i = table_find(m, s->id);
	if (i >= 0 && m->v[i] == s) {
		table_remove(m, (size_t)i);
		tombstone_add(m, s->id, s->dead_reason, false);
		removed = true;
	}
	pthread_mutex_unlock(&m->lock);
	/* Not in the table: deleted or expired, and counted as such. */
	if (removed) {
		metrics_inc(M_SESSIONS_DIED);
		log_info("session %s died: %s", s->id, s->dead_reason);
	}
	jail_stop(box_jail(s->box));
	watch_hub_session_ended(m->watches, s);
	if (removed)
		session_put(s);
}

/* What a session with a network reached and was refused during an
 * execution, into its result (and the record with it), counted in the
 * metrics. */
static void network_seen(struct session *s, struct result *res)
{
	static const struct {
		const char *key;
		enum metric_counter m;
	} lists[] = {
		{ "connected", M_NET_CONNECTED }, { "refused", M_NET_REFUSED },
		{ "names", M_NET_NAMES }, { "names_refused", M_NET_NAMES_REFUSED },
	};

	pthread_mutex_lock(&s->net_lock);
	if (s->net && !res->network)
		res->network = net_seen(s->net);
	pthread_mutex_unlock(&s->net_lock);
	for (size_t i = 0; res->network && i < sizeof(lists) / sizeof(lists[0]); i++)
		metrics_add(lists[i].m, json_array_size(json_object_get(res->network, lists[i].key)));
}

enum sm_result session_run(struct smgr *m, struct session *s, const struct exec_request *ex,
			   const struct exec_events *ev, struct result *res, char *reason,
			   size_t reasonlen)
{
	double started_at = clock_wall_s();
	bool died;
	int r = box_exec(s->box, ex, ev, res);

	if (r == 0)
		network_seen(s, res);
	pthread_mutex_lock(&s->lock);
	s->busy = false;
	box_interrupt_withdraw(s->box);	/* one asked since box_exec() returned */
	s->last_used = clock_wall_s();
	died = !s->dead && !box_alive(s->box);
	if (died) {
		s->dead = true;
		snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", box_dead_reason(s->box));
	}
	if (r == -EPIPE)	/* it had died before: say why */
		snprintf(reason, reasonlen, "%s", s->dead ? s->dead_reason : box_dead_reason(s->box));
	else if (r == -EINVAL)
		snprintf(reason, reasonlen, "%s", BOX_EINVAL_REASON);
	pthread_mutex_unlock(&s->lock);
	exec_slot_give(m);
	if (r == 0 && !ex->unpack)	/* an archive is no execution of code */
		finished(m, s, ex, &s->limits, started_at, res);

	if (died)
		bury(m, s);
	return exec_result(r);
}

/* How long a restart waits for an execution it interrupted to end: the
 * interrupt's tick and grace, and room. */
#define RESTART_WAIT_S (EXEC_GRACE_DEFAULT + 3.0)

enum sm_result session_restart(struct smgr *m, struct session *s, char *reason,
			       size_t reasonlen)
{
	enum sm_result r = session_claim(m, s, reason, reasonlen);
	double until = clock_mono_s() + RESTART_WAIT_S;
	bool died, running;
	int e;

	/* An execution in progress is interrupted first (its caller gets its
	 * result); code that does not stop ends the session, as it would. */
	while (r == SM_BUSY && clock_mono_s() < until &&
	       session_interrupt(s, &running, reason, reasonlen) == SM_OK) {
		struct timespec tick = { 0, 20 * 1000 * 1000 };

		nanosleep(&tick, NULL);
		r = session_claim(m, s, reason, reasonlen);
	}
	if (r != SM_OK)
		return r;
	e = box_restart(s->box, reason, reasonlen);
	pthread_mutex_lock(&s->lock);
	s->busy = false;
	box_interrupt_withdraw(s->box);
	s->last_used = clock_wall_s();
	died = !s->dead && !box_alive(s->box);
	if (died) {
		s->dead = true;
		snprintf(s->dead_reason, sizeof(s->dead_reason), "%s", box_dead_reason(s->box));
	}
	pthread_mutex_unlock(&s->lock);
	exec_slot_give(m);
	if (died)
		bury(m, s);
	else if (e == 0)
		log_info("session %s: runtime restarted", s->id);
	return e == 0 ? SM_OK : e == -ENOMEM ? SM_NO_MEMORY : SM_GONE;
}

/* ---- archives --------------------------------------------------------- */

/* Is s one of list (NULL-terminated)? */
static bool one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

/* What the driver said of an unpack (a result it made: hostile like any):
 * SM_OK with the summary, or SM_INVALID / SM_TOO_LARGE and why in err. */
static enum sm_result unpack_outcome(const struct petri_limits *lim, const struct result *res,
				     json_t **summary, char *err, size_t errlen)
{
	static const char *const counts[] = { "entries", "files", "directories", "links", "bytes",
					     NULL };
	static const char *const formats[] = { "tar", "tar.gz", "tar.bz2", "tar.xz", "zip", NULL };
	const json_t *e = res->error;
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	json_t *bundle, *out;
	const char *text, *format;
	bool bad;

	switch (res->status) {
	case RESULT_OK:
		break;
	case RESULT_TIMEOUT:
		snprintf(err, errlen, "extracting the archive took longer than the session's "
			 "timeout (%g s): nothing was extracted", lim->timeout_s);
		return SM_TOO_LARGE;
	case RESULT_OOM:
		snprintf(err, errlen, "extracting the archive ran out of the session's memory "
			 "(%u MiB): %s", lim->memory_mb, res->reason);
		return SM_TOO_LARGE;
	default:
		if (!name || !msg) {
			snprintf(err, errlen, "the archive was not extracted: %s",
				 res->reason[0] ? res->reason : "the sandbox failed");
			return SM_INVALID;
		}
		snprintf(err, errlen, "%s", msg);
		return !strcmp(name, "ArchiveTooLarge") ? SM_TOO_LARGE : SM_INVALID;
	}
	bundle = res->main_result >= 0 ? json_array_get(res->results, (size_t)res->main_result)
				       : NULL;
	text = json_string_value(json_object_get(bundle, "application/json"));
	out = text && strlen(text) < 1024 ? json_loads(text, 0, NULL) : NULL;
	/* The counts and one of the formats' names: nothing else. */
	format = json_string_value(json_object_get(out, "format"));
	bad = !format || json_object_size(out) != 6;	/* the format and five counts */
	for (size_t i = 0; !bad && counts[i]; i++) {
		json_t *v = json_object_get(out, counts[i]);

		bad = !json_is_integer(v) || json_integer_value(v) < 0;
	}
	if (!json_is_object(out) || bad || !one_of(format, formats)) {
		json_decref(out);
		snprintf(err, errlen, "the sandbox gave no account of the archive");
		return SM_INVALID;
	}
	*summary = out;
	return SM_OK;
}

/* Extract archive into dest in the session s (claimed by the call), or, s
 * NULL, in the one-shot's box b: as session_unpack(). */
static enum sm_result unpack_in(struct smgr *m, struct session *s, struct box *b,
				const struct petri_limits *lim, const char *archive,
				const char *dest, json_t **summary, char *err, size_t errlen)
{
	struct exec_unpack job = {
		.archive = archive, .dest = dest, .max_entries = m->cfg->archive_max_entries,
		.max_bytes = (uint64_t)lim->disk_mb << 20, .max_ratio = m->cfg->archive_max_ratio,
	};
	struct exec_request ex = {
		.language = "python", .code = "", .timeout_s = lim->timeout_s, .cancel_fd = -1,
		.one_shot = !s, .unpack = &job,
	};
	struct result res;
	enum sm_result r;

	*summary = NULL;
	if (result_init(&res) < 0)
		return SM_NO_MEMORY;
	r = s ? session_exec(m, s, &ex, NULL, &res, err, errlen)
	      : exec_result(box_exec(b, &ex, NULL, &res));
	if (r == SM_OK)
		r = unpack_outcome(lim, &res, summary, err, errlen);
	else if (r == SM_GONE && !s)
		snprintf(err, errlen, "%s", box_dead_reason(b));
	result_release(&res);
	if (r == SM_OK || r == SM_INVALID || r == SM_TOO_LARGE)
		box_note_host_write(s ? s->box : b);
	return r;
}

enum sm_result session_unpack(struct smgr *m, struct session *s, const char *archive,
			      const char *dest, json_t **summary, char *err, size_t errlen)
{
	enum sm_result r = unpack_in(m, s, NULL, &s->limits, archive, dest, summary, err,
				     errlen);

	/* The driver removes what it read; one it never saw (busy, gone...)
	 * goes here. */
	if (r != SM_OK && r != SM_INVALID && r != SM_TOO_LARGE)
		session_file_remove(s, archive);
	return r;
}

/* ---- one-shots -------------------------------------------------------- */

/* Python code longer than this is not scanned: it goes to the main
 * template (the scan runs on the request's thread). */
#define LIGHT_SCAN_MAX (64u << 10)

/* Can the one-shot run in a sandbox of the light template, ready now?
 * When nothing comes with it but its code (no files, no archive, no
 * input: they could hold code that imports anything) and its code names
 * none of the modules the main template preloads, nor a way to import by
 * a name it does not write (exec, importlib...), nor a module that is a
 * preloaded one under another name; a program in another language never
 * imports them into the interpreter (docs/configuration.md, "The light
 * template"). */
static bool light_enough(struct smgr *m, const struct oneshot *o)
{
	static const char *const indirect[] = {
		"exec", "eval", "compile", "__import__", "importlib", "runpy", "pylab",
		"mpl_toolkits", NULL,
	};
	struct pool *light = m->light;
	const char *code = o->ex.code ? o->ex.code : "";

	if (!light || pool_state(light) != POOL_READY)
		return false;
	if (o->internal || o->archive || o->nfiles || o->ex.unpack || o->ex.input)
		return false;
	if (o->ex.language && strcmp(o->ex.language, "python"))
		return true;
	return strnlen(code, LIGHT_SCAN_MAX + 1) <= LIGHT_SCAN_MAX &&
	       !config_code_names(code, indirect) && !config_preload_named(m->cfg, code);
}

/* A sandbox for one execution, counted against the session cap and killed
 * by smgr_shutdown() while it lives. */
static enum sm_result oneshot_begin(struct smgr *m, const struct oneshot *o, struct box **out,
				    char *err, size_t errlen)
{
	const struct petri_limits *lim = &o->limits;
	bool internal = o->internal;
	enum sm_result r;

	*out = NULL;
	if ((r = reserve(m, internal ? FOR_PROBE : FOR_ONESHOT, lim->pids, o->key, false)) != SM_OK)
		return r;
	r = spawn(m, lim, NULL, light_enough(m, o), out, err, errlen);
	pthread_mutex_lock(&m->lock);
	if (r == SM_OK && m->noneshot_boxes == m->caponeshot_boxes) {
		size_t cap = m->caponeshot_boxes ? m->caponeshot_boxes * 2 : 16;
		struct box **v = realloc(m->oneshot_boxes, cap * sizeof(*v));

		if (v) {
			m->oneshot_boxes = v;
			m->caponeshot_boxes = cap;
		} else {
			r = SM_NO_MEMORY;
		}
	}
	if (r == SM_OK && m->stopping)
		r = SM_STOPPING;
	if (r == SM_OK) {
		m->oneshot_boxes[m->noneshot_boxes++] = *out;
	} else if (internal) {
		m->probes--;
	} else {
		m->oneshots--;
		tasks_give(m, lim->pids, o->key);
	}
	pthread_mutex_unlock(&m->lock);
	if (r != SM_OK && *out) {
		box_free(*out);
		*out = NULL;
	}
	if (r != SM_OK && !internal)
		room_grew(m);
	return r;
}

static void oneshot_end(struct smgr *m, struct box *b, const struct oneshot *o)
{
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->noneshot_boxes; i++)
		if (m->oneshot_boxes[i] == b) {
			m->oneshot_boxes[i] = m->oneshot_boxes[--m->noneshot_boxes];
			break;
		}
	if (o->internal) {
		m->probes--;
	} else {
		m->oneshots--;
		tasks_give(m, o->limits.pids, o->key);
	}
	pthread_mutex_unlock(&m->lock);
	dispose(m, b, NULL);
}

/* The request's files, written into the fresh sandbox as its user. */
/* The one-shot's archive, extracted into /work by its driver. */
static enum sm_result put_archive(struct smgr *m, struct box *b, const struct oneshot *o,
				  char *err, size_t errlen)
{
	static const char name[] = EXEC_ARCHIVE_PREFIX "oneshot";
	struct files_user u;
	json_t *summary;
	enum sm_result r;
	int w;

	jail_owner(box_jail(b), &u.uid, &u.gid);
	if ((w = files_write(&u, jail_work_fd(box_jail(b)), name, o->archive,
			     o->archive_len)) < 0) {
		snprintf(err, errlen, "archive: cannot write it into /work: %s", strerror(-w));
		return w == -ENOSPC || w == -EDQUOT || w == -EFBIG ? SM_TOO_LARGE : SM_INVALID;
	}
	r = unpack_in(m, NULL, b, &o->limits, name, o->archive_dest ? o->archive_dest : "",
		      &summary, err, errlen);
	json_decref(summary);
	if (r == SM_GONE) {
		pthread_mutex_lock(&m->lock);
		r = m->stopping ? SM_STOPPING : SM_START_FAILED;
		pthread_mutex_unlock(&m->lock);
	}
	if (r == SM_INVALID || r == SM_TOO_LARGE) {
		char why[sizeof(((struct request_error *)0)->message)];

		snprintf(why, sizeof(why), "archive: %s", err);
		snprintf(err, errlen, "%s", why);
	}
	return r;
}

static enum sm_result put_files(struct box *b, const struct oneshot *o, char *err,
				size_t errlen)
{
	struct files_user u;

	jail_owner(box_jail(b), &u.uid, &u.gid);
	for (size_t i = 0; i < o->nfiles; i++) {
		const struct oneshot_file *f = &o->files[i];
		int r = files_write(&u, jail_work_fd(box_jail(b)), f->path,
				    f->data ? (const void *)f->data : "", f->len);

		box_note_host_write(b);
		if (r < 0) {
			snprintf(err, errlen, "files[%zu]: cannot write '%.200s': %s", i, f->path,
				 strerror(-r));
			return r == -ENOSPC || r == -EDQUOT || r == -EFBIG ? SM_TOO_LARGE : SM_INVALID;
		}
	}
	return SM_OK;
}

enum sm_result smgr_oneshot(struct smgr *m, const struct oneshot *o,
			    const struct exec_events *ev, struct result *res, char *err,
			    size_t errlen)
{
	struct exec_request ex = o->ex;
	struct box *b = NULL;
	double started_at;
	enum sm_result r;

	ex.one_shot = true;	/* a timeout kills at once: nothing is kept */
	/* petri's own (the probe) takes no client's slot. */
	if (!o->internal && (r = exec_slot_take(m)) != SM_OK)
		return r;
	if ((r = oneshot_begin(m, o, &b, err, errlen)) != SM_OK ||
	    (o->archive && (r = put_archive(m, b, o, err, errlen)) != SM_OK) ||
	    (r = put_files(b, o, err, errlen)) != SM_OK)
		goto out;
	started_at = clock_wall_s();
	r = exec_result(box_exec(b, &ex, ev, res));
	if (r == SM_INVALID)
		snprintf(err, errlen, "%s", BOX_EINVAL_REASON);
	if (r == SM_GONE) {
		/* Killed before it ran: by a shutdown, or it never came up. */
		snprintf(err, errlen, "%s", box_dead_reason(b));
		pthread_mutex_lock(&m->lock);
		r = m->stopping ? SM_STOPPING : SM_START_FAILED;
		pthread_mutex_unlock(&m->lock);
	}
	if (r != SM_OK)
		goto out;
	/* Before the record takes its copy: it keeps the files' contents, as
	 * it keeps images, up to its attachment bound. */
	if (o->return_files &&
	    box_files_inline(b, res->files, (const char *const *)o->patterns, o->npatterns,
			     o->return_file_max ? o->return_file_max : m->cfg->max_return_file_bytes,
			     o->return_total_max ? o->return_total_max :
						   m->cfg->max_return_files_bytes) < 0)
		r = SM_NO_MEMORY;
	if (!o->internal)
		finished(m, NULL, &ex, &o->limits, started_at, res);
out:
	if (b)
		oneshot_end(m, b, o);
	if (!o->internal)
		exec_slot_give(m);
	return r;
}
