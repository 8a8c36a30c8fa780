/* The fake sandbox of fake_box.h: box.h, the parts of jail.h, files.h and
 * pool.h that the session manager calls, over one table of boxes in
 * memory.  One lock for everything: tests are small. */
#include "fake_box.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail/jail.h"
#include "workspace/archive.h"
#include "runtime/box.h"
#include "workspace/files.h"
#include "session/pool.h"
#include "util/clock.h"

#define FAKE_BOXES 64
/* jail_work_fd() of box i: no real descriptor, a key files_write() finds
 * the box by. */
#define FAKE_FD_BASE 10000

struct jail {
	struct box *box;
};

struct box {
	struct jail jail;
	int slot;
	struct jail_limits limits;
	uint64_t work_used;
	uint64_t oom_kills;
	bool interrupt;			/* box_interrupt(), until withdrawn */
	bool dead;
	char dead_reason[256];
};

struct files_sink {
	struct box *box;
	int error;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct box *boxes[FAKE_BOXES];
static int live, started, blocked, held;
static bool fail_starts, hold_starts;
static struct box *last;
static pthread_t last_starter;
static uint64_t last_work_bytes;

static _Noreturn void unexpected(const char *what)
{
	fprintf(stderr, "fake_box: %s called, which the test does not expect\n", what);
	abort();
}

/* Callers hold lock.  The first reason is kept, as box_stop() keeps it. */
static void kill_box(struct box *b, const char *reason)
{
	if (!b->dead) {
		b->dead = true;
		snprintf(b->dead_reason, sizeof(b->dead_reason), "%s", reason);
	}
	pthread_cond_broadcast(&changed);
}

/* ---- test control ------------------------------------------------------ */

void fake_box_fail_starts(bool fail)
{
	pthread_mutex_lock(&lock);
	fail_starts = fail;
	pthread_mutex_unlock(&lock);
}

void fake_box_hold_starts(bool hold)
{
	pthread_mutex_lock(&lock);
	hold_starts = hold;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

void fake_box_wait_held(int n)
{
	pthread_mutex_lock(&lock);
	while (held < n)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

#define GETTER(type, name, var)			\
	type name(void)				\
	{					\
		type v;				\
		pthread_mutex_lock(&lock);	\
		v = var;			\
		pthread_mutex_unlock(&lock);	\
		return v;			\
	}
GETTER(int, fake_box_live, live)
GETTER(int, fake_box_started, started)
GETTER(struct box *, fake_box_last, last)
GETTER(pthread_t, fake_box_last_starter, last_starter)
GETTER(uint64_t, fake_box_last_work_bytes, last_work_bytes)

void fake_box_wait_blocked(int n)
{
	pthread_mutex_lock(&lock);
	while (blocked < n)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

void fake_box_wait_all_freed(void)
{
	pthread_mutex_lock(&lock);
	while (live > 0)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

/* ---- box.h ------------------------------------------------------------- */

int box_start(struct jail_host *host, const struct box_config *cfg,
	      struct box **out, char *err, size_t errlen)
{
	struct box *b;
	int slot;

	*out = NULL;
	pthread_mutex_lock(&lock);
	last_starter = pthread_self();
	held++;
	pthread_cond_broadcast(&changed);
	while (hold_starts)
		pthread_cond_wait(&changed, &lock);
	held--;
	if (fail_starts) {
		pthread_mutex_unlock(&lock);
		snprintf(err, errlen, "fake: the sandbox did not start");
		return -EIO;
	}
	for (slot = 0; slot < FAKE_BOXES && boxes[slot]; slot++)
		;
	if (slot == FAKE_BOXES || !(b = calloc(1, sizeof(*b)))) {
		pthread_mutex_unlock(&lock);
		snprintf(err, errlen, "fake: no room for another box");
		return -ENOMEM;
	}
	b->jail.box = b;
	b->slot = slot;
	b->limits = cfg->limits;
	boxes[slot] = b;
	last = b;
	last_work_bytes = cfg->limits.work_bytes;
	live++;
	started++;
	pthread_mutex_unlock(&lock);
	*out = b;
	return 0;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) == 1;
}

/* "block": until stopped or cancelled.  Callers hold lock. */
static void run_blocked(struct box *b, const struct exec_request *ex, struct result *res)
{
	blocked++;
	pthread_cond_broadcast(&changed);
	while (!b->dead && !b->interrupt && !readable(ex->cancel_fd)) {
		struct timespec ts = clock_deadline(0.01);

		pthread_cond_timedwait(&changed, &lock, &ts);
	}
	blocked--;
	if (b->dead) {
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "%s", b->dead_reason);
	} else if (b->interrupt) {
		res->status = RESULT_ERROR;
		snprintf(res->reason, sizeof(res->reason), "interrupted (fake)");
	} else {
		res->status = RESULT_TIMEOUT;
		snprintf(res->reason, sizeof(res->reason), "cancelled (fake)");
	}
}

int box_exec(struct box *b, const struct exec_request *ex,
	     const struct exec_events *ev, struct result *res)
{
	const char *code = ex->code ? ex->code : "";
	int r = 0;

	pthread_mutex_lock(&lock);
	if (b->dead) {
		r = -EPIPE;
	} else if (!strcmp(code, "ok") || !strcmp(code, "write")) {
		res->status = RESULT_OK;
		result_stream_add(&res->out, "ok\n", 3, EXEC_OUTPUT_CAP_DEFAULT);
		if (!strcmp(code, "write"))
			json_array_append_new(res->files, json_pack("{s:s, s:i}", "path",
								    FAKE_WRITTEN, "size", 3));
	} else if (!strcmp(code, "block")) {
		run_blocked(b, ex, res);
	} else if (!strcmp(code, "die")) {
		kill_box(b, FAKE_DIED_REASON);
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "%s", b->dead_reason);
	} else {
		r = -EINVAL;	/* "einval", and any script the fake does not know */
	}
	pthread_mutex_unlock(&lock);
	return r;
}

int box_files_inline(struct box *b, json_t *files, const char *const *patterns,
		     size_t npatterns, uint64_t per_file, uint64_t total)
{
	size_t i;
	json_t *f;

	json_array_foreach(files, i, f) {
		json_object_set_new(f, "content_base64", json_string("b2sK"));
		json_object_set_new(f, "truncated", json_false());
	}
	return 0;
}

static atomic_int host_writes;

void box_note_host_write(struct box *b) { atomic_fetch_add(&host_writes, 1); }
int fake_box_host_writes(void) { return atomic_load(&host_writes); }

void box_stop(struct box *b, const char *reason)
{
	pthread_mutex_lock(&lock);
	kill_box(b, reason);
	pthread_mutex_unlock(&lock);
}

/* Variables a session sends its sandbox (its package index): taken, on a
 * box alive. */
int box_send_env(struct box *b, const char *const *env)
{
	int r = 0;

	(void)env;
	pthread_mutex_lock(&lock);
	if (b->dead)
		r = -EPIPE;
	pthread_mutex_unlock(&lock);
	return r;
}

/* A restart that works, on a box alive. */
int box_restart(struct box *b, char *err, size_t errlen)
{
	int r = 0;

	pthread_mutex_lock(&lock);
	if (b->dead) {
		snprintf(err, errlen, "%s", b->dead_reason);
		r = -EPIPE;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void box_interrupt(struct box *b)
{
	pthread_mutex_lock(&lock);
	b->interrupt = true;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

void box_interrupt_withdraw(struct box *b)
{
	pthread_mutex_lock(&lock);
	b->interrupt = false;
	pthread_mutex_unlock(&lock);
}

bool box_alive(const struct box *b)
{
	bool alive;

	pthread_mutex_lock(&lock);
	alive = !b->dead;
	pthread_mutex_unlock(&lock);
	return alive;
}

/* Set once, when the box dies, and never changed after. */
const char *box_dead_reason(const struct box *b) { return b->dead_reason; }
struct jail *box_jail(struct box *b) { return &b->jail; }
const char *box_python_version(const struct box *b) { return "3.0.0-fake"; }

void box_free(struct box *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&lock);
	boxes[b->slot] = NULL;
	if (last == b)
		last = NULL;
	live--;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
	free(b);
}

/* ---- jail.h ------------------------------------------------------------ */

void jail_stop(struct jail *j)
{
	box_stop(j->box, "the sandbox was killed");
}

int jail_work_fd(const struct jail *j) { return FAKE_FD_BASE + j->box->slot; }

/* Nor do they watch directories. */
int files_watch(const struct files_user *u, int work_fd, const char *dir, int inotify_fd,
		uint32_t mask)
{
	(void)u;
	(void)work_fd;
	(void)dir;
	(void)inotify_fd;
	(void)mask;
	return -ENOSYS;
}

/* The session tests start no process beside the interpreter. */
int box_spawn(struct box *b, const struct box_spawn *sp, struct box_proc *out)
{
	(void)b;
	(void)sp;
	out->pid = -1;
	return -ENOSYS;
}

int jail_open_pty(struct jail *j, int *master, int *slave)
{
	(void)j;
	*master = *slave = -1;
	return -ENOTTY;
}

/* A fake sandbox runs no server. */
int jail_connect(struct jail *j, unsigned short port, int *fd)
{
	(void)j;
	(void)port;
	*fd = -1;
	return -ECONNREFUSED;
}

/* No namespace to link: the session tests ask for no network. */
int jail_netns(struct jail *j)
{
	(void)j;
	return -ENOSYS;
}

/* Only /work: the session tests write no file elsewhere. */
int jail_dir_fd(const struct jail *j, const char *path, const char **rest)
{
	if (strncmp(path, "/work", 5) || (path[5] && path[5] != '/')) {
		*rest = NULL;
		return -1;
	}
	*rest = path[5] ? path + 6 : path + 5;
	return jail_work_fd(j);
}

void jail_owner(const struct jail *j, uid_t *uid, gid_t *gid)
{
	*uid = *gid = (uid_t)(FAKE_FD_BASE + j->box->slot);
}

int jail_procs(struct jail *j, struct jail_proc *out, size_t max, size_t *total)
{
	static const char cmd[] = "sleep\0" "1000";

	*total = 0;
	if (!box_alive(j->box) || max == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	out->pid = FAKE_PID;
	out->ppid = JAIL_INIT_PID;
	out->state = 'S';
	out->threads = 1;
	snprintf(out->name, sizeof(out->name), "sleep");
	memcpy(out->cmd, cmd, sizeof(cmd));
	out->cmd_len = sizeof(cmd);
	*total = 1;
	return 1;
}

int jail_proc_signal(struct jail *j, pid_t pid, int sig)
{
	if (pid == JAIL_INIT_PID || pid == JAIL_MAIN_PID)
		return -EPERM;
	return pid == FAKE_PID && box_alive(j->box) ? 0 : -ESRCH;
}

/* The configuration's check of its binds; these tests configure none. */
int jail_bind_check(const char *path, bool want_dir, char *why, size_t whylen)
{
	unexpected("jail_bind_check");
	return -EINVAL;
}

/* smgr_cgroups() asks the host, which these tests never have. */
const struct jail_host_info *jail_host_info(const struct jail_host *host)
{
	unexpected("jail_host_info");
	return NULL;
}

int jail_usage(struct jail *j, struct jail_usage *u)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_lock(&lock);
	u->oom_kills = j->box->oom_kills;
	pthread_mutex_unlock(&lock);
	return 0;
}

/* ---- files.h ----------------------------------------------------------- */

int files_write(const struct files_user *u, int work_fd, const char *path,
		const void *data, size_t len)
{
	int slot = work_fd - FAKE_FD_BASE, r = 0;
	struct box *b;

	pthread_mutex_lock(&lock);
	b = slot >= 0 && slot < FAKE_BOXES ? boxes[slot] : NULL;
	if (!b || u->uid != (uid_t)work_fd)
		r = -EBADF;	/* not this box's /work, or not as its user */
	else if (path[0] && path[strlen(path) - 1] == '/')
		r = -EISDIR;
	else if (b->work_used + len > b->limits.work_bytes)
		r = -ENOSPC;
	else
		b->work_used += len;
	pthread_mutex_unlock(&lock);
	return r;
}

int files_delete(const struct files_user *u, int work_fd, const char *path)
{
	return 0;
}

/* What session/workspace.c calls and no test does yet. */
const char *files_content_type(const char *path) { unexpected("files_content_type"); }
int files_check_path(const char *path, bool allow_empty, char *why, size_t whylen)
{
	unexpected("files_check_path");
}
int files_open(const struct files_user *u, int work_fd, const char *path, int *fd,
	       uint64_t *size) { unexpected("files_open"); }
int files_list(const struct files_user *u, int work_fd, const char *dir, json_t **out,
	       bool *truncated) { unexpected("files_list"); }
int files_stat(const struct files_user *u, int work_fd, const char *path, struct stat *st,
	       char *target, size_t tlen, struct files_meta *meta) { unexpected("files_stat"); }
int files_walk(const struct files_user *u, int work_fd, const char *dir, unsigned depth,
	       size_t max, unsigned flags, files_walk_fn fn, void *ctx)
{
	unexpected("files_walk");
}
int files_remove_tree(const struct files_user *u, int work_fd, const char *path, size_t max)
{
	unexpected("files_remove_tree");
}
int files_mkdir(const struct files_user *u, int work_fd, const char *path)
{
	unexpected("files_mkdir");
}
int files_rename(const struct files_user *u, int work_fd, const char *from, const char *to)
{
	unexpected("files_rename");
}

int files_sink_begin(const struct files_user *u, struct jail *j, int dir_fd, const char *path,
		     const struct files_meta *meta, struct files_sink **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->box = j->box;
	return 0;
}

int files_sink_write(struct files_sink *k, const void *data, size_t len)
{
	struct box *b = k->box;

	pthread_mutex_lock(&lock);
	if (!k->error && b->work_used + len > b->limits.memory_bytes) {
		/* The writer's pages are charged to the sandbox: over its
		 * limit, the kernel kills in it. */
		b->oom_kills++;
		kill_box(b, "out of memory (fake)");
		k->error = -ENOMEM;
	} else if (!k->error) {
		b->work_used += len;
	}
	pthread_mutex_unlock(&lock);
	return k->error;
}

int files_sink_offer(struct files_sink *k, const void *data, size_t len, size_t *taken)
{
	int r = files_sink_write(k, data, len);

	*taken = r < 0 ? 0 : len;
	return r;
}

int files_sink_fd(const struct files_sink *k) { return -1; }

int files_sink_finish(struct files_sink *k, bool commit)
{
	int r = k->error;

	free(k);
	return r;
}

void files_sink_cancel(struct files_sink *k) {}
int files_sink_exit_fd(const struct files_sink *k) { return -1; }

bool files_sink_reap(struct files_sink *k)
{
	free(k);
	return true;
}

/* ---- archive.h: no writer ever starts ---------------------------------- */

int ws_archiver_start(const struct files_user *u, struct jail *j, const char *dir, bool gzip,
		      size_t max_entries, uint64_t max_bytes, struct ws_archiver **out)
{
	*out = NULL;
	return -ENOSYS;
}

int ws_archiver_opened(struct ws_archiver *a, double timeout_s, size_t *entries)
{
	unexpected("ws_archiver_opened");
}

ssize_t ws_archiver_read(struct ws_archiver *a, char *out, size_t max)
{
	unexpected("ws_archiver_read");
}

int ws_archiver_fd(const struct ws_archiver *a) { unexpected("ws_archiver_fd"); }
int ws_archiver_exit_fd(const struct ws_archiver *a) { unexpected("ws_archiver_exit_fd"); }
void ws_archiver_cancel(struct ws_archiver *a) { unexpected("ws_archiver_cancel"); }
bool ws_archiver_reap(struct ws_archiver *a) { unexpected("ws_archiver_reap"); }

/* ---- pool.h: the tests run with warm = false --------------------------- */

int pool_new(struct jail_host *host, const struct pool_config *cfg, struct pool **out)
{
	unexpected("pool_new");
	return -ENOSYS;
}

void pool_free(struct pool *p)
{
	if (p)
		unexpected("pool_free");
}

int pool_take(struct pool *p, const struct box_config *cfg, bool is_default,
	      struct box **out, char *err, size_t errlen)
{
	unexpected("pool_take");
	return -ENOSYS;
}

void pool_poke(struct pool *p) { unexpected("pool_poke"); }

enum pool_state pool_state(const struct pool *p)
{
	unexpected("pool_state");
	return POOL_FAILED;
}

size_t pool_ready(const struct pool *p)
{
	unexpected("pool_ready");
	return 0;
}

unsigned pool_target(const struct pool *p)
{
	unexpected("pool_target");
	return 0;
}

bool pool_wait_ready(struct pool *p, double seconds)
{
	unexpected("pool_wait_ready");
	return false;
}
