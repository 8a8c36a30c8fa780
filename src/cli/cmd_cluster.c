/* petri cluster haproxy — the configuration of HAProxy in front of several
 * petri nodes (docs/cluster.md explains each part).  It holds no state of
 * its own and learns nothing: a request that names a session (in its path,
 * or in E2B's or MCP's headers) goes to the node the session's id names;
 * any other request goes to the node with the most room, by the agents'
 * weights; a session whose node is down gets a JSON node_unavailable at
 * once, never another node's 404.  With --dns, the nodes' addresses are
 * names HAProxy resolves while it runs (Kubernetes' pods, whose addresses
 * change when they restart: deploy/kubernetes, docs/kubernetes.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "util/ids.h"
#include "util/log.h"

#define NODES_MAX 256

struct node {
	char name[ID_NODE_MAX + 1];
	char addr[256];		/* HOST:PORT of its API */
	unsigned agent;		/* its agent's port; 0: none */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: petri cluster haproxy --node NAME=HOST:PORT[,agent=PORT] ... [--listen ADDR:PORT]\n"
		"                             [--stats-socket PATH] [--source ADDR] [--dns]\n"
		"\n"
		"  --node NAME=HOST:PORT[,agent=PORT]  a petri node: its [server] node name, where\n"
		"                  its API listens, and its [cluster] agent_listen port (repeat)\n"
		"  --listen ADDR:PORT  where HAProxy listens (default 127.0.0.1:8080)\n"
		"  --stats-socket PATH HAProxy's runtime API on a unix socket (admin level)\n"
		"  --source ADDR   the address HAProxy connects to the nodes from\n"
		"  --dns           HOST is a name HAProxy resolves while it runs, with the\n"
		"                  name servers of /etc/resolv.conf: it starts before the\n"
		"                  nodes exist and follows their addresses when they change\n"
		"\n"
		"Prints a commented HAProxy configuration (docs/cluster.md) on stdout.\n");
}

/* Text that goes into the configuration as one word of one line: no
 * space, quote, comment, escape or control character. */
static bool plain_word(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f || strchr("'\"#\\", s[i]))
			return false;
	return len > 0;
}

/* NAME=HOST:PORT[,agent=PORT] */
static int parse_node(const char *arg, struct node *n)
{
	const char *eq = strchr(arg, '='), *comma;
	size_t len;
	char *end;

	memset(n, 0, sizeof(*n));
	if (!eq || (size_t)(eq - arg) > ID_NODE_MAX)
		return -1;
	memcpy(n->name, arg, (size_t)(eq - arg));
	if (!id_node_valid(n->name))
		return -1;
	comma = strchr(eq + 1, ',');
	len = comma ? (size_t)(comma - eq - 1) : strlen(eq + 1);
	if (!len || len >= sizeof(n->addr) || !memchr(eq + 1, ':', len) ||
	    !plain_word(eq + 1, len))
		return -1;
	memcpy(n->addr, eq + 1, len);
	if (comma) {
		unsigned long port;

		if (strncmp(comma + 1, "agent=", 6))
			return -1;
		port = strtoul(comma + 7, &end, 10);
		if (*end || end == comma + 7 || !port || port > 65535)
			return -1;
		n->agent = (unsigned)port;
	}
	return 0;
}

/* An error HAProxy itself answers, as petri's JSON error. */
static void error_json(int status, const char *code, const char *message)
{
	printf("    http-error status %d content-type application/json string "
	       "'{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}'\n", status, code, message);
}

/* Where HAProxy finds the nodes' addresses, with --dns. */
static void print_resolvers(void)
{
	printf("# The nodes' addresses, asked of the name servers of /etc/resolv.conf\n"
	       "# (in Kubernetes, the cluster's DNS) while HAProxy runs: a node that\n"
	       "# restarts with a new address is followed within seconds, and a node\n"
	       "# that does not exist (yet) is in maintenance, not an error at start.\n"
	       "resolvers dns\n"
	       "    parse-resolv-conf\n"
	       "    hold valid 5s\n"
	       "    hold nx 5s\n"
	       "    hold obsolete 5s\n"
	       "    timeout resolve 1s\n"
	       "    timeout retry 1s\n\n");
}

/* The end of a server line: how its address is found. */
static const char *resolve_opts(bool dns)
{
	return dns ? " resolvers dns init-addr none" : "";
}

static void print_config(const struct node *v, size_t n, const char *listen_at,
			 const char *stats_socket, const char *source, bool dns)
{
	printf("# HAProxy in front of %zu petri node%s, made by `petri cluster haproxy`.\n"
	       "# docs/cluster.md explains each part.  It holds no state: a session's id\n"
	       "# names its node (ses_NODE-..., mcp_NODE-..., tok_NODE-...), so any number\n"
	       "# of HAProxy instances with this file route alike, across reloads.\n\n",
	       n, n == 1 ? "" : "s");
	printf("global\n"
	       "    # Connections at once (each takes two descriptors: raise the\n"
	       "    # process's fd limit before raising this).\n"
	       "    maxconn 4096\n");
	if (stats_socket)
		printf("    # HAProxy's runtime API: `show servers state`, `set server nodes/n1 state\n"
		       "    # drain`, ... (socat, or `echo CMD | nc -U`).\n"
		       "    stats socket %s mode 600 level admin\n", stats_socket);
	printf("\n");
	if (dns)
		print_resolvers();
	printf("defaults\n"
	       "    mode http\n"
	       "    # The client's address, for the nodes' per-client caps and logs:\n"
	       "    # name this HAProxy's address in each node's [server] trusted_proxies.\n"
	       "    option forwardfor\n");
	if (source)
		printf("    # The address the nodes see this HAProxy connect from: the one\n"
		       "    # their trusted_proxies names.\n"
		       "    source %s\n", source);
	printf(
	       "    timeout connect 2s\n"
	       "    timeout http-request 30s\n"
	       "    # Executions run up to [max_limits] timeout_s (600 s by default) and\n"
	       "    # event streams stay open: petri sends keepalives, and its own\n"
	       "    # http_timeout_s closes what is idle.\n"
	       "    timeout client 11m\n"
	       "    timeout server 11m\n"
	       "    timeout tunnel 1h\n"
	       "    timeout queue 10s\n\n");
	printf("frontend petri\n"
	       "    bind %s\n"
	       "    # What a client says of who it is counts for nothing: the nodes\n"
	       "    # believe X-Forwarded-For from this router only, which sets it\n"
	       "    # (option forwardfor) to the address it saw.\n"
	       "    http-request del-header X-Forwarded-For\n"
	       "    # The id a request names: a session or E2B sandbox in the path, E2B's\n"
	       "    # headers (the sandbox's id, or its access token alone), MCP's session.\n"
	       "    http-request set-var(txn.id) path,field(4,/) if { path_beg /v1/sessions/ } || { path_beg /e2b/sandboxes/ }\n"
	       "    http-request set-var(txn.id) path,field(3,/) if { path_beg /sandboxes/ }\n"
	       "    http-request set-var(txn.id) req.hdr(E2b-Sandbox-Id) if !{ var(txn.id) -m found } { req.hdr(E2b-Sandbox-Id) -m found }\n"
	       "    http-request set-var(txn.id) req.hdr(X-Access-Token) if !{ var(txn.id) -m found } { req.hdr(X-Access-Token) -m found }\n"
	       "    http-request set-var(txn.id) req.hdr(E2B-Traffic-Access-Token) if !{ var(txn.id) -m found } { req.hdr(E2B-Traffic-Access-Token) -m found }\n"
	       "    http-request set-var(txn.id) req.hdr(Mcp-Session-Id) if !{ var(txn.id) -m found } { req.hdr(Mcp-Session-Id) -m found }\n"
	       "    # Its node: PREFIX_NODE-RANDOM.\n"
	       "    http-request set-var(txn.node) var(txn.id),field(2,_),field(1,-) if { var(txn.id) -m found }\n"
	       "    # /nodes/NODE/...: that node's own endpoints (/metrics, its lists of\n"
	       "    # sessions and executions, drain), the prefix taken off.\n"
	       "    http-request set-var(txn.node) path,field(3,/) if { path_beg /nodes/ }\n"
	       "    http-request set-path / if { path_reg ^/nodes/[^/]*/?$ }\n"
	       "    http-request set-path %%[path,regsub(^/nodes/[^/]*/,/)] if { path_beg /nodes/ }\n"
	       "    # A node this router does not know: no such session, said at once.\n",
	       listen_at);
	for (size_t i = 0; i < n; i++)
		printf("    acl known_node var(txn.node) -m str %s\n", v[i].name);
	printf("    http-request return status 404 content-type application/json string "
	       "'{\"error\":{\"code\":\"session_not_found\",\"message\":\"no such session\"}}' "
	       "if { var(txn.node) -m found } !known_node\n");
	for (size_t i = 0; i < n; i++)
		printf("    use_backend node_%s if { var(txn.node) -m str %s }\n", v[i].name,
		       v[i].name);
	printf("    # Anything else (a new session, a one-shot, an E2B sandbox, MCP's\n"
	       "    # initialize, the node-wide lists): the node with the most room.\n"
	       "    default_backend nodes\n\n");

	printf("# New work: the least busy node, weighted by each agent's free capacity;\n"
	       "# a draining node (agent: drain) gets none, a full one (0%%) none.\n"
	       "backend nodes\n"
	       "    balance leastconn\n"
	       "    option httpchk GET /healthz\n"
	       "    http-check expect status 200\n"
	       "    # A node that refused the connection never saw the request: another may.\n"
	       "    option redispatch\n"
	       "    retries 2\n");
	error_json(503, "no_node_available", "no petri node is up with room for new sessions; retry later");
	for (size_t i = 0; i < n; i++) {
		/* weight 100: the agent's N% is N (of weight 1, any N < 100
		 * would round to 0: no new session). */
		printf("    server %s %s weight 100 check inter 2s fall 2 rise 1%s", v[i].name,
		       v[i].addr, resolve_opts(dns));
		if (v[i].agent)
			printf(" agent-check agent-port %u agent-inter 2s", v[i].agent);
		printf("\n");
	}
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		printf("# The sessions of node %s live there only: never another node.\n"
		       "backend node_%s\n"
		       "    option httpchk GET /healthz\n"
		       "    http-check expect status 200\n"
		       "    # A connection of its own for each request: once the node has\n"
		       "    # died, the connection is refused (never half-sent), and the\n"
		       "    # client hears node_unavailable (503).  One retry, a second\n"
		       "    # later: a connection the dying node's socket still took and\n"
		       "    # then reset is refused on the retry.  A request under way\n"
		       "    # when it died gets node_unavailable as a 502: it is never\n"
		       "    # sent twice.\n"
		       "    http-reuse never\n"
		       "    retries 1\n", v[i].name, v[i].name);
		error_json(503, "node_unavailable", "the node that holds this session is down: the session is lost");
		error_json(502, "node_unavailable", "the node that holds this session stopped answering: the session may be lost");
		error_json(504, "node_timeout", "the node that holds this session did not answer in time");
		printf("    server %s %s check inter 1s fall 1 rise 1%s\n\n", v[i].name, v[i].addr,
		       resolve_opts(dns));
	}
}

static int cluster_haproxy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "listen", required_argument, NULL, 'l' },
		{ "stats-socket", required_argument, NULL, 's' },
		{ "source", required_argument, NULL, 'S' },
		{ "dns", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct node *v = calloc(NODES_MAX, sizeof(*v));
	const char *listen_at = "127.0.0.1:8080", *stats_socket = NULL, *source = NULL;
	size_t n = 0;
	bool dns = false;
	int c;

	if (!v)
		die(1, "out of memory");
	while ((c = getopt_long(argc, argv, "n:l:s:S:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (n == NODES_MAX)
				die(2, "at most %d nodes", NODES_MAX);
			if (parse_node(optarg, &v[n]) < 0)
				die(2, "--node %s: expected NAME=HOST:PORT[,agent=PORT], NAME being 1-16 "
				    "of [a-z0-9] (the node's [server] node)", optarg);
			for (size_t i = 0; i < n; i++)
				if (!strcmp(v[i].name, v[n].name))
					die(2, "--node %s: two nodes named %s", optarg, v[n].name);
			n++;
			break;
		case 'l':
			if (!strchr(optarg, ':') || !plain_word(optarg, strlen(optarg)))
				die(2, "--listen %s: expected ADDR:PORT", optarg);
			listen_at = optarg;
			break;
		case 's':
			if (optarg[0] != '/' || !plain_word(optarg, strlen(optarg)))
				die(2, "--stats-socket %s: expected an absolute path", optarg);
			stats_socket = optarg;
			break;
		case 'S':
			if (!plain_word(optarg, strlen(optarg)))
				die(2, "--source %s: expected an address", optarg);
			source = optarg;
			break;
		case 'd':
			dns = true;
			break;
		case 'h':
			usage(stdout);
			free(v);
			return 0;
		default:
			usage(stderr);
			free(v);
			return 2;
		}
	}
	if (optind != argc || !n) {
		usage(stderr);
		free(v);
		return 2;
	}
	print_config(v, n, listen_at, stats_socket, source, dns);
	free(v);
	return fflush(stdout) == 0 ? 0 : 1;
}

static void cluster_usage(FILE *f);

static const struct cli_command cluster_commands[] = {
	{ "haproxy", cluster_haproxy, "print HAProxy's configuration for several nodes" },
	{ NULL, NULL, NULL },
};

static void cluster_usage(FILE *f)
{
	fprintf(f, "usage: petri cluster <command> [options]\n\ncommands:\n");
	cli_list(f, cluster_commands);
}

int cmd_cluster(int argc, char **argv)
{
	return cli_dispatch("petri cluster", cluster_commands, cluster_usage, argc, argv);
}
