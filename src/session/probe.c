#include "session/probe.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/request.h"
#include "runtime/languages.h"
#include "runtime/result.h"
#include "session/session.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/timefmt.h"

#define PACKAGES_MAX 5000	/* distributions kept from the probe */
#define FIELD_MAX 200		/* a name, a version, a version line */

/* The command-line tools a project's tests need besides the languages'
 * runtimes (docs/projects.md), each with the command that prints its
 * version: the probe runs each in the sandbox, so a tool it names works
 * there, not only on the host. */
static const struct probe_tool {
	const char *name, *command;
} tool_table[] = {
	{ "git", "git --version" },
	{ "make", "make --version" },
	{ "gcc", "gcc --version" },
	{ "g++", "g++ --version" },
	{ "pkg-config", "pkg-config --version" },
	{ "pytest", "python3 -m pytest --version" },
	{ "npm", "npm --version" },
	{ "jq", "jq --version" },
	{ "sqlite3", "sqlite3 --version" },
	{ "rg", "rg --version" },
	{ "patch", "patch --version" },
	{ "diff", "diff --version" },
	{ "tar", "tar --version" },
	{ "unzip", "unzip -v" },
};
#define NTOOLS (sizeof(tool_table) / sizeof(tool_table[0]))

static bool is_tool(const char *name)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (!strcmp(tool_table[i].name, name))
			return true;
	return false;
}

/* The probe: Python's version and every installed distribution as
 * importlib.metadata finds them on the driver's sys.path (Debian's
 * dist-packages, the operator's [python] path), then each program
 * language's `version` command and each tool's (first line of its
 * output; null when it fails: not installed, or it does not run).  LANGS
 * and TOOLS are spliced in as JSON. */
static const char probe_head[] =
	"import importlib.metadata as md, json, os, signal, subprocess, sys, time\n"
	"LANGS = json.loads(%s)\n"
	"TOOLS = json.loads(%s)\n";
static const char probe_body[] =
	"found = {'python': '%d.%d.%d' % sys.version_info[:3], 'packages': {}, 'languages': {},\n"
	"         'tools': {}}\n"
	"for d in md.distributions():\n"
	"    try:\n"
	"        name, version = d.metadata['Name'], d.version\n"
	"    except Exception:\n"
	"        continue\n"
	"    if name and version and len(found['packages']) < 5000:\n"
	"        found['packages'].setdefault(str(name)[:200], str(version)[:200])\n"
	/* Each command in a process group of its own, killed with whatever
	 * it started; all of them, languages and tools, within 40 s (the
	 * probe has 60). */
	"def version(command, left):\n"
	"    if left <= 0:\n"
	"        return None\n"
	"    p = subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL,\n"
	"                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,\n"
	"                         start_new_session=True)\n"
	"    try:\n"
	"        out, err = p.communicate(timeout=min(10, left))\n"
	"    except subprocess.TimeoutExpired:\n"
	"        out = err = b''\n"
	"    finally:\n"
	"        try:\n"
	"            os.killpg(p.pid, signal.SIGKILL)\n"
	"        except OSError:\n"
	"            pass\n"
	"        p.communicate()\n"
	"    text = (out or err).decode('utf-8', 'replace').strip()\n"
	"    return text.splitlines()[0][:200] if p.returncode == 0 and text else None\n"
	"end = time.monotonic() + 40\n"
	"for kind, table in (('languages', LANGS), ('tools', TOOLS)):\n"
	"    for name, command in table.items():\n"
	"        try:\n"
	"            found[kind][name] = version(command, end - time.monotonic())\n"
	"        except Exception:\n"
	"            found[kind][name] = None\n"
	"print(json.dumps(found))\n";

/* A JSON string of the JSON object {name: command} (consumed): a Python
 * literal as it stands, to free(); NULL when out of memory. */
static char *quoted_json(json_t *table)
{
	char *list = table ? json_dumps(table, JSON_COMPACT) : NULL, *quoted = NULL;
	json_t *text = list ? json_string(list) : NULL;

	if (text)
		quoted = json_dumps(text, JSON_ENCODE_ANY);
	json_decref(text);
	json_decref(table);
	free(list);
	return quoted;
}

char *probe_code(void)
{
	json_t *langs = json_object(), *tools = json_object();
	char *quoted_langs, *quoted_tools;
	struct buf code = BUF_INIT;

	for (size_t i = 0; langs && i < lang_count(); i++)
		if (lang_at(i)->version)
			json_object_set_new(langs, lang_at(i)->name, json_string(lang_at(i)->version));
	for (size_t i = 0; tools && i < NTOOLS; i++)
		json_object_set_new(tools, tool_table[i].name, json_string(tool_table[i].command));
	quoted_langs = quoted_json(langs);
	quoted_tools = quoted_json(tools);
	if (!quoted_langs || !quoted_tools ||
	    buf_appendf(&code, probe_head, quoted_langs, quoted_tools) < 0 ||
	    buf_append_str(&code, probe_body) < 0) {
		buf_release(&code);
		code.data = NULL;
	}
	free(quoted_langs);
	free(quoted_tools);
	return code.data;
}

struct box_exec probe_exec(const char *code)
{
	return (struct box_exec){
		.language = lang_default(), .code = code, .timeout_s = PROBE_TIMEOUT_S,
		.output_cap = PROBE_OUTPUT_MAX, .cancel_fd = -1,
	};
}

static bool short_string(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) <= FIELD_MAX &&
	       strlen(json_string_value(v)) == json_string_length(v);
}

json_t *probe_parse(const char *out, size_t len)
{
	json_t *found = len <= PROBE_OUTPUT_MAX ? json_loadb(out, len, 0, NULL) : NULL;
	json_t *packages = json_object_get(found, "packages");
	json_t *langs = json_object_get(found, "languages");
	json_t *tools = json_object_get(found, "tools");
	const char *k;
	json_t *v;

	if (!json_is_object(found) || !short_string(json_object_get(found, "python")) ||
	    !json_is_object(packages) || json_object_size(packages) > PACKAGES_MAX ||
	    !json_is_object(langs) || !json_is_object(tools))
		goto bad;
	json_object_foreach(packages, k, v)
		if (strlen(k) > FIELD_MAX || !short_string(v))
			goto bad;
	json_object_foreach(langs, k, v)
		if (!lang_find(k) || !(json_is_null(v) || short_string(v)))
			goto bad;
	json_object_foreach(tools, k, v)
		if (!is_tool(k) || !(json_is_null(v) || short_string(v)))
			goto bad;
	return found;
bad:
	json_decref(found);
	return NULL;
}

static int by_name(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;

	return strcasecmp(json_string_value(json_object_get(x, "name")),
			  json_string_value(json_object_get(y, "name")));
}

static json_t *strings(const char *const *list)
{
	json_t *a = json_array();

	for (size_t i = 0; a && list && list[i]; i++)
		json_array_append_new(a, json_string(list[i]));
	return a;
}

/* [{"name", "version"}] sorted by name (case aside), from {name: version}. */
static json_t *package_list(const json_t *packages)
{
	size_t n = json_object_size(packages), i = 0;
	json_t **items = calloc(n ? n : 1, sizeof(*items)), *list = json_array(), *v;
	const char *k;

	if (!items || !list) {
		free(items);
		json_decref(list);
		return NULL;
	}
	json_object_foreach((json_t *)packages, k, v)
		if ((items[i] = json_pack("{s:s, s:O}", "name", k, "version", v)))
			i++;
	n = i;
	qsort(items, n, sizeof(*items), by_name);
	for (i = 0; i < n; i++)
		json_array_append_new(list, items[i]);
	free(items);
	return list;
}

/* [{"name", "version"}] in the table's order, version null for a tool
 * not found. */
static json_t *tool_list(const json_t *tools)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < NTOOLS; i++)
		json_array_append_new(list, json_pack("{s:s, s:O?}", "name", tool_table[i].name,
						      "version", json_object_get(tools,
										 tool_table[i].name)));
	return list;
}

json_t *probe_describe(const json_t *found, const char *error)
{
	json_t *langs = json_array(), *versions = json_object_get(found, "languages");
	json_t *d;

	for (size_t i = 0; langs && i < lang_count(); i++) {
		const struct language *l = lang_at(i);
		json_t *version = !l->file ? json_object_get(found, "python") :
				  json_object_get(versions, l->name);
		json_t *entry = json_pack("{s:s, s:o, s:o, s:s, s:b, s:O?}", "name", l->name,
					  "aliases", strings(l->aliases), "extensions",
					  strings(l->extensions), "summary", l->summary,
					  "default", i == 0, "version", version);

		/* Known only once found: whether its runtime answered. */
		if (entry && found && (!l->file || l->version))
			json_object_set_new(entry, "available", json_boolean(json_is_string(version)));
		json_array_append_new(langs, entry);
	}
	d = json_pack("{s:o, s:o, s:o}", "languages", langs, "packages",
		      found ? package_list(json_object_get(found, "packages")) : json_null(),
		      "tools", found ? tool_list(json_object_get(found, "tools")) : json_null());
	if (d && error)
		json_object_set_new(d, "error", json_string(error));
	return d;
}

/* ---- in the background ---------------------------------------------------- */

#define PROBE_ATTEMPTS 5		/* a failed probe is tried again ... */
#define PROBE_RETRY_S 30.0		/* ... this long after */

struct probe {
	struct smgr *m;
	struct petri_limits limits;	/* a one-shot's, by default */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;	/* done, or stop */
	bool done;			/* an attempt ended */
	bool stop;			/* probe_free(): no more attempts */
	json_t *found;			/* NULL: not yet, or failed */
	char error[256];
};

/* One attempt: the probe's one-shot, what it found into p. */
static bool attempt(struct probe *p)
{
	struct oneshot o = { .limits = {0} };
	struct result res;
	char err[512] = "";
	char *code = probe_code();
	json_t *found = NULL;
	enum sm_result r = SM_NO_MEMORY;

	if (code && result_init(&res) == 0) {
		o.limits = p->limits;
		o.ex = probe_exec(code);
		o.internal = true;
		r = smgr_oneshot(p->m, &o, NULL, &res, err, sizeof(err));
		if (r == SM_OK && res.status == RESULT_OK)
			found = probe_parse(res.out.data.data, res.out.data.len);
		else if (r == SM_OK)
			snprintf(err, sizeof(err), "the probe ended %s: %.*s",
				 result_status_name(res.status),
				 (int)(res.err.data.len < 200 ? res.err.data.len : 200),
				 res.err.data.data ? res.err.data.data : "");
		result_release(&res);
	}
	pthread_mutex_lock(&p->lock);
	p->found = found;
	if (!found)
		snprintf(p->error, sizeof(p->error), "cannot tell what the sandboxes have: %.200s",
			 r != SM_OK ? (err[0] ? err : sm_result_message(r)) :
			 err[0] ? err : "the probe printed something else");
	p->done = true;
	pthread_cond_broadcast(&p->done_cond);
	pthread_mutex_unlock(&p->lock);
	/* Cut short by the shutdown: nothing is wrong with the sandboxes. */
	if (!found && (r == SM_STOPPING || smgr_stopping(p->m)))
		log_info("%s (the server is stopping)", p->error);
	else if (!found)
		log_warn("%s", p->error);
	free(code);
	return found != NULL;
}

/* Until an attempt finds out (a busy or loaded server may fail one), at
 * most PROBE_ATTEMPTS, PROBE_RETRY_S apart, or until probe_free(). */
static void *probe_thread(void *arg)
{
	struct probe *p = arg;

	for (int i = 0; i < PROBE_ATTEMPTS; i++) {
		struct timespec until;
		bool stop;

		if (attempt(p))
			break;
		until = clock_deadline(PROBE_RETRY_S);
		pthread_mutex_lock(&p->lock);
		while (!p->stop && pthread_cond_timedwait(&p->done_cond, &p->lock, &until) !=
				   ETIMEDOUT)
			;
		stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
	}
	return NULL;
}

struct probe *probe_start(struct smgr *m, const struct petri_limits *limits)
{
	struct probe *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->m = m;
	p->limits = *limits;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	if (pthread_create(&p->thread, NULL, probe_thread, p) != 0) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->done_cond);
		free(p);
		return NULL;
	}
	return p;
}

json_t *probe_wait(struct probe *p, double wait_s)
{
	struct timespec until = clock_deadline(wait_s);
	json_t *d;

	if (!p)
		return probe_describe(NULL, "cannot tell what the sandboxes have: no memory");
	pthread_mutex_lock(&p->lock);
	while (!p->done && pthread_cond_timedwait(&p->done_cond, &p->lock, &until) != ETIMEDOUT)
		;
	d = probe_describe(p->found, p->done ? (p->found ? NULL : p->error) :
				     "still finding out what the sandboxes have: ask again");
	pthread_mutex_unlock(&p->lock);
	return d;
}

void probe_free(struct probe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->done_cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	json_decref(p->found);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->done_cond);
	free(p);
}
