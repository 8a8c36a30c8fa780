#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "jail/jail.h"
#include "util/cidr.h"
#include "util/num.h"

static void config_http_defaults(struct petri_config *c);

/* The host's name as a node's (util/ids.h). */
static void config_default_node(char node[ID_NODE_MAX + 1])
{
	char host[256] = "";

	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
	id_node_from_host(host, node);
}

void config_defaults(struct petri_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->listen, sizeof(c->listen), "127.0.0.1:8080");
	config_default_node(c->node);
	c->max_sessions = 100;
	c->max_executions = 16;
	c->max_body_bytes = 64ull << 20;
	c->max_file_bytes = 64ull << 20;
	c->archive_max_entries = 100000;
	c->archive_max_ratio = 200;
	c->max_return_file_bytes = 4ull << 20;
	c->max_return_files_bytes = 8ull << 20;
	c->network.max_connections = NET_CONNECTIONS_DEFAULT;
	c->network.connections_per_s = NET_RATE_DEFAULT;
	c->shutdown_grace_s = 10;
	config_http_defaults(c);
	c->log_level = LOG_INFO;
	c->idle_timeout_s = 600;
	c->max_lifetime_s = 3600;
	c->pool_min = CONFIG_POOL_MIN_DEFAULT;
	c->pool_max = CONFIG_POOL_MAX_DEFAULT;
	c->pool_window_s = 10;
	c->warm = true;
	c->light_template = true;
	c->warm_wait_s = CONFIG_WARM_WAIT_DEFAULT;
	c->uid_count = JAIL_UID_COUNT_DEFAULT;
	c->ptys = JAIL_PTYS_DEFAULT;
	c->cpu_weight = CG_WEIGHT_DEFAULT;
	c->pool_cpu_weight = CG_WEIGHT_DEFAULT / 2;
	c->daemon_cpu_weight = 2 * CG_WEIGHT_DEFAULT;
	/* What a session, a one-shot, petri run and petri mcp get when
	 * neither the operator's file nor the request says otherwise. */
	c->defaults = (struct petri_limits){
		.memory_mb = 1024, .cpu = 1.0, .pids = 256, .disk_mb = 512,
		.timeout_s = 30, .output_kb = 1024,
	};
	c->max = (struct petri_limits){
		.memory_mb = 4096, .cpu = 2.0, .pids = 1024, .disk_mb = 4096,
		.timeout_s = 600, .output_kb = 8192,
	};
	c->cgroups = true;
	c->record_max_attachment_bytes = 1u << 20;
	c->record_default = config_state_path("record.sqlite", c->record, sizeof(c->record)) != NULL;
}

struct parse {
	struct petri_config *cfg;
	char *err;
	size_t errlen;
	const char *path;
	bool failed;
	/* [sessions]: which of the pool's sizes the file sets, and its
	 * pool_size (check_pool() makes sense of them). */
	bool pool_size_set, pool_min_set, pool_max_set;
	uint32_t pool_size;
	bool network_default_set;	/* [network] default */
};

static bool parse_bool(const char *v, bool *out)
{
	if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1") ||
	    !strcasecmp(v, "on"))
		*out = true;
	else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0") ||
		 !strcasecmp(v, "off"))
		*out = false;
	else
		return false;
	return true;
}

static int push(char ***list, size_t *n, const char *v)
{
	char **l = realloc(*list, (*n + 2) * sizeof(*l));

	if (!l)
		return -ENOMEM;
	*list = l;
	if (!(l[*n] = strdup(v)))
		return -ENOMEM;
	l[++*n] = NULL;
	return 0;
}

static void free_list(char ***list, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*list)[i]);
	free(*list);
	*list = NULL;
	*n = 0;
}

/* Comma-separated values, trimmed, empty ones skipped. */
static int push_list(char ***list, size_t *n, const char *v)
{
	char *copy = strdup(v), *save = NULL, *tok;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok && r == 0; tok = strtok_r(NULL, ",", &save)) {
		char *end;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		end = tok + strlen(tok);
		while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*tok)
			r = push(list, n, tok);
	}
	free(copy);
	return r;
}

/* push_list(), then every value it added must pass ok(), and the list may
 * hold at most max: a repeatable key of a bounded list. */
static bool push_list_checked(char ***list, size_t *n, const char *v,
			      bool (*ok)(const char *), size_t max)
{
	size_t before = *n;

	if (push_list(list, n, v) < 0)
		return false;
	for (size_t i = before; i < *n; i++)
		if (!ok((*list)[i]))
			return false;
	return *n <= max;
}

/* A keys file (api_keys_file, admin_keys_file) into list: a key or a
 * comma-separated list a line, lines that start with '#' skipped.  0, or
 * -errno (it cannot be read, or out of memory). */
static int load_keys_file(char ***list, size_t *n, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int r = 0;

	if (!f)
		return -errno;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] && line[0] != '#')
			r = push_list(list, n, line);
	}
	if (r == 0 && ferror(f))
		r = errno ? -errno : -EIO;	/* a directory: EISDIR */
	fclose(f);
	return r;
}

/* name = v in [section] names a keys file: load it into list, or fail the
 * parse saying which file and why (the generic message would not). */
static bool set_keys_file(struct parse *p, const char *section, const char *name,
			  const char *v, char ***list, size_t *n)
{
	int r = load_keys_file(list, n, v);

	if (r < 0 && !p->failed) {
		snprintf(p->err, p->errlen, "%s: %s in [%s]: cannot read '%s': %s",
			 p->path, name, section, v, strerror(-r));
		p->failed = true;
	}
	return r == 0;
}

/* [limits] and [max_limits]: the ranges of limit_rules. */
static bool set_limit(struct petri_limits *l, const char *name, const char *v)
{
	const struct limit_rule *r = limit_rule_find(name);
	uint32_t u = 0;
	double d = 0;

	if (!r || strcmp(r->name, name))	/* aliases are for requests */
		return false;
	if (r->integer ? !num_u32(v, (uint32_t)r->min, (uint32_t)r->max, &u) :
			 !num_double(v, r->min, r->max, &d))
		return false;
	limit_set(l, r, r->integer ? u : d);
	return true;
}

/* ---- [server]: the HTTP server's budgets ------------------------------ */

static void config_http_defaults(struct petri_config *c)
{
	/* The largest legitimate JSON body: 1 MiB of code, every byte
	 * escaped as \u00XX, plus env and limits. */
	c->max_json_bytes = 8ull << 20;
	c->max_buffered_bytes = 256ull << 20;
	c->max_answers_bytes = 256ull << 20;
	c->min_read_bytes_per_s = 256ull << 10;
	c->http_threads = 2;
	c->http_workers = 0;	/* max_executions + 16 */
	c->http_timeout_s = 30;
	c->max_connections = 4096;
	c->max_connections_per_ip = 256;
}

/* true: name was one of these keys (*ok says whether its value was good). */
static bool set_http(struct petri_config *c, const char *name, const char *v, bool *ok)
{
	uint32_t n;

	if (!strcmp(name, "max_json_kb")) {
		*ok = num_u32(v, 64, 1u << 20, &n);
		c->max_json_bytes = (uint64_t)n << 10;
	} else if (!strcmp(name, "max_buffered_mb")) {
		*ok = num_u32(v, 1, 1u << 20, &n);
		c->max_buffered_bytes = (uint64_t)n << 20;
	} else if (!strcmp(name, "max_answers_mb")) {
		*ok = num_u32(v, 1, 1u << 20, &n);
		c->max_answers_bytes = (uint64_t)n << 20;
	} else if (!strcmp(name, "min_read_kbps")) {
		*ok = num_u32(v, 1, 1u << 20, &n);
		c->min_read_bytes_per_s = (uint64_t)n << 10;
	} else if (!strcmp(name, "http_threads")) {
		*ok = num_u32(v, 1, CONFIG_HTTP_THREADS_MAX, &c->http_threads);
	} else if (!strcmp(name, "http_workers")) {
		*ok = num_u32(v, 1, 4096, &c->http_workers);
	} else if (!strcmp(name, "http_timeout_s")) {
		*ok = num_double(v, 1, 3600, &c->http_timeout_s);
	} else if (!strcmp(name, "max_connections")) {
		*ok = num_u32(v, 16, 1u << 20, &c->max_connections);
	} else if (!strcmp(name, "max_connections_per_ip")) {
		*ok = num_u32(v, 0, 1u << 20, &c->max_connections_per_ip);
	} else if (!strcmp(name, "allowed_hosts")) {
		*ok = push_list(&c->allowed_hosts, &c->nallowed_hosts, v) == 0;
	} else if (!strcmp(name, "allowed_origins")) {
		*ok = push_list(&c->allowed_origins, &c->nallowed_origins, v) == 0;
	} else {
		return false;
	}
	return true;
}

static bool cidr_ok(const char *s)
{
	struct cidr c;

	return cidr_parse(s, &c);
}

static bool set_server(struct parse *p, const char *name, const char *v)
{
	struct petri_config *c = p->cfg;
	uint32_t mb;
	bool ok;

	if (set_http(c, name, v, &ok))
		return ok;

	if (!strcmp(name, "listen")) {
		if (strlen(v) >= sizeof(c->listen))
			return false;
		snprintf(c->listen, sizeof(c->listen), "%s", v);
		return true;
	}
	if (!strcmp(name, "node")) {
		if (!*v)
			config_default_node(c->node);
		else if (id_node_valid(v))
			snprintf(c->node, sizeof(c->node), "%s", v);
		return !*v || id_node_valid(v);
	}
	if (!strcmp(name, "api_keys"))
		return push_list(&c->api_keys, &c->napi_keys, v) == 0;
	if (!strcmp(name, "trusted_proxies"))
		return push_list_checked(&c->trusted_proxies, &c->ntrusted_proxies, v, cidr_ok,
					 CONFIG_TRUSTED_PROXIES_MAX);
	if (!strcmp(name, "record")) {
		if (strlen(v) >= sizeof(c->record) || (v[0] && v[0] != '/'))
			return false;
		snprintf(c->record, sizeof(c->record), "%s", v);
		c->record_default = false;
		return true;
	}
	if (!strcmp(name, "record_max_mb")) {
		if (!num_u32(v, 1, 1u << 20, &mb))
			return false;
		c->record_max_bytes = (uint64_t)mb << 20;
		return true;
	}
	if (!strcmp(name, "record_keep_days"))
		return num_double(v, 0, 36500, &c->record_keep_days);
	if (!strcmp(name, "record_max_attachment_kb")) {
		if (!num_u32(v, 0, 64u << 10, &mb))
			return false;
		c->record_max_attachment_bytes = (uint64_t)mb << 10;
		return true;
	}
	if (!strcmp(name, "api_keys_file"))
		return set_keys_file(p, "server", name, v, &c->api_keys, &c->napi_keys);
	if (!strcmp(name, "max_sessions"))
		return num_u32(v, 1, 100000, &c->max_sessions);
	if (!strcmp(name, "max_executions"))
		return num_u32(v, 1, 100000, &c->max_executions);
	if (!strcmp(name, "max_body_mb")) {
		if (!num_u32(v, 1, 4096, &mb))
			return false;
		c->max_body_bytes = (uint64_t)mb << 20;
		return true;
	}
	if (!strcmp(name, "max_file_mb")) {
		if (!num_u32(v, 1, 4096, &mb))
			return false;
		c->max_file_bytes = (uint64_t)mb << 20;
		return true;
	}
	if (!strcmp(name, "archive_max_entries"))
		return num_u32(v, 1, 10000000, &c->archive_max_entries);
	if (!strcmp(name, "archive_max_ratio"))
		return num_u32(v, 1, 1000000, &c->archive_max_ratio);
	if (!strcmp(name, "max_return_file_kb")) {
		if (!num_u32(v, 1, 1u << 20, &mb))
			return false;
		c->max_return_file_bytes = (uint64_t)mb << 10;
		return true;
	}
	if (!strcmp(name, "max_return_files_mb")) {
		if (!num_u32(v, 1, 1024, &mb))
			return false;
		c->max_return_files_bytes = (uint64_t)mb << 20;
		return true;
	}
	if (!strcmp(name, "shutdown_grace_s"))
		return num_double(v, 0, 3600, &c->shutdown_grace_s);
	if (!strcmp(name, "log_level")) {
		static const char *const levels[] = { "error", "warning", "info", "debug" };

		for (int i = 0; i < 4; i++)
			if (!strcasecmp(v, levels[i])) {
				c->log_level = (enum log_level)i;
				return true;
			}
		return false;
	}
	return false;
}

static bool set_sandbox(struct parse *p, const char *name, const char *v)
{
	struct petri_config *c = p->cfg;
	uint32_t base;

	if (!strcmp(name, "uid_base")) {
		/* Room above it for the sandbox user; never root. */
		if (!num_u32(v, 100000, 4000000000u, &base))
			return false;
		c->uid_base = base;
		return true;
	}
	if (!strcmp(name, "uid_count"))
		/* Host uids of sandboxes, from uid_base + 1000: one per live
		 * sandbox.  The top of the range stays below 2^32 - 1. */
		return num_u32(v, 1, JAIL_UID_COUNT_MAX, &c->uid_count);
	if (!strcmp(name, "ptys"))
		/* Each sandbox's own devpts instance holds at most this many
		 * (its mount's max); the host's share is checked at start. */
		return num_u32(v, 1, JAIL_PTYS_MAX, &c->ptys);
	if (!strcmp(name, "cgroup_parent")) {
		if (v[0] != '/' || strlen(v) >= sizeof(c->cgroup_parent) || strstr(v, ".."))
			return false;
		snprintf(c->cgroup_parent, sizeof(c->cgroup_parent), "%s", v);
		return true;
	}
	if (!strcmp(name, "cgroups"))
		return parse_bool(v, &c->cgroups);
	if (!strcmp(name, "cpu_weight"))
		return num_u32(v, CG_WEIGHT_MIN, CG_WEIGHT_MAX, &c->cpu_weight);
	if (!strcmp(name, "pool_cpu_weight"))
		return num_u32(v, CG_WEIGHT_MIN, CG_WEIGHT_MAX, &c->pool_cpu_weight);
	if (!strcmp(name, "daemon_cpu_weight"))
		return num_u32(v, CG_WEIGHT_MIN, CG_WEIGHT_MAX, &c->daemon_cpu_weight);
	if (!strcmp(name, "ro_bind"))
		return v[0] == '/' && c->nro_binds < CONFIG_RO_BINDS_MAX &&
		       push(&c->ro_binds, &c->nro_binds, v) == 0;
	if (!strcmp(name, "env")) {
		const char *eq = strchr(v, '=');

		if (!eq || eq == v || c->nenv >= 64 || (v[0] >= '0' && v[0] <= '9') ||
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
		    (size_t)(eq - v))
			return false;
		return push(&c->env, &c->nenv, v) == 0;
	}
	return false;
}

/* [language.NAME] name = value: the section's language, made on its first
 * key (sections may repeat); its strings and lists are the config's. */
static bool set_language(struct parse *p, const char *lang, const char *name, const char *v)
{
	struct petri_config *c = p->cfg;
	struct language *l = NULL, *grown;
	const char **field = NULL;
	char **list = NULL;
	size_t n = 0;

	for (size_t i = 0; i < c->nlanguages && !l; i++)
		if (!strcmp(c->languages[i].name, lang))
			l = &c->languages[i];
	if (!l) {
		if (c->nlanguages > LANG_EXTRA_MAX)
			return false;	/* lang_check() says why */
		grown = realloc(c->languages, (c->nlanguages + 1) * sizeof(*grown));
		if (!grown)
			return false;
		c->languages = grown;
		l = &c->languages[c->nlanguages];
		*l = (struct language){ .name = strdup(lang) };
		if (!l->name)
			return false;
		c->nlanguages++;
	}
	if (!strcmp(name, "file"))
		field = &l->file;
	else if (!strcmp(name, "compile"))
		field = &l->compile;
	else if (!strcmp(name, "run"))
		field = &l->run;
	else if (!strcmp(name, "version"))
		field = &l->version;
	else if (!strcmp(name, "summary"))
		field = &l->summary;
	if (field) {
		if (*field || strlen(v) > LANG_COMMAND_MAX)
			return false;	/* given twice, or far too long */
		return (*field = strdup(v)) != NULL;
	}
	if (strcmp(name, "aliases") && strcmp(name, "extensions"))
		return false;
	if (push_list(&list, &n, v) < 0 || !list) {
		free_list(&list, &n);
		return false;
	}
	if (!strcmp(name, "aliases") ? !l->aliases : !l->extensions) {
		*(!strcmp(name, "aliases") ? &l->aliases : &l->extensions) =
			(const char *const *)list;
		return true;
	}
	free_list(&list, &n);
	return false;
}

/* ---- [python]: what an operator adds to every session's Python -------- */

/* What the template imports unless the file says otherwise, chosen with
 * bench/preload.py (docs/configuration.md has the numbers): the data stack
 * and the analyst's top-level packages save a fresh session ~0.4 s of
 * imports for ~1 ms more CPU per fresh sandbox.  statsmodels.api (and
 * sklearn's estimators) would save ~0.3 s more where used, but cost every
 * sandbox ~6 ms (+20 %: ~200 more mappings to copy at each fork). */
static const char *const preload_default[] = {
	"numpy", "pandas", "matplotlib", "matplotlib.pyplot", "scipy", "scipy.stats",
	"openpyxl", "PIL.Image", "seaborn", "sklearn", "statsmodels", NULL
};

bool config_preload_name_ok(const char *name)
{
	size_t n = strlen(name);
	bool start = true;	/* at the start of a dotted part */

	if (n == 0 || n > CONFIG_PRELOAD_NAME_MAX)
		return false;
	for (const char *s = name; *s; s++) {
		bool alpha = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
		bool digit = *s >= '0' && *s <= '9';

		if (*s == '.') {
			if (start)
				return false;	/* "", ".x", "x..y" */
			start = true;
		} else if (alpha || (digit && !start)) {
			start = false;
		} else {
			return false;
		}
	}
	return !start;			/* "x." */
}

const char *const *config_preload(const struct petri_config *c)
{
	static const char *const none[] = { NULL };

	if (!c->preload_set)
		return preload_default;
	return c->preload ? (const char *const *)c->preload : none;
}

bool config_light_template(const struct petri_config *c)
{
	return c->warm && c->light_template && config_preload(c)[0];
}

static bool word_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '_';
}

bool config_preload_named(const struct petri_config *c, const char *code)
{
	return config_code_names(code, config_preload(c));
}

bool config_code_names(const char *code, const char *const *mods)
{
	/* Each word of the code once against each module's first part. */
	for (const char *s = code; *s;) {
		const char *w = s;

		while (*s && word_char(*s))
			s++;
		for (size_t i = 0; s > w && mods[i]; i++) {
			const char *dot = strchr(mods[i], '.');
			size_t n = dot ? (size_t)(dot - mods[i]) : strlen(mods[i]);

			if ((size_t)(s - w) == n && !memcmp(w, mods[i], n))
				return true;
		}
		while (*s && !word_char(*s))
			s++;
	}
	return false;
}

/* preload = a, b.c, ... (repeatable: the lines add up; the first replaces
 * the default; an empty value preloads nothing). */
static bool set_preload(struct parse *p, const char *v)
{
	p->cfg->preload_set = true;
	return push_list_checked(&p->cfg->preload, &p->cfg->npreload, v,
				 config_preload_name_ok, CONFIG_PRELOAD_MAX);
}

/* A directory named on sys.path (PETRI_PYTHON_PATH, ':'-separated) and in
 * pip's find-links (whitespace-separated): neither separator fits in it. */
static bool plain_dir_name(const char *v)
{
	if (v[0] != '/')
		return false;
	for (const unsigned char *c = (const unsigned char *)v; *c; c++)
		if (*c <= ' ' || *c == ':' || *c == 0x7f)
			return false;
	return true;
}

static bool set_cluster(struct parse *p, const char *name, const char *v)
{
	struct petri_config *c = p->cfg;

	if (!strcmp(name, "admin_keys"))
		return push_list(&c->admin_keys, &c->nadmin_keys, v) == 0;
	if (!strcmp(name, "admin_keys_file"))
		return set_keys_file(p, "cluster", name, v, &c->admin_keys, &c->nadmin_keys);
	if (!strcmp(name, "agent_listen")) {
		if (strlen(v) >= sizeof(c->agent_listen) || !strncmp(v, "unix:", 5))
			return false;
		snprintf(c->agent_listen, sizeof(c->agent_listen), "%s", v);
		return true;
	}
	if (!strcmp(name, "drain_grace_s"))
		return num_double(v, 0, 86400, &c->drain_grace_s);
	return false;
}

/* An admin key that is also an API key would let a tenant drain the node.
 * Checked once the whole file is read: keys and keys files come in any
 * order. */
static int check_admin_keys(const struct petri_config *c, char *err, size_t errlen)
{
	for (size_t i = 0; i < c->nadmin_keys; i++)
		for (size_t j = 0; j < c->napi_keys; j++)
			if (!strcmp(c->admin_keys[i], c->api_keys[j])) {
				snprintf(err, errlen, "[cluster] admin_keys: a key is also one of "
					 "[server] api_keys (or their keys files): give "
					 "administration keys of their own");
				return -EINVAL;
			}
	return 0;
}

static bool set_python(struct parse *p, const char *name, const char *v)
{
	struct petri_config *c = p->cfg;

	if (!strcmp(name, "path"))
		return push_list_checked(&c->python_path, &c->npython_path, v, plain_dir_name,
					 CONFIG_PYTHON_PATH_MAX);
	if (!strcmp(name, "wheelhouse")) {
		if (!plain_dir_name(v) || strlen(v) >= sizeof(c->wheelhouse))
			return false;
		snprintf(c->wheelhouse, sizeof(c->wheelhouse), "%s", v);
		return true;
	}
	if (!strcmp(name, "preload"))
		return set_preload(p, v);
	if (!strcmp(name, "light_template"))
		return parse_bool(v, &c->light_template);
	return false;
}

/* A list of rules (allow, deny) or ranges (reachable): comma-separated,
 * repeatable, each checked by net/policy.h; a bad one is named. */
static bool set_network_list(struct parse *p, const char *name, const char *v)
{
	struct net_config *n = &p->cfg->network;
	char **items = NULL, why[200];
	size_t count = 0;
	bool ok = push_list(&items, &count, v) == 0;

	for (size_t i = 0; ok && i < count; i++) {
		if (!strcmp(name, "reachable")) {
			struct net_rule r;

			ok = n->nreachable < NET_REACHABLE_MAX &&
			     net_rule_parse(items[i], true, &r, why, sizeof(why)) && !r.is_name;
			if (ok)
				n->reachable[n->nreachable++] = r.range;
			else if (n->nreachable == NET_REACHABLE_MAX || r.is_name)
				snprintf(why, sizeof(why), "at most %d IPv4 ranges, no names",
					 NET_REACHABLE_MAX);
		} else {
			struct net_policy *d = &n->deflt;
			bool deny = !strcmp(name, "deny");
			size_t *cnt = deny ? &d->ndeny : &d->nallow;

			ok = *cnt < NET_RULES_MAX &&
			     net_rule_parse(items[i], deny, &(deny ? d->deny : d->allow)[*cnt], why,
					    sizeof(why));
			if (ok)
				(*cnt)++;
			else if (*cnt == NET_RULES_MAX)
				snprintf(why, sizeof(why), "at most %d rules", NET_RULES_MAX);
		}
		if (!ok && !p->failed) {
			snprintf(p->err, p->errlen, "%s: [network] %s: %s", p->path, name, why);
			p->failed = true;
		}
	}
	free_list(&items, &count);
	return ok;
}

static bool set_network(struct parse *p, const char *name, const char *v)
{
	struct net_config *n = &p->cfg->network;

	if (!strcmp(name, "default")) {
		p->network_default_set = true;
		return net_mode_parse(v, &n->deflt.mode);
	}
	if (!strcmp(name, "clients_may"))
		return net_mode_parse(v, &n->clients_may);
	if (!strcmp(name, "allow") || !strcmp(name, "deny") || !strcmp(name, "reachable"))
		return set_network_list(p, name, v);
	if (!strcmp(name, "upstream_dns"))
		return net_upstream_parse(v, n);
	if (!strcmp(name, "package_index") || !strcmp(name, "npm_registry")) {
		char why[200];

		if (net_index_parse(v, !strcmp(name, "package_index") ? &n->pip : &n->npm, why,
				    sizeof(why)))
			return true;
		if (!p->failed) {
			snprintf(p->err, p->errlen, "%s: [network] %s: %s", p->path, name, why);
			p->failed = true;
		}
		return false;
	}
	if (!strcmp(name, "max_connections"))
		return num_u32(v, 1, 65536, &n->max_connections);
	if (!strcmp(name, "connections_per_s"))
		return num_u32(v, 1, 10000, &n->connections_per_s);
	return false;
}

/* The default policy says what it is: an allow-list names something, an
 * open or closed one names nothing to allow. */
static int check_network(const struct parse *p, char *err, size_t errlen)
{
	struct net_config *n = &p->cfg->network;
	const struct net_policy *d = &n->deflt;
	const struct net_index *ix[] = { &n->pip, &n->npm };
	static const char *const keys[] = { "package_index", "npm_registry" };
	const char *why;

	if (d->mode == NET_ALLOWLIST && d->nallow == 0) {
		snprintf(err, errlen, "%s: [network] default = allowlist needs allow = (names, "
			 "addresses or ranges)", p->path);
		return -EINVAL;
	}
	if (d->mode != NET_ALLOWLIST && d->nallow) {
		snprintf(err, errlen, "%s: [network] allow is the default allow-list: it needs "
			 "default = allowlist", p->path);
		return -EINVAL;
	}
	/* npm uses pip's index unless it has its own; an index no session
	 * could ever reach would be a setting that does nothing. */
	if (!n->npm.url[0])
		n->npm = n->pip;
	for (size_t i = 0; i < 2; i++) {
		if (!ix[i]->url[0])
			continue;
		if (!net_config_enabled(n)) {
			snprintf(err, errlen, "%s: [network] %s: no session can have a network "
				 "(default and clients_may are none)", p->path, keys[i]);
			return -EINVAL;
		}
		if (net_policy_denies(d, &ix[i]->host)) {
			snprintf(err, errlen, "%s: [network] %s: its host is in [network] deny",
				 p->path, keys[i]);
			return -EINVAL;
		}
		if (!ix[i]->host.is_name && (why = net_never_reached(n, ix[i]->host.range.addr))) {
			snprintf(err, errlen, "%s: [network] %s: its address is %s", p->path,
				 keys[i], why);
			return -EINVAL;
		}
	}
	return 0;
}

/* pool_size, pool_min, pool_max: noted as set, for check_pool(). */
static bool set_pool_count(bool *set, const char *v, uint32_t *out)
{
	*set = true;
	return num_u32(v, 0, CONFIG_POOL_MAX, out);
}

static int handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct parse *p = user;
	bool ok;

	if (!strcmp(section, "server"))
		ok = set_server(p, name, value);
	else if (!strcmp(section, "sessions")) {
		if (!strcmp(name, "idle_timeout_s"))
			ok = num_double(value, 1, 30 * 86400, &p->cfg->idle_timeout_s);
		else if (!strcmp(name, "max_lifetime_s"))
			ok = num_double(value, 1, 365 * 86400, &p->cfg->max_lifetime_s);
		else if (!strcmp(name, "pool_size"))
			ok = set_pool_count(&p->pool_size_set, value, &p->pool_size);
		else if (!strcmp(name, "pool_min"))
			ok = set_pool_count(&p->pool_min_set, value, &p->cfg->pool_min);
		else if (!strcmp(name, "pool_max"))
			ok = set_pool_count(&p->pool_max_set, value, &p->cfg->pool_max);
		else if (!strcmp(name, "pool_window_s"))
			ok = num_double(value, 1, 3600, &p->cfg->pool_window_s);
		else if (!strcmp(name, "warm"))
			ok = parse_bool(value, &p->cfg->warm);
		else if (!strcmp(name, "warm_wait_s"))
			ok = num_double(value, 0, 600, &p->cfg->warm_wait_s);
		else
			ok = false;
	} else if (!strcmp(section, "limits"))
		ok = set_limit(&p->cfg->defaults, name, value);
	else if (!strcmp(section, "max_limits"))
		ok = set_limit(&p->cfg->max, name, value);
	else if (!strcmp(section, "sandbox"))
		ok = set_sandbox(p, name, value);
	else if (!strncmp(section, "language.", 9))
		ok = set_language(p, section + 9, name, value);
	else if (!strcmp(section, "python"))
		ok = set_python(p, name, value);
	else if (!strcmp(section, "cluster"))
		ok = set_cluster(p, name, value);
	else if (!strcmp(section, "network"))
		ok = set_network(p, name, value);
	else
		ok = false;
	if (!ok && !p->failed) {
		snprintf(p->err, p->errlen, "%s: bad value or unknown setting '%s = %s' in [%s]",
			 p->path, name, value, section);
		p->failed = true;
	}
	return 1;	/* keep going; the first error is what we report */
}

static int check_defaults_within_max(struct petri_config *c, char *err, size_t errlen)
{
	const struct limit_rule *r = limits_above(&c->defaults, &c->max);

	if (r) {
		snprintf(err, errlen, "%s = %g in [limits] is above its maximum %g in [max_limits]",
			 r->name, limit_get(&c->defaults, r), limit_get(&c->max, r));
		return -EINVAL;
	}
	return 0;
}

/* pool_size is the fixed size of configurations older than pool_min and
 * pool_max: it is both, and naming it beside either is ambiguous. */
static int check_pool(const struct parse *p, char *err, size_t errlen)
{
	struct petri_config *c = p->cfg;

	if (p->pool_size_set && (p->pool_min_set || p->pool_max_set)) {
		snprintf(err, errlen, "%s: pool_size in [sessions] is a fixed pool (pool_min = "
			 "pool_max = pool_size): set either pool_size or pool_min and pool_max, "
			 "not both", p->path);
		return -EINVAL;
	}
	if (p->pool_size_set)
		c->pool_min = c->pool_max = p->pool_size;
	if (c->pool_min > c->pool_max) {
		snprintf(err, errlen, "%s: pool_min = %u in [sessions] is above pool_max = %u%s",
			 p->path, c->pool_min, c->pool_max,
			 p->pool_max_set ? "" : " (its default): set pool_max too");
		return -EINVAL;
	}
	return 0;
}

/* Every live sandbox has a host uid of its own: the sessions, the pool at
 * its largest, the warm templates (one retiring while the next starts) and
 * the probe (session/probe.c) must fit.  With a light template, two more
 * templates, and one more sandbox: the two pools hold pool_max between
 * them, but each may fork one while the other's count is read. */
static int check_uid_range(struct petri_config *c, char *err, size_t errlen)
{
	bool two = config_light_template(c);
	uint64_t need = (uint64_t)c->max_sessions + c->pool_max + (two ? 6 : 3);

	if (c->uid_count < need) {
		snprintf(err, errlen, "uid_count = %u in [sandbox] is too small: max_sessions + "
			 "pool_max + %d = %llu sandboxes can live at once (%s), and each needs a "
			 "host uid of its own", c->uid_count, two ? 6 : 3, (unsigned long long)need,
			 two ? "the pools at their largest, 4 templates, the probe and a refill "
			       "besides" : "the pool at its largest, 2 templates and the probe besides");
		return -EINVAL;
	}
	return 0;
}

static int check_languages(struct petri_config *c, const char *path, char *err, size_t errlen)
{
	char why[512];

	for (size_t i = 0; i < c->nlanguages; i++) {
		struct language *l = &c->languages[i];
		char line[LANG_COMMAND_MAX + 64];

		/* Lists are never NULL (languages.h): an empty one. */
		if (!l->aliases && !(l->aliases = calloc(1, sizeof(char *))))
			return -ENOMEM;
		if (!l->extensions && !(l->extensions = calloc(1, sizeof(char *))))
			return -ENOMEM;
		if (!l->summary && l->run) {
			snprintf(line, sizeof(line), "%s code, run with: %s", l->name, l->run);
			if (!(l->summary = strdup(line)))
				return -ENOMEM;
		}
	}
	if (lang_check(c->languages, c->nlanguages, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -EINVAL;
	}
	return 0;
}

/* A bind that cannot work would make every sandbox fail to start (or, on
 * the warm path, the template): refuse it now, naming its setting. */
static int check_bind(const char *path, const char *setting, const char *section,
		      bool want_dir, const char *file, char *err, size_t errlen)
{
	char why[1280];
	int r = jail_bind_check(path, want_dir, why, sizeof(why));

	if (r < 0)
		snprintf(err, errlen, "%s: %s = %s in [%s] cannot be bound into the "
			 "sandbox: the path %s", file, setting, path, section, why);
	return r;
}

static int check_binds(struct petri_config *c, const char *file, char *err, size_t errlen)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < c->nro_binds; i++)
		r = check_bind(c->ro_binds[i], "ro_bind", "sandbox", false, file, err, errlen);
	for (size_t i = 0; r == 0 && i < c->npython_path; i++)
		r = check_bind(c->python_path[i], "path", "python", true, file, err, errlen);
	if (r == 0 && c->wheelhouse[0])
		r = check_bind(c->wheelhouse, "wheelhouse", "python", true, file, err, errlen);
	return r;
}

/* inih reads a line into INI_MAX_LINE bytes and parses what does not fit
 * as a line of its own: a long value would be cut short without a word.
 * Refuse such a line, naming it.  0, -ENOENT or -EINVAL. */
static int check_line_lengths(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t len = 0;
	int line = 1, ch, r = 0;

	if (!f)
		return -ENOENT;
	while ((ch = getc(f)) != EOF) {
		if (ch == '\n') {
			line++;
			len = 0;
		} else if (++len > INI_MAX_LINE - 2) {
			snprintf(err, errlen, "%s:%d: the line is longer than %d characters (a "
				 "list can go on more lines of the same key)", path, line,
				 INI_MAX_LINE - 2);
			r = -EINVAL;
			break;
		}
	}
	fclose(f);
	return r;
}

int config_load(struct petri_config *c, const char *path, char *err, size_t errlen)
{
	struct parse p = { .cfg = c, .err = err, .errlen = errlen, .path = path };
	int r;

	config_defaults(c);
	err[0] = '\0';
	if (!path)
		return 0;
	if ((r = check_line_lengths(path, err, errlen)) == -EINVAL)
		return r;
	r = ini_parse(path, handler, &p);
	if (r < 0) {
		snprintf(err, errlen, "cannot read '%s'", path);
		return -ENOENT;
	}
	if (r > 0 && !p.failed)
		snprintf(err, errlen, "%s:%d: syntax error", path, r);
	if (r > 0 || p.failed) {
		config_release(c);
		return -EINVAL;
	}
	if ((r = check_defaults_within_max(c, err, errlen)) < 0 ||
	    (r = check_pool(&p, err, errlen)) < 0 ||
	    (r = check_uid_range(c, err, errlen)) < 0 ||
	    (r = check_languages(c, path, err, errlen)) < 0 ||
	    (r = check_binds(c, path, err, errlen)) < 0 ||
	    (r = check_admin_keys(c, err, errlen)) < 0 ||
	    (r = check_network(&p, err, errlen)) < 0)
		config_release(c);
	return r;
}

static void free_strings(const char *const *list)
{
	for (size_t i = 0; list && list[i]; i++)
		free((char *)list[i]);
	free((char **)list);
}

static void free_languages(struct petri_config *c)
{
	for (size_t i = 0; i < c->nlanguages; i++) {
		struct language *l = &c->languages[i];

		free((char *)l->name);
		free((char *)l->summary);
		free((char *)l->file);
		free((char *)l->compile);
		free((char *)l->run);
		free((char *)l->version);
		free_strings(l->aliases);
		free_strings(l->extensions);
	}
	free(c->languages);
	c->languages = NULL;
	c->nlanguages = 0;
}

void config_release(struct petri_config *c)
{
	free_languages(c);
	free_list(&c->api_keys, &c->napi_keys);
	free_list(&c->admin_keys, &c->nadmin_keys);
	free_list(&c->trusted_proxies, &c->ntrusted_proxies);
	free_list(&c->ro_binds, &c->nro_binds);
	free_list(&c->env, &c->nenv);
	free_list(&c->python_path, &c->npython_path);
	free_list(&c->preload, &c->npreload);
	free_list(&c->allowed_hosts, &c->nallowed_hosts);
	free_list(&c->allowed_origins, &c->nallowed_origins);
}

uint64_t config_share_of(const struct petri_config *c, uint64_t total)
{
	size_t parts = c->napi_keys ? c->napi_keys : CONFIG_SHARE_PARTS_MAX;
	uint64_t each;

	if (parts > CONFIG_SHARE_PARTS_MAX)
		parts = CONFIG_SHARE_PARTS_MAX;
	each = total / parts;
	return each ? each : 1;
}

bool config_listen_is_local(const char *listen)
{
	char host[256];
	const char *colon;
	struct in_addr a4;
	struct in6_addr a6;
	size_t n;

	if (!strncmp(listen, "unix:", 5))
		return true;
	colon = strrchr(listen, ':');
	if (!colon)
		return false;
	n = (size_t)(colon - listen);
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, listen, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	if (!strcmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false;
}

int config_check_listen(const struct petri_config *cfg, char *err, size_t errlen)
{
	if (cfg->napi_keys || config_listen_is_local(cfg->listen))
		return 0;
	snprintf(err, errlen, "refusing to listen on '%s' without API keys: anyone who "
		 "can reach it could run code; set api_keys in [server], or listen on a "
		 "loopback address or a unix socket", cfg->listen);
	return -EPERM;
}

/* One of petri's directories: systemd's (the variable it sets for the
 * unit, the first of its colon-separated list), else root's, else
 * $XDG_VAR/petri or ~/HOME_SUB/petri; then "/name" when name is given.
 * buf, or NULL when none fits or none can be named. */
static const char *petri_dir(char *buf, size_t len, const char *systemd_var,
			     const char *root, const char *xdg_var, const char *home_sub,
			     const char *name)
{
	const char *sd = getenv(systemd_var), *xdg = getenv(xdg_var), *home = getenv("HOME");
	const char *sep = name ? "/" : "", *tail = name ? name : "";
	int n;

	if (sd && sd[0] == '/')
		n = snprintf(buf, len, "%.*s%s%s", (int)strcspn(sd, ":"), sd, sep, tail);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "%s%s%s", root, sep, tail);
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/petri%s%s", xdg, sep, tail);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/%s/petri%s%s", home, home_sub, sep, tail);
	else
		n = -1;
	if (n <= 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return NULL;
	}
	return buf;
}

const char *config_state_path(const char *name, char *buf, size_t len)
{
	return petri_dir(buf, len, "STATE_DIRECTORY", "/var/lib/petri", "XDG_STATE_HOME",
			 ".local/state", name);
}

const char *config_cache_path(char *buf, size_t len)
{
	return petri_dir(buf, len, "CACHE_DIRECTORY", "/var/cache/petri", "XDG_CACHE_HOME",
			 ".cache", NULL);
}

const char *config_default_path(char *buf, size_t len)
{
	const char *env = getenv("PETRI_CONFIG"), *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/etc/petri/petri.ini");
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/petri/petri.ini", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.config/petri/petri.ini", home);
	else
		return NULL;
	if (n <= 0 || (size_t)n >= len)
		return NULL;
	/* PETRI_CONFIG names a file that must be there: config_load() says so
	 * if it is not.  The built-in paths are used only when present. */
	if (!env && access(buf, F_OK) != 0)
		return NULL;
	return buf;
}
