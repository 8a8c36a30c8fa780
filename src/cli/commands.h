/* The subcommands of petri, one file each (src/cli/cmd_<name>.c). Each
 * takes the arguments after its name (argv[0] is the command's name) and
 * returns the process's exit status. */
#ifndef PETRI_COMMANDS_H
#define PETRI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Shared by commands: start the jail host or die with a clear message
 * (cgroup settings from PETRI_NO_CGROUPS and PETRI_CGROUP_PARENT, or from
 * cfg), warn loudly when cgroups are missing, sweep stale cgroups. */
struct jail_host;
struct jail_host_config;
struct jail_host *cli_jail_host(void);
struct jail_host *cli_jail_host_with(const struct jail_host_config *cfg);

#endif
