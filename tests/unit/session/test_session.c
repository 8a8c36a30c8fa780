/* The session manager (src/session/session.c) over a fake sandbox
 * (fake_box.h): what it promises a front end, without sandboxes.
 *   - expiry: idle timeout and maximum lifetime end a session with a
 *     reason later calls are told; a running execution is never expired
 *     under it; session_set_lifetime() extends past the old expiry;
 *   - capacity: max_sessions (smgr_create), max_executions (session_claim),
 *     and one-shots counting against both, given back on every path;
 *   - busy, deletion (not found afterwards, not "gone"), a sandbox that
 *     dies during or between executions (gone, with its reason);
 *   - shutdown with executions in flight: they end, smgr_free() returns,
 *     and no sandbox is left (nor memory, under ASan or valgrind); a
 *     session whose sandbox was starting is refused.
 * Expiry is waited for by polling (the reaper looks every 500 ms); nothing
 * asserts on how long anything took. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "config/config.h"
#include "exec/request.h"
#include "fake_box.h"
#include "runtime/box.h"
#include "session/session.h"
#include "session/workspace.h"

static struct petri_config cfg;
static struct smgr *m;

/* ---- helpers ----------------------------------------------------------- */

static void start(uint32_t max_sessions, uint32_t max_executions)
{
	char err[256] = "";

	config_defaults(&cfg);
	cfg.warm = false;	/* no pool: every sandbox through the spawner */
	cfg.record[0] = '\0';	/* the record in memory: nothing kept on disk */
	cfg.record_default = false;
	cfg.max_sessions = max_sessions;
	cfg.max_executions = max_executions;
	ck_assert_msg(smgr_new(&cfg, NULL, &m, err, sizeof(err)) == 0, "smgr_new: %s", err);
}

/* smgr_free() returns, and every sandbox was freed with it. */
static void finish(void)
{
	smgr_free(m);
	m = NULL;
	ck_assert_int_eq(fake_box_live(), 0);
	config_release(&cfg);
}

static struct session_params params(double idle_s, double life_s)
{
	return (struct session_params){
		.language = "python", .limits = cfg.defaults,
		.idle_timeout_s = idle_s, .max_lifetime_s = life_s,
	};
}

static struct session *create(double idle_s, double life_s)
{
	struct session_params p = params(idle_s, life_s);
	struct session *s;
	char err[256] = "";
	enum sm_result r = smgr_create(m, &p, &s, err, sizeof(err));

	ck_assert_msg(r == SM_OK, "smgr_create: %s (%s)", sm_result_message(r), err);
	return s;
}

static enum sm_result try_create(void)
{
	struct session_params p = params(60, 60);
	struct session *s;
	char err[256] = "";
	enum sm_result r = smgr_create(m, &p, &s, err, sizeof(err));

	if (r == SM_OK) {
		smgr_delete(m, session_id(s));
		session_put(s);
	}
	return r;
}

static struct exec_request exec_of(const char *code, int cancel_fd)
{
	return (struct exec_request){
		.language = "python", .code = code, .timeout_s = 10, .cancel_fd = cancel_fd,
	};
}

/* session_exec() of code; res is the caller's to release. */
static enum sm_result run(struct session *s, const char *code, struct result *res,
			  char *reason, size_t reasonlen)
{
	struct exec_request ex = exec_of(code, -1);

	ck_assert_int_eq(result_init(res), 0);
	reason[0] = '\0';
	return session_exec(m, s, &ex, NULL, res, reason, reasonlen);
}

static enum sm_result run_status(struct session *s, const char *code,
				 enum result_status *status)
{
	struct result res;
	char reason[256];
	enum sm_result r = run(s, code, &res, reason, sizeof(reason));

	*status = res.status;
	result_release(&res);
	return r;
}

static enum sm_result lookup(const char *id, char *reason, size_t reasonlen)
{
	struct session *s;
	enum sm_result r;

	reason[0] = '\0';
	r = smgr_lookup(m, id, &s, reason, reasonlen);
	session_put(s);
	return r;
}

/* Until the reaper ended the session; its reason into reason. */
static void wait_gone(const char *id, char *reason, size_t reasonlen)
{
	while (lookup(id, reason, reasonlen) != SM_GONE)
		usleep(50 * 1000);
}

/* Once this returns, the reaper has looked at every session created before
 * the call past the time it would have expired with an idle timeout and a
 * lifetime of 1 s: a session created now with those is due after them, and
 * is waited for until the reaper ended it. */
static void wait_reaper_past_one_second(void)
{
	struct session *later = create(1, 1);
	char reason[256];

	wait_gone(session_id(later), reason, sizeof(reason));
	session_put(later);
}

/* Both caps have room for one more: a session can be created and claimed.
 * With max_sessions and max_executions of 1, this says that whatever ran
 * before gave both back, and left no sandbox. */
static void assert_room_for_one(const char *after)
{
	struct session_params p = params(60, 60);
	struct session *s;
	char reason[256] = "";

	ck_assert_msg(smgr_create(m, &p, &s, reason, sizeof(reason)) == SM_OK,
		      "after %s: no room for a session", after);
	ck_assert_msg(session_claim(m, s, reason, sizeof(reason)) == SM_OK,
		      "after %s: no room for an execution", after);
	session_release(m, s);
	ck_assert_int_eq(smgr_delete(m, session_id(s)), SM_OK);
	session_put(s);
	fake_box_wait_all_freed();
}

/* An execution on a thread of its own, for one that blocks: a session's
 * (s) or a one-shot (s NULL, o). */
struct job {
	pthread_t thread;
	struct session *s;
	struct oneshot o;
	struct exec_request ex;
	struct result res;
	char reason[256];
	enum sm_result r;
};

static void *job_main(void *arg)
{
	struct job *j = arg;

	if (j->s)
		j->r = session_exec(m, j->s, &j->ex, NULL, &j->res, j->reason, sizeof(j->reason));
	else
		j->r = smgr_oneshot(m, &j->o, NULL, &j->res, j->reason, sizeof(j->reason));
	return NULL;
}

/* s: the job holds a reference of its own, dropped by job_join(). */
static void job_start(struct job *j, struct session *s, const char *code, int cancel_fd)
{
	memset(j, 0, sizeof(*j));
	j->s = s ? session_ref(s) : NULL;
	j->ex = exec_of(code, cancel_fd);
	j->o.limits = cfg.defaults;
	j->o.ex = j->ex;
	ck_assert_int_eq(result_init(&j->res), 0);
	ck_assert_int_eq(pthread_create(&j->thread, NULL, job_main, j), 0);
}

/* Joined, its reference dropped; j->res is the caller's to release. */
static void job_join(struct job *j)
{
	ck_assert_int_eq(pthread_join(j->thread, NULL), 0);
	session_put(j->s);
	j->s = NULL;
}

struct creation {
	pthread_t thread;
	struct session *s;
	enum sm_result r;
};

static void *create_main(void *arg)
{
	struct creation *c = arg;
	struct session_params p = params(60, 60);
	char err[256];

	c->r = smgr_create(m, &p, &c->s, err, sizeof(err));
	return NULL;
}

static int cancel_fd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return fd;
}

static void cancel(int fd)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(fd, &one, sizeof(one)), sizeof(one));
}

/* ---- sessions ---------------------------------------------------------- */

START_TEST(test_create_starts_on_a_spawner_thread)
{
	struct session *s;
	struct result res;
	char reason[256];
	bool truncated;
	json_t *record;

	start(4, 4);
	s = create(60, 60);
	/* Started by box_start(), on a spawner thread (whose death would be
	 * the sandbox's), with the session's limits. */
	ck_assert_int_eq(fake_box_started(), 1);
	ck_assert(!pthread_equal(fake_box_last_starter(), pthread_self()));
	ck_assert_uint_eq(fake_box_last_work_bytes(), (uint64_t)cfg.defaults.disk_mb << 20);
	ck_assert_uint_eq(smgr_count(m), 1);

	ck_assert_int_eq(run(s, "ok", &res, reason, sizeof(reason)), SM_OK);
	ck_assert_int_eq(res.status, RESULT_OK);
	ck_assert_str_eq(res.out.data.data, "ok\n");
	result_release(&res);
	record = smgr_executions(m, session_id(s), 10, 0, &truncated);
	ck_assert_uint_eq(json_array_size(record), 1);
	json_decref(record);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_max_sessions)
{
	struct session *a, *b, *s;
	struct session_params p;
	char err[256] = "";

	start(2, 4);
	p = params(60, 60);
	a = create(60, 60);
	b = create(60, 60);
	ck_assert_int_eq(try_create(), SM_CAPACITY);
	/* A deleted session gives its place back. */
	ck_assert_int_eq(smgr_delete(m, session_id(b)), SM_OK);
	session_put(b);
	/* So does a sandbox that did not start, whose reason is told. */
	fake_box_fail_starts(true);
	ck_assert_int_eq(smgr_create(m, &p, &s, err, sizeof(err)), SM_START_FAILED);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(err, "fake: the sandbox did not start");
	fake_box_fail_starts(false);
	b = create(60, 60);
	ck_assert_int_eq(try_create(), SM_CAPACITY);
	session_put(a);
	session_put(b);
	finish();
}
END_TEST

START_TEST(test_max_executions)
{
	struct session *a, *b;
	char reason[256];

	start(4, 1);
	a = create(60, 60);
	b = create(60, 60);
	ck_assert_int_eq(session_claim(m, a, reason, sizeof(reason)), SM_OK);
	ck_assert_int_eq(session_claim(m, b, reason, sizeof(reason)), SM_CAPACITY);
	session_release(m, a);
	/* The refused claim left b free, and a's release gave the slot back. */
	ck_assert_int_eq(session_claim(m, b, reason, sizeof(reason)), SM_OK);
	session_release(m, b);
	session_put(a);
	session_put(b);
	finish();
}
END_TEST

START_TEST(test_busy)
{
	struct session *s;
	struct job j;
	char reason[256];
	enum result_status status;
	int fd = cancel_fd();

	start(4, 4);
	s = create(60, 60);
	ck_assert_int_eq(session_claim(m, s, reason, sizeof(reason)), SM_OK);
	ck_assert_int_eq(session_claim(m, s, reason, sizeof(reason)), SM_BUSY);
	session_release(m, s);
	/* An execution in progress holds the session... */
	job_start(&j, s, "block", fd);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_BUSY);
	/* ...until it is over, and then the session is free again. */
	cancel(fd);
	job_join(&j);
	ck_assert_int_eq(j.r, SM_OK);
	ck_assert_int_eq(j.res.status, RESULT_TIMEOUT);
	result_release(&j.res);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_OK);
	ck_assert_int_eq(status, RESULT_OK);
	close(fd);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_interrupt_and_restart)
{
	struct session *s;
	struct job j;
	char reason[256];
	enum result_status status;
	bool running = true;

	start(4, 4);
	s = create(60, 60);
	/* None running: nothing is kept for the next execution. */
	ck_assert_int_eq(session_interrupt(s, &running, reason, sizeof(reason)), SM_OK);
	ck_assert(!running);
	job_start(&j, s, "block", -1);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(session_interrupt(s, &running, reason, sizeof(reason)), SM_OK);
	ck_assert(running);
	job_join(&j);
	ck_assert_int_eq(j.r, SM_OK);
	ck_assert_int_eq(j.res.status, RESULT_ERROR);
	result_release(&j.res);
	/* Withdrawn when the execution ended: the next one blocks again. */
	job_start(&j, s, "block", -1);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_BUSY);
	ck_assert_int_eq(session_interrupt(s, &running, reason, sizeof(reason)), SM_OK);
	job_join(&j);
	result_release(&j.res);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_OK);
	/* A restart interrupts a running execution first, then takes the
	 * session for itself. */
	job_start(&j, s, "block", -1);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(session_restart(m, s, reason, sizeof(reason)), SM_OK);
	job_join(&j);
	ck_assert_int_eq(j.res.status, RESULT_ERROR);
	result_release(&j.res);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_OK);
	smgr_delete(m, session_id(s));
	ck_assert_int_eq(session_interrupt(s, &running, reason, sizeof(reason)), SM_NOT_FOUND);
	ck_assert_int_eq(session_restart(m, s, reason, sizeof(reason)), SM_NOT_FOUND);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_invalid_code_keeps_the_session)
{
	struct session *s;
	struct result res;
	char reason[256];
	enum result_status status;

	start(4, 4);
	s = create(60, 60);
	ck_assert_int_eq(run(s, "einval", &res, reason, sizeof(reason)), SM_INVALID);
	ck_assert_str_eq(reason, BOX_EINVAL_REASON);
	result_release(&res);
	ck_assert_int_eq(run_status(s, "ok", &status), SM_OK);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_delete)
{
	struct session *s;
	struct job j;
	char reason[256];

	start(4, 4);
	ck_assert_int_eq(lookup("ses_00000000000000000000000000000000", reason,
				sizeof(reason)), SM_NOT_FOUND);
	s = create(60, 60);
	/* Deleted with an execution in progress: it ends at once, killed. */
	job_start(&j, s, "block", -1);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(smgr_delete(m, session_id(s)), SM_OK);
	job_join(&j);
	ck_assert_int_eq(j.r, SM_OK);
	ck_assert_int_eq(j.res.status, RESULT_KILLED);
	ck_assert_str_eq(j.res.reason, "the session was deleted");
	result_release(&j.res);
	/* After a deletion a session is not found (a client deleted it: no
	 * "gone" with a reason), whether asked by id or through a reference
	 * that outlived it. */
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_NOT_FOUND);
	ck_assert_int_eq(smgr_delete(m, session_id(s)), SM_NOT_FOUND);
	ck_assert_int_eq(session_claim(m, s, reason, sizeof(reason)), SM_NOT_FOUND);
	ck_assert_int_eq(session_set_lifetime(s, 60, 60, reason, sizeof(reason)), SM_NOT_FOUND);
	ck_assert(session_ended(s));
	ck_assert_uint_eq(smgr_count(m), 0);
	/* Its sandbox goes with the last reference. */
	ck_assert_int_eq(fake_box_live(), 1);
	session_put(s);
	fake_box_wait_all_freed();
	finish();
}
END_TEST

/* What the processes of a session are to the session manager: listed and
 * signalled without a claim (an execution may run), petri's own refused
 * with a reason, nothing once the session is deleted. */
START_TEST(test_processes)
{
	struct session *s;
	struct job j;
	json_t *list, *p;
	char reason[256] = "";

	start(4, 4);
	s = create(60, 60);
	job_start(&j, s, "block", -1);
	fake_box_wait_blocked(1);
	ck_assert_int_eq(session_processes(s, &list, reason, sizeof(reason)), SM_OK);
	ck_assert_int_eq(json_integer_value(json_object_get(list, "count")), 1);
	ck_assert(json_is_false(json_object_get(list, "truncated")));
	p = json_array_get(json_object_get(list, "processes"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(p, "pid")), FAKE_PID);
	ck_assert_str_eq(json_string_value(json_object_get(p, "state")), "sleeping");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(p, "command"), 1)),
			 "1000");
	json_decref(list);
	ck_assert_int_eq(session_signal_process(s, FAKE_PID, SIGTERM, reason, sizeof(reason)),
			 SM_OK);
	ck_assert_int_eq(session_signal_process(s, 1, SIGTERM, reason, sizeof(reason)),
			 SM_PROTECTED);
	ck_assert_ptr_nonnull(strstr(reason, "init"));
	ck_assert_int_eq(session_signal_process(s, 2, SIGKILL, reason, sizeof(reason)),
			 SM_PROTECTED);
	ck_assert_ptr_nonnull(strstr(reason, "driver"));
	ck_assert_int_eq(session_signal_process(s, 99, SIGTERM, reason, sizeof(reason)),
			 SM_NO_PROCESS);
	ck_assert_int_eq(smgr_delete(m, session_id(s)), SM_OK);
	job_join(&j);
	result_release(&j.res);
	ck_assert_int_eq(session_processes(s, &list, reason, sizeof(reason)), SM_NOT_FOUND);
	ck_assert_ptr_null(list);
	ck_assert_int_eq(session_signal_process(s, FAKE_PID, SIGTERM, reason, sizeof(reason)),
			 SM_NOT_FOUND);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_died_during_an_execution)
{
	struct session *s;
	struct result res;
	char reason[256];

	start(1, 4);
	s = create(60, 60);
	ck_assert_int_eq(run(s, "die", &res, reason, sizeof(reason)), SM_OK);
	ck_assert_int_eq(res.status, RESULT_KILLED);
	result_release(&res);
	/* Dead, never silently replaced: every later call is told why. */
	ck_assert_int_eq(session_claim(m, s, reason, sizeof(reason)), SM_GONE);
	ck_assert_str_eq(reason, FAKE_DIED_REASON);
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_GONE);
	ck_assert_str_eq(reason, FAKE_DIED_REASON);
	ck_assert_int_eq(smgr_delete(m, session_id(s)), SM_NOT_FOUND);
	session_put(s);
	/* It no longer counts against max_sessions (of 1). */
	assert_room_for_one("a death");
	finish();
}
END_TEST

START_TEST(test_died_between_executions)
{
	struct session *s;
	struct result res;
	char reason[256];
	const char *why = "killed by the kernel (fake)";

	start(4, 4);
	s = create(60, 60);
	box_stop(fake_box_last(), why);
	ck_assert_int_eq(run(s, "ok", &res, reason, sizeof(reason)), SM_GONE);
	ck_assert_str_eq(reason, why);
	result_release(&res);
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_GONE);
	ck_assert_str_eq(reason, why);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_upload_over_memory_ends_the_session)
{
	struct session *s;
	struct session_upload *up;
	static char data[64 << 10];
	char reason[256];
	bool ended = false;
	int r = 0;

	start(4, 4);
	cfg.defaults.memory_mb = 1;
	s = create(60, 60);
	ck_assert_int_eq(session_upload_begin(m, s, "big.bin", NULL, &up), 0);
	for (int i = 0; i < 32 && r == 0; i++)
		r = session_upload_write(up, data, sizeof(data));
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_int_eq(session_upload_finish(up, true, &ended), -ENOMEM);
	ck_assert(ended);
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_GONE);
	ck_assert_msg(strstr(reason, "an upload went over the session's memory limit (1 MiB)"),
		      "reason: %s", reason);
	session_put(s);
	finish();
}
END_TEST

/* ---- expiry ------------------------------------------------------------ */

START_TEST(test_idle_timeout)
{
	struct session *s;
	char reason[256], again[256];

	start(1, 4);
	s = create(1, 60);
	wait_gone(session_id(s), reason, sizeof(reason));
	ck_assert_str_eq(reason, "the session was idle too long and was ended");
	/* A reference held across the expiry is told the same. */
	ck_assert_int_eq(session_claim(m, s, again, sizeof(again)), SM_GONE);
	ck_assert_str_eq(again, reason);
	ck_assert_int_eq(session_set_lifetime(s, 60, 60, again, sizeof(again)), SM_GONE);
	ck_assert_str_eq(again, reason);
	ck_assert(session_ended(s));
	session_put(s);
	assert_room_for_one("an expiry");
	finish();
}
END_TEST

START_TEST(test_max_lifetime)
{
	struct session *s;
	char reason[256];

	start(4, 4);
	s = create(60, 1);
	/* Used all along: the lifetime ends it anyway. */
	while (lookup(session_id(s), reason, sizeof(reason)) != SM_GONE) {
		session_touch(s);
		usleep(50 * 1000);
	}
	ck_assert_str_eq(reason, "the session reached its maximum lifetime and was ended");
	session_put(s);
	finish();
}
END_TEST

static double last_used(struct session *s)
{
	double created, used, idle, life;

	session_times(s, &created, &used, &idle, &life);
	return used;
}

/* The workspace's one rule (session/workspace.h): a write by the host is
 * noted whatever came of it, a success counts as use, a removal is no
 * write. */
START_TEST(test_a_file_write_is_noted_and_a_success_is_use)
{
	struct session *s;
	double before;
	int writes;

	start(4, 4);
	s = create(60, 60);
	writes = fake_box_host_writes();
	before = last_used(s);
	usleep(20 * 1000);
	ck_assert_int_eq(session_file_write(s, "a.txt", "x", 1), 0);
	ck_assert_int_eq(fake_box_host_writes(), writes + 1);
	ck_assert(last_used(s) > before);

	before = last_used(s);
	usleep(20 * 1000);
	ck_assert_int_eq(session_file_write(s, "dir/", "x", 1), -EISDIR);
	ck_assert_int_eq(fake_box_host_writes(), writes + 2);
	ck_assert(last_used(s) == before);

	ck_assert_int_eq(session_file_remove(s, "a.txt"), 0);
	ck_assert_int_eq(fake_box_host_writes(), writes + 2);
	ck_assert(last_used(s) > before);
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_a_running_execution_does_not_expire)
{
	struct session *s;
	char reason[256];

	start(4, 4);
	s = create(1, 1);
	ck_assert_int_eq(session_claim(m, s, reason, sizeof(reason)), SM_OK);
	wait_reaper_past_one_second();
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_OK);
	ck_assert(!session_ended(s));
	/* Over, it expires at the reaper's next look. */
	session_release(m, s);
	wait_gone(session_id(s), reason, sizeof(reason));
	session_put(s);
	finish();
}
END_TEST

START_TEST(test_set_lifetime_extends_and_shortens)
{
	struct session *s;
	char reason[256];

	start(4, 4);
	s = create(1, 1);
	ck_assert_int_eq(session_set_lifetime(s, 60, 60, reason, sizeof(reason)), SM_OK);
	/* s outlives its old expiry. */
	wait_reaper_past_one_second();
	ck_assert_int_eq(lookup(session_id(s), reason, sizeof(reason)), SM_OK);
	/* Shortened (the idle timeout kept, as 0 asks): the lifetime counts
	 * from the creation, which is past already. */
	ck_assert_int_eq(session_set_lifetime(s, 0, 1, reason, sizeof(reason)), SM_OK);
	wait_gone(session_id(s), reason, sizeof(reason));
	ck_assert_str_eq(reason, "the session reached its maximum lifetime and was ended");
	session_put(s);
	finish();
}
END_TEST

/* ---- one-shots --------------------------------------------------------- */

START_TEST(test_oneshot_counts_against_both_caps)
{
	struct session *a;
	struct job j;
	char reason[256];
	int fd = cancel_fd();

	start(2, 1);
	a = create(60, 60);
	job_start(&j, NULL, "block", fd);
	fake_box_wait_blocked(1);
	/* a and the one-shot fill max_sessions; the one-shot, max_executions. */
	ck_assert_int_eq(try_create(), SM_CAPACITY);
	ck_assert_int_eq(session_claim(m, a, reason, sizeof(reason)), SM_CAPACITY);
	cancel(fd);
	job_join(&j);
	ck_assert_int_eq(j.r, SM_OK);
	result_release(&j.res);
	/* Over, it gave both back. */
	ck_assert_int_eq(session_claim(m, a, reason, sizeof(reason)), SM_OK);
	session_release(m, a);
	ck_assert_int_eq(try_create(), SM_OK);
	close(fd);
	session_put(a);
	finish();
}
END_TEST

/* With one session and one execution allowed: each way a one-shot can end
 * gives both back, and frees its sandbox. */
START_TEST(test_oneshot_gives_slots_back_on_every_path)
{
	static unsigned char two_mib[2 << 20];
	struct oneshot_file big = { .path = "data.bin", .data = two_mib, .len = sizeof(two_mib) };
	struct oneshot_file dir = { .path = "dir/", .data = two_mib, .len = 1 };
	static const struct {
		const char *what, *code;
		enum { PLAIN, RETURN_FILES, BIG_FILE, BAD_PATH, NO_START, NO_SESSION,
		       NO_EXECUTION } how;
		enum sm_result want;
		const char *err;	/* how it begins */
	} paths[] = {
		{ "a run", "ok", PLAIN, SM_OK, "" },
		{ "a run returning files", "write", RETURN_FILES, SM_OK, "" },
		{ "a runtime that died", "die", PLAIN, SM_OK, "" },
		{ "code refused", "einval", PLAIN, SM_INVALID, BOX_EINVAL_REASON },
		{ "a file over /work", "ok", BIG_FILE, SM_TOO_LARGE,
		  "files[0]: cannot write 'data.bin': " },
		{ "a file that cannot be written", "ok", BAD_PATH, SM_INVALID,
		  "files[0]: cannot write 'dir/': " },
		{ "a sandbox that did not start", "ok", NO_START, SM_START_FAILED,
		  "fake: the sandbox did not start" },
		{ "no session left", "ok", NO_SESSION, SM_CAPACITY, "" },
		{ "no execution left", "ok", NO_EXECUTION, SM_CAPACITY, "" },
	};

	start(1, 1);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct oneshot o = { .limits = cfg.defaults, .ex = exec_of(paths[i].code, -1) };
		struct session *full = NULL;
		struct result res;
		char err[256] = "";
		enum sm_result r;

		o.limits.disk_mb = 1;
		if (paths[i].how == RETURN_FILES)
			o.return_files = true;
		if (paths[i].how == BIG_FILE)
			o.files = &big, o.nfiles = 1;
		if (paths[i].how == BAD_PATH)
			o.files = &dir, o.nfiles = 1;
		if (paths[i].how == NO_START)
			fake_box_fail_starts(true);
		if (paths[i].how == NO_SESSION || paths[i].how == NO_EXECUTION)
			full = create(60, 60);
		if (paths[i].how == NO_EXECUTION)
			ck_assert_int_eq(session_claim(m, full, err, sizeof(err)), SM_OK);
		ck_assert_int_eq(result_init(&res), 0);
		r = smgr_oneshot(m, &o, NULL, &res, err, sizeof(err));
		ck_assert_msg(r == paths[i].want, "%s: %s, not %s", paths[i].what,
			      sm_result_message(r), sm_result_message(paths[i].want));
		ck_assert_msg(!strncmp(err, paths[i].err, strlen(paths[i].err)),
			      "%s: err '%s'", paths[i].what, err);
		if (paths[i].how == RETURN_FILES) {
			json_t *f = json_array_get(res.files, 0);

			ck_assert_str_eq(json_string_value(json_object_get(f, "path")), FAKE_WRITTEN);
			ck_assert_ptr_nonnull(json_object_get(f, "content_base64"));
		}
		result_release(&res);
		fake_box_fail_starts(false);
		if (full) {
			if (paths[i].how == NO_EXECUTION)
				session_release(m, full);
			smgr_delete(m, session_id(full));
			session_put(full);
		}
		assert_room_for_one(paths[i].what);
	}
	finish();
}
END_TEST

/* ---- shutdown ---------------------------------------------------------- */

START_TEST(test_shutdown_with_executions_in_flight)
{
	struct session *a, *b;
	struct job jobs[3];
	struct oneshot o = { .ex = exec_of("ok", -1) };
	struct result res;
	char err[256];
	int started;

	start(4, 4);
	o.limits = cfg.defaults;
	a = create(60, 60);
	b = create(60, 60);
	job_start(&jobs[0], a, "block", -1);
	job_start(&jobs[1], b, "block", -1);
	job_start(&jobs[2], NULL, "block", -1);	/* a one-shot */
	fake_box_wait_blocked(3);

	smgr_shutdown(m);
	/* Every execution in flight ends, killed, saying why. */
	for (int i = 0; i < 3; i++) {
		job_join(&jobs[i]);
		ck_assert_int_eq(jobs[i].r, SM_OK);
		ck_assert_int_eq(jobs[i].res.status, RESULT_KILLED);
		ck_assert_str_eq(jobs[i].res.reason, "the server is shutting down");
		result_release(&jobs[i].res);
	}
	/* Nothing new starts, not even a sandbox to be thrown away. */
	started = fake_box_started();
	ck_assert_int_eq(try_create(), SM_STOPPING);
	ck_assert_int_eq(result_init(&res), 0);
	ck_assert_int_eq(smgr_oneshot(m, &o, NULL, &res, err, sizeof(err)), SM_STOPPING);
	result_release(&res);
	ck_assert_int_eq(fake_box_started(), started);
	session_put(a);
	session_put(b);
	finish();
}
END_TEST

/* A session whose sandbox was starting when the shutdown came is refused,
 * as one asked for after it is, and its sandbox does not wait for
 * smgr_free(). */
START_TEST(test_shutdown_while_a_session_starts)
{
	struct creation c = { 0 };

	start(4, 4);
	fake_box_hold_starts(true);
	ck_assert_int_eq(pthread_create(&c.thread, NULL, create_main, &c), 0);
	fake_box_wait_held(1);
	smgr_shutdown(m);
	fake_box_hold_starts(false);
	ck_assert_int_eq(pthread_join(c.thread, NULL), 0);
	ck_assert_int_eq(c.r, SM_STOPPING);
	ck_assert_ptr_null(c.s);
	ck_assert_uint_eq(smgr_count(m), 0);
	fake_box_wait_all_freed();
	finish();
}
END_TEST

static Suite *session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("fake box");

	/* The expiry tests wait for the reaper (a 500 ms tick); valgrind is
	 * slow. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_create_starts_on_a_spawner_thread);
	tcase_add_test(tc, test_max_sessions);
	tcase_add_test(tc, test_max_executions);
	tcase_add_test(tc, test_busy);
	tcase_add_test(tc, test_interrupt_and_restart);
	tcase_add_test(tc, test_invalid_code_keeps_the_session);
	tcase_add_test(tc, test_delete);
	tcase_add_test(tc, test_processes);
	tcase_add_test(tc, test_died_during_an_execution);
	tcase_add_test(tc, test_died_between_executions);
	tcase_add_test(tc, test_upload_over_memory_ends_the_session);
	tcase_add_test(tc, test_idle_timeout);
	tcase_add_test(tc, test_max_lifetime);
	tcase_add_test(tc, test_a_running_execution_does_not_expire);
	tcase_add_test(tc, test_set_lifetime_extends_and_shortens);
	tcase_add_test(tc, test_oneshot_counts_against_both_caps);
	tcase_add_test(tc, test_oneshot_gives_slots_back_on_every_path);
	tcase_add_test(tc, test_shutdown_with_executions_in_flight);
	tcase_add_test(tc, test_shutdown_while_a_session_starts);
	tcase_add_test(tc, test_a_file_write_is_noted_and_a_success_is_use);
	suite_add_tcase(s, tc);
	return s;
}

/* Its own binary (the fake replaces runtime/box.c, which the other suites'
 * binary links): see the Makefile's unit target. */
int main(void)
{
	SRunner *sr = srunner_create(session_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
