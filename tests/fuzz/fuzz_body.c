/* Request bodies: the JSON a client POSTs, through the API's own parsing
 * and validation up to the point where a sandbox would be used:
 * http_body_object, http_only_keys, parse_limits, parse_env and
 * http_exec_request (handlers.c is included for its static parsers), then
 * the "files" of POST /v1/execute as put_files checks them.
 *
 * There is no HTTP connection: answering an error to a NULL connection
 * builds the response and is refused by libmicrohttpd, which is all a
 * parser needs.  The operator's limits are the defaults. */
#include "api/handlers.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct petri_config cfg;

static void check_files(struct api_req *rq, json_t *files)
{
	static const char *const keys[] = { "path", "content_base64", NULL };
	enum MHD_Result answered;
	size_t i, len;
	json_t *f;

	json_array_foreach(files, i, f) {
		json_t *path = json_object_get(f, "path"), *b64 = json_object_get(f, "content_base64");
		unsigned char *bytes;
		char why[128];

		if ((json_is_object(f) && !http_only_keys(rq, f, keys, &answered)) ||
		    !json_is_string(path) || !json_is_string(b64) ||
		    files_check_path(json_string_value(path), false, why, sizeof(why)) < 0)
			return;
		bytes = base64_decode(json_string_value(b64), json_string_length(b64), &len);
		if (!bytes)
			return;
		assert(len <= json_string_length(b64));
		free(bytes);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const oneshot_keys[] = {
		"code", "language", "files", "limits", "timeout_s", "env", NULL
	};
	static const char *const session_keys[] = {
		"language", "limits", "idle_timeout_s", "max_lifetime_s", "env", NULL
	};
	struct api_req rq = { .cfg = &cfg, .method = "POST", .url = "/v1/execute" };
	enum MHD_Result answered = MHD_NO;
	struct petri_limits lim;
	struct box_exec ex;
	json_t *body, *files;
	char **env, why[256];

	if (!cfg.listen[0])
		config_defaults(&cfg);
	if (buf_append(&rq.body, data, size) < 0)
		return 0;
	body = http_body_object(&rq, &answered);
	if (!body)
		goto out;
	assert(json_is_object(body));

	/* POST /v1/execute */
	if (http_only_keys(&rq, body, oneshot_keys, &answered) &&
	    parse_limits(&rq, body, &lim, &answered) &&
	    http_exec_request(&rq, body, "python", &lim, &ex, &answered)) {
		/* Never above what the operator allows. */
		assert(config_check_limits(&cfg, &lim, why, sizeof(why)) == 0);
		assert(lang_find(ex.language) && !strcmp(lang_find(ex.language)->name, ex.language) && ex.timeout_s <= lim.timeout_s);
		assert(strlen(ex.code) == json_string_length(json_object_get(body, "code")));
		files = json_object_get(body, "files");
		if (json_is_array(files) && json_array_size(files) <= MAX_ONESHOT_FILES)
			check_files(&rq, files);
		http_exec_request_release(&ex);
	}

	/* POST /v1/sessions */
	if (http_only_keys(&rq, body, session_keys, &answered) &&
	    parse_limits(&rq, body, &lim, &answered) &&
	    (env = parse_env(&rq, body, &answered))) {
		for (size_t i = 0; env[i]; i++)
			assert(strchr(env[i], '=') && strncmp(env[i], "PATH=", 5));
		box_env_free(env);
	}

	/* POST /v1/sessions/<id>/execute, with the session's limits */
	if (http_exec_request(&rq, body, "bash", &cfg.defaults, &ex, &answered))
		http_exec_request_release(&ex);
	json_decref(body);
out:
	buf_release(&rq.body);
	return 0;
}
