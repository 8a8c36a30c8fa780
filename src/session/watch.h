/* watch — a directory of a session's sandbox watched for changes: each file
 * or directory made, written, removed, renamed or changed in its mode,
 * told as it happens to the client that asked (E2B's watchDir), with its
 * name relative to the watched directory.
 *
 * One inotify instance serves every watch of the daemon, and one thread
 * reads it.  A directory is watched as the sandbox's user, found as every
 * file of the session is (session/workspace.h: /work, /tmp, /dev/shm, no
 * link planted by the code leading out); recursively, its subdirectories
 * too, and those made while it is watched.  A file the daemon writes
 * arrives whole by a rename: it is told as made and written (the events
 * of its temporary name are not told).
 *
 * Bounds: WATCHES_PER_SESSION watches per session, WATCH_DIRS_MAX
 * directories per watch and WATCH_DIRS_TOTAL in the daemon (inotify's
 * watches are the host's, per user); at most WATCH_EVENTS_PER_S events
 * told per watch (a burst of as many), the rest dropped; the kernel's own
 * queue drops what the thread has not read past its length.  A watch ends
 * when its client stops it, when its directory goes (the sandbox's end
 * included), or with the daemon.
 *
 * Threads: any, holding a reference to the session; the sink is called on
 * the watch thread, must not block, nor call back into this file. */
#ifndef PETRI_WATCH_H
#define PETRI_WATCH_H

#include <stdbool.h>

#include "session/session.h"

#define WATCHES_PER_SESSION 8
#define WATCH_DIRS_MAX 1024
#define WATCH_DIRS_TOTAL 16384
#define WATCH_EVENTS_PER_S 2000

enum watch_kind { WATCH_CREATE, WATCH_WRITE, WATCH_REMOVE, WATCH_RENAME, WATCH_CHMOD };

struct watch_sink {
	/* name: relative to the watched directory ("sub/f.txt") */
	void (*event)(void *ctx, enum watch_kind kind, const char *name);
	/* The watch ended by itself (its directory is gone, the daemon
	 * stops); never after watch_stop() returned. */
	void (*end)(void *ctx, const char *why);
	void *ctx;
};

struct watch;

/* Watch dir of s (a path as session/workspace.h takes it), its
 * subdirectories too when recursive.  SM_OK with *out; else why in reason:
 * SM_INVALID (no such directory, or not one), SM_CAPACITY (over a bound),
 * SM_GONE (the session ended), SM_NO_MEMORY, SM_START_FAILED. */
enum sm_result session_watch_start(struct session *s, const char *dir, bool recursive,
				   const struct watch_sink *sink, struct watch **out,
				   char *reason, size_t reasonlen);
/* Stop and free w (its owner's, once, whatever happened): after it
 * returns, its sink is never called again.  True when it was live; false
 * when it had ended by itself (its sink's end was called). */
bool watch_stop(struct watch *w);

/* ---- the session layer's own --------------------------------------------- */

struct watch_hub;
int watch_hub_new(struct watch_hub **out);
/* Ends every watch left (its sink's end; its owner still frees it), stops
 * the thread, frees the hub. */
void watch_hub_free(struct watch_hub *h);
/* s ended: its watches end too (their sinks told), so that none holds its
 * sandbox (a watch holds a reference to the session) past its end. */
void watch_hub_session_ended(struct watch_hub *h, struct session *s);
/* In session.c: the session's hub (its manager's). */
struct watch_hub *session_watch_hub(struct session *s);

#endif
