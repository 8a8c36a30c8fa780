/* Request bodies: the JSON a client POSTs, through the API's own parsing
 * (http_body_object, http_only_keys) and the request model's validation
 * (src/exec/request.c) up to the point where a sandbox would be used: a
 * one-shot, a session, an execution in a session.
 *
 * There is no HTTP connection: answering an error to a NULL connection
 * builds the response and is refused by libmicrohttpd, which is all a
 * parser needs.  The operator's limits are the defaults. */
#include "api/handlers.c"
#include "workspace/files.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct petri_config cfg;

/* What the request model let through is within what it promises. */
static void check_oneshot(const json_t *body, const struct oneshot *o)
{
	assert(!limits_above(&o->limits, &cfg.max));
	for (size_t i = 0; i < limit_rule_count; i++)
		assert(limit_get(&o->limits, &limit_rules[i]) >= limit_rules[i].min);
	assert(lang_find(o->ex.language) && !strcmp(lang_find(o->ex.language)->name,
						     o->ex.language));
	assert(o->ex.timeout_s <= o->limits.timeout_s && o->ex.one_shot);
	assert(strlen(o->ex.code) == json_string_length(json_object_get(body, "code")));
	assert(o->nfiles <= REQUEST_FILES_MAX && o->npatterns <= REQUEST_PATTERNS_MAX);
	for (size_t i = 0; i < o->nfiles; i++) {
		char why[160];

		assert(files_check_path(o->files[i].path, false, why, sizeof(why)) == 0);
	}
	for (size_t i = 0; o->ex.env[i]; i++)
		assert(strchr(o->ex.env[i], '=') && strncmp(o->ex.env[i], "PATH=", 5));
	assert(!o->ex.input || (o->ex.input_len <= EXEC_STDIN_MAX &&
				!memchr(o->ex.input, '\0', o->ex.input_len)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const oneshot_keys[] = {
		"code", "language", "files", "limits", "timeout_s", "return_files", "env", "stdin",
		NULL
	};
	static const char *const session_keys[] = {
		"language", "limits", "idle_timeout_s", "max_lifetime_s", "env", NULL
	};
	struct api_req rq = { .cfg = &cfg, .method = "POST", .url = "/v1/execute" };
	enum MHD_Result answered = MHD_NO;
	struct request_error e;
	struct petri_limits lim;
	struct exec_request ex;
	struct oneshot o;
	json_t *body;
	char **env;
	double idle = 0, life = 0;

	if (!cfg.listen[0])
		config_defaults(&cfg);
	if (buf_append(&rq.body, data, size) < 0)
		return 0;
	body = http_body_object(&rq, &answered);
	if (!body)
		goto out;
	assert(json_is_object(body));

	/* POST /v1/execute */
	if (http_only_keys(&rq, body, oneshot_keys, &answered)) {
		if (request_oneshot(&cfg, body, &o, &e))
			check_oneshot(body, &o);
		else
			assert(e.code && e.message[0]);
		oneshot_release(&o);
	}

	/* POST /v1/sessions */
	if (http_only_keys(&rq, body, session_keys, &answered) &&
	    request_limits(&cfg, json_object_get(body, "limits"), &lim, &e) &&
	    request_lifetime(&cfg, body, &idle, &life, &e) &&
	    (env = request_env(&cfg, json_object_get(body, "env"), &e))) {
		assert(!limits_above(&lim, &cfg.max));
		assert(idle <= cfg.idle_timeout_s && life <= cfg.max_lifetime_s);
		for (size_t i = 0; env[i]; i++)
			assert(strchr(env[i], '=') && strncmp(env[i], "PATH=", 5));
		exec_env_free(env);
	}

	/* POST /v1/sessions/<id>/execute, with the session's limits */
	if (request_exec(&cfg, body, "bash", &cfg.defaults, &ex, &e))
		assert(ex.timeout_s <= cfg.defaults.timeout_s);
	request_exec_release(&ex);
	json_decref(body);
out:
	buf_release(&rq.body);
	return 0;
}
