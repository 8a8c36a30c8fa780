/* petri serve — the daemon: sessions over HTTP until SIGTERM or SIGINT.
 *
 * This is where the server is assembled: the configuration, the jail host,
 * the session manager (cli_local_start) and the HTTP API (api_start).
 *
 * Theory of operation: the threads, what each owns, and the locks.
 *
 *   main thread       this function: blocks every signal before any other
 *                     thread exists (so all inherit the mask), then waits in
 *                     sigwait() and runs the shutdown below.
 *   HTTP event        libmicrohttpd's epoll threads (http_threads): every
 *                     connection, header and body; they never wait on a
 *                     sandbox, so /healthz answers while all are busy.
 *   HTTP workers      (api/worker.c, http_workers) one request each whose
 *                     handler may wait on a sandbox: create, execute, MCP
 *                     calls, file transfers; the connection is suspended.
 *   upload waiter     (api/files.c) resumes uploads whose writer caught up.
 *   stream hub tick   (api/stream.c) keepalives and hung-up clients of SSE.
 *   reaper            (session/session.c) ends expired sessions, every 0.5 s.
 *   disposer          (session/session.c) tears killed sandboxes down.
 *   spawners          (session/spawner.c, 2 per CPU) start cold sandboxes:
 *                     PR_SET_PDEATHSIG follows the thread that spawned, so
 *                     only long-lived threads spawn (jail.h).
 *   pool              (session/pool.c, with warm) the template and the ready
 *                     sandboxes.
 *   probe             (session/probe.c) once, at start: runs a one-shot that
 *                     finds what the sandboxes have (GET /v1/languages).
 *
 * Locks, taken only left to right:
 *
 *   pool lock -> session manager lock -> a session's lock
 *                                     -> a box's stop lock
 *   stream hub lock -> a stream's lock
 *                   -> the event streams' lock (src/api/events.c)
 *   the record's lock -> the event streams' lock
 *
 * An execution holds only its own session's busy flag, never the table.
 * Leaves taken alone: the disposer queue, the spawner queue, the upload
 * waiter's list, the MCP registry, the metrics histograms.
 * docs/architecture.md says why each thread exists and what each lock
 * guards.
 *
 * Shutdown: on SIGTERM with [cluster] drain_grace_s, drain first (no new
 * sessions, the agent says drain) until the sessions have ended or the
 * grace has passed; then stop accepting, give requests in flight the grace period,
 * then kill every sandbox (executions still running end as killed), wait
 * for their responses to go out, free everything and exit 0.  api_stop()
 * returns only when the API's worker threads and streams have let go of
 * their sessions, so the session manager is freed after the last user.
 *
 * Under systemd (Type=notify, packaging/petri.service) the daemon says
 * READY=1 once it listens and STOPPING=1 when the shutdown begins
 * (sd_notify(3); without $NOTIFY_SOCKET both do nothing). */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "api/api.h"
#include "cli/commands.h"
#include "cluster/agent.h"
#include "config/config.h"
#include "jail/jail.h"
#include "session/session.h"
#include "util/clock.h"
#include "util/log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: petri serve [--listen HOST:PORT | --listen unix:PATH] [--config FILE]\n"
		"\n"
		"  --listen ADDR   where to listen (default 127.0.0.1:8080; port 0 picks one)\n"
		"  --config FILE   the configuration file (docs/configuration.md)\n"
		"  -v, --verbose   log every request\n");
}

/* SIGTERM on a node of a cluster ([cluster] drain_grace_s): take no new
 * sessions while the live ones run on, until none is left, grace seconds
 * have passed, or another signal says stop now. */
static void drain_first(struct smgr *sm, const sigset_t *stop, double grace)
{
	double end = clock_mono_s() + grace, left;
	struct smgr_health h;

	smgr_drain(sm, true);
	smgr_health(sm, &h);
	log_info("draining before stopping: %zu sessions live, at most %g s", h.sessions, grace);
	while (smgr_health(sm, &h), h.sessions > 0 && (left = end - clock_mono_s()) > 0) {
		struct timespec ts = { .tv_nsec = left < 0.2 ? (long)(left * 1e9) : 200000000L };
		int sig = sigtimedwait(stop, NULL, &ts);

		if (sig > 0 && sig != SIGHUP) {
			log_info("%s: stopping now, %zu sessions live", strsignal(sig), h.sessions);
			return;
		}
	}
	log_info("drained: %zu sessions live", h.sessions);
}

static void wait_idle(struct api_server *srv, double seconds)
{
	double end = clock_mono_s() + seconds;

	while (api_active(srv) > 0 && clock_mono_s() < end)
		usleep(20000);
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "config", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *listen_at = NULL;
	struct cli_local l;
	struct api_server *srv;
	struct node_agent *agent = NULL;
	bool verbose = false;
	sigset_t stop;
	char err[512];
	int c, sig;

	while ((c = getopt_long(argc, argv, "l:c:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_at = optarg;
			break;
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
	cli_local_config(&l, config_path);
	if (listen_at) {
		if (strlen(listen_at) >= sizeof(l.cfg.listen))
			die(2, "--listen: address too long");
		snprintf(l.cfg.listen, sizeof(l.cfg.listen), "%s", listen_at);
	}
	/* Before anything is started (the record, the template): a refused
	 * address, or one in use, is a quick error. */
	if (api_open(&l.cfg, &srv, err, sizeof(err)) < 0 ||
	    (l.cfg.agent_listen[0] && agent_open(l.cfg.agent_listen, &agent, err, sizeof(err)) < 0))
		die(2, "%s", err);
	log_set_prefix("petri serve");
	log_set_level(verbose ? LOG_DEBUG : l.cfg.log_level);

	/* Large buffers (answers, bodies, listings: up to tens of MiB) get
	 * mappings of their own, unmapped when freed, so that what a burst of
	 * clients took goes back to the kernel once they have read it.  By
	 * default glibc raises this threshold to the size of each mapping
	 * freed, and big buffers then come from arenas that are seldom given
	 * back (RSS stayed at 1.2 GiB after a review's clients had gone). */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	/* Signals are taken by sigwait() below, in this thread only: block
	 * them before any thread exists so that every thread inherits it. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	cli_local_start(&l);
	json_decref(smgr_found(l.sm, 0));	/* start finding what sandboxes have */
	if (api_start(srv, l.sm, err, sizeof(err)) < 0) {
		cli_local_stop(&l);
		die(2, "%s", err);
	}
	printf("petri: listening on %s%s\n",
	       strncmp(api_address(srv), "unix:", 5) ? "http://" : "", api_address(srv));
	if (agent) {
		if (agent_start(agent, l.sm, err, sizeof(err)) < 0) {
			api_stop(srv);
			cli_local_stop(&l);
			die(2, "%s", err);
		}
		printf("petri: agent on %s\n", agent_address(agent));
		log_info("agent for HAProxy's agent-check on %s", agent_address(agent));
	}
	fflush(stdout);
	log_info("serving on %s as node %s (%s, max %u sessions)", api_address(srv), l.cfg.node,
		 l.cfg.napi_keys ? "API keys required" : "no API keys: local only",
		 l.cfg.max_sessions);
	/* Ready means accepting connections: the warm template may still be
	 * starting, and the server answers cold meanwhile. */
	sd_notifyf(0, "READY=1\nSTATUS=listening on %s", api_address(srv));

	for (;;) {
		if (sigwait(&stop, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			break;
		log_info("SIGHUP ignored: restart petri to change its configuration");
	}
	if (sig == SIGTERM && l.cfg.drain_grace_s > 0) {
		sd_notify(0, "STATUS=draining");
		drain_first(l.sm, &stop, l.cfg.drain_grace_s);
	}
	log_info("%s: stopping (grace %g s)", strsignal(sig), l.cfg.shutdown_grace_s);
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	agent_stopping(agent);
	api_quiesce(srv);
	wait_idle(srv, l.cfg.shutdown_grace_s);
	smgr_shutdown(l.sm);
	wait_idle(srv, 5.0);
	api_stop(srv);
	agent_stop(agent);
	cli_local_stop(&l);
	log_info("stopped");
	return 0;
}
