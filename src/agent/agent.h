/* agent — the loop that code-executing assistants run, from a question to
 * an answer that a person can check (docs/ask.md):
 *
 *   the model gets the question (and the uploaded files' names, sizes and
 *   a preview) and an `execute` tool; each tool call it makes is run in
 *   the sandbox and its result (or what was wrong with the call) goes back
 *   as a tool message; this repeats until the model answers in text or the
 *   round limit is reached.  A round is one request to the model.
 *
 * Every step is told to the caller as it happens (struct agent_events) and
 * recorded in a transcript (JSON), with what the execution record holds
 * of every execution it ran (docs/ask.md).  Charts are saved as PNG files in
 * save_dir; with keep_files, the files the code wrote are copied there
 * too.  The model's replies are untrusted: chat_parse_reply() validates
 * them, and a malformed tool call becomes a tool message that tells the
 * model what was wrong. */
#ifndef PETRI_AGENT_H
#define PETRI_AGENT_H

#include <jansson.h>
#include <stdbool.h>

#include "agent/chat.h"
#include "mcp/tools.h"

enum agent_status {
	AGENT_ANSWERED,		/* the model answered in text */
	AGENT_MAX_ROUNDS,	/* the round limit came first */
	AGENT_API_ERROR,	/* the model's API failed or answered nonsense */
	AGENT_FAILED,		/* petri itself failed (out of memory, disk) */
};

struct agent_events {
	void *ctx;
	/* The model asked to run code (before it runs). */
	void (*code)(void *ctx, unsigned round, const char *language, const char *code);
	/* What the model is told about a call: the output, or the error. */
	void (*output)(void *ctx, const char *text, bool is_error);
	/* A chart was saved at path. */
	void (*image)(void *ctx, const char *path);
	/* The model's text that came with tool calls, or a note of petri's. */
	void (*note)(void *ctx, const char *text);
};

struct agent_config {
	struct chat_client *chat;
	struct tools *tools;
	struct smgr *sm;		/* the tools' sessions: their record (NULL: none) */
	const char *model;
	unsigned max_rounds;
	const char *save_dir;		/* an existing directory for charts (and files) */
	bool keep_files;		/* copy the files the code wrote into save_dir */
	size_t file_max;		/* bytes of one file copied out */
	const struct agent_events *ev;
};

/* Ask.  files_intro: what the user message says about the uploaded files
 * ("" for none).  *transcript: a new object (docs/ask.md), also on
 * failure; its "answer" is the final text.  err says why for every status
 * but AGENT_ANSWERED. */
enum agent_status agent_run(const struct agent_config *cfg, const char *question,
			    const char *files_intro, json_t **transcript, char *err,
			    size_t errlen);

/* The system prompt petri sends (for docs and tests). */
extern const char agent_system_prompt[];

#endif
