/* config — the operator's one configuration file (INI, parsed by inih).
 *
 *   [server]   listen, node, api_keys, api_keys_file, max_sessions,
 *              max_executions, max_body_mb, max_file_mb, shutdown_grace_s,
 *              log_level, record, record_max_mb, record_keep_days,
 *              record_max_attachment_kb, max_return_file_kb, max_return_files_mb,
 *              archive_max_entries, archive_max_ratio
 *              HTTP: max_json_kb, max_buffered_mb, http_threads, http_workers,
 *              http_timeout_s, max_connections, max_connections_per_ip,
 *              allowed_hosts, allowed_origins, trusted_proxies
 *   [sessions] idle_timeout_s, max_lifetime_s, pool_min, pool_max,
 *              pool_window_s, pool_size (a fixed pool_min = pool_max), warm,
 *              warm_wait_s
 *   [limits]   memory_mb, cpu, pids, disk_mb, timeout_s, output_kb
 *              (defaults for new sessions)
 *   [max_limits] the same keys: the most a client may ask for
 *   [sandbox]  uid_base, uid_count, ptys, cgroup_parent, cgroups, ro_bind (repeatable),
 *              cpu_weight, pool_cpu_weight, daemon_cpu_weight, env
 *              (repeatable, NAME=value)
 *   [language.NAME] file, run, compile, version, aliases, extensions, summary:
 *              a language the operator adds (src/exec/languages.h)
 *   [cluster]  admin_keys, admin_keys_file, agent_listen, drain_grace_s
 *              (docs/cluster.md)
 *   [python]   path (directories on sys.path, repeatable), wheelhouse (the
 *              directory of wheels that pip installs from), preload (modules
 *              the warm template imports), light_template
 *   [network]  default, clients_may, allow, deny, reachable, upstream_dns,
 *              max_connections, connections_per_s:
 *              what sessions' code may reach (src/net/policy.h)
 *
 * docs/configuration.md documents every key.  Unknown keys and bad values
 * are errors naming the key: a typo must not silently weaken a limit. */
#ifndef PETRI_CONFIG_H
#define PETRI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec/limits.h"

struct jail_file;
#include "exec/languages.h"
#include "net/policy.h"
#include "util/ids.h"
#include "util/log.h"

struct petri_config {
	char listen[256];	/* "HOST:PORT" or "unix:PATH" */
	/* This petri's name among several behind a router, in every id it
	 * makes (util/ids.h); by default the host's (id_node_from_host()). */
	char node[ID_NODE_MAX + 1];
	char **api_keys;
	size_t napi_keys;
	uint32_t max_sessions;
	uint32_t max_executions;
	uint64_t max_body_bytes;
	uint64_t max_file_bytes;
	/* An archive extracted into a session (docs/api.md#archives): its
	 * entries, and how many times its size it may expand to (beyond
	 * 16 MiB); the bytes are bounded by the session's disk limit. */
	uint32_t archive_max_entries;
	uint32_t archive_max_ratio;
	/* A one-shot's written files returned inline ("return_files"): each,
	 * and all of one answer together. */
	uint64_t max_return_file_bytes;
	uint64_t max_return_files_bytes;
	double shutdown_grace_s;
	enum log_level log_level;
	/* The execution record (src/record/record.h): its file, "" for
	 * memory; by default config_state_path()'s record.sqlite.  Its
	 * bounds: bytes (0: the record's default), days (0: none), and the
	 * base64 bytes of one image or file it keeps. */
	char record[512];
	bool record_default;	/* record is the default path */
	uint64_t record_max_bytes;
	double record_keep_days;
	uint64_t record_max_attachment_bytes;

	/* The HTTP server's budgets (src/api, docs/configuration.md). */
	uint64_t max_json_bytes;	/* a JSON request body */
	uint64_t max_buffered_bytes;	/* all request bodies held at once */
	uint64_t max_answers_bytes;	/* answers made and not yet read (api/answers.h) */
	uint64_t min_read_bytes_per_s;	/* how fast a client must read an answer */
	uint32_t http_threads;		/* event threads, at most CONFIG_HTTP_THREADS_MAX */
	uint32_t http_workers;		/* threads that run blocking handlers */
	double http_timeout_s;		/* a connection idle while reading or writing */
	uint32_t max_connections;
	uint32_t max_connections_per_ip;
	char **allowed_hosts;		/* NULL-terminated; NULL: the defaults */
	size_t nallowed_hosts;
	char **allowed_origins;		/* NULL-terminated, besides the server's own */
	size_t nallowed_origins;
	/* Routers whose X-Forwarded-For names the client (util/cidr.h
	 * ranges, at most CONFIG_TRUSTED_PROXIES_MAX); none: the header is
	 * never read. */
	char **trusted_proxies;
	size_t ntrusted_proxies;

	double idle_timeout_s;
	double max_lifetime_s;
	/* Warm sandboxes kept ready (session/pool.h): at least pool_min, at
	 * most pool_max, by the take rate over pool_window_s.  pool_size = N
	 * in the file is pool_min = pool_max = N. */
	uint32_t pool_min, pool_max;
	double pool_window_s;
	bool warm;		/* fork sandboxes from a template when possible */
	/* A sandbox asked for while the template is starting waits at most
	 * this long for it, then starts cold; 0: never waits. */
	double warm_wait_s;

	struct petri_limits defaults;
	struct petri_limits max;

	uid_t uid_base;
	uint32_t uid_count;	/* host uids leased to sandboxes, see jail.h */
	uint32_t ptys;		/* devpts max of each sandbox */
	char cgroup_parent[256];
	bool cgroups;
	/* Shares of the CPU when it is contended (cgroup.h's scale, 100 the
	 * kernel's default; docs/configuration.md, "Fair CPU"): each
	 * session's sandbox; the warm template and the sandboxes it forks
	 * ahead, until a session takes one; the daemon itself, where it has
	 * a cgroup of its own. */
	uint32_t cpu_weight, pool_cpu_weight, daemon_cpu_weight;
	char **ro_binds;	/* NULL-terminated */
	size_t nro_binds;
	char **env;		/* NULL-terminated "NAME=value" */
	size_t nenv;

	/* [cluster] (docs/cluster.md): the keys that may drain and undrain
	 * this node (admin_keys and admin_keys_file; none of them an API
	 * key); where HAProxy's agent-check reads its state ("": no agent);
	 * how long SIGTERM drains before the daemon stops (0: it stops at
	 * once, as a single node does). */
	char **admin_keys;
	size_t nadmin_keys;
	char agent_listen[256];
	double drain_grace_s;

	/* [language.NAME]: the operator's languages, checked by lang_check();
	 * every string and list is the configuration's own. */
	struct language *languages;
	size_t nlanguages;
	/* [python]: directories on every session's sys.path, and the
	 * wheelhouse pip installs from ("": none).  Each is bound read-only
	 * into every sandbox at the same place, as ro_binds are. */
	char **python_path;	/* NULL-terminated */
	size_t npython_path;
	char wheelhouse[1024];
	/* [python] preload: modules the warm template imports before it
	 * forks, as the file gave them (NULL-terminated); read it with
	 * config_preload(), which knows the default. */
	char **preload;
	size_t npreload;
	bool preload_set;	/* the file said preload: the default is gone */
	/* [python] light_template: one-shots whose code names none of the
	 * preloaded modules are forked from a second template that imports
	 * none of them (config_light_template(), config_preload_named()). */
	bool light_template;

	/* [network]: the default policy, the most a client may ask, the
	 * private ranges sessions may reach, the resolver upstream. */
	struct net_config network;

	/* Not a key: the files of what the sandboxes' libraries build on
	 * first use (src/runtime/cache.h), made at start by
	 * cli_local_cache(), which owns them; none: each sandbox builds what
	 * it needs, as before. */
	const struct jail_file *cache_files;
	size_t ncache_files;
};

/* The pool's sizes: pool_min and pool_max's defaults, and the most either
 * may be. */
#define CONFIG_POOL_MIN_DEFAULT 2
#define CONFIG_POOL_MAX_DEFAULT 8
#define CONFIG_POOL_MAX 1000
#define CONFIG_TRUSTED_PROXIES_MAX 64
/* Event threads of the HTTP server (http_threads). */
#define CONFIG_HTTP_THREADS_MAX 64

/* [sessions] warm_wait_s by default: a few seconds, about what a cold start
 * of Python with pandas costs on a loaded host. */
#define CONFIG_WARM_WAIT_DEFAULT 5.0

/* At most this many of each: every one is a mount in every sandbox. */
#define CONFIG_RO_BINDS_MAX 64
#define CONFIG_PYTHON_PATH_MAX 16

/* Fill cfg with the defaults. */
void config_defaults(struct petri_config *cfg);
/* Defaults, then the file at path (NULL: defaults only).  0 or -errno with
 * a message in err. */
int config_load(struct petri_config *cfg, const char *path, char *err, size_t errlen);
void config_release(struct petri_config *cfg);

/* The file every command reads when not given --config: $PETRI_CONFIG if
 * set, else /etc/petri/petri.ini for root and
 * $XDG_CONFIG_HOME/petri/petri.ini (~/.config/...) for anyone else; NULL
 * (defaults only) when that file does not exist, or when PETRI_CONFIG is
 * set but empty.  Into buf. */
const char *config_default_path(char *buf, size_t len);

/* The file NAME in petri's state directory: $STATE_DIRECTORY (systemd's
 * StateDirectory=), else /var/lib/petri as root, else
 * $XDG_STATE_HOME/petri or ~/.local/state/petri.  buf, or NULL when none
 * fits or none can be named. */
const char *config_state_path(const char *name, char *buf, size_t len);

/* petri's cache directory, for what it builds once for every sandbox
 * (src/runtime/cache.h): $CACHE_DIRECTORY (systemd's CacheDirectory=),
 * else /var/cache/petri as root, else $XDG_CACHE_HOME/petri or
 * ~/.cache/petri.  buf, or NULL when none fits or none can be named. */
const char *config_cache_path(char *buf, size_t len);

/* [python] preload: at most CONFIG_PRELOAD_MAX modules, each a dotted
 * Python identifier (ASCII) of at most CONFIG_PRELOAD_NAME_MAX bytes. */
#define CONFIG_PRELOAD_MAX	64
#define CONFIG_PRELOAD_NAME_MAX	128
bool config_preload_name_ok(const char *name);
/* The modules the template imports: the file's, else the default
 * (NULL-terminated, never NULL; owned by cfg or static). */
const char *const *config_preload(const struct petri_config *cfg);
/* Is there a light template: warm, light_template, and something to
 * preload (without, the one template is light already)? */
bool config_light_template(const struct petri_config *cfg);
/* Does code (NUL-terminated) name the top-level package of one of the
 * modules the template preloads, as a whole word anywhere (an import, an
 * attribute, a string)?  Only then is the heavy template worth its cost
 * to a one-shot; a miss costs time, never a wrong answer: any sandbox
 * can import anything. */
bool config_preload_named(const struct petri_config *cfg, const char *code);
/* The same against any list of dotted names (NULL-terminated). */
bool config_code_names(const char *code, const char *const *names);

/* Is listen a loopback TCP address or a unix socket? */
bool config_listen_is_local(const char *listen);

/* What one tenant (an API key; with no keys, a client address) may hold of
 * a budget of the server's: total divided among the configured keys, in at
 * most CONFIG_SHARE_PARTS_MAX parts, so that with two keys each may hold
 * half, and however many keys or addresses there are one holds at most a
 * quarter.  One key with no others holds all.  At least 1. */
#define CONFIG_SHARE_PARTS_MAX 4
uint64_t config_share_of(const struct petri_config *c, uint64_t total);
/* Refuse to listen beyond this machine without API keys: -EPERM with the
 * reason, else 0. */
int config_check_listen(const struct petri_config *cfg, char *err, size_t errlen);

#endif
