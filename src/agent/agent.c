#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/workspace.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/savefile.h"

const char agent_system_prompt[] =
	"You answer the user's question by running code in a sandbox with the `execute` "
	"tool, and you base your answer on what the code printed, not on guesses.  The "
	"user's files, if any, are in the working directory /work.  Look at the data "
	"before you compute with it.  If the code fails, read the error, fix the code and "
	"run it again.  When you know the answer, reply in plain text without calling a "
	"tool: state the answer first, with the numbers the code found, then briefly how "
	"you got it.";

struct run {
	const struct agent_config *cfg;
	json_t *messages;
	json_t *tools;
	json_t *transcript;
	json_t *steps;
	json_t *written;		/* paths the code wrote, for keep_files */
	json_t *sessions;		/* the ids of the sessions code ran in, in order */
	unsigned round;
	long long prompt_tokens, completion_tokens;
};

/* ---- saving outputs ---------------------------------------------------- */

/* Save a chart; its path (save_dir/name) into path. */
static int save_image(struct run *rn, const char *b64, size_t n, const char *mime,
		      unsigned index, char *path, size_t pathlen)
{
	const char *ext = !strcmp(mime, "image/jpeg") ? "jpg" : "png";
	unsigned char *bytes;
	size_t len;
	char name[64];
	int r;

	bytes = base64_decode(b64, n, &len);
	if (!bytes)
		return -EINVAL;
	snprintf(name, sizeof(name), "chart-%u-%u.%s", rn->round, index, ext);
	snprintf(path, pathlen, "%s/%s", rn->cfg->save_dir, name);
	r = savefile_write(rn->cfg->save_dir, name, bytes, len);
	free(bytes);
	return r;
}

/* Copy a file of /work to save_dir/files/<path>, never following a link
 * on the host side.  path came out of the sandbox: checked first. */
static int keep_file(struct run *rn, const char *path)
{
	char why[128], checked[FILES_PATH_MAX + 1], rel[FILES_PATH_MAX + 8];
	struct buf data = BUF_INIT;
	int r;

	if (ws_path(path, NULL, 0, checked, why, sizeof(why)) != WS_OK)
		return -EINVAL;
	if ((r = tools_download(rn->cfg->tools, checked, &data, rn->cfg->file_max)) < 0)
		return r;
	snprintf(rel, sizeof(rel), "files/%s", checked);
	r = savefile_write(rn->cfg->save_dir, rel, data.data ? data.data : "", data.len);
	buf_release(&data);
	return r;
}

/* ---- one tool call ----------------------------------------------------- */

static void note(struct run *rn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct run *rn, const char *fmt, ...)
{
	const struct agent_events *ev = rn->cfg->ev;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ev && ev->note)
		ev->note(ev->ctx, msg);
}

/* The text of an MCP result for the model, with the charts saved and
 * named in it.  Returns the text (caller frees). */
static char *tool_text(struct run *rn, json_t *result, json_t *images)
{
	json_t *content = json_object_get(result, "content"), *item;
	struct buf b = BUF_INIT;
	unsigned nimg = 0;
	size_t i;

	json_array_foreach(content, i, item) {
		const char *type = json_string_value(json_object_get(item, "type"));
		json_t *data = json_object_get(item, "data");
		char path[4096];

		if (type && !strcmp(type, "text")) {
			buf_append_str(&b, json_string_value(json_object_get(item, "text")));
		} else if (type && !strcmp(type, "image") && json_is_string(data)) {
			const char *mime = json_string_value(json_object_get(item, "mimeType"));
			int r = save_image(rn, json_string_value(data), json_string_length(data),
					   mime ? mime : "image/png", ++nimg, path, sizeof(path));

			if (r < 0) {
				buf_appendf(&b, "[image %u could not be saved: %s]\n", nimg,
					    strerror(-r));
				continue;
			}
			json_array_append_new(images, json_string(path));
			buf_appendf(&b, "[image %u was saved as %s and shown to the user]\n", nimg,
				    strrchr(path, '/') + 1);
		}
	}
	return buf_detach(&b, NULL);
}

/* Remember a session that ran code, once, in the order of first use. */
static void note_session(struct run *rn, const char *sid)
{
	size_t n = json_array_size(rn->sessions);

	/* Sessions are used one after the other: a new one is the last. */
	if (!n || strcmp(json_string_value(json_array_get(rn->sessions, n - 1)), sid))
		json_array_append_new(rn->sessions, json_string(sid));
}

static json_t *call_tool(struct run *rn, const struct chat_tool_call *tc)
{
	const struct agent_events *ev = rn->cfg->ev;
	json_t *step = json_pack("{s:s, s:s, s:s}", "id", tc->id, "name", tc->name,
				 "arguments", tc->arguments);
	json_t *args = NULL, *result = NULL, *execution = NULL, *images = json_array();
	char sid[SESSION_ID_LEN + 1] = "";
	json_error_t jerr;
	char *text = NULL;
	bool is_error = true;

	if (!step || !images)
		goto out;
	if (strcmp(tc->name, "execute") != 0) {
		if (asprintf(&text, "error: there is no tool named '%.100s'.  The only tool is "
			     "execute, with arguments {\"code\": \"...\", \"language\": \"python\"}.",
			     tc->name) < 0)
			text = NULL;
		goto told;
	}
	args = json_loads(tc->arguments[0] ? tc->arguments : "{}", JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(args)) {
		if (asprintf(&text, "error: the arguments of this call are not a JSON object (%s).  "
			     "Call execute again with arguments like {\"code\": \"print(1 + 1)\"}; "
			     "put newlines in the code as \\n.", args ? "not an object" : jerr.text) < 0)
			text = NULL;
		goto told;
	}
	if (json_is_string(json_object_get(args, "code"))) {
		const char *lang = json_string_value(json_object_get(args, "language"));

		json_object_set(step, "code", json_object_get(args, "code"));
		json_object_set_new(step, "language", json_string(lang ? lang : "python"));
		if (ev && ev->code)
			ev->code(ev->ctx, rn->round, lang ? lang : "python",
				 json_string_value(json_object_get(args, "code")));
	}
	result = tools_call(rn->cfg->tools, "execute", args, -1, &execution);
	if (!result)
		goto out;
	tools_last_session(rn->cfg->tools, sid);
	if (sid[0])
		note_session(rn, sid);
	is_error = json_is_true(json_object_get(result, "isError"));
	text = tool_text(rn, result, images);
	if (execution) {
		json_t *f;
		size_t i;

		json_array_foreach(json_object_get(execution, "files"), i, f) {
			json_t *p = json_object_get(f, "path");

			if (json_is_string(p))
				json_object_set(rn->written, json_string_value(p), json_true());
		}
		/* The transcript keeps the result, images by file name only. */
		json_array_foreach(json_object_get(execution, "results"), i, f) {
			json_object_del(f, "image/png");
			json_object_del(f, "image/jpeg");
		}
	}
told:
	if (!text)
		goto out;
	if (ev && ev->output)
		ev->output(ev->ctx, text, is_error);
	for (size_t i = 0; ev && ev->image && i < json_array_size(images); i++)
		ev->image(ev->ctx, json_string_value(json_array_get(images, i)));
	json_object_set_new(step, "session", sid[0] ? json_string(sid) : json_null());
	json_object_set_new(step, "is_error", json_boolean(is_error));
	json_object_set_new(step, "output", json_string(text));
	json_object_set_new(step, "images", images);
	images = NULL;
	json_object_set_new(step, "execution", execution ? execution : json_null());
	execution = NULL;
	json_array_append_new(rn->messages, json_pack("{s:s, s:s, s:s}", "role", "tool",
						      "tool_call_id", tc->id, "content", text));
	free(text);
	json_decref(args);
	json_decref(result);
	return step;
out:
	free(text);
	json_decref(args);
	json_decref(result);
	json_decref(execution);
	json_decref(images);
	json_decref(step);
	return NULL;
}

/* ---- the loop ---------------------------------------------------------- */

/* The assistant message as it goes back into the history: what the model
 * sent, normalized (ids made up where it gave none). */
static json_t *assistant_message(const struct chat_reply *rp)
{
	json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content",
			      rp->content ? json_string(rp->content) : json_null());
	json_t *calls;

	if (!m || rp->ncalls == 0)
		return m;
	calls = json_array();
	for (size_t i = 0; calls && i < rp->ncalls; i++)
		json_array_append_new(calls, json_pack(
			"{s:s, s:s, s:{s:s, s:s}}", "id", rp->calls[i].id, "type", "function",
			"function", "name", rp->calls[i].name, "arguments", rp->calls[i].arguments));
	json_object_set_new(m, "tool_calls", calls);
	return m;
}

/* MCP tool definitions -> Chat Completions tools. */
static json_t *chat_tools(struct tools *t)
{
	static const char *const only[] = { "execute", NULL };
	json_t *defs = tools_list_only(t, only), *out = json_array(), *d;
	size_t i;

	if (!defs || !out) {
		json_decref(defs);
		json_decref(out);
		return NULL;
	}
	json_array_foreach(defs, i, d)
		json_array_append_new(out, json_pack("{s:s, s:{s:O, s:O, s:O}}", "type", "function",
						     "function", "name", json_object_get(d, "name"),
						     "description", json_object_get(d, "description"),
						     "parameters", json_object_get(d, "inputSchema")));
	json_decref(defs);
	return out;
}

static void keep_files(struct run *rn)
{
	json_t *saved = json_array(), *v;
	const char *path;

	json_object_foreach(rn->written, path, v) {
		char dest[4096];
		int r = keep_file(rn, path);

		if (r < 0) {
			note(rn, "could not keep /work/%s: %s", path, strerror(-r));
			continue;
		}
		snprintf(dest, sizeof(dest), "%s/files/%s", rn->cfg->save_dir, path);
		json_array_append_new(saved, json_string(dest));
	}
	json_object_set_new(rn->transcript, "saved_files", saved);
}

/* What the record holds of one session, oldest first: every page of its
 * listing (a question's sandbox may run more than fits one).  New
 * reference, or NULL when out of memory. */
static json_t *session_record(struct smgr *sm, const char *sid)
{
	json_t *all = json_array(), *page;
	bool truncated = true;
	int64_t before = 0;

	while (all && truncated) {
		page = smgr_executions(sm, sid, 1000, before, &truncated);
		if (!page || json_array_size(page) == 0 || json_array_extend(page, all) < 0) {
			json_decref(page);
			break;
		}
		json_decref(all);
		all = page;
		before = json_integer_value(json_object_get(json_array_get(all, 0), "seq"));
	}
	return all;
}

/* The record of what ran: each entry as GET /v1/sessions/{id}/executions
 * lists it, with the session it ran in. */
static void add_record(struct run *rn)
{
	json_t *all = json_array(), *sid;
	size_t i, n = json_array_size(rn->sessions);

	json_array_foreach(rn->sessions, i, sid) {
		json_t *mine = rn->cfg->sm ? session_record(rn->cfg->sm, json_string_value(sid)) :
					     NULL;

		json_array_extend(all, mine);
		json_decref(mine);
	}
	json_object_set(rn->transcript, "session", n ? json_array_get(rn->sessions, n - 1) :
						       json_null());
	json_object_set_new(rn->transcript, "executions", all);
}

static void finish(struct run *rn, const char *status, const char *answer, const char *error)
{
	json_object_set_new(rn->transcript, "status", json_string(status));
	json_object_set_new(rn->transcript, "answer", answer ? json_string(answer) : json_null());
	json_object_set_new(rn->transcript, "error", error ? json_string(error) : json_null());
	json_object_set_new(rn->transcript, "rounds", json_integer(rn->round));
	json_object_set_new(rn->transcript, "usage", json_pack(
		"{s:o, s:o}",
		"prompt_tokens", rn->prompt_tokens >= 0 ? json_integer(rn->prompt_tokens) : json_null(),
		"completion_tokens", rn->completion_tokens >= 0 ?
		json_integer(rn->completion_tokens) : json_null()));
	add_record(rn);
	if (rn->cfg->keep_files)
		keep_files(rn);
}

static void count_usage(long long *sum, long long v)
{
	if (v < 0)
		return;
	*sum = *sum < 0 ? v : *sum + v;
}

enum agent_status agent_run(const struct agent_config *cfg, const char *question,
			    const char *files_intro, json_t **transcript, char *err,
			    size_t errlen)
{
	struct run rn = { .cfg = cfg, .prompt_tokens = -1, .completion_tokens = -1 };
	enum agent_status st = AGENT_FAILED;
	struct buf user = BUF_INIT;
	char *prompt = NULL;

	rn.transcript = json_pack("{s:s, s:s, s:[], s:[]}", "question", question, "model",
				  cfg->model, "steps", "messages");
	rn.written = json_object();
	rn.sessions = json_array();
	*transcript = rn.transcript;
	if (!rn.transcript || !rn.written || !rn.sessions)
		goto oom;
	rn.steps = json_object_get(rn.transcript, "steps");
	rn.messages = json_object_get(rn.transcript, "messages");
	if (buf_append_str(&user, question) < 0 ||
	    (files_intro[0] && buf_appendf(&user, "\n\n%s", files_intro) < 0))
		goto oom;
	prompt = buf_detach(&user, NULL);
	json_array_append_new(rn.messages, json_pack("{s:s, s:s}", "role", "system", "content",
						     agent_system_prompt));
	json_array_append_new(rn.messages, json_pack("{s:s, s:s}", "role", "user", "content",
						     prompt ? prompt : ""));
	rn.tools = chat_tools(cfg->tools);
	if (!rn.tools)
		goto oom;

	for (rn.round = 1; rn.round <= cfg->max_rounds; rn.round++) {
		json_t *req = json_pack("{s:s, s:O, s:O, s:s}", "model", cfg->model, "messages",
					rn.messages, "tools", rn.tools, "tool_choice", "auto");
		json_t *resp = NULL, *step, *calls;
		struct chat_reply rp;
		int r;

		if (!req)
			goto oom;
		r = chat_complete(cfg->chat, req, &resp, err, errlen);
		json_decref(req);
		if (r == -ENOMEM)
			goto oom;
		if (r < 0) {
			st = AGENT_API_ERROR;
			finish(&rn, "api_error", NULL, err);
			goto out;
		}
		r = chat_parse_reply(resp, &rp, err, errlen);
		json_decref(resp);
		if (r < 0) {
			if (r == -ENOMEM)
				goto oom;
			st = AGENT_API_ERROR;
			finish(&rn, "api_error", NULL, err);
			goto out;
		}
		count_usage(&rn.prompt_tokens, rp.prompt_tokens);
		count_usage(&rn.completion_tokens, rp.completion_tokens);
		json_array_append_new(rn.messages, assistant_message(&rp));
		step = json_pack("{s:i, s:o, s:[]}", "round", (int)rn.round, "content",
				 rp.content ? json_string(rp.content) : json_null(), "tool_calls");
		json_array_append_new(rn.steps, step);
		if (rp.ncalls == 0) {
			if (!rp.content || !*rp.content) {
				snprintf(err, errlen, "the model answered with neither text nor a tool "
					 "call (finish_reason '%s')", rp.finish_reason);
				chat_reply_release(&rp);
				st = AGENT_API_ERROR;
				finish(&rn, "api_error", NULL, err);
				goto out;
			}
			finish(&rn, "answered", rp.content, NULL);
			chat_reply_release(&rp);
			st = AGENT_ANSWERED;
			goto out;
		}
		if (rp.content && *rp.content)
			note(&rn, "%s", rp.content);
		calls = json_object_get(step, "tool_calls");
		for (size_t i = 0; i < rp.ncalls; i++) {
			json_t *c = call_tool(&rn, &rp.calls[i]);

			if (!c) {
				chat_reply_release(&rp);
				goto oom;
			}
			json_array_append_new(calls, c);
		}
		chat_reply_release(&rp);
	}
	rn.round = cfg->max_rounds;
	snprintf(err, errlen, "the model gave no answer within %u round%s", cfg->max_rounds,
		 cfg->max_rounds == 1 ? "" : "s");
	finish(&rn, "max_rounds", NULL, err);
	st = AGENT_MAX_ROUNDS;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	if (rn.transcript)
		finish(&rn, "failed", NULL, err);
	st = AGENT_FAILED;
out:
	free(prompt);
	buf_release(&user);
	json_decref(rn.tools);
	json_decref(rn.written);
	json_decref(rn.sessions);
	return st;
}
