/* petri — run AI-written code in a sandbox.  The command table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "jail/jail.h"
#include "workspace/archive.h"
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
	{ "drain", cmd_drain, "stop a petri serve taking new sessions; its sessions run on" },
	{ "undrain", cmd_undrain, "let a drained petri serve take new sessions again" },
	{ "cluster", cmd_cluster, "print the configuration of HAProxy in front of several nodes" },
	{ "node", cmd_node, "print a petri serve's state: node, sessions, capacity, draining" },
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

/* Append "; " (unless first) and text to out, which holds *n bytes. */
static void add_clause(char *out, size_t len, size_t *n, const char *text)
{
	if (*n < len)
		*n += (size_t)snprintf(out + *n, len - *n, "%s%s", *n ? "; " : "", text);
}

void cli_cgroup_losses(const struct jail_host_info *in, char *out, size_t len)
{
	const bool none = in->cgroup == JAIL_CG_NONE;
	size_t n = 0;

	out[0] = '\0';
	if (none || !in->cg_memory)
		add_clause(out, len, &n,
			   "memory is capped per process (RLIMIT_DATA), not per sandbox, so "
			   "its processes together can use more, a memory bomb ends as a "
			   "MemoryError (status error, not oom) and no peak memory is measured");
	if (none || !in->cg_pids)
		add_clause(out, len, &n,
			   "processes are capped by RLIMIT_NPROC alone, and there is no warm "
			   "path (its sandboxes need the pids controller)");
	if (none || !in->cg_cpu)
		add_clause(out, len, &n, "no CPU quota (limits.cpu is not enforced)");
	if (none)
		add_clause(out, len, &n,
			   "no CPU time of the sandbox is measured (--cpu-time is not enforced; "
			   "the wall-clock timeout is), and no cgroup kills the whole process "
			   "tree (the pid namespace still ends it with its pid 1)");
}

struct jail_host *cli_jail_host_with(const struct jail_host_config *cfg)
{
	struct jail_host *host;
	char err[512], losses[1024];
	const struct jail_host_info *in;

	if (jail_host_init(cfg, &host, err, sizeof(err)) < 0)
		die(125, "%s", err);
	in = jail_host_info(host);
	/* Once per process, at start: what the sandboxes lose. */
	cli_cgroup_losses(in, losses, sizeof(losses));
	if (in->cgroup == JAIL_CG_NONE)
		log_warn("cgroups are off (%s); falling back to rlimits: %s",
			 in->cg_problem, losses);
	else if (losses[0])
		log_warn("cgroups lack controllers%s%s%s: %s", in->cg_problem[0] ? " (" : "",
			 in->cg_problem, in->cg_problem[0] ? ")" : "", losses);
	if (!in->privileged)
		log_warn("not running as root: every sandbox runs as your uid %u, so they "
			 "all share its per-user kernel quotas (fds in flight, epoll "
			 "watches, pipe buffers) and one can exhaust them for all; and "
			 "there is no warm path: every sandbox starts cold",
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
	/* The daemon's archive writer (src/workspace/archive.h), not a command. */
	if (argc >= 2 && !strcmp(argv[1], WS_ARCHIVER_COMMAND))
		return ws_archiver_main(argc, argv);
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("petri %s\n", petri_version());
		return 0;
	}
	return cli_dispatch("petri", commands, usage, argc, argv);
}
