/* A jail host and a session manager in this process, from the
 * configuration file: what petri serve, mcp and ask all start with. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/commands.h"
#include "jail/jail.h"
#include "runtime/cache.h"
#include "session/session.h"
#include "util/clock.h"
#include "util/log.h"

void cli_local_config(struct cli_local *l, const char *config_path)
{
	char err[512], dflt[4096];

	memset(l, 0, sizeof(*l));
	if (!config_path)
		config_path = config_default_path(dflt, sizeof(dflt));
	if (config_load(&l->cfg, config_path, err, sizeof(err)) < 0)
		die(2, "%s", err);
	lang_configure(l->cfg.languages, l->cfg.nlanguages);
}

void cli_host_config(const struct petri_config *cfg, struct jail_host_config *hc)
{
	memset(hc, 0, sizeof(*hc));
	hc->uid_base = cfg->uid_base;
	hc->uid_count = cfg->uid_count;
	hc->cgroup_parent = cfg->cgroup_parent;
	hc->no_cgroups = !cfg->cgroups;
	hc->daemon_cpu_weight = cfg->daemon_cpu_weight;
	/* The environment's word over the file's, for every command. */
	if (getenv("PETRI_CGROUP_PARENT"))
		hc->cgroup_parent = getenv("PETRI_CGROUP_PARENT");
	if (cli_env_no_cgroups())
		hc->no_cgroups = true;
}

void cli_local_cache(struct cli_local *l)
{
	char base[4096], err[1024];
	double t0 = clock_mono_s();

	if (!config_cache_path(base, sizeof(base))) {
		log_warn("no cache directory can be named (no CACHE_DIRECTORY, HOME or "
			 "XDG_CACHE_HOME): each sandbox builds its font caches itself");
		return;
	}
	if (cache_prepare(base, &l->cache, err, sizeof(err)) < 0) {
		log_warn("the sandboxes' caches under '%s': %s; each sandbox builds its font "
			 "caches itself", base, err);
		return;
	}
	l->cfg.cache_files = l->cache.files;
	l->cfg.ncache_files = l->cache.nfiles;
	if (clock_mono_s() - t0 > 0.05)
		log_info("the sandboxes' caches: '%s' (%.1f s)", l->cache.dir, clock_mono_s() - t0);
}

void cli_local_release_cache(struct cli_local *l)
{
	l->cfg.cache_files = NULL;
	l->cfg.ncache_files = 0;
	cache_release(&l->cache);
}

void cli_local_start(struct cli_local *l)
{
	struct jail_host_config hc = { 0 };
	struct rlimit rl;
	char err[512];
	int r;

	/* Sessions hold fds (pipes, sockets, pidfds, the workspace). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	cli_host_config(&l->cfg, &hc);
	l->host = cli_jail_host_with(&hc);
	cli_local_cache(l);
	/* -E2BIG: the configuration does not fit the host's tables. */
	if ((r = smgr_new(&l->cfg, l->host, &l->sm, err, sizeof(err))) < 0)
		die(r == -E2BIG ? 2 : 125, "%s", err);
	if (!l->warm_later)
		smgr_warm_start(l->sm);
}

void cli_local_stop(struct cli_local *l)
{
	smgr_free(l->sm);
	jail_host_free(l->host);
	cli_local_release_cache(l);
	lang_configure(NULL, 0);
	config_release(&l->cfg);
	memset(l, 0, sizeof(*l));
}
