#include "session/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/request.h"
#include "exec/languages.h"
#include "exec/result.h"
#include "session/session.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/timefmt.h"
#include "util/version.h"

#define PACKAGES_MAX 5000	/* distributions kept from the probe */
#define PATHS_MAX 64		/* sys.path directories it reports */
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
	/* Where the packages came from: the cache of what was found is
	 * good while none of these directories changed (below). */
	"found['paths'] = [p[:200] for p in sys.path if p.startswith('/') and os.path.isdir(p)][:64]\n"
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

struct exec_request probe_exec(const char *code)
{
	return (struct exec_request){
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
	json_t *paths = json_object_get(found, "paths");
	const char *k;
	json_t *v;
	size_t i;

	if (paths && (!json_is_array(paths) || json_array_size(paths) > PATHS_MAX))
		goto bad;
	json_array_foreach(paths, i, v)
		if (!short_string(v) || json_string_value(v)[0] != '/')
			goto bad;
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

/* ---- kept from one start to the next -------------------------------------- */

/* What a probe finds changes only when the host's packages, the table of
 * languages or the operator's configuration do; a probe costs a sandbox
 * and seconds of CPU at every start of petri mcp, ask and serve, competing
 * with the first client.  So what it found is kept in the state directory
 * (found.json, beside the record) with what it depended on:
 *
 *   key     a hash of petri's version, the probe's code (the languages'
 *           and tools' commands) and the context (binds, [python] path,
 *           wheelhouse: what the sandboxes see);
 *   stamps  the modification time, inode and size of each directory the
 *           packages were read from (the probe's sys.path), of dpkg's
 *           status (apt), of /usr/bin and /usr/local/bin (the tools and
 *           runtimes) and of each bind.  Installing or removing anything
 *           there changes a stamp.
 *
 * A cache whose key or any stamp differs is not used: the probe runs and
 * writes a new one.  The file is petri's own (0600, written beside its
 * name and renamed); what it holds is checked as a probe's output is. */

#define CACHE_MAX (2u << 20)

static const char *const fixed_stamps[] = {
	"/var/lib/dpkg/status", "/usr/bin", "/usr/local/bin", NULL,
};

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;	/* ends each string */
}

static void stamp_of(const char *path, char out[64])
{
	struct stat st;

	if (stat(path, &st) < 0)
		snprintf(out, 64, "-");
	else
		snprintf(out, 64, "%lld.%09ld:%llu:%lld", (long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec, (unsigned long long)st.st_ino,
			 (long long)st.st_size);
}

/* {path: stamp} of the fixed paths, the context's and found's "paths". */
static json_t *stamps_of(const char *const *dirs, const json_t *found)
{
	json_t *st = json_object(), *v;
	char s[64];
	size_t i;

	for (i = 0; st && fixed_stamps[i]; i++) {
		stamp_of(fixed_stamps[i], s);
		json_object_set_new(st, fixed_stamps[i], json_string(s));
	}
	for (i = 0; st && dirs && dirs[i]; i++) {
		stamp_of(dirs[i], s);
		json_object_set_new(st, dirs[i], json_string(s));
	}
	json_array_foreach(json_object_get(found, "paths"), i, v) {
		stamp_of(json_string_value(v), s);
		json_object_set_new(st, json_string_value(v), json_string(s));
	}
	return st;
}

static void found_key(const char *context, char out[17])
{
	char *code = probe_code();
	uint64_t h = 14695981039346656037ull;

	h = fnv1a(h, petri_version());
	h = fnv1a(h, code);
	h = fnv1a(h, context);
	free(code);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* What the cache at path holds, when it is still true; else NULL. */
static json_t *cache_load(const char *path, const char *context, const char *const *dirs)
{
	json_t *c = NULL, *found = NULL, *now = NULL, *kept, *v;
	char key[17], *text = NULL;
	const char *k;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CACHE_MAX)
		goto out;
	c = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	found_key(context, key);
	kept = json_object_get(c, "stamps");
	if (!json_is_object(kept) || strcmp(json_string_value(json_object_get(c, "key")) ?: "", key))
		goto out;
	/* Checked as the probe's output is: a file can be edited. */
	if (!(text = json_dumps(json_object_get(c, "found"), JSON_COMPACT)) ||
	    !(found = probe_parse(text, strlen(text))))
		goto out;
	now = stamps_of(dirs, found);
	if (!now || json_object_size(now) != json_object_size(kept))
		goto drop;
	json_object_foreach(now, k, v)
		if (!json_equal(v, json_object_get(kept, k)))
			goto drop;
	goto out;
drop:
	json_decref(found);
	found = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(text);
	json_decref(now);
	json_decref(c);
	return found;
}

/* Keep found at path for the next start; a failure only costs a probe
 * then. */
static void cache_save(const char *path, const char *context, const char *const *dirs,
		       const json_t *found)
{
	char key[17], tmp[4200];
	json_t *c;
	int fd, r = -1;

	found_key(context, key);
	c = json_pack("{s:s, s:o, s:O}", "key", key, "stamps", stamps_of(dirs, found),
		      "found", (json_t *)found);
	if (!c || snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		goto out;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	r = json_dumpfd(c, fd, JSON_COMPACT);
	if (close(fd) < 0 || r < 0 || rename(tmp, path) < 0) {
		r = -1;
		unlink(tmp);
	}
out:
	if (r < 0)
		log_debug("cannot keep what the probe found in '%s': %s", path, strerror(errno));
	json_decref(c);
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
	bool no_thread;			/* found in the cache: nothing runs */
	json_t *found;			/* NULL: not yet, or failed */
	char error[256];
	const struct probe_cache *cache;	/* NULL: none */
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
	if (found && p->cache)
		cache_save(p->cache->path, p->cache->context, p->cache->dirs, found);
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

struct probe *probe_start(struct smgr *m, const struct petri_limits *limits,
			  const struct probe_cache *cache, bool run)
{
	json_t *cached = cache && cache->path[0] ?
			 cache_load(cache->path, cache->context, cache->dirs) : NULL;
	struct probe *p = (cached || run) ? calloc(1, sizeof(*p)) : NULL;

	if (!p) {
		json_decref(cached);
		return NULL;
	}
	p->m = m;
	p->limits = *limits;
	p->cache = cache && cache->path[0] ? cache : NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	if ((p->found = cached)) {
		log_info("what the sandboxes have: as found before ('%s')", p->cache->path);
		p->done = true;
		p->no_thread = true;
		return p;
	}
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
	if (!p->no_thread)
		pthread_join(p->thread, NULL);
	json_decref(p->found);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->done_cond);
	free(p);
}
