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
#include "jail/jail.h"
#include "record/record.h"
#include "runtime/box.h"
#include "runtime/result.h"

struct smgr;
struct session;

#define SESSION_ID_LEN 36	/* "ses_" + 32 hex digits */

struct session_params {
	const char *language;		/* default language of executions */
	struct petri_limits limits;	/* checked against the maximum already */
	double idle_timeout_s;
	double max_lifetime_s;
	const char *const *env;		/* extra "NAME=value", NULL-terminated */
};

/* Errors beyond plain errnos, for the API to map to statuses. */
#define SM_ENOTFOUND	(-ENOENT)	/* no such session (or deleted) */
#define SM_EGONE	(-ESHUTDOWN)	/* expired or died: see the reason */
#define SM_EBUSY	(-EBUSY)	/* an execution is running */
#define SM_ECAPACITY	(-EAGAIN)	/* session or execution cap reached */
#define SM_ESTOPPING	(-ECANCELED)	/* the server is shutting down */

int smgr_new(const struct petri_config *cfg, struct jail_host *host,
	     struct smgr **out, char *err, size_t errlen);
/* Kill every sandbox, stop the threads, free. */
void smgr_free(struct smgr *m);

/* A new session.  SM_ECAPACITY, or -EIO with err when the sandbox failed
 * to start. */
int smgr_create(struct smgr *m, const struct session_params *p,
		struct session **out, char *err, size_t errlen);
/* Find a session.  SM_ENOTFOUND, or SM_EGONE with the reason. */
int smgr_lookup(struct smgr *m, const char *id, struct session **out,
		char *reason, size_t reasonlen);
int smgr_delete(struct smgr *m, const char *id);
/* Refuse new sessions and kill every sandbox now (executions in flight end
 * as killed); smgr_free() later frees what is left. */
void smgr_shutdown(struct smgr *m);
json_t *smgr_list_json(struct smgr *m);
size_t smgr_count(struct smgr *m);

void session_put(struct session *s);
/* Another reference to s (for work that outlives the caller's). */
struct session *session_ref(struct session *s);
json_t *session_json(struct session *s);
const char *session_id(const struct session *s);
const char *session_language(const struct session *s);
const struct petri_limits *session_limits(const struct session *s);

/* Claim the session for one execution: SM_EBUSY if one is running,
 * SM_EGONE if the session died (reason), SM_ECAPACITY over the execution
 * cap.  A claim must be followed by exactly one session_run(). */
int session_claim(struct smgr *m, struct session *s, char *reason, size_t reasonlen);
/* Run code in a claimed session and release the claim; as box_exec().  If
 * the execution kills the runtime, the session is dead from then on (later
 * calls get SM_EGONE). */
int session_run(struct smgr *m, struct session *s, const struct box_exec *ex,
		const struct box_events *ev, struct result *res);
/* Give a claim back without running anything. */
void session_release(struct smgr *m, struct session *s);
/* session_claim() then session_run(). */
int session_exec(struct smgr *m, struct session *s, const struct box_exec *ex,
		 const struct box_events *ev, struct result *res,
		 char *reason, size_t reasonlen);

/* Count a finished execution in the metrics (by status, duration) and add
 * it to the execution record; session NULL for a one-shot run. */
void smgr_finished(struct smgr *m, struct session *s, const struct box_exec *ex,
		   const struct petri_limits *lim, double started_at,
		   const struct result *res);

/* What the execution record holds for a session (record_list() in
 * record.h): an array, oldest first, at most limit entries before seq
 * `before` (0: any) and RECORD_LIST_MAX bytes, *truncated when that bound
 * left older ones out; NULL when out of memory. */
json_t *smgr_executions(struct smgr *m, const char *id, int limit, int64_t before,
			bool *truncated);
/* The whole record, every session's executions and the one-shot runs (or
 * only those: RECORD_ONESHOTS), NEWEST first, each naming its session
 * (null for a one-shot); bounds as above (record_list_all()). */
json_t *smgr_all_executions(struct smgr *m, enum record_scope scope, int limit,
			    int64_t before, bool *truncated);

/* File access: the workspace fd and the host ids files must belong to.
 * Calls are serialized with executions only by the kernel: reads and
 * writes of /work while code runs see whatever the code does. */
int session_work_fd(struct session *s);
void session_file_owner(struct session *s, uid_t *uid, gid_t *gid);
/* Mark the session used now (file transfers count as use). */
void session_touch(struct session *s);
/* Change a live session's timeouts (a value <= 0 keeps the current one;
 * the caller checked them against the configuration's maxima) and mark it
 * used now, under the lock the reaper decides expiry under: a session
 * expired already stays expired.  max_lifetime_s counts from the session's
 * creation, so a shorter one may end the session at the reaper's next
 * look.  0, SM_ENOTFOUND (deleted) or SM_EGONE with the reason. */
int session_set_lifetime(struct session *s, double idle_timeout_s, double max_lifetime_s,
			 char *reason, size_t reasonlen);
/* Has the session ended (deleted, expired, died)?  Then whatever a
 * reference still holds of its sandbox (an open file of its /work) must be
 * let go: it is no longer counted against max_sessions. */
bool session_ended(struct session *s);
/* Files were just written into the session's /work by the API. */
void session_note_write(struct session *s);

/* An upload into the session's /work, streamed (see files_sink_* in
 * src/runtime/files.h): written by a process charged to the session's
 * cgroups, so the file counts against the session's memory and pids limits,
 * never the daemon's.  path is checked with files_check_path() already.
 * begin: as files_sink_begin() (it does not wait for the writer); the
 * upload holds a reference to s.  write:
 * the next bytes.  finish: commit or abort, then frees up; 0 or -errno
 * (-ENOSPC: /work is full; -ENOMEM: over the session's memory limit, or the
 * session was killed meanwhile). */
struct session_upload;
int session_upload_begin(struct smgr *m, struct session *s, const char *path,
			 struct session_upload **out);
int session_upload_write(struct session_upload *up, const void *data, size_t len);
/* The same without waiting (files_sink_offer), and the descriptor to wait
 * on, writable when more is taken. */
int session_upload_offer(struct session_upload *up, const void *data, size_t len,
			 size_t *taken);
int session_upload_fd(const struct session_upload *up);
int session_upload_finish(struct session_upload *up, bool commit);
/* Abort without waiting for the sandbox (files_sink_cancel), then reap
 * until true, which frees up: when session_upload_exit_fd() is readable,
 * or now and then when it is -1. */
void session_upload_cancel(struct session_upload *up);
int session_upload_exit_fd(const struct session_upload *up);
bool session_upload_reap(struct session_upload *up);

/* A one-shot sandbox: created, used once and destroyed by the caller with
 * smgr_oneshot_end().  Counts against the session cap while it lives. */
int smgr_oneshot_begin(struct smgr *m, const struct petri_limits *lim,
		       struct box **out, char *err, size_t errlen);
void smgr_oneshot_end(struct smgr *m, struct box *b);
/* Before smgr_oneshot_end(): put the content of the files the execution
 * wrote (files, the result's array of {"path", "size"}) inline, read as the
 * sandbox's user like a download.  Those whose path matches one of the
 * patterns (fnmatch(3) without flags, relative to /work; NULL: every file)
 * gain "content_base64", "truncated": false; one over max_return_file_kb,
 * past max_return_files_mb with the others, or unreadable gains
 * "truncated": true and a "reason" instead.  0 or -ENOMEM. */
int smgr_oneshot_files(const struct smgr *m, struct box *b, json_t *files,
		       const char *const *patterns, size_t npatterns);
/* The same with the caps given (petri run --save-dir: the workspace's size). */
int session_box_files(struct box *b, json_t *files, const char *const *patterns,
		      size_t npatterns, uint64_t per_file, uint64_t total);
/* Take an execution slot (SM_ECAPACITY when none) and give it back. */
int smgr_exec_slot_take(struct smgr *m);
void smgr_exec_slot_give(struct smgr *m);

/* Fill a box_config from limits and the operator's binds; the caller sets
 * bc->env. */
void smgr_box_config(const struct smgr *m, const struct petri_limits *lim,
		     struct box_config *bc);

#endif
