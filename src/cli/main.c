/* petri — run AI-written code in a sandbox.  The command table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "jail/jail.h"
#include "util/log.h"
#include "util/version.h"

static const struct cli_command commands[] = {
	{ "run", cmd_run, "run code in a fresh sandbox and print what came out" },
	{ "check", cmd_check, "report what this host supports and what petri will do" },
	{ "serve", cmd_serve, "serve the HTTP API: stateful sessions, files, streaming" },
	{ "policy", cmd_policy, "print the system calls the sandbox allows" },
	{ "mcp", cmd_mcp, "serve the Model Context Protocol on stdio (for MCP clients)" },
	{ "ask", cmd_ask, "let a model answer a question by running code, step by step" },
	{ "record", cmd_record, "verify and export the execution record petri serve keeps" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: petri <command> [options]\n\ncommands:\n");
	cli_list(f, commands);
	fprintf(f, "\n'petri <command> --help' describes a command.\n");
}

bool cli_env_no_cgroups(void)
{
	const char *no_cg = getenv("PETRI_NO_CGROUPS");

	return no_cg && *no_cg && strcmp(no_cg, "0") != 0;
}

struct jail_host *cli_jail_host(void)
{
	struct jail_host_config cfg = {
		.cgroup_parent = getenv("PETRI_CGROUP_PARENT"),
		.no_cgroups = cli_env_no_cgroups(),
	};

	return cli_jail_host_with(&cfg);
}

struct jail_host *cli_jail_host_with(const struct jail_host_config *cfg)
{
	struct jail_host *host;
	char err[512];
	const struct jail_host_info *in;

	if (jail_host_init(cfg, &host, err, sizeof(err)) < 0)
		die(125, "%s", err);
	in = jail_host_info(host);
	if (in->cgroup == JAIL_CG_NONE)
		log_warn("no cgroups (%s): memory, process and CPU limits fall back "
			 "to rlimits, which are per process and weaker",
			 in->cg_problem);
	if (!in->privileged)
		log_warn("not running as root: every sandbox runs as your uid %u, so they "
			 "all share its per-user kernel quotas (fds in flight, epoll "
			 "watches, pipe buffers); one can exhaust them for all",
			 (unsigned)in->host_uid);
	if (jail_host_sweep(host) < 0)
		log_warn("could not sweep stale sandbox cgroups");
	return host;
}

void cli_list(FILE *f, const struct cli_command *table)
{
	for (const struct cli_command *c = table; c->name; c++)
		fprintf(f, "  %-8s %s\n", c->name, c->help);
}

int cli_dispatch(const char *prog, const struct cli_command *table,
		 void (*usage_of)(FILE *f),
		 int argc, char **argv)
{
	if (argc < 2) {
		usage_of(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage_of(stdout);
		return 0;
	}
	for (const struct cli_command *c = table; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->fn(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
	usage_of(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("petri %s\n", petri_version());
		return 0;
	}
	return cli_dispatch("petri", commands, usage, argc, argv);
}
