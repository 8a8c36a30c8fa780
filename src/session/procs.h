/* procs — a session's processes beside its interpreter: commands a client
 * starts that run while code runs and while other commands run, each with
 * its own stdin, stdout and stderr, followed by any number of clients (up
 * to PROC_SINKS_MAX) from its start to its end.
 *
 * The sandbox's keeper starts each (box_spawn(), docs/protocol.md: as the
 * sandbox's code would, same user, limits and filter); the daemon holds its
 * pipes.  One thread of the daemon, the pump, reads every process's output
 * as it comes and hands each chunk to the clients following it, and learns
 * each end (the keeper's "exit", or the sandbox's end); nobody following:
 * the output is dropped, never kept.  What a client cannot take at once is
 * its own to bound (the stream's cap, api/stream.c).
 *
 * Bounds: PROCS_PER_SESSION live processes per session, PROCS_MAX in the
 * daemon (four descriptors each), PROC_INPUT_MAX bytes of stdin per call.
 * A process ends with its session (the sandbox's end), with a restart of
 * the interpreter (the keeper kills every process of the sandbox then), at
 * its deadline (killed), or by a signal a client sends.
 *
 * Threads: any, holding a reference to the session; the sinks are called
 * on the pump's thread and must not block nor call back into this file
 * for the same process. */
#ifndef PETRI_PROCS_H
#define PETRI_PROCS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/exec.h"
#include "session/session.h"

#define PROCS_PER_SESSION 32
#define PROCS_MAX 1024
#define PROC_SINKS_MAX 8
#define PROC_INPUT_MAX (1u << 20)
#define PROC_TAG_MAX 256

/* What to start. */
struct proc_spec {
	const char *const *argv;	/* NULL-terminated; argv[0] looked up on PATH */
	const char *const *env;		/* "NAME=value" over the sandbox's; NULL: none */
	const char *cwd;		/* absolute, as the sandbox names it */
	bool stdin;			/* keep stdin open for proc_input(); else EOF */
	const char *tag;		/* a client's name for it, or NULL */
	double timeout_s;		/* killed after it; 0: lives with the session */
	json_t *config;			/* what List shows of it (a reference is taken) */
	/* On a terminal of the sandbox's (its controlling one, stdin, stdout
	 * and stderr): its output comes as EXEC_STDOUT, input goes to it. */
	bool pty;
	unsigned short rows, cols;
};

/* How a process ended. */
struct proc_end {
	bool exited;		/* with code; else by signal (or the sandbox ended) */
	int code;
	int signal;		/* 0 when exited */
	bool timed_out;		/* killed at its deadline */
	bool lost;		/* the sandbox (or its keeper) ended first */
};

struct proc;

/* A client following a process. */
struct proc_sink {
	/* Optional: the process started (session_proc_start(), on its
	 * caller's thread, before any output), p borrowed (proc_ref()). */
	void (*start)(void *ctx, struct proc *p);
	void (*output)(void *ctx, enum exec_stream s, const char *data, size_t len);
	/* After the last output; the sink is dropped then. */
	void (*end)(void *ctx, const struct proc_end *e);
	void *ctx;
	/* It keeps the output for a client to read later (commands.h): what
	 * it takes is not use of the session, as a client's reading is. */
	bool keeps;
};

/* Start spec in s, followed by sink from its first byte (sink NULL: none
 * yet).  SM_OK with *out (a reference, for proc_put()) and its pid; else
 * why in reason: SM_CAPACITY (PROCS_PER_SESSION or PROCS_MAX), SM_INVALID
 * (no such cwd, a string not UTF-8), SM_GONE or SM_NOT_FOUND (the session
 * ended), SM_NO_MEMORY, SM_START_FAILED (anything else). */
enum sm_result session_proc_start(struct session *s, const struct proc_spec *spec,
				  const struct proc_sink *sink, struct proc **out,
				  char *reason, size_t reasonlen);

/* A live process of s by pid (tag NULL) or by tag: a reference, or NULL. */
struct proc *session_proc_find(struct session *s, int pid, const char *tag);

/* s's live processes: [{"pid", "tag"?, "config"}], a new reference. */
json_t *session_proc_list(struct session *s);

/* Follow p with sink from now on: 0; -ESRCH once it ended, -ENOSPC when
 * PROC_SINKS_MAX follow it.  unfollow: by the sink's ctx; after it returns
 * the sink is never called again (false: it was not following, or its end
 * was called already). */
int proc_follow(struct proc *p, const struct proc_sink *sink);
bool proc_unfollow(struct proc *p, void *ctx);

/* Write data to p's stdin, waiting at most timeout_s (on the caller's
 * worker: keep it short) for room, *written bytes of it: 0; -EPIPE
 * (closed, or not kept open), -ETIMEDOUT (it did not read it all), -E2BIG
 * (over PROC_INPUT_MAX).  close: end of file for it; 0 or -EPIPE. */
int proc_input(struct proc *p, const void *data, size_t len, double timeout_s,
	       size_t *written);
int proc_close_input(struct proc *p);

/* Send sig to p: 0 or -ESRCH (it ended). */
int proc_signal(struct proc *p, int sig);
/* A terminal's new size: 0; -ENOTTY (p has none), -ESRCH (it ended). */
int proc_resize(struct proc *p, unsigned short rows, unsigned short cols);
bool proc_is_pty(const struct proc *p);

int proc_pid(const struct proc *p);
struct proc *proc_ref(struct proc *p);
void proc_put(struct proc *p);

/* ---- the session layer's own --------------------------------------------- */

struct procs_hub;
struct box_spawn;
struct box_proc;
int procs_hub_new(struct procs_hub **out);
/* Ends every process still followed ("lost"), stops the pump, frees. */
void procs_hub_free(struct procs_hub *h);
/* In session.c: the session's hub (its manager's); box_spawn() through the
 * session's box, -ENOTCONN or -EPIPE when it ended. */
struct procs_hub *session_procs_hub(struct session *s);
/* In session.c: s's API key (0: none counted apart, one key or none) and
 * its share of total (total itself then). */
int session_key_of(struct session *s, size_t total, size_t *share);
int session_spawn(struct session *s, const struct box_spawn *sp, struct box_proc *out);
int session_open_pty(struct session *s, int *master, int *slave);

#endif
