/* petri mcp — a Model Context Protocol server on stdin and stdout, with
 * its own sandbox (docs/mcp.md).  An MCP client starts it as a
 * subprocess ("command": "petri", "args": ["mcp"]); it serves that one
 * client until its stdin ends or a signal comes, then deletes the sandbox
 * and exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/commands.h"
#include "mcp/mcp.h"
#include "mcp/stdio.h"
#include "util/log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: petri mcp [--config FILE] [-v]\n"
		"\n"
		"Serve the Model Context Protocol on stdin/stdout (newline-delimited\n"
		"JSON-RPC) with one sandbox for the client; logs go to stderr.\n"
		"\n"
		"  --config FILE   the configuration file: limits, idle expiry (docs/configuration.md)\n"
		"  -v, --verbose   log more\n");
}

int cmd_mcp(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL;
	struct cli_local l;
	struct mcp_conn *conn;
	bool verbose = false;
	sigset_t stop;
	int c, out_fd, sig_fd, r;

	while ((c = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	log_set_prefix("petri mcp");
	/* stdout carries MCP messages only: keep it for them, and send
	 * whatever else might print there to stderr. */
	out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (out_fd < 0 || dup2(2, 1) < 0)
		die(125, "cannot set up stdout: %s", strerror(errno));
	/* Signals arrive on a descriptor the reader polls, in every thread
	 * blocked before any thread exists. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	sig_fd = signalfd(-1, &stop, SFD_CLOEXEC);
	if (sig_fd < 0)
		die(125, "signalfd: %s", strerror(errno));

	cli_local_config(&l, config_path);
	/* Before any thread of the session manager may log. */
	log_set_level(verbose ? LOG_DEBUG : l.cfg.log_level);
	/* Nothing heavy before the client is answered: the warm template and
	 * the probe start once it has listed its tools or calls one
	 * (mcp_conn_answered, tools_warm). */
	l.warm_later = true;
	cli_local_start(&l);
	if (mcp_conn_new(l.sm, &l.cfg, "stdio", &conn) < 0)
		die(125, "out of memory");
	log_info("serving MCP on stdio");
	r = mcp_stdio_serve(conn, 0, out_fd, sig_fd);
	if (r < 0)
		log_err("reading stdin: %s", strerror(-r));
	mcp_conn_put(conn);
	cli_local_stop(&l);
	close(sig_fd);
	close(out_fd);
	log_info("stopped");
	return r < 0 ? 1 : 0;
}
