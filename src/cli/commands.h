/* The subcommands of petri, one file each (src/cli/cmd_<name>.c). Each
 * takes the arguments after its name (argv[0] is the command's name) and
 * returns the process's exit status. */
#ifndef PETRI_COMMANDS_H
#define PETRI_COMMANDS_H

#include <stdbool.h>

#include "config/config.h"
#include "runtime/cache.h"

#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_ask(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_drain(int argc, char **argv);
int cmd_undrain(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_cluster(int argc, char **argv);

/* A table of commands (main.c's; a command's subcommands, as petri
 * record's), ended by a NULL name.  cli_dispatch() runs the one argv[1]
 * names with the arguments after it and returns its status; --help, -h
 * and help print usage to stdout (0); none or an unknown name print it to
 * stderr (2).  cli_list() prints the table's names and help, aligned. */
struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};
int cli_dispatch(const char *prog, const struct cli_command *table,
		 void (*usage_of)(FILE *f),
		 int argc, char **argv);
void cli_list(FILE *f, const struct cli_command *table);

/* Shared by commands: start the jail host or die with a clear message,
 * warn loudly (once) when cgroups are off or lack controllers, sweep stale
 * cgroups.  cli_host_config() fills the host's settings from the
 * configuration, overridden by PETRI_NO_CGROUPS and PETRI_CGROUP_PARENT. */
struct jail_host;
struct jail_host_config;
struct jail_host_info;
/* PETRI_NO_CGROUPS is set (and not "0"). */
bool cli_env_no_cgroups(void);
void cli_host_config(const struct petri_config *cfg, struct jail_host_config *hc);
struct jail_host *cli_jail_host_with(const struct jail_host_config *cfg);
/* What the sandboxes lose to missing cgroups or controllers, as one
 * sentence of clauses joined by "; " into out; "" when nothing. */
void cli_cgroup_losses(const struct jail_host_info *in, char *out, size_t len);

/* A jail host and a session manager in this process (petri serve, mcp,
 * ask, run).  cli_local_config() loads the configuration file (NULL: the
 * default path of config_default_path(), else the defaults) or dies; the
 * caller may adjust l->cfg and block signals, then
 * cli_local_start() starts the host and the sessions' threads, or dies. */
struct smgr;
struct cli_local {
	struct petri_config cfg;
	struct jail_host *host;
	struct smgr *sm;
	/* Set before cli_local_start(): the caller starts the warm path
	 * itself (smgr_warm_start), once its client is answered. */
	bool warm_later;
	struct cache cache;	/* cfg.cache_files point into it */
};
void cli_local_config(struct cli_local *l, const char *config_path);
void cli_local_start(struct cli_local *l);
/* Build, or find, what the sandboxes' libraries would build on first use
 * (src/runtime/cache.h) into l->cache, and point l->cfg.cache_files at its
 * files; on failure say so and leave them empty.  cli_local_start() calls
 * it; cli_local_stop() or cli_local_release_cache() frees it. */
void cli_local_cache(struct cli_local *l);
void cli_local_release_cache(struct cli_local *l);
void cli_local_stop(struct cli_local *l);

#endif
