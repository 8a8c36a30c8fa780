/* commands — processes a client starts to come back to: a dev server, a
 * build, a test watcher, started through the HTTP API or MCP and read later
 * (E2B's front end follows its processes as streams instead: procs.h).
 *
 * A command is a process of procs.h whose output the session keeps: the
 * latest CMD_KEPT_BYTES of its stdout and of its stderr, from its start
 * until the session ends.  One that ended stays readable, its end and the
 * last of its output, until CMD_ENDED_KEPT later commands of its session
 * have ended too.  A command runs beside the interpreter and beside other
 * commands, and ends as every process does (procs.h): by itself, at its
 * deadline, by a signal (session_signal_process()), with a restart of the
 * interpreter, or with the session.
 *
 * Offsets count every byte a stream ever wrote: a reader asks from where it
 * got to and learns how much it missed (older than what is kept), so that a
 * follower reading in a loop never sees a byte twice nor misses one
 * without being told.
 *
 * Bounds: as processes (PROCS_PER_SESSION, PROCS_MAX); kept output grows as
 * the command writes, up to 2 * CMD_KEPT_BYTES; CMD_ENDED_KEPT ended ones
 * per session; a read waits at most CMD_WAIT_MAX_S.
 *
 * Threads: any, holding a reference to the session.  A read that waits
 * blocks its caller (a worker): it ends early when the session ends. */
#ifndef PETRI_COMMANDS_H
#define PETRI_COMMANDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "session/procs.h"
#include "session/session.h"

#define CMD_KEPT_BYTES (64u << 10)
#define CMD_ENDED_KEPT 8
#define CMD_WAIT_MAX_S 60.0
/* A read's offset: where the last read of this command got to. */
#define CMD_UNREAD UINT64_MAX

/* Start the command c asks for (exec/request.h) in s, described to every
 * read and listing as request_command_json() shows it: SM_OK with *pid,
 * else as session_proc_start(). */
enum sm_result session_command_start(struct session *s, const struct command_request *c,
				     int *pid, char *reason, size_t reasonlen);

struct command_read {
	/* stdout's, stderr's offsets, or CMD_UNREAD: where the last read
	 * with CMD_UNREAD got to (which only those move) */
	uint64_t from[2];
	double wait_s;		/* at most (capped at CMD_WAIT_MAX_S) ... */
	bool until_end;		/* ... for the command's end; false: for output
				 * past from (a whole character), or its end */
	/* Optional: the reader is gone (its client hung up, cancelled): it
	 * waits no more.  Asked every WAIT_SLICE_S. */
	bool (*gone)(void *ctx);
	void *gone_ctx;
};

/* The command pid of s (the latest of that pid) with its output from
 * rd->from (JSON, docs/api.md's Command): SM_OK with *out; SM_NO_PROCESS
 * (no such command kept), SM_CAPACITY (it would wait, and the session's
 * key or the daemon has as many reads waiting as it may:
 * session_wait_begin()), SM_NO_MEMORY. */
enum sm_result session_command_read(struct session *s, int pid, const struct command_read *rd,
				    json_t **out, char *reason, size_t reasonlen);

/* Input to s's process pid (a command, or any process petri started with
 * its stdin open): data, then its end of file when close_after, waiting at
 * most CMD_INPUT_WAIT_S for it to read.  0 with *written; -E2BIG (over
 * PROC_INPUT_MAX), -ESRCH (no such process running), -EPIPE (its stdin is
 * closed), -ETIMEDOUT (it took *written of it), -errno.  Counts as use. */
#define CMD_INPUT_WAIT_S 0.5
int session_command_input(struct session *s, int pid, const void *data, size_t len,
			  bool close_after, size_t *written);

/* s's commands kept, newest first, without their output: a new reference,
 * or NULL when out of memory. */
json_t *session_command_list(struct session *s);

/* ---- the session layer's own --------------------------------------------- */

struct commands;
struct commands *commands_new(void);
/* In session.c: s's set, made on first use (NULL: out of memory). */
struct commands *session_commands(struct session *s);
/* With the session, after every process of it ended. */
void commands_free(struct commands *c);


#endif
