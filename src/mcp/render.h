/* render — what a model reads of an execution: the result object turned
 * into MCP content (one text item, one image item per chart), with every
 * stream cut to a size a model's context can take.
 *
 * Shared by the MCP tools (src/mcp/tools.c) and `petri ask`
 * (src/agent), so a model sees the same text whichever way it reached
 * petri.  Text handed out is always valid UTF-8 (invalid bytes become
 * U+FFFD).  Functions return new JSON references or NULL when out of
 * memory. */
#ifndef PETRI_RENDER_H
#define PETRI_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/result.h"
#include "util/buf.h"

#define RENDER_STREAM_MAX	20000		/* bytes of stdout, of stderr */
#define RENDER_RESULTS_MAX	20000		/* bytes of text results, all together */
#define RENDER_TRACEBACK_MAX	6000		/* bytes of a traceback */
#define RENDER_IMAGES_MAX	10		/* image items per execution */
#define RENDER_IMAGE_BYTES_MAX	(8u << 20)	/* base64 bytes, all images together */
#define RENDER_CASES_MAX	20		/* failing test cases shown */
#define RENDER_CASE_MESSAGE_MAX	600		/* bytes of a failing case's message */

/* Append s[0..len) to out, at most about max bytes: a longer text keeps
 * its head and its tail, with a line between them saying how much was
 * left out.  Cuts never split a character.  0 or -ENOMEM. */
int render_clip(struct buf *out, const char *s, size_t len, size_t max);

/* The MCP content array of a finished execution: first a text item with
 * stdout, stderr, text results, the error (name, message, trimmed
 * traceback), the test results (a line of counts, then the failures and
 * errors, each with its place and message), the files written and, for a
 * timeout, oom or kill, the reason; then an image item
 * ({"type":"image","data","mimeType"}) per PNG or JPEG result.  *is_error:
 * the status was not ok. */
json_t *render_execution(const struct result *r, bool *is_error);

/* The processes of a session (runtime/processes.h's object) as a table
 * for a model: one line each, pid, parent, state, age, memory, command;
 * at most RENDER_PROCESSES_MAX lines.  Appended to out: 0 or -ENOMEM. */
#define RENDER_PROCESSES_MAX	200
int render_processes(struct buf *out, const json_t *list);

/* A command of session/commands.h (a read of it: docs/api.md's Command) as
 * a model reads it: whether it runs or how it ended, then what it printed
 * since the read before (each stream at most RENDER_STREAM_MAX bytes, what
 * was not kept said), then how to go on.  Appended to out: 0 or -ENOMEM. */
int render_command(struct buf *out, const json_t *cmd);

/* An MCP content item of type text. */
json_t *render_text_item(const char *s, size_t len);

#endif
