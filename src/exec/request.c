#include "exec/request.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "workspace/files.h"
#include "workspace/ws.h"
#include "exec/languages.h"
#include "util/base64.h"
#include "util/utf8.h"

static bool refuse(struct request_error *e, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool refuse(struct request_error *e, const char *code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return false;
}

static bool out_of_memory(struct request_error *e)
{
	return refuse(e, "internal", "out of memory");
}

/* Only the keys of allowed (NULL-terminated) in obj. */
static bool only_keys(const json_t *obj, const char *const *allowed, const char *where,
		      struct request_error *e)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)obj, k, v) {
		bool ok = false;

		for (size_t i = 0; allowed[i] && !ok; i++)
			ok = !strcmp(k, allowed[i]);
		if (!ok)
			return refuse(e, "invalid_request", "%s: unknown field '%.100s'", where, k);
	}
	return true;
}

/* A number of obj at key within [min, max]: absent keeps *out. */
static bool number(const json_t *obj, const char *key, double min, double max,
		   const char *why_max, double *out, struct request_error *e)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return true;
	if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
	    json_number_value(v) < min || json_number_value(v) > max)
		return refuse(e, "invalid_request", "'%s' must be a number from %g to %g%s", key,
			      min, max, why_max);
	*out = json_number_value(v);
	return true;
}

/* ---- limits ----------------------------------------------------------- */

bool request_limits(const struct petri_config *cfg, const json_t *limits,
		    struct petri_limits *out, struct request_error *e)
{
	const char *k;
	json_t *v;

	*out = cfg->defaults;
	if (!limits || json_is_null(limits))
		return true;
	if (!json_is_object(limits))
		return refuse(e, "invalid_request", "'limits' must be an object of %s, %s, %s, "
			      "%s, %s and %s", limit_rules[0].name, limit_rules[1].name,
			      limit_rules[2].name, limit_rules[3].name, limit_rules[4].name,
			      limit_rules[5].name);
	json_object_foreach((json_t *)limits, k, v) {
		const struct limit_rule *r = limit_rule_find(k);
		double x = json_number_value(v), max;

		if (!r)
			return refuse(e, "invalid_request", "'limits': unknown field '%.100s'", k);
		/* Asking for more than the operator allows is an error, not a
		 * silent cap: the client should know what it gets. */
		max = limit_get(&cfg->max, r);
		if (!json_is_number(v) || !isfinite(x) || x < r->min || x > max ||
		    (r->integer && !json_is_integer(v)))
			return refuse(e, "invalid_request", "'limits.%s' must be %s from %g to %g "
				      "%s (the most this server allows)", r->name,
				      r->integer ? "an integer" : "a number", r->min, max, r->unit);
		limit_set(out, r, x);
	}
	return true;
}

/* ---- language, variables ---------------------------------------------- */

bool request_language(const json_t *v, const char **name, struct request_error *e)
{
	const struct language *l;

	if (!v || json_is_null(v))
		return true;
	if (!(l = lang_from_json(v, e->message, sizeof(e->message)))) {
		e->code = "invalid_request";
		return false;
	}
	*name = l->name;
	return true;
}

bool request_pid(const json_t *v, int *pid, struct request_error *e)
{
	const char *s = json_string_value(v);
	long long n = -1;

	if (json_is_integer(v)) {
		n = json_integer_value(v);
	} else if (s && *s && strlen(s) <= 10 && strspn(s, "0123456789") == strlen(s)) {
		n = strtoll(s, NULL, 10);
	}
	if (n < 1 || n > INT_MAX)
		return refuse(e, "invalid_request", "a process is named by its pid, a number from "
			      "1 to %d (as GET /v1/sessions/{id}/processes lists it)", INT_MAX);
	*pid = (int)n;
	return true;
}

bool request_signal(const json_t *v, int *sig, const char **name, struct request_error *e)
{
	static const struct { const char *name; int sig; } table[] = {
		{ "TERM", SIGTERM }, { "KILL", SIGKILL }, { "INT", SIGINT }, { "HUP", SIGHUP },
		{ "QUIT", SIGQUIT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
	};
	const char *s = json_string_value(v);

	if (!v || json_is_null(v)) {
		*sig = SIGTERM;
		*name = "TERM";
		return true;
	}
	if (s && !strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; s && i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcasecmp(s, table[i].name)) {
			*sig = table[i].sig;
			*name = table[i].name;
			return true;
		}
	return refuse(e, "invalid_request", "'signal' must be one of TERM (the default), KILL, "
		      "INT, HUP, QUIT, USR1, USR2");
}

static bool env_name_ok(const char *k)
{
	if (!*k || strlen(k) > 128 || (*k >= '0' && *k <= '9'))
		return false;
	for (; *k; k++)
		if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

/* Set by petri in every sandbox, or by the operator: a client may not
 * change them. */
static bool env_reserved(const struct petri_config *cfg, const char *name)
{
	static const char *const fixed[] = {
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "MPLCONFIGDIR",
		"XDG_CACHE_HOME", "FONTCONFIG_FILE", NULL
	};
	size_t n = strlen(name);

	for (size_t i = 0; fixed[i]; i++)
		if (!strcmp(name, fixed[i]))
			return true;
	for (size_t i = 0; i < cfg->nenv; i++)
		if (!strncmp(cfg->env[i], name, n) && cfg->env[i][n] == '=')
			return true;
	return false;
}

char **request_env(const struct petri_config *cfg, const json_t *env,
		   struct request_error *e)
{
	size_t n = 0, bytes = 0;
	const char *k;
	char **out;
	json_t *v;

	if (!env || json_is_null(env)) {
		if (!(out = calloc(1, sizeof(char *))))
			out_of_memory(e);
		return out;
	}
	if (!json_is_object(env) || json_object_size(env) > REQUEST_ENV_MAX) {
		refuse(e, "invalid_request", "'env' must be an object of at most %d string "
		       "values", REQUEST_ENV_MAX);
		return NULL;
	}
	if (!(out = calloc(json_object_size(env) + 1, sizeof(*out)))) {
		out_of_memory(e);
		return NULL;
	}
	json_object_foreach((json_t *)env, k, v) {
		const char *why = NULL;

		bytes += strlen(k) + json_string_length(v) + 2;
		if (!env_name_ok(k))
			why = "names are [A-Za-z_][A-Za-z0-9_]*";
		else if (!json_is_string(v) ||
			 memchr(json_string_value(v), '\0', json_string_length(v)))
			why = "values are strings without NUL";
		else if (env_reserved(cfg, k))
			why = "it is set by petri (PATH, HOME, USER, LOGNAME, SHELL, TMPDIR, "
			      "MPLCONFIGDIR, XDG_CACHE_HOME, FONTCONFIG_FILE) or by the operator";
		else if (bytes > REQUEST_ENV_BYTES)
			why = "all variables together may take 64 KiB";
		if (why)
			refuse(e, "invalid_request", "env '%.100s': %s", k, why);
		else if (asprintf(&out[n], "%s=%s", k, json_string_value(v)) < 0)
			out_of_memory(e);
		else {
			n++;
			continue;
		}
		exec_env_free(out);
		return NULL;
	}
	return out;
}

/* ---- executions ------------------------------------------------------- */

static bool code_ok(const json_t *code, struct request_error *e)
{
	if (!json_is_string(code))
		return refuse(e, "invalid_request", "'code' (a string) is required");
	if (json_string_length(code) > EXEC_CODE_MAX ||
	    memchr(json_string_value(code), '\0', json_string_length(code)))
		return refuse(e, "invalid_request", "'code' must be at most %u bytes and "
			      "contain no NUL", EXEC_CODE_MAX);
	return true;
}

/* "stdin": a string (NULL or null: none), what the code reads from its
 * standard input.  Bounded like the code: the body's own limit holds it
 * already, this keeps the frame to the driver small. */
static bool stdin_ok(const json_t *v, struct request_error *e)
{
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || json_string_length(v) > EXEC_STDIN_MAX ||
	    memchr(json_string_value(v), '\0', json_string_length(v)))
		return refuse(e, "invalid_request", "'stdin' must be a string of at most %u bytes "
			      "without NUL", EXEC_STDIN_MAX);
	return true;
}

/* "tests": "junit:PATH", the report to read after the execution (PATH
 * relative to /work, or under /work/); NULL or null: the reports among
 * the files it writes.  *path points into v. */
static bool tests_spec(const json_t *v, const char **path, struct request_error *e)
{
	const char *s = json_string_value(v), *p;
	char why[160];

	*path = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!s || strncmp(s, "junit:", 6) || strlen(s) != json_string_length(v))
		return refuse(e, "invalid_request", "'tests' must be \"junit:PATH\": the JUnit XML "
			      "report the execution writes, relative to /work");
	p = s + 6;
	if (!strncmp(p, "/work/", 6))
		p += 6;
	if (files_check_path(p, false, why, sizeof(why)) < 0)
		return refuse(e, "invalid_path", "'tests': %s", why);
	*path = p;
	return true;
}

bool request_exec(const struct petri_config *cfg, const json_t *obj, const char *language,
		  const struct petri_limits *lim, struct exec_request *ex, struct request_error *e)
{
	json_t *code = json_object_get(obj, "code"), *input = json_object_get(obj, "stdin");
	char **env;

	memset(ex, 0, sizeof(*ex));
	ex->cancel_fd = -1;
	ex->language = language;
	ex->timeout_s = lim->timeout_s;
	if (!code_ok(code, e) ||
	    !request_language(json_object_get(obj, "language"), &ex->language, e) ||
	    !number(obj, "timeout_s", 0.1, lim->timeout_s, " (the sandbox's timeout_s limit)",
		    &ex->timeout_s, e) ||
	    !tests_spec(json_object_get(obj, "tests"), &ex->junit, e) || !stdin_ok(input, e))
		return false;
	/* Last: nothing fails after it, so a refusal leaves nothing behind. */
	if (!(env = request_env(cfg, json_object_get(obj, "env"), e)))
		return false;
	ex->code = json_string_value(code);
	if (json_is_string(input)) {
		ex->input = json_string_value(input);
		ex->input_len = json_string_length(input);
	}
	ex->output_cap = (size_t)lim->output_kb << 10;
	ex->env = (const char *const *)env;
	return true;
}

void request_exec_release(struct exec_request *ex)
{
	exec_env_free((char **)ex->env);
	ex->env = NULL;
}

bool request_lifetime(const struct petri_config *cfg, const json_t *obj, double *idle,
		      double *life, struct request_error *e)
{
	return number(obj, "idle_timeout_s", 1, cfg->idle_timeout_s,
		      " (this server's idle_timeout_s)", idle, e) &&
	       number(obj, "max_lifetime_s", 1, cfg->max_lifetime_s,
		      " (this server's max_lifetime_s)", life, e);
}

/* ---- a session's network ---------------------------------------------- */

bool request_network(const struct petri_config *cfg, const json_t *v, struct net_policy **out,
		     struct request_error *e)
{
	static const char *const keys[] = { "allow", "deny", NULL };
	static const char *const lists[] = { "allow", "deny" };
	struct net_policy *p;
	char why[200];

	*out = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v))
		return refuse(e, "invalid_request", "'network' must be an object "
			      "({\"allow\": [...], \"deny\": [...]}) or null");
	if (!only_keys(v, keys, "network", e))
		return false;
	if (!(p = calloc(1, sizeof(*p))))
		return out_of_memory(e);
	for (int deny = 0; deny < 2; deny++) {
		json_t *list = json_object_get(v, lists[deny]), *item;
		size_t i;

		if (!list || json_is_null(list))
			continue;
		if (!json_is_array(list) || json_array_size(list) > NET_RULES_MAX) {
			refuse(e, "invalid_request", "network.%s must be an array of at most %d "
			       "strings", lists[deny], NET_RULES_MAX);
			goto fail;
		}
		json_array_foreach(list, i, item) {
			if (!json_is_string(item)) {
				refuse(e, "invalid_request", "network.%s[%zu] must be a string",
				       lists[deny], i);
				goto fail;
			}
			if (!net_policy_add(p, json_string_value(item), deny, why, sizeof(why))) {
				refuse(e, "invalid_request", "network.%s[%zu]: %s", lists[deny], i, why);
				goto fail;
			}
		}
	}
	if (!net_policy_permitted(&cfg->network, p, why, sizeof(why))) {
		refuse(e, "network_not_allowed", "%s", why);
		goto fail;
	}
	if (!net_policy_add_operator_denies(&cfg->network, p, why, sizeof(why))) {
		refuse(e, "invalid_request", "network.deny: %s", why);
		goto fail;
	}
	*out = p;
	return true;
fail:
	free(p);
	return false;
}

json_t *request_network_json(const struct net_policy *p)
{
	json_t *j = json_pack("{s:s}", "mode", net_mode_name(p ? p->mode : NET_NONE));

	for (int deny = 0; j && p && p->mode != NET_NONE && deny < 2; deny++) {
		const struct net_rule *v = deny ? p->deny : p->allow;
		size_t n = deny ? p->ndeny : p->nallow;
		json_t *a = json_array();
		char text[NET_NAME_MAX + 8];

		if (!deny && p->mode == NET_OPEN)
			json_array_append_new(a, json_string("*"));
		for (size_t i = 0; a && i < n; i++) {
			net_rule_text(&v[i], text, sizeof(text));
			json_array_append_new(a, json_string(text));
		}
		json_object_set_new(j, deny ? "deny" : "allow", a);
	}
	return j;
}

/* ---- one-shots -------------------------------------------------------- */

static bool oneshot_files(const json_t *files, struct oneshot *o, struct request_error *e)
{
	static const char *const keys[] = { "path", "content_base64", NULL };
	json_t *f;
	size_t i;

	if (!files || json_is_null(files))
		return true;
	if (!json_is_array(files) || json_array_size(files) > REQUEST_FILES_MAX)
		return refuse(e, "invalid_request", "'files' must be an array of at most %d "
			      "objects", REQUEST_FILES_MAX);
	if (!(o->files = calloc(json_array_size(files) + 1, sizeof(*o->files))))
		return out_of_memory(e);
	json_array_foreach(files, i, f) {
		json_t *path = json_object_get(f, "path"), *data = json_object_get(f, "content_base64");
		struct oneshot_file *of = &o->files[i];
		char where[32], why[160];

		snprintf(where, sizeof(where), "files[%zu]", i);
		if (!json_is_object(f) || !json_is_string(path) || !json_is_string(data))
			return refuse(e, "invalid_request", "%s needs string 'path' and "
				      "'content_base64'", where);
		if (!only_keys(f, keys, where, e))
			return false;
		if (files_check_path(json_string_value(path), false, why, sizeof(why)) < 0)
			return refuse(e, "invalid_path", "%s: %s", where, why);
		if (!(of->path = strdup(json_string_value(path))))
			return out_of_memory(e);
		o->nfiles = i + 1;
		of->data = base64_decode(json_string_value(data), json_string_length(data),
					 &of->len);
		if (!of->data)
			return refuse(e, "invalid_request", "%s.content_base64 is not valid base64",
				      where);
	}
	return true;
}

/* "archive": {"content_base64", "path"?}: extracted into path ("": /work)
 * before the files are written. */
static bool oneshot_archive(const json_t *v, struct oneshot *o, struct request_error *e)
{
	static const char *const keys[] = { "path", "content_base64", NULL };
	json_t *data = json_object_get(v, "content_base64"), *path = json_object_get(v, "path");
	char why[160];

	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v) || !json_is_string(data) || (path && !json_is_string(path)))
		return refuse(e, "invalid_request", "'archive' must be an object with a string "
			      "'content_base64' (a tar, tar.gz, tar.bz2, tar.xz or zip) and "
			      "optionally 'path'");
	if (!only_keys(v, keys, "archive", e))
		return false;
	if (path && files_check_path(json_string_value(path), true, why, sizeof(why)) < 0)
		return refuse(e, "invalid_path", "archive.path: %s", why);
	if (path && !(o->archive_dest = strdup(json_string_value(path))))
		return out_of_memory(e);
	o->archive = base64_decode(json_string_value(data), json_string_length(data),
				   &o->archive_len);
	if (!o->archive)
		return refuse(e, "invalid_request", "archive.content_base64 is not valid base64");
	return true;
}

/* "return_files": true (every file written), false, or a list of fnmatch
 * patterns. */
static bool return_files(const json_t *v, struct oneshot *o, struct request_error *e)
{
	json_t *p;
	size_t i;

	if (!v || json_is_false(v) || json_is_null(v))
		return true;
	o->return_files = true;
	if (json_is_true(v))
		return true;
	if (!json_is_array(v) || json_array_size(v) > REQUEST_PATTERNS_MAX)
		goto bad;
	if (!(o->patterns = calloc(json_array_size(v) + 1, sizeof(*o->patterns))))
		return out_of_memory(e);
	json_array_foreach(v, i, p) {
		if (!json_is_string(p) || json_string_length(p) > 1024 ||
		    strlen(json_string_value(p)) != json_string_length(p))
			goto bad;
		if (!(o->patterns[o->npatterns] = strdup(json_string_value(p))))
			return out_of_memory(e);
		o->npatterns++;
	}
	/* An empty list asks for no file; 0 patterns would mean all. */
	if (!o->npatterns)
		o->return_files = false;
	return true;
bad:
	return refuse(e, "invalid_request", "'return_files' must be true, false or an array "
		      "of at most %d glob patterns (strings)", REQUEST_PATTERNS_MAX);
}

bool request_oneshot(const struct petri_config *cfg, const json_t *obj, struct oneshot *o,
		     struct request_error *e)
{
	memset(o, 0, sizeof(*o));
	o->ex.cancel_fd = -1;
	if (!request_limits(cfg, json_object_get(obj, "limits"), &o->limits, e) ||
	    !request_exec(cfg, obj, lang_default(), &o->limits, &o->ex, e))
		return false;
	o->ex.one_shot = true;
	return return_files(json_object_get(obj, "return_files"), o, e) &&
	       oneshot_archive(json_object_get(obj, "archive"), o, e) &&
	       oneshot_files(json_object_get(obj, "files"), o, e);
}

void oneshot_release(struct oneshot *o)
{
	request_exec_release(&o->ex);
	for (size_t i = 0; i < o->nfiles; i++) {
		free(o->files[i].path);
		free(o->files[i].data);
	}
	free(o->files);
	free(o->archive);
	free(o->archive_dest);
	for (size_t i = 0; i < o->npatterns; i++)
		free(o->patterns[i]);
	free(o->patterns);
	memset(o, 0, sizeof(*o));
	o->ex.cancel_fd = -1;
}

/* ---- a command beside the interpreter ---------------------------------- */

/* "cwd": relative to /work, or absolute ("/work/x", "/tmp", "/"); into out,
 * absolute, as the sandbox names it. */
static bool command_cwd(const json_t *v, char *out, size_t len, struct request_error *e)
{
	const char *in = json_string_value(v);
	char rel[FILES_PATH_MAX + 1], why[256];
	int w;

	if (!v || json_is_null(v))
		in = "/work";
	if (!in)
		return refuse(e, "invalid_request", "'cwd' must be a string: a directory relative "
			      "to /work, or an absolute one");
	if (!strcmp(in, "/"))
		rel[0] = '/', rel[1] = '\0';
	else if (ws_path(in, "/work", WS_PATH_ROOT | WS_PATH_SLASH | WS_PATH_ANYWHERE, rel, why,
			 sizeof(why)) != WS_OK)
		return refuse(e, "invalid_path", "'cwd': %s", why);
	w = snprintf(out, len, "%s%s%s", rel[0] == '/' ? "" : "/work", rel[0] && rel[0] != '/' ?
		     "/" : "", rel);
	if (w < 0 || (size_t)w >= len)
		return refuse(e, "invalid_path", "'cwd' is too long");
	return true;
}

bool request_size(const json_t *obj, unsigned short *rows, unsigned short *cols,
		  struct request_error *e)
{
	static const char *const keys[] = { "rows", "cols", NULL };
	unsigned short *out[] = { rows, cols };

	if (!json_is_object(obj))
		return refuse(e, "invalid_request", "a terminal's size is {\"rows\", \"cols\"}");
	if (!only_keys(obj, keys, "a terminal's size", e))
		return false;
	for (int i = 0; i < 2; i++) {
		json_t *v = json_object_get(obj, keys[i]);

		if (!v)
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > REQUEST_PTY_MAX)
			return refuse(e, "invalid_request", "a terminal's '%s' must be a whole "
				      "number from 1 to %d", keys[i], REQUEST_PTY_MAX);
		*out[i] = (unsigned short)json_integer_value(v);
	}
	return true;
}

bool request_input(const json_t *obj, struct input_request *in, struct request_error *e)
{
	json_t *text = json_object_get(obj, "input"), *b64 = json_object_get(obj, "input_base64");
	json_t *close_v = json_object_get(obj, "close");

	memset(in, 0, sizeof(*in));
	if ((text && !json_is_string(text)) || (b64 && !json_is_string(b64)) || (text && b64) ||
	    (close_v && !json_is_boolean(close_v)) || (!text && !b64 && !json_is_true(close_v)))
		return refuse(e, "invalid_request", "send 'input' (text) or 'input_base64' (bytes), "
			      "and/or 'close': true (end of file)");
	in->close = json_is_true(close_v);
	if (text) {
		in->data = json_string_value(text);
		in->len = json_string_length(text);
	} else if (b64) {
		in->decoded = base64_decode(json_string_value(b64), json_string_length(b64),
					    &in->len);
		if (!in->decoded)
			return refuse(e, "invalid_request", "'input_base64' is not base64");
		in->data = in->decoded;
	}
	return true;
}

void request_input_release(struct input_request *in)
{
	free(in->decoded);
	in->decoded = NULL;
}

bool request_command(const struct petri_config *cfg, const json_t *obj,
		     struct command_request *c, struct request_error *e)
{
	json_t *command = json_object_get(obj, "command"), *args = json_object_get(obj, "args");
	json_t *input = json_object_get(obj, "stdin"), *tag = json_object_get(obj, "tag"), *a;
	size_t i, n = 0;

	memset(c, 0, sizeof(*c));
	if (!command == !args || (command && (!json_is_string(command) ||
					      !json_string_length(command))))
		return refuse(e, "invalid_request", "a command is either 'command' (a string, run "
			      "by bash -c) or 'args' (an array of strings: the program and its "
			      "arguments), not both");
	if (args && (!json_is_array(args) || !json_array_size(args) ||
		     json_array_size(args) > REQUEST_ARGS_MAX))
		return refuse(e, "invalid_request", "'args' must be an array of 1 to %d strings",
			      REQUEST_ARGS_MAX);
	json_array_foreach(args, i, a)
		if (!json_is_string(a) || (i == 0 && !json_string_length(a)))
			return refuse(e, "invalid_request", "'args' must be strings, the first "
				      "not empty");
	if (input && !json_is_boolean(input))
		return refuse(e, "invalid_request", "'stdin' must be a boolean: true keeps the "
			      "command's standard input open for what is sent to it");
	if (tag && !json_is_null(tag) && (!json_is_string(tag) || !json_string_length(tag) ||
					   json_string_length(tag) > REQUEST_TAG_MAX))
		return refuse(e, "invalid_request", "'tag' must be a string of 1 to %d bytes",
			      REQUEST_TAG_MAX);
	if (json_object_get(obj, "pty") && !json_is_null(json_object_get(obj, "pty"))) {
		c->pty = true;
		c->rows = 24;
		c->cols = 80;
		if (!request_size(json_object_get(obj, "pty"), &c->rows, &c->cols, e))
			return false;
	}
	if (!number(obj, "timeout_s", 0.1, REQUEST_COMMAND_TIMEOUT_MAX, "", &c->timeout_s, e) ||
	    !command_cwd(json_object_get(obj, "cwd"), c->cwd, sizeof(c->cwd), e))
		return false;
	if (!(c->argv = calloc((args ? json_array_size(args) : 3) + 1, sizeof(*c->argv))))
		return out_of_memory(e);
	if (command) {
		c->command = json_string_value(command);
		c->argv[n++] = "/bin/bash";
		c->argv[n++] = "-c";
		c->argv[n++] = json_string_value(command);
	}
	json_array_foreach(args, i, a)
		c->argv[n++] = json_string_value(a);
	c->stdin = json_is_true(input) || c->pty;
	c->tag = json_string_value(tag);
	/* Last: nothing fails after it, so a refusal leaves nothing behind. */
	if (!(c->env = request_env(cfg, json_object_get(obj, "env"), e))) {
		free(c->argv);
		c->argv = NULL;
		return false;
	}
	return true;
}

void request_command_release(struct command_request *c)
{
	free(c->argv);
	exec_env_free(c->env);
	c->argv = NULL;
	c->env = NULL;
}

/* s as shown: at most *room bytes of it (*room counted down), cut at a
 * character; *cut set when it was. */
static json_t *shown(const char *s, size_t *room, bool *cut)
{
	size_t n = strlen(s);

	if (n > *room) {
		n = utf8_cut(s, *room);
		*cut = true;
	}
	*room -= n;
	return json_stringn(s, n);
}

json_t *request_command_json(const struct command_request *c)
{
	json_t *o = json_object(), *list = NULL;
	size_t room = REQUEST_SHOWN_MAX;
	bool cut = false;

	if (!o)
		return NULL;
	if (c->command) {
		json_object_set_new(o, "command", shown(c->command, &room, &cut));
	} else if ((list = json_array())) {
		for (size_t i = 0; c->argv[i] && !cut; i++)
			json_array_append_new(list, shown(c->argv[i], &room, &cut));
		json_object_set_new(o, "args", list);
	}
	room = REQUEST_SHOWN_MAX;
	json_object_set_new(o, "cwd", shown(c->cwd, &room, &cut));
	room = REQUEST_SHOWN_MAX;
	if (c->env && c->env[0] && (list = json_array())) {
		for (size_t i = 0, n; c->env[i]; i++) {	/* names: checked ASCII */
			if ((n = strcspn(c->env[i], "=")) > room) {
				cut = true;
				break;
			}
			json_array_append_new(list, json_stringn(c->env[i], n));
			room -= n;
		}
		json_object_set_new(o, "env", list);
	}
	json_object_set_new(o, "stdin", json_boolean(c->stdin));
	if (c->timeout_s > 0)
		json_object_set_new(o, "timeout_s", json_real(c->timeout_s));
	if (c->pty)
		json_object_set_new(o, "pty", json_pack("{s:i, s:i}", "rows", c->rows, "cols",
							c->cols));
	room = REQUEST_SHOWN_MAX;
	if (c->tag)
		json_object_set_new(o, "tag", shown(c->tag, &room, &cut));
	if (cut)
		json_object_set_new(o, "truncated", json_true());
	return o;
}
