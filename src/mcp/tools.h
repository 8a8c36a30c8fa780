/* tools — the sandbox tools a model calls: execute, write_file, read_file,
 * list_files, upload_archive, download_archive and reset, over one sandbox
 * session of the session manager.
 *
 * A `struct tools` is one client's sandbox: the session is created on
 * first use and deleted by tools_free().  When the session ended between
 * calls (idle expiry, lifetime, out of memory), the next call starts a
 * new one and answers with an error result that says so, without running
 * anything: the model must learn that its variables and files are gone.
 *
 * Results are MCP CallToolResult objects ({"content": [...], "isError"}):
 * bad arguments are error results a model can read and correct, not
 * protocol errors (MCP 2025-11-25, "Tool Execution Errors").
 *
 * Threads: calls on one `struct tools` are serialized (one at a time, in
 * the order they take its lock); different ones are independent. */
#ifndef PETRI_MCP_TOOLS_H
#define PETRI_MCP_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "session/session.h"
#include "util/buf.h"

struct tools;

/* cfg gives the limits of new sessions and the file size cap; both must
 * outlive the tools.  sm NULL: no sandboxes, every call that needs one is
 * an error result (for tests).  0 or -ENOMEM. */
int tools_new(struct smgr *sm, const struct petri_config *cfg, struct tools **out);
/* Delete the session (killing a running execution) and free.  NULL ok. */
void tools_free(struct tools *t);
/* The API key its session is charged to (session_params.key); before the
 * first call. */
void tools_set_key(struct tools *t, int key);
/* The client is there and about to call tools: start what makes the
 * first call fast, in the background (the warm path: smgr_warm_start;
 * finding out what the sandboxes have, unless known: smgr_found).  Once;
 * later calls cost nothing.  tools_call() calls it itself. */
void tools_warm(struct tools *t);
/* Delete the session now; later calls answer that the client is gone.
 * Safe while another thread is inside tools_call(). */
void tools_close(struct tools *t);

/* The tool definitions for tools/list: name, title, description (with the
 * sandbox's Python version, packages and limits, as far as they are known
 * now), inputSchema, annotations.  Starts nothing: no sandbox, no probe.
 * New reference. */
json_t *tools_list(struct tools *t);
/* The same, only the tools named (NULL-terminated): for `petri ask`. */
json_t *tools_list_only(struct tools *t, const char *const *names);
bool tools_known(const struct tools *t, const char *name);

/* Call a tool.  args: the arguments object (NULL: none).  cancel_fd:
 * readable = stop a running execution now (-1: none).  *execution, when
 * not NULL, receives the result object of an execute call (result_to_json)
 * or NULL.  Returns a CallToolResult (new reference), NULL for an unknown
 * tool name or out of memory. */
json_t *tools_call(struct tools *t, const char *name, json_t *args, int cancel_fd,
		   json_t **execution);

/* The id of the session the last tools_call() on t ran its tool in, or ""
 * when it ran none (bad arguments, no sandbox, reset): where the record
 * keeps what it ran (smgr_executions()), also after that session ended.
 * For a caller that makes one call at a time (petri ask). */
void tools_last_session(struct tools *t, char out[SESSION_ID_LEN + 1]);

/* Put a file into /work (for `petri ask --file`).  0 or -errno with err. */
int tools_upload(struct tools *t, const char *path, const void *data, size_t len,
		 char *err, size_t errlen);
/* Extract an archive into dir of /work (for `petri ask --dir`), as the
 * upload_archive tool does: 0 with *summary (session_unpack()'s), or
 * -errno with err. */
int tools_unpack(struct tools *t, const void *data, size_t len, const char *dir,
		 json_t **summary, char *err, size_t errlen);
/* dir of /work as a tar.gz into out, at most max bytes: 0, or -errno with
 * err (-ENOENT: no sandbox). */
int tools_archive(struct tools *t, const char *dir, struct buf *out, size_t max, char *err,
		  size_t errlen);
/* Read a file of /work into out, at most max bytes (-EFBIG beyond). */
int tools_download(struct tools *t, const char *path, struct buf *out, size_t max);

#endif
