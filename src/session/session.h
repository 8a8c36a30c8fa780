/* session — the table of live sessions: one sandbox (box) each, where
 * variables, imports and files persist between executions until the
 * session is deleted, expires, or dies.
 *
 * Threads.  Any thread may call these functions.  The table has one lock;
 * each session has its own lock and a busy flag, so a slow execution holds
 * only its own session.  Sessions are reference-counted: smgr_lookup() and
 * smgr_create() hand out a reference that the caller drops with
 * session_put(); a deleted session's sandbox is killed at once and freed
 * with its last reference.  Cold sandboxes are spawned by long-lived
 * spawner threads (PR_SET_PDEATHSIG follows the thread that spawned, see
 * jail.h); docs/architecture.md lists every thread and the lock order.
 *
 * Ended sessions leave a tombstone for an hour so that later calls learn
 * why (expired, died of OOM...) instead of a bare "not found". */
#ifndef PETRI_SESSION_H
#define PETRI_SESSION_H

#include <jansson.h>
#include <stdbool.h>

#include "config/config.h"
#include "exec/request.h"
#include "jail/jail.h"
#include "record/record.h"
#include "exec/exec.h"
#include "exec/result.h"

struct smgr;
struct session;

/* "ses_" NODE "-" 32 hex digits, at most (util/ids.h). */
#define SESSION_ID_LEN ID_LEN("ses", 32)

struct session_params {
	const char *language;		/* default language of executions */
	struct petri_limits limits;	/* checked against the maximum already */
	double idle_timeout_s;
	double max_lifetime_s;
	const char *const *env;		/* extra "NAME=value", NULL-terminated */
	/* The API key that asked: 1 + its index in cfg->api_keys; 0: none (no
	 * keys, or petri's own).  With several keys, each may hold at most its
	 * share (config_share_of) of max_sessions and of the host's tasks. */
	int key;
	/* The first sandbox of a client's session that exists already (an
	 * MCP session's, made on its first call): taken while the node
	 * drains, as its sessions run on. */
	bool continues;
	/* What its code may reach (net/policy.h), checked against what the
	 * operator lets a client ask already; NULL: the operator's default. */
	const struct net_policy *network;
};

/* What the session manager answers.  Front ends map each to their own
 * words (an HTTP status, an MCP error text, an exit status); the sentence
 * of sm_result_message() fits any of them. */
enum sm_result {
	SM_OK = 0,
	SM_NOT_FOUND,		/* no such session (or deleted) */
	SM_GONE,		/* expired or died: see the reason */
	SM_BUSY,		/* an execution is running */
	SM_CAPACITY,		/* session or execution cap reached */
	SM_STOPPING,		/* the server is shutting down */
	SM_START_FAILED,	/* the sandbox did not start: see err */
	SM_INVALID,		/* the request cannot run: see err */
	SM_TOO_LARGE,		/* a file does not fit in /work: see err */
	SM_NO_MEMORY,		/* the daemon is out of memory */
	SM_NO_PROCESS,		/* the session has no such process */
	SM_PROTECTED,		/* the process is petri's own: see the reason */
	SM_HOST_FULL,		/* the host's process table has no room for its
				 * pids now (tables.h) */
	SM_KEY_SHARE,		/* its API key holds its share of the sandboxes
				 * or of the host's processes */
	SM_DRAINING,		/* the node takes no new sessions (smgr_drain) */
};

/* A sentence for r, for when there is no reason more precise. */
const char *sm_result_message(enum sm_result r);
/* The error code clients read for r (the HTTP API's, petri run --json's). */
const char *sm_result_code(enum sm_result r);

int smgr_new(const struct petri_config *cfg, struct jail_host *host,
	     struct smgr **out, char *err, size_t errlen);
/* Has smgr_shutdown() begun? */
bool smgr_stopping(struct smgr *m);
/* Kill every sandbox, stop the threads, free. */
void smgr_free(struct smgr *m);

/* A new session.  SM_CAPACITY, SM_STOPPING, or SM_START_FAILED with
 * err. */
enum sm_result smgr_create(struct smgr *m, const struct session_params *p,
		struct session **out, char *err, size_t errlen);
/* Find a session.  SM_NOT_FOUND, or SM_GONE with the reason. */
enum sm_result smgr_lookup(struct smgr *m, const char *id, struct session **out,
		char *reason, size_t reasonlen);
/* SM_OK, or SM_NOT_FOUND (never existed, ended or deleted already). */
enum sm_result smgr_delete(struct smgr *m, const char *id);
/* Refuse new sessions and kill every sandbox now (executions in flight end
 * as killed); smgr_free() later frees what is left. */
void smgr_shutdown(struct smgr *m);
/* Draining (on): take no new session or one-shot (SM_DRAINING), while the
 * live sessions run on, until smgr_drain(m, false) (docs/cluster.md). */
void smgr_drain(struct smgr *m, bool on);
bool smgr_draining(struct smgr *m);
json_t *smgr_list_json(struct smgr *m);
/* What the sandboxes have (session/probe.h: GET /v1/languages's answer, a
 * new reference): from what an earlier start found when that is still
 * true (found.json in the state directory), else the first call starts
 * finding out, in the background; each waits at most wait_s for it.
 * wait_s < 0: what is known now, starting nothing (tools/list). */
json_t *smgr_found(struct smgr *m, double wait_s);
size_t smgr_count(struct smgr *m);

/* Start the warm path (session/pool.h) in the background, once; nothing
 * when [sessions] warm is off.  smgr_new() does not: petri serve calls it
 * at once, petri mcp and petri ask once their client is there, so that
 * the template's imports do not compete with answering it. */
void smgr_warm_start(struct smgr *m);

/* What /healthz says, read without a lock the slow paths hold (atomics):
 * warm is "off" (warm = false, or not started), "starting", "ready" or
 * "failed" (every sandbox starts cold, a retry may still succeed); pool,
 * the warm sandboxes ready; sessions, the live ones; max_sessions, the
 * cap; draining (smgr_drain); stopping (smgr_shutdown has begun). */
struct smgr_health {
	const char *warm;
	const char *light;	/* the light template's state, as warm's */
	size_t pool, sessions, max_sessions;
	bool draining, stopping;
};
void smgr_health(struct smgr *m, struct smgr_health *h);
/* Does every sandbox get cgroups of its own?  false: its limits are
 * rlimits (docs/security.md), for want of cgroups this process may use. */
bool smgr_cgroups(struct smgr *m);

void session_put(struct session *s);
/* Another reference to s (for work that outlives the caller's). */
struct session *session_ref(struct session *s);
json_t *session_json(struct session *s);
const char *session_id(const struct session *s);
const char *session_language(const struct session *s);
const struct petri_limits *session_limits(const struct session *s);

/* Claim the session for one execution: SM_BUSY if one is running,
 * SM_NOT_FOUND if it was deleted, SM_GONE if it died (reason), SM_CAPACITY
 * over the execution cap.  A claim must be followed by exactly one
 * session_run() or session_release(). */
enum sm_result session_claim(struct smgr *m, struct session *s, char *reason,
			     size_t reasonlen);
/* Run code in a claimed session and release the claim: SM_OK with res
 * filled (whatever the code did: res->status says), SM_GONE if the sandbox
 * had died (reason), SM_INVALID for code the runtime refuses, SM_NO_MEMORY.
 * If the execution kills the runtime, the session is dead from then on
 * (later calls get SM_GONE). */
enum sm_result session_run(struct smgr *m, struct session *s, const struct exec_request *ex,
			   const struct exec_events *ev, struct result *res, char *reason,
			   size_t reasonlen);
/* Interrupt the session's execution in progress, if any, as a timeout
 * does (box_interrupt(): SIGINT, the session kept when the code stops);
 * *running says whether one was.  Counts as use.  SM_OK, SM_NOT_FOUND
 * (deleted) or SM_GONE with the reason. */
enum sm_result session_interrupt(struct session *s, bool *running, char *reason,
				 size_t reasonlen);
/* Restart the session's runtime (box_restart(): a fresh interpreter in
 * the same sandbox; /work kept, variables and processes gone), as a
 * notebook restarts its kernel.  It claims the session as an execution
 * does; one in progress is interrupted first and waited for a few seconds.
 * SM_OK; SM_BUSY (it did not end), SM_NOT_FOUND, SM_GONE (dead before, or
 * the runtime did not come back: then the session is dead, reason says
 * why), SM_CAPACITY, SM_NO_MEMORY. */
enum sm_result session_restart(struct smgr *m, struct session *s, char *reason,
			       size_t reasonlen);
/* Give a claim back without running anything. */
void session_release(struct smgr *m, struct session *s);
/* session_claim() then session_run(). */
enum sm_result session_exec(struct smgr *m, struct session *s, const struct exec_request *ex,
			    const struct exec_events *ev, struct result *res,
			    char *reason, size_t reasonlen);

/* What the execution record holds for a session (record_list() in
 * record.h): an array, oldest first, at most limit entries before seq
 * `before` (0: any) and RECORD_LIST_MAX bytes, *truncated when that bound
 * left older ones out; NULL when out of memory. */
json_t *smgr_executions(struct smgr *m, const char *id, int limit, int64_t before,
			bool *truncated);
/* A listing of the record as JSON text (record_list_text()): one
 * session's, the whole record's or the one-shot runs', bounded and
 * cancelled as record.h says.  0 or -errno. */
int smgr_list_executions(struct smgr *m, const struct record_query *q, struct buf *out,
			 bool *truncated);
/* Watch what the record commits (record_on_add(): fn under the record's
 * lock, NULL to stop). */
void smgr_on_record(struct smgr *m, record_hook fn, void *arg);
/* Watch sessions come and go, whichever front end made or ended them:
 * fn(arg, id, state, reason) with state "created" or "deleted" (reason
 * NULL), or "ended" (expired or died: the reason later calls are told).  Called
 * under the manager's lock: fn must not call back into m.  NULL stops. */
typedef void (*session_hook)(void *arg, const char *id, const char *state,
			     const char *reason);
void smgr_on_session(struct smgr *m, session_hook fn, void *arg);

/* The record itself, for what reads it in pages (record/export.h); it
 * lives as long as m. */
struct record *smgr_record(struct smgr *m);

/* File access, for the session layer's own session/workspace.c (front ends
 * call that): the workspace fd, the host ids files must belong to, and the
 * sandbox (whose cgroups an archive's writer is charged to).  Calls are
 * serialized with executions only by the kernel: reads and writes of /work
 * while code runs see whatever the code does. */
int session_work_fd(struct session *s);
void session_file_owner(struct session *s, uid_t *uid, gid_t *gid);
struct jail *session_jail(struct session *s);
/* The processes the session's code left running (every process of its
 * sandbox but pid 1 and the driver, runtime/processes.h), and a signal to
 * one of them by its pid inside.  Neither claims the session: they work
 * while an execution runs, and count as use.  SM_OK (with *out, a new
 * reference), SM_NOT_FOUND (deleted), SM_GONE (reason), SM_NO_PROCESS,
 * SM_PROTECTED (pid 1 or the driver: reason says which), SM_INVALID (the
 * sandbox's processes cannot be seen: reason), SM_NO_MEMORY. */
enum sm_result session_processes(struct session *s, json_t **out, char *reason,
				 size_t reasonlen);
enum sm_result session_signal_process(struct session *s, int pid, int sig, char *reason,
				      size_t reasonlen);
/* A request that waits on the session's sandbox beyond an execution (a
 * read of a command that waits, a request to one of its ports) holds a
 * worker, or an MCP session's call, as an execution does: at most half the
 * workers beside max_executions may at once, each API key its share of
 * them (the session's key's).  False: none left; else end it with
 * session_wait_end(). */
bool session_wait_begin(struct session *s);
void session_wait_end(struct session *s);
/* A connection to a server the session's code runs, at 127.0.0.1:port as
 * its sandbox has it (jail_connect()); counts as use.  SM_OK with *fd
 * (non-blocking, its connect possibly in progress); SM_NO_PROCESS (nothing
 * listens there), SM_CAPACITY (the sandbox's pids limit), SM_GONE,
 * SM_NOT_FOUND, SM_START_FAILED; why in reason. */
enum sm_result session_connect(struct session *s, unsigned short port, int *fd,
			       char *reason, size_t reasonlen);
/* Mark the session used now (workspace.c: file transfers count as use). */
void session_touch(struct session *s);
/* When the session was created (seconds since the epoch), last used, and
 * its timeouts now. */
void session_times(struct session *s, double *created, double *last_used,
		   double *idle_timeout_s, double *max_lifetime_s);
/* What the session's sandbox uses now: its CPU time since it started, its
 * memory (its cgroup's; 0 where there is none), and its /work's bytes
 * used and size.  0, or -errno when its cgroup cannot be read. */
struct session_usage {
	uint64_t cpu_ns;
	uint64_t memory_bytes;
	uint64_t work_used_bytes, work_total_bytes;
	/* Through its network (net/router.h), since its link was made; 0
	 * without one. */
	uint64_t net_sent_bytes, net_received_bytes;
};
int session_usage(struct session *s, struct session_usage *u);
/* Change a live session's timeouts (a value <= 0 keeps the current one;
 * the caller checked them against the configuration's maxima) and mark it
 * used now, under the lock the reaper decides expiry under: a session
 * expired already stays expired.  max_lifetime_s counts from the session's
 * creation, so a shorter one may end the session at the reaper's next
 * look.  SM_OK, SM_NOT_FOUND (deleted) or SM_GONE with the reason. */
/* A new network policy for a live session (asked, already checked against
 * what the operator lets a client ask; NULL: the operator's default): none
 * removes its link, anything else makes one or changes its rules.  SM_OK;
 * SM_GONE with the reason; SM_START_FAILED or SM_CAPACITY with the reason,
 * the session's network then as it was (or, where its new resolver did not
 * start, its names unresolved). */
enum sm_result session_set_network(struct session *s, const struct net_policy *asked,
				   char *reason, size_t reasonlen);
enum sm_result session_set_lifetime(struct session *s, double idle_timeout_s,
				    double max_lifetime_s, char *reason, size_t reasonlen);
/* Has the session ended (deleted, expired, died)?  Then whatever a
 * reference still holds of its sandbox (an open file of its /work) must be
 * let go: it is no longer counted against max_sessions. */
bool session_ended(struct session *s);
/* Was it deleted (smgr_delete(): a client's DELETE, E2B's kill)?  A
 * session never expires under an execution, so an execution whose session
 * was deleted was cut short by that. */
bool session_deleted(struct session *s);
/* Files were just written into the session's /work by the host
 * (workspace.c, uploads, archives): box_note_host_write(). */
void session_note_write(struct session *s);

/* An upload into the session's /work, streamed (see files_sink_* in
 * src/workspace/files.h): written by a process charged to the session's
 * cgroups, so the file counts against the session's memory and pids limits,
 * never the daemon's.  path is checked with files_check_path() already.
 * begin: as files_sink_begin() (it does not wait for the writer; meta,
 * NULL for none, is the new file's metadata); the
 * upload holds a reference to s.  write:
 * the next bytes.  finish: commit or abort, then frees up; 0 or -errno
 * (-ENOSPC: /work is full; -ENOMEM: over the session's memory limit, or the
 * session was killed meanwhile; then *ended says whether the kernel killed
 * the session's processes for the upload's memory, which ended the session). */
struct session_upload;
struct files_meta;
int session_upload_begin(struct smgr *m, struct session *s, const char *path,
			 const struct files_meta *meta, struct session_upload **out);
int session_upload_write(struct session_upload *up, const void *data, size_t len);
/* The same without waiting (files_sink_offer), and the descriptor to wait
 * on, writable when more is taken. */
int session_upload_offer(struct session_upload *up, const void *data, size_t len,
			 size_t *taken);
int session_upload_fd(const struct session_upload *up);
int session_upload_finish(struct session_upload *up, bool commit, bool *ended);
/* Abort without waiting for the sandbox (files_sink_cancel), then reap
 * until true, which frees up: when session_upload_exit_fd() is readable,
 * or now and then when it is -1. */
void session_upload_cancel(struct session_upload *up);
int session_upload_exit_fd(const struct session_upload *up);
bool session_upload_reap(struct session_upload *up);

/* Extract an archive that an upload left in the session's /work (archive:
 * a EXEC_ARCHIVE_PREFIX name, removed whatever happens) into dest (checked
 * with files_check_path(); "": /work), all or nothing, by the session's own
 * driver inside its limits (docs/api.md#archives).  It claims the session as
 * an execution does (SM_BUSY, SM_GONE...) and is not recorded.  SM_OK with
 * *summary (a new reference: format, entries, files, directories, links,
 * bytes); SM_INVALID (a refused or broken archive) or SM_TOO_LARGE (over a
 * cap: entries, bytes, expansion, memory, time) with why in err. */
enum sm_result session_unpack(struct smgr *m, struct session *s, const char *archive,
			      const char *dest, json_t **summary, char *err, size_t errlen);

/* A one-shot (request.h): a fresh sandbox with the request's limits, its
 * files written into /work, one execution, and then the sandbox is gone.
 * It takes an execution slot and counts against the session cap while it
 * lives; it is recorded under no session.  SM_OK with res filled (and, with
 * return_files, each file written that is asked for carries
 * "content_base64" and "truncated": false, or "truncated": true and a
 * "reason" when over a cap or unreadable), SM_CAPACITY, SM_STOPPING,
 * SM_START_FAILED, SM_INVALID or SM_TOO_LARGE (a file in: err says which),
 * SM_NO_MEMORY. */
struct oneshot;
enum sm_result smgr_oneshot(struct smgr *m, const struct oneshot *o,
			    const struct exec_events *ev, struct result *res, char *err,
			    size_t errlen);

#endif
