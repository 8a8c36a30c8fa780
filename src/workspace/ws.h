/* ws — what the workspace (a session's /work) says to every front end: one
 * result for its operations, and one rule for the paths clients name its
 * files by.
 *
 * The operations (files.h) return 0 or -errno; ws_result_of() turns that
 * into an enum ws_result, which each front end maps to its own wire through
 * one table: the HTTP API to a status (code: ws_result_code()), E2B's envd
 * to a status and a Connect code, MCP to the sentence of
 * ws_result_message().  A result keeps no errno: a front end that words the
 * unexpected (WS_FAILED) with strerror() keeps the errno it was given.
 *
 * A client names a file the way its protocol does: "data.csv" or
 * "/work/data.csv" (MCP), "/home/user/data.csv" (E2B's SDKs), or relative
 * only (the HTTP API); E2B's and MCP's clients also name files of the
 * sandbox's other filesystems of its own ("/tmp/x").  ws_path() turns each
 * into the one form the session layer takes (session/workspace.h):
 * relative to /work, or absolute outside it; it refuses what names no
 * file. */
#ifndef PETRI_WS_H
#define PETRI_WS_H

#include <stdbool.h>
#include <stddef.h>

#include "workspace/files.h"

enum ws_result {
	WS_OK = 0,
	WS_BAD_PATH,		/* refused by ws_path() or files_check_path(): see why */
	WS_ELSEWHERE,		/* an absolute path outside the workspace: see why */
	WS_NOT_FOUND,		/* ENOENT */
	WS_EXISTS,		/* EEXIST */
	WS_IS_DIR,		/* EISDIR */
	WS_NOT_DIR,		/* ENOTDIR: the path or one of its parents */
	WS_SYMLINK,		/* ELOOP: a link where none is followed */
	WS_LEAVES,		/* EXDEV: the lookup would cross into another mount */
	WS_SYSTEM,		/* EROFS: an absolute path on none of the sandbox's own
				 * filesystems (session/workspace.h) */
	WS_NOT_REGULAR,		/* EINVAL, ENXIO: a FIFO, socket or device */
	WS_NOT_EMPTY,		/* ENOTEMPTY */
	WS_TOO_LONG,		/* ENAMETOOLONG */
	WS_DENIED,		/* EACCES, EPERM: the sandbox's user may not */
	WS_TOO_MANY,		/* E2BIG: more entries than one call takes */
	WS_FULL,		/* ENOSPC, EDQUOT, EFBIG: /work is full */
	WS_NO_MEMORY,		/* ENOMEM: over the sandbox's memory limit */
	WS_NO_PROCESS,		/* EAGAIN: a writer needs a process the sandbox has not */
	WS_STALLED,		/* ETIMEDOUT: the sandbox took no byte for too long */
	WS_CHANGING,		/* FILES_ECHANGING: lookups raced every try */
	WS_WRITER_FAILED,	/* ECHILD, EPIPE: the upload's writer was lost */
	WS_FAILED,		/* any other errno */
};
#define WS_RESULTS (WS_FAILED + 1)

/* What 0 or -errno from files.h means. */
enum ws_result ws_result_of(int err);
/* A clause about the path for r ("no such file or directory"), to follow
 * "cannot read '/work/x': ". */
const char *ws_result_message(enum ws_result r);
/* The error code the HTTP API answers r with ("internal" where it has no
 * code of its own), as sm_result_code() is for sessions. */
const char *ws_result_code(enum ws_result r);

/* What ws_path() takes besides a file. */
enum {
	WS_PATH_ROOT = 1,	/* the workspace itself: "", ".", "/work" */
	WS_PATH_SLASH = 2,	/* a trailing '/': "dir/" names dir */
	/* an absolute path outside root: as it is ("/tmp/x"), for the
	 * session layer to find on the sandbox's own filesystems */
	WS_PATH_ANYWHERE = 4,
};

/* The path in, as a client of a front end sent it, into rel relative to
 * /work, as files.h takes it: without root (the workspace's absolute name
 * for this front end: "/work", E2B_HOME) or a leading "./".  root NULL:
 * only a path relative to /work, taken as it is.  WS_OK; WS_ELSEWHERE for
 * an absolute path not under root (without WS_PATH_ANYWHERE); WS_BAD_PATH for anything
 * files_check_path() refuses; why says which in a sentence. */
enum ws_result ws_path(const char *in, const char *root, unsigned flags,
		       char rel[FILES_PATH_MAX + 1], char *why, size_t whylen);

#endif
