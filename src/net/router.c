/* net/router — the router's namespace, its uplink, each session's link,
 * rules and resolver (router.h says how they fit). */
#include "net/router.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <jansson.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/workq.h"

#define SLIRP4NETNS "/usr/bin/slirp4netns"
#define DNSMASQ "/usr/sbin/dnsmasq"

/* The addresses of the plumbing, all link-local: no destination a policy
 * may name is ever one of them (169.254.0.0/16 is never reachable), so
 * they cannot hide a host an operator wants reached.  Each sandbox sees
 * GATEWAY as its router and resolver; the uplink is slirp4netns's
 * network, its resolver (the host's, through slirp4netns) at .3. */
#define GATEWAY "169.254.0.1"
#define UPLINK_CIDR "169.254.255.0/24"
#define UPLINK_DNS "169.254.255.3"
#define UPLINK_TAP "tap0"
/* Where each session's resolver listens on its own address of the
 * router's loopback (the sandbox asks port 53 of the gateway, translated):
 * a port above 1024, so that dnsmasq needs no capability to bind it. */
#define RESOLVER_PORT "5353"
/* Addresses a session's resolver may add to its set, at most (a name it
 * controls could answer with thousands). */
#define NET_ALLOWED_MAX 4096
/* Addresses connected to and refused, and names, noted between two
 * net_seen(), at most (each list). */
#define NET_SEEN_MAX 256
/* The bit of a connection's conntrack mark (beside its link's id) that
 * says the policy cut it (link_rules()). */
#define NET_CUT 0x80000000u

/* How long the uplink and a resolver may take to come up. */
#define SLIRP_WAIT_MS 5000
#define RESOLVER_WAIT_MS 10000

struct net_link {
	struct net_router *r;
	unsigned slot;
	/* Unique in the daemon's life: the conntrack mark of its connections
	 * (a later link in the same slot, with the same address, is another
	 * id). */
	uint32_t id;
	pid_t resolver;			/* dnsmasq's pid 1 (spawn()), or 0 */
	/* Its log (stderr, non-blocking): the names asked, read by
	 * net_seen(); a line cut by the read's end waits in partial. */
	int log;
	char partial[512];
	size_t npartial;
};

struct net_router {
	struct net_config cfg;
	struct workq *q;		/* one thread, in the router's namespace:
					 * workq_call()s */
	int host_ns;			/* the daemon's network namespace */
	int ns;				/* the router's */
	struct nft_ctx *nft;
	pid_t slirp;
	int slirp_exit;			/* closing it ends slirp4netns */
	int alive[2];			/* a pipe: [1] closes when the daemon dies */
	_Atomic uint32_t next_id;	/* of links (net_link.id) */
	/* A thread in the daemon's namespace that renews the set of the
	 * host's addresses whenever they change (host_watch()), the only one
	 * that writes it: its socket (opened before the set is first filled,
	 * so that no change is missed); a byte on watch_stop[1] ends it. */
	pthread_t watcher;
	bool watching;
	struct mnl_socket *watch_nl;
	int watch_stop[2];
	pthread_mutex_t lock;		/* the links */
	struct net_link *links[NET_LINKS_MAX];
};

static int write_sysctl(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, value, strlen(value)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* ---- rtnetlink ------------------------------------------------------------ */

/* Send one request on a netlink socket and read its answer: 0 or the
 * kernel's -errno. */
static int nl_do(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
	static _Atomic unsigned seq;
	char buf[8192];
	unsigned s = ++seq;
	ssize_t n;

	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = s;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	if (mnl_cb_run(buf, (size_t)n, s, mnl_socket_get_portid(nl), NULL, NULL) < 0)
		return -errno;
	return 0;
}

/* A netlink socket of bus (NETLINK_ROUTE, NETLINK_NETFILTER), bound, in
 * this thread's network namespace; NULL with errno. */
static struct mnl_socket *nl_open(int bus)
{
	struct mnl_socket *nl = mnl_socket_open2(bus, SOCK_CLOEXEC);

	if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* A veth pair: name here, peer in the namespace peer_ns. */
static int veth_add(struct mnl_socket *nl, const char *name, const char *peer, int peer_ns)
{
	char buf[512];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;
	struct nlattr *info, *data, *pinfo;

	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	pinfo = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_ns);
	mnl_attr_nest_end(nlh, pinfo);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return nl_do(nl, nlh);
}

static int link_del(struct mnl_socket *nl, const char *name)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;

	nlh->nlmsg_type = RTM_DELLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return nl_do(nl, nlh);
}

static int link_up(struct mnl_socket *nl, unsigned index)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifm;

	nlh->nlmsg_type = RTM_NEWLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = (int)index;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return nl_do(nl, nlh);
}

/* addr/32 on the link index. */
static int addr_add(struct mnl_socket *nl, unsigned index, in_addr_t addr)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = 32;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = index;
	mnl_attr_put_u32(nlh, IFA_LOCAL, addr);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, addr);
	return nl_do(nl, nlh);
}

/* A route to dst/len through the link index, by gateway gw (0: on the
 * link itself). */
static int route_add(struct mnl_socket *nl, in_addr_t dst, unsigned len, in_addr_t gw,
		     unsigned index)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;

	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = (unsigned char)len;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
	rtm->rtm_type = RTN_UNICAST;
	if (len)
		mnl_attr_put_u32(nlh, RTA_DST, dst);
	if (gw)
		mnl_attr_put_u32(nlh, RTA_GATEWAY, gw);
	mnl_attr_put_u32(nlh, RTA_OIF, index);
	return nl_do(nl, nlh);
}

/* ---- addresses of a slot -------------------------------------------------- */

/* The sandbox's own address: 169.254.(1 + k/254).(1 + k%254), never the
 * gateway (169.254.0.1) nor the uplink's 169.254.255.0/24. */
static in_addr_t slot_addr(unsigned k)
{
	return htonl(0xa9fe0000u | (1 + k / 254) << 8 | (1 + k % 254));
}

/* Its resolver's, on the router's loopback: 127.1.x.y. */
static void slot_resolver(unsigned k, char *out, size_t len)
{
	snprintf(out, len, "127.1.%u.%u", (k + 1) >> 8, (k + 1) & 255);
}

static void slot_ifname(unsigned k, char out[IFNAMSIZ])
{
	snprintf(out, IFNAMSIZ, "pn%u", k);
}

/* ---- nftables ------------------------------------------------------------- */

/* Apply a transaction of nft commands with nft (its errors buffered),
 * whose rules they are: 0, or -EINVAL with nft's first line of complaint
 * in err. */
static int nft_run(struct nft_ctx *nft, const char *text, const char *whose, char *err,
		   size_t errlen)
{
	const char *e;

	if (nft_run_cmd_from_buffer(nft, text) == 0)
		return 0;
	e = nft_ctx_get_error_buffer(nft);
	snprintf(err, errlen, "nftables refused the %s rules: %.*s", whose,
		 (int)strcspn(e ? e : "", "\n"), e ? e : "");
	log_err("net: nftables: %s\n%s", e ? e : "", text);
	return -EINVAL;
}

/* The same in the router's namespace. */
static int nft_apply(struct net_router *r, const char *text, char *err, size_t errlen)
{
	return nft_run(r->nft, text, "router's", err, errlen);
}

/* What a listing command says, as nftables' JSON (a new reference), or
 * NULL when it failed. */
static json_t *nft_list(struct net_router *r, const char *cmd)
{
	unsigned flags = nft_ctx_output_get_flags(r->nft);
	json_t *j = NULL;

	nft_ctx_output_set_flags(r->nft, flags | NFT_CTX_OUTPUT_JSON);
	if (nft_run_cmd_from_buffer(r->nft, cmd) == 0)
		j = json_loads(nft_ctx_get_output_buffer(r->nft), 0, NULL);
	nft_ctx_output_set_flags(r->nft, flags);
	return j;
}

/* A range as a set element, after ", " unless it is the first. */
static void put_range(FILE *f, const struct cidr *c, bool *first)
{
	char text[64];

	cidr_text(c, text, sizeof(text));
	fprintf(f, "%s%s", *first ? "" : ", ", text);
	*first = false;
}

/* The rules of the router as a whole (router.h: what each refuses). */
static char *base_rules(const struct net_config *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool first = true;

	if (!f)
		return NULL;
	fprintf(f,
		"table inet petri {\n"
		"  set never { type ipv4_addr; flags interval; auto-merge;\n"
		"    elements = { " NET_NEVER_RANGES " } }\n"
		/* Single addresses: renewing it costs no look at the other
		 * sets' elements, as an interval set's would. */
		"  set host { type ipv4_addr; }\n"
		"  set private { type ipv4_addr; flags interval; auto-merge;\n"
		"    elements = { " NET_PRIVATE_RANGES " } }\n"
		"  set reachable { type ipv4_addr; flags interval; auto-merge;");
	if (c->nreachable) {
		fprintf(f, " elements = { ");
		for (size_t i = 0; i < c->nreachable; i++)
			put_range(f, &c->reachable[i], &first);
		fprintf(f, " }");
	}
	fprintf(f, " }\n"
		"  map sessions { type ifname : verdict; }\n"
		"  map replies { type ifname : verdict; }\n"
		"  map resolvers { type ifname : ipv4_addr; }\n"
		/* Every packet of a sandbox goes through its own chain, and
		 * every packet to it through its replies' chain (below). */
		"  chain forward {\n"
		"    type filter hook forward priority 0; policy drop;\n"
		"    meta nfproto ipv6 drop\n"
		"    iifname vmap @sessions\n"
		"    oifname vmap @replies\n"
		"    reject with icmpx admin-prohibited\n"
		"  }\n"
		"  chain input {\n"
		"    type filter hook input priority 0; policy drop;\n"
		"    iif \"lo\" accept\n"
		"    ct state established,related accept\n"
		/* A sandbox reaches its own resolver only, through the
		 * translation below: a packet sent to a resolver's address
		 * directly (bound to eth0) was not translated. */
		"    iifname \"pn*\" ct status dnat ip daddr 127.1.0.0/16 meta l4proto { tcp, udp } "
		"th dport " RESOLVER_PORT " accept\n"
		"    iifname \"pn*\" reject with icmpx admin-prohibited\n"
		"  }\n"
		"  chain resolver {\n"
		"    type nat hook prerouting priority -100;\n"
		"    iifname \"pn*\" ip daddr " GATEWAY " meta l4proto { tcp, udp } th dport 53 "
		"dnat ip to iifname map @resolvers : " RESOLVER_PORT "\n"
		"  }\n"
		"  chain uplink {\n"
		"    type nat hook postrouting priority 100;\n"
		"    oifname \"" UPLINK_TAP "\" masquerade\n"
		"  }\n"
		"}\n");
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* The host's own IPv4 addresses (read in the caller's namespace, the
 * host's), as nft set elements "a, b, c": a string to free, "" when none,
 * NULL when out of memory. */
static char *host_addresses(void)
{
	struct ifaddrs *ifa, *i;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool first = true;

	if (!f)
		return NULL;
	if (getifaddrs(&ifa) == 0) {
		for (i = ifa; i; i = i->ifa_next) {
			char a[INET_ADDRSTRLEN];

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a,
				  sizeof(a));
			fprintf(f, "%s%s", first ? "" : ", ", a);
			first = false;
		}
		freeifaddrs(ifa);
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* ---- processes in the router's namespace ---------------------------------- */

/* Fork a process that dies with this thread and execs argv; in the child,
 * before exec, join ns (when >= 0) and make err_fd (when >= 0) its stderr;
 * keep[] stay open across the exec.  Only async-signal-safe calls past the
 * fork.
 *
 * PR_SET_PDEATHSIG is cleared when a process changes its user, as dnsmasq
 * does (to nobody) once it has bound its port.  So with watched, the child
 * is pid 1 of a pid namespace of its own (a root that never changes its
 * credentials, keeping the death signal) and argv runs as its child there:
 * when the daemon dies, its pid 1 dies, and the kernel kills everything in
 * that namespace.  pid 1 ends with argv's status.  The pid (of pid 1 when
 * watched), or -errno. */
static pid_t spawn(struct net_router *r, char *const argv[], int ns, int err_fd,
		   const int *keep, size_t nkeep, bool watched)
{
	sigset_t all, old;
	pid_t parent = getpid(), pid;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = (pid_t)syscall(SYS_clone, (watched ? CLONE_NEWPID : 0) | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC), st = 0;
		sigset_t none;
		pid_t child;

		struct pollfd gone = { .fd = r->alive[0], .events = POLLIN };

		/* The daemon may have died before the death signal was set:
		 * its end of alive is closed then (in a new pid namespace
		 * getppid() says 0, so that is no test). */
		close(r->alive[1]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || poll(&gone, 1, 0) != 0 ||
		    (!watched && getppid() != parent))
			_exit(127);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		if (ns >= 0 && setns(ns, CLONE_NEWNET) < 0)
			_exit(126);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(err_fd >= 0 ? err_fd : null, 2) < 0)
			_exit(125);
		/* Nothing of the daemon's crosses the exec but what argv
		 * names by number. */
		if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
			_exit(124);
		for (size_t i = 0; i < nkeep; i++)
			if (fcntl(keep[i], F_SETFD, 0) < 0)
				_exit(124);
		/* A raw clone, as the one above: fork() would run the C
		 * library's handlers, whose locks another thread of the daemon
		 * may have held when it was copied. */
		child = watched ? (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0) : 0;
		if (child == 0) {
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			execv(argv[0], argv);
			_exit(127);
		}
		if (child < 0)
			_exit(123);
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pid < 0 ? -errno : pid;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Has pid exited?  Reaped if so. */
static bool exited(pid_t pid, int *status)
{
	return waitpid(pid, status, WNOHANG) == pid;
}

/* ---- the router's start ------------------------------------------------- */

struct start_args {
	char *err;
	size_t errlen;
};

/* On the router's thread, first: a network namespace of its own (this
 * thread's only), loopback up, forwarding, its rules and the uplink. */
static int start_in_ns(void *arg, void *ctx)
{
	struct net_router *r = ctx;
	struct start_args *a = arg;
	struct mnl_socket *nl = NULL;
	char *rules = NULL, cidr[] = "--cidr=" UPLINK_CIDR, mtu[] = "--mtu=65520";
	char exit_arg[32], ready_arg[32], ns_path[64];
	int ready[2] = { -1, -1 }, exitp[2] = { -1, -1 }, e;

	if (unshare(CLONE_NEWNET) < 0) {
		e = -errno;
		snprintf(a->err, a->errlen, "cannot make the router's network namespace: %s",
			 strerror(errno));
		return e;
	}
	if ((r->ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		e = -errno;
		snprintf(a->err, a->errlen, "cannot open the router's namespace: %s", strerror(errno));
		return e;
	}
	if (!(nl = nl_open(NETLINK_ROUTE)) || (e = link_up(nl, if_nametoindex("lo"))) < 0 ||
	    (e = write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")) < 0 ||
	    (e = write_sysctl("/proc/sys/net/ipv4/conf/all/route_localnet", "1")) < 0 ||
	    /* A refusal answers at once, however many came before it (the
	     * kernel would send one a second to an address after a burst;
	     * a session's refusals then looked like a network that hangs). */
	    (e = write_sysctl("/proc/sys/net/ipv4/icmp_ratelimit", "0")) < 0) {
		e = nl ? e : -errno;
		snprintf(a->err, a->errlen, "cannot set up the router's namespace: %s",
			 strerror(-e));
		goto out;
	}
	if (!(r->nft = nft_ctx_new(NFT_CTX_DEFAULT)) || nft_ctx_buffer_error(r->nft) < 0 ||
	    nft_ctx_buffer_output(r->nft) < 0) {
		e = -ENOMEM;
		snprintf(a->err, a->errlen, "cannot start nftables");
		goto out;
	}
	if (!(rules = base_rules(&r->cfg))) {
		e = -ENOMEM;
		goto out;
	}
	if ((e = nft_apply(r, rules, a->err, a->errlen)) < 0)
		goto out;

	/* The uplink: slirp4netns in the host's namespace, attached to this
	 * one by its descriptor; it says when the tap is up (ready), and ends
	 * when the write end of exit is closed. */
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(exitp, O_CLOEXEC) < 0) {
		e = -errno;
		goto out;
	}
	snprintf(exit_arg, sizeof(exit_arg), "--exit-fd=%d", exitp[0]);
	snprintf(ready_arg, sizeof(ready_arg), "--ready-fd=%d", ready[1]);
	snprintf(ns_path, sizeof(ns_path), "/proc/self/fd/%d", r->ns);
	{
		char *argv[] = { SLIRP4NETNS, "--configure", mtu, cidr, "--disable-host-loopback",
				 "--enable-sandbox", "--enable-seccomp", exit_arg, ready_arg,
				 "--netns-type=path", ns_path, UPLINK_TAP, NULL };
		int keep[] = { exitp[0], ready[1], r->ns };
		struct pollfd p = { .fd = ready[0], .events = POLLIN };
		char c;
		pid_t pid = spawn(r, argv, r->host_ns, -1, keep, 3, false);

		if (pid < 0) {
			e = (int)pid;
			snprintf(a->err, a->errlen, "cannot start " SLIRP4NETNS ": %s", strerror(-e));
			goto out;
		}
		r->slirp = pid;
		close(ready[1]);
		ready[1] = -1;
		close(exitp[0]);
		exitp[0] = -1;
		r->slirp_exit = exitp[1];
		exitp[1] = -1;
		if (poll(&p, 1, SLIRP_WAIT_MS) != 1 || read(ready[0], &c, 1) != 1) {
			int st = 0;

			e = -EIO;
			if (exited(pid, &st))
				r->slirp = 0;
			snprintf(a->err, a->errlen, SLIRP4NETNS " did not bring the uplink up "
				 "(status %d)", st);
			goto out;
		}
	}
	e = 0;
out:
	free(rules);
	if (nl)
		mnl_socket_close(nl);
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (exitp[i] >= 0)
			close(exitp[i]);
	}
	return e;
}

/* The host's addresses (set elements, from host_addresses()) into the
 * router's set of them, on the router's thread. */
static int host_in_ns(void *arg, void *ctx)
{
	struct net_router *r = ctx;
	const char *host = arg;
	char *text = NULL;
	char err[256];
	int e;

	if (asprintf(&text, "flush set inet petri host\n%s%s%s", host[0] ? "add element inet "
		     "petri host { " : "", host, host[0] ? " }\n" : "") < 0)
		return -ENOMEM;
	e = nft_apply(r, text, err, sizeof(err));
	if (e < 0)
		log_err("net: the host's addresses were not renewed: %s", err);
	free(text);
	return e;
}

/* Read the host's addresses (here, in the daemon's namespace) and have the
 * router's thread put them in its set: 0 or -errno. */
static int host_renew(struct net_router *r)
{
	char *host = host_addresses();
	int e;

	if (!host)
		return -ENOMEM;
	e = workq_call(r->q, host_in_ns, host);
	free(host);
	return e;
}

/* The host gains or loses an address (a lease, a bridge made, an interface
 * up): the set of addresses no session may reach follows within moments.
 * The kernel tells the socket, opened in the daemon's namespace; a burst of
 * changes is one renewal; one that failed is tried again a second later. */
static void *host_watch(void *arg)
{
	struct net_router *r = arg;
	int fd = mnl_socket_get_fd(r->watch_nl);
	bool again = false;
	char buf[8192];

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = r->watch_stop[0], .events = POLLIN } };
		bool changed = again;
		int n = poll(p, 2, again ? 1000 : -1);

		if (n < 0 && errno != EINTR) {
			log_err("net: the watch of the host's addresses stopped: %s",
				strerror(errno));
			break;
		}
		if (n > 0 && p[1].revents)
			break;
		/* Drain what came; an overrun (ENOBUFS) is a change too. */
		for (;;) {
			ssize_t got = recv(fd, buf, sizeof(buf), 0);

			if (got > 0 || (got < 0 && errno == ENOBUFS))
				changed = true;
			else if (got < 0 && errno == EINTR)
				continue;
			else
				break;
		}
		if (changed)
			again = host_renew(r) < 0;
	}
	return NULL;
}

/* The watch started: its socket, the set filled once, then its thread.
 * 0 or -errno with a sentence in err. */
static int host_watch_start(struct net_router *r, char *err, size_t errlen)
{
	int e;

	r->watch_nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!r->watch_nl || mnl_socket_bind(r->watch_nl, RTMGRP_IPV4_IFADDR,
					    MNL_SOCKET_AUTOPID) < 0) {
		e = -errno;
		snprintf(err, errlen, "cannot watch the host's addresses: %s", strerror(-e));
		return e;
	}
	if ((e = host_renew(r)) < 0) {
		snprintf(err, errlen, "cannot set the host's addresses apart: %s", strerror(-e));
		return e;
	}
	if ((e = -pthread_create(&r->watcher, NULL, host_watch, r)) < 0) {
		snprintf(err, errlen, "cannot start the thread that watches the host's addresses: "
			 "%s", strerror(-e));
		return e;
	}
	r->watching = true;
	return 0;
}

int net_router_start(const struct net_config *c, struct net_router **out, char *err,
		     size_t errlen)
{
	struct net_router *r;
	struct start_args a = { err, errlen };
	int e;

	*out = NULL;
	if (access(SLIRP4NETNS, X_OK) < 0 || access(DNSMASQ, X_OK) < 0) {
		snprintf(err, errlen, "a network for sessions needs " SLIRP4NETNS " and " DNSMASQ
			 " (Debian's slirp4netns and dnsmasq-base)");
		return -ENOENT;
	}
	if (!(r = calloc(1, sizeof(*r))))
		return -ENOMEM;
	r->cfg = *c;
	r->ns = r->host_ns = r->slirp_exit = r->alive[0] = r->alive[1] = -1;
	r->watch_stop[0] = r->watch_stop[1] = -1;
	if (pipe2(r->alive, O_CLOEXEC) < 0 || pipe2(r->watch_stop, O_CLOEXEC) < 0) {
		e = -errno;
		for (int i = 0; i < 2; i++)
			if (r->alive[i] >= 0)
				close(r->alive[i]);
		free(r);
		return e;
	}
	pthread_mutex_init(&r->lock, NULL);
	if ((r->host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		e = -errno;
		snprintf(err, errlen, "cannot open this network namespace: %s", strerror(errno));
		goto fail;
	}
	if ((e = workq_start(1, 0, workq_run_call, r, &r->q)) < 0) {
		snprintf(err, errlen, "cannot start the router's thread: %s", strerror(-e));
		goto fail;
	}
	if ((e = workq_call(r->q, start_in_ns, &a)) < 0 || (e = host_watch_start(r, err, errlen)) < 0)
		goto fail;
	log_info("net: router up (uplink " UPLINK_CIDR " by slirp4netns, pid %d)", (int)r->slirp);
	*out = r;
	return 0;
fail:
	net_router_stop(r);
	return e;
}

/* ---- a session's link ----------------------------------------------------- */

struct attach_args {
	struct net_link *l;
	int netns;
	const struct net_policy *p;
	char *err;
	size_t errlen;
};

/* The sandbox's resolver, as every sandbox's C library finds it: with no
 * /etc/resolv.conf it asks 127.0.0.1:53, where nothing listens in a sandbox
 * without a network (its user may not bind a port below 1024), and which
 * here leads to the gateway: these rules are in the sandbox's namespace,
 * where no process of the sandbox has the capability to change them. */
static const char sandbox_rules[] =
	"table ip petri {\n"
	"  chain resolver {\n"
	"    type nat hook output priority -100;\n"
	"    ip daddr 127.0.0.1 meta l4proto { tcp, udp } th dport 53 dnat to " GATEWAY "\n"
	"  }\n"
	"  chain source {\n"
	"    type nat hook postrouting priority 100;\n"
	"    oifname \"eth0\" ip saddr 127.0.0.0/8 masquerade\n"
	"  }\n"
	"}\n";

/* The sandbox's side: eth0 with its address, up, and routes to the
 * gateway and through it, made by this thread inside the sandbox's
 * namespace (a netlink socket acts where it was opened; so do nftables'
 * and the sysctls' files), then back. */
static int sandbox_side(struct net_router *r, int netns, unsigned slot, char *err,
			size_t errlen)
{
	struct mnl_socket *nl;
	struct nft_ctx *nft;
	unsigned eth;
	int e = 0;

	if (setns(netns, CLONE_NEWNET) < 0)
		return -errno;
	nl = nl_open(NETLINK_ROUTE);
	eth = if_nametoindex("eth0");
	/* Loopback's addresses may leave by eth0 (only the resolver's
	 * packets do, translated). */
	e = write_sysctl("/proc/sys/net/ipv4/conf/all/route_localnet", "1");
	nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (e == 0 && (!nft || nft_ctx_buffer_error(nft) < 0))
		e = -ENOMEM;
	if (e == 0)
		e = nft_run(nft, sandbox_rules, "sandbox's", err, errlen);
	if (nft)
		nft_ctx_free(nft);
	if (setns(r->ns, CLONE_NEWNET) < 0) {
		/* This thread would act in a sandbox's namespace from now on. */
		log_err("net: cannot return to the router's namespace: %s", strerror(errno));
		abort();
	}
	if (e < 0)
		goto out;
	if (!nl || !eth) {
		e = -ENODEV;
		goto out;
	}
	if ((e = addr_add(nl, eth, slot_addr(slot))) < 0 || (e = link_up(nl, eth)) < 0 ||
	    (e = route_add(nl, inet_addr(GATEWAY), 32, 0, eth)) < 0 ||
	    (e = route_add(nl, 0, 0, inet_addr(GATEWAY), eth)) < 0)
		goto out;
out:
	if (nl)
		mnl_socket_close(nl);
	return e;
}

/* Into chain (s or y) of slot k: a packet whose other end (dir: daddr,
 * saddr) the policy of mode forbids goes to chain verdict (z: refused, x:
 * cut).  One list for both ways, so that what a session may not send to
 * it may not hear from either: never, the host, private ranges not
 * reachable, its denied addresses, and in an allow-list what it does not
 * allow. */
static void forbidden(FILE *f, char chain, unsigned k, const char *dir, char verdict,
		      enum net_mode mode)
{
	char priv[48], deny[16], allow[24];
	const char *tests[] = { "@never", "@host", priv, deny, mode == NET_ALLOWLIST ? allow : NULL };

	snprintf(priv, sizeof(priv), "@private ip %s != @reachable", dir);
	snprintf(deny, sizeof(deny), "@d%u", k);
	snprintf(allow, sizeof(allow), "!= @a%u", k);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]) && tests[i]; i++)
		fprintf(f, "add rule inet petri %c%u ip %s %s goto %c%u\n", chain, k, dir, tests[i],
			verdict, k);
}

/* The session's own rules for policy p: its sets and its chains, made
 * (fresh: with its entries in the router's maps) or emptied and filled
 * again (a policy changed: addresses its resolver added before go too), in
 * one transaction.  (The host's addresses are the watch's: host_watch().) */
static char *link_rules(const struct net_router *r, const struct net_link *l,
			const struct net_policy *p, bool fresh)
{
	unsigned k = l->slot, id = l->id;
	char *text = NULL, res[32];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	slot_resolver(k, res, sizeof(res));
	if (fresh) {
		/* Its sets: allowed (ranges, and what its resolver adds),
		 * denied, connected to and refused (net_seen()); its counters
		 * of bytes out and in; its chains: s (what it sends), y (what
		 * comes back), z (a refusal, noted). */
		fprintf(f, "add set inet petri a%u { type ipv4_addr; flags interval; auto-merge; "
			"size %u; }\n", k, NET_ALLOWED_MAX);
		fprintf(f, "add set inet petri d%u { type ipv4_addr; flags interval; auto-merge; }\n",
			k);
		fprintf(f, "add set inet petri c%u { type ipv4_addr; size %u; flags dynamic; }\n",
			k, NET_SEEN_MAX);
		fprintf(f, "add set inet petri r%u { type ipv4_addr; size %u; flags dynamic; }\n",
			k, NET_SEEN_MAX);
		fprintf(f, "add counter inet petri o%u\n", k);
		fprintf(f, "add counter inet petri i%u\n", k);
		fprintf(f, "add chain inet petri s%u\n", k);
		fprintf(f, "add chain inet petri y%u\n", k);
		fprintf(f, "add chain inet petri z%u\n", k);
		fprintf(f, "add chain inet petri x%u\n", k);
		fprintf(f, "add rule inet petri x%u meta l4proto tcp ct mark set %u "
			"reject with tcp reset\n", k, id | NET_CUT);
		fprintf(f, "add rule inet petri x%u drop\n", k);
		fprintf(f, "add rule inet petri z%u add @r%u { ip daddr }\n", k, k);
		/* A TCP connection the policy no longer allows is cut at both
		 * ends: this packet goes on as a reset, which closes the
		 * uplink's socket for it (slirp4netns keeps an idle one for
		 * ever), and the connection is marked cut, so that the
		 * sandbox's next packet of it (its retransmission) is answered
		 * with a reset (s, below).  A new connection is refused. */
		fprintf(f, "add rule inet petri z%u meta l4proto tcp ct state established "
			"ct mark set %u tcp flags set rst accept\n", k, id | NET_CUT);
		fprintf(f, "add rule inet petri z%u reject with icmpx admin-prohibited\n", k);
	} else
		fprintf(f, "flush chain inet petri s%u\nflush chain inet petri y%u\n"
			"flush set inet petri a%u\nflush set inet petri d%u\n", k, k, k, k);
	for (int deny = 0; deny < 2; deny++) {
		const struct net_rule *v = deny ? p->deny : p->allow;
		size_t n = deny ? p->ndeny : p->nallow;
		bool first = true;

		for (size_t i = 0; i < n; i++) {
			if (v[i].is_name)
				continue;
			if (first)
				fprintf(f, "add element inet petri %c%u { ", deny ? 'd' : 'a', k);
			put_range(f, &v[i].range, &first);
		}
		if (!first)
			fprintf(f, " }\n");
	}
	/* The session's chain: every packet it sends is counted; one of a
	 * connection another link made (an earlier session that had its
	 * address) or that conntrack finds invalid is dropped.  Every other
	 * packet, of a connection open or new, goes only to an address never
	 * forbidden, not denied and allowed, as the policy is now: a change
	 * of policy holds for connections already open.  A new one must also
	 * be within the session's connections at once and their rate, and is
	 * marked as the link's.  Its replies' chain (y) counts and passes only
	 * what belongs to a connection marked so, from an address the policy
	 * still allows. */
#define RULE(...) fprintf(f, "add rule inet petri s%u " __VA_ARGS__)
/* A refusal: its address noted (z: net_seen() reads it), then rejected. */
#define REJECT "goto z%u\n"
	RULE("counter name \"o%u\"\n", k, k);
	RULE("ct mark %u meta l4proto tcp reject with tcp reset\n", k, id | NET_CUT);
	RULE("ct mark %u drop\n", k, id | NET_CUT);
	RULE("ct state invalid drop\n", k);
	RULE("ct state established,related ct mark != %u drop\n", k, id);
	forbidden(f, 's', k, "daddr", 'z', p->mode);
	RULE("ct state established,related accept\n", k);
	RULE("ct count over %u " REJECT, k, r->cfg.max_connections, k);
	RULE("limit rate over %u/second burst %u packets " REJECT, k,
	     r->cfg.connections_per_s, 2 * r->cfg.connections_per_s, k);
	/* Noted apart: when the set is full, the rule stops, and the next
	 * still accepts. */
	RULE("add @c%u { ip daddr }\n", k, k);
	RULE("ct mark set %u accept\n", k, id);
#undef RULE
#undef REJECT
#define RULE(...) fprintf(f, "add rule inet petri y%u " __VA_ARGS__)
	RULE("counter name \"i%u\"\n", k, k);
	RULE("ct mark %u meta l4proto tcp reject with tcp reset\n", k, id | NET_CUT);
	RULE("ct mark != %u drop\n", k, id);
	RULE("ct state related accept\n", k);	/* an error about one of its own */
	RULE("ct state != established drop\n", k);
	/* From an address the policy no longer allows: a TCP connection is
	 * reset toward the uplink (which closes its socket) and marked cut,
	 * so that the sandbox's next packet of it is answered with a reset. */
	forbidden(f, 'y', k, "saddr", 'x', p->mode);
	RULE("accept\n", k);
#undef RULE
	if (fresh)
		fprintf(f, "add element inet petri sessions { \"pn%u\" : jump s%u }\n"
			"add element inet petri replies { \"pn%u\" : jump y%u }\n"
			"add element inet petri resolvers { \"pn%u\" : %s }\n", k, k, k, k, k, res);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

static void link_rules_remove(struct net_router *r, unsigned k)
{
	/* The map entries first (the chains are referenced from them), then
	 * the chains (which reference the sets and counters).  Each on its
	 * own: what an earlier failure left out is not there. */
	static const char *const commands[][2] = {
		{ "delete element inet petri sessions { \"pn", "\" }" },
		{ "delete element inet petri replies { \"pn", "\" }" },
		{ "delete element inet petri resolvers { \"pn", "\" }" },
		{ "flush chain inet petri s", "" }, { "delete chain inet petri s", "" },
		{ "flush chain inet petri y", "" }, { "delete chain inet petri y", "" },
		{ "flush chain inet petri z", "" }, { "delete chain inet petri z", "" },
		{ "flush chain inet petri x", "" }, { "delete chain inet petri x", "" },
		{ "delete set inet petri a", "" }, { "delete set inet petri d", "" },
		{ "delete set inet petri c", "" }, { "delete set inet petri r", "" },
		{ "delete counter inet petri o", "" }, { "delete counter inet petri i", "" },
	};
	char text[128];

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		snprintf(text, sizeof(text), "%s%u%s", commands[i][0], k, commands[i][1]);
		nft_run_cmd_from_buffer(r->nft, text);
	}
}

/* Does the deny rule d cover the allowed name a (so that a must not be
 * forwarded: a more specific allow would win in the resolver)? */
static bool covered(const struct net_rule *a, const struct net_rule *d)
{
	bool under = net_name_under(a->name, d->name);

	if (!d->wildcard)
		return under || !strcmp(a->name, d->name);
	return under || (a->wildcard && !strcmp(a->name, d->name));
}

static bool has_wildcard(const struct net_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nallow; i++)
		if (p->allow[i].is_name && p->allow[i].wildcard && !strcmp(p->allow[i].name, name))
			return true;
	return false;
}

/* dnsmasq's arguments for a session (NULL-terminated, each allocated). */
static char **resolver_argv(const struct net_router *r, const struct net_policy *p, unsigned k)
{
	size_t max = 16 + 3 * (p->nallow + p->ndeny), n = 0;
	char **argv = calloc(max, sizeof(*argv)), res[32], up[32], a[INET_ADDRSTRLEN];
	struct in_addr ua = { r->cfg.upstream_addr };

	if (!argv)
		return NULL;
	slot_resolver(k, res, sizeof(res));
	if (r->cfg.upstream_port) {
		inet_ntop(AF_INET, &ua, a, sizeof(a));
		snprintf(up, sizeof(up), "%s#%u", a, r->cfg.upstream_port);
	} else
		snprintf(up, sizeof(up), "%s", UPLINK_DNS);
#define ARG(...) (n < max - 1 && asprintf(&argv[n], __VA_ARGS__) >= 0 ? (void)n++ : (void)0)
	ARG(DNSMASQ);
	ARG("--keep-in-foreground");
	ARG("--conf-file=/dev/null");
	ARG("--no-resolv");
	ARG("--no-hosts");
	ARG("--no-poll");
	ARG("--pid-file=");
	ARG("--bind-interfaces");
	ARG("--listen-address=%s", res);
	ARG("--port=" RESOLVER_PORT);
	/* IPv6 is not forwarded: AAAA answers would only make programs try
	 * it first. */
	ARG("--filter-AAAA");
	/* Each query and its answer, on stderr: the names net_seen() reports. */
	ARG("--log-queries");
	ARG("--log-facility=-");
	ARG("--log-async=100");
	for (size_t i = 0; i < p->ndeny; i++)
		if (p->deny[i].is_name)
			ARG("--address=/%s%s/", p->deny[i].wildcard ? "*." : "", p->deny[i].name);
	if (p->mode == NET_OPEN) {
		/* Everything, but what only the host's network knows: names
		 * without a dot and reverse lookups of private addresses. */
		ARG("--server=%s", up);
		ARG("--domain-needed");
		ARG("--bogus-priv");
	}
	for (size_t i = 0; p->mode == NET_ALLOWLIST && i < p->nallow; i++) {
		const struct net_rule *al = &p->allow[i];
		bool denied = false;

		if (!al->is_name)
			continue;
		for (size_t j = 0; j < p->ndeny; j++)
			denied |= p->deny[j].is_name && covered(al, &p->deny[j]);
		if (denied)
			continue;
		ARG("--server=/%s%s/%s", al->wildcard ? "*." : "", al->name, up);
		ARG("--nftset=/%s%s/4#inet#petri#a%u", al->wildcard ? "*." : "", al->name, k);
		/* "name" is that name only: its subdomains are not allowed
		 * unless a rule says so. */
		if (!al->wildcard && !has_wildcard(p, al->name))
			ARG("--address=/*.%s/", al->name);
	}
	ARG("--address=/#/");
#undef ARG
	return argv;
}

static void free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

/* Does a UDP socket of this thread's namespace listen on the resolver's
 * address of slot k?  Read from /proc (binding the port to find out would
 * take it from dnsmasq for that instant). */
static bool resolver_listening(unsigned k)
{
	char res[32], want[32], line[256];
	struct in_addr a;
	FILE *f = fopen("/proc/thread-self/net/udp", "re");
	bool found = false;

	if (!f)
		return false;
	slot_resolver(k, res, sizeof(res));
	inet_pton(AF_INET, res, &a);
	/* The kernel prints the address's four bytes as one native integer. */
	snprintf(want, sizeof(want), " %08X:%04X ", (unsigned)a.s_addr, atoi(RESOLVER_PORT));
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* Wait until the resolver listens on its address, or has died: 0 or -EIO
 * with its complaint in err. */
static int resolver_wait(pid_t pid, unsigned k, int errp, char *err, size_t errlen)
{
	double deadline = clock_mono_s() + RESOLVER_WAIT_MS / 1e3;
	int st;

	while (!resolver_listening(k)) {
		bool ended = exited(pid, &st);

		if (ended || clock_mono_s() > deadline) {
			/* What it said last is the cause ("started" comes first). */
			char msg[4096] = "", *last;
			ssize_t n = read(errp, msg, sizeof(msg) - 1);

			msg[n > 0 ? n : 0] = '\0';
			while (n > 0 && msg[n - 1] == '\n')
				msg[--n] = '\0';
			last = strrchr(msg, '\n');
			last = last ? last + 1 : msg;
			snprintf(err, errlen, "the session's resolver did not start (%s %d s)%s%.200s",
				 ended ? "it ended within" : "not listening after",
				 RESOLVER_WAIT_MS / 1000, last[0] ? ": " : "", last);
			return -EIO;
		}
		usleep(500);
	}
	return 0;
}

/* Start the session's resolver for policy p: 0 with the read end of its
 * stderr in *errfd (for resolver_wait()), or -errno with a sentence in err. */
static int resolver_spawn(struct net_router *r, struct net_link *l, const struct net_policy *p,
			  int *errfd, char *err, size_t errlen)
{
	char **argv = resolver_argv(r, p, l->slot);
	int e = 0, errp[2] = { -1, -1 };

	*errfd = -1;
	if (!argv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (pipe2(errp, O_CLOEXEC | O_NONBLOCK) < 0) {
		e = -errno;
		snprintf(err, errlen, "cannot start " DNSMASQ ": %s", strerror(-e));
		goto out;
	}
	l->resolver = spawn(r, argv, -1, errp[1], NULL, 0, true);
	if (l->resolver < 0) {
		e = (int)l->resolver;
		l->resolver = 0;
		snprintf(err, errlen, "cannot start " DNSMASQ ": %s", strerror(-e));
		goto out;
	}
	*errfd = errp[0];
	errp[0] = -1;
out:
	for (int i = 0; i < 2; i++)
		if (errp[i] >= 0)
			close(errp[i]);
	free_argv(argv);
	return e;
}

/* Wait for the resolver resolver_spawn() started to listen; then errfd is
 * its log (l->log), else closed.  0 or -errno with a sentence in err. */
static int resolver_ready(struct net_link *l, int errfd, char *err, size_t errlen)
{
	int e = resolver_wait(l->resolver, l->slot, errfd, err, errlen);

	if (e < 0) {
		close(errfd);
		return e;
	}
	if (l->log >= 0)
		close(l->log);
	l->log = errfd;
	l->npartial = 0;
	return 0;
}

/* The resolver started and listening when this returns: 0 or -errno with
 * a sentence in err. */
static int resolver_start(struct net_router *r, struct net_link *l, const struct net_policy *p,
			  char *err, size_t errlen)
{
	int errfd, e = resolver_spawn(r, l, p, &errfd, err, errlen);

	return e < 0 ? e : resolver_ready(l, errfd, err, errlen);
}

static int attach_in_ns(void *arg, void *ctx)
{
	struct net_router *r = ctx;
	struct attach_args *a = arg;
	struct net_link *l = a->l;
	unsigned k = l->slot;
	char ifname[IFNAMSIZ], *rules = link_rules(r, l, a->p, true);
	struct mnl_socket *nl = nl_open(NETLINK_ROUTE);
	int e, errfd = -1;
	unsigned pn;

	slot_ifname(k, ifname);
	if (!nl || !rules) {
		e = nl ? -ENOMEM : -errno;
		snprintf(a->err, a->errlen, "cannot make the session's rules: %s", strerror(-e));
		goto out;
	}
	/* The rules, then the resolver (its sets exist), which starts while
	 * the link is made. */
	if ((e = nft_apply(r, rules, a->err, a->errlen)) < 0 ||
	    (e = resolver_spawn(r, l, a->p, &errfd, a->err, a->errlen)) < 0)
		goto out;
	/* A link of the same name left by a sandbox that has not ended yet
	 * is that session's no more. */
	link_del(nl, ifname);
	if ((e = veth_add(nl, ifname, "eth0", a->netns)) < 0) {
		snprintf(a->err, a->errlen, "cannot make the session's link: %s", strerror(-e));
		goto out;
	}
	pn = if_nametoindex(ifname);
	if (!pn || (e = addr_add(nl, pn, inet_addr(GATEWAY))) < 0 || (e = link_up(nl, pn)) < 0 ||
	    (e = route_add(nl, slot_addr(k), 32, 0, pn)) < 0 ||
	    (e = sandbox_side(r, a->netns, k, a->err, a->errlen)) < 0) {
		e = e ? e : -ENODEV;
		if (e != -EINVAL)
			snprintf(a->err, a->errlen, "cannot set up the session's link: %s",
				 strerror(-e));
		goto out;
	}
	e = resolver_ready(l, errfd, a->err, a->errlen);
	errfd = -1;
out:
	if (errfd >= 0)
		close(errfd);
	if (e < 0) {
		reap(l->resolver);
		l->resolver = 0;
		link_rules_remove(r, k);
		if (nl)
			link_del(nl, ifname);
	}
	free(rules);
	if (nl)
		mnl_socket_close(nl);
	return e;
}

int net_attach(struct net_router *r, int netns_fd, const struct net_policy *p,
	       struct net_link **out, char *err, size_t errlen)
{
	struct net_link *l;
	struct attach_args a = { .netns = netns_fd, .p = p, .err = err, .errlen = errlen };
	unsigned k;
	int e;

	*out = NULL;
	if (!r || p->mode == NET_NONE) {
		snprintf(err, errlen, "this server has no network for sessions");
		return -EINVAL;
	}
	if (!(l = calloc(1, sizeof(*l))))
		return -ENOMEM;
	l->r = r;
	pthread_mutex_lock(&r->lock);
	for (k = 0; k < NET_LINKS_MAX && r->links[k]; k++)
		;
	if (k < NET_LINKS_MAX) {
		r->links[k] = l;
		metrics_gauge_add(M_NET_LINKS, 1);
	}
	pthread_mutex_unlock(&r->lock);
	if (k == NET_LINKS_MAX) {
		free(l);
		snprintf(err, errlen, "%d sessions have a network already", NET_LINKS_MAX);
		return -EAGAIN;
	}
	l->slot = k;
	l->log = -1;
	l->id = atomic_fetch_add(&r->next_id, 1) % (NET_CUT - 1) + 1;	/* never 0 or cut */
	a.l = l;
	e = workq_call(r->q, attach_in_ns, &a);
	if (e < 0) {
		pthread_mutex_lock(&r->lock);
		r->links[k] = NULL;
		metrics_gauge_add(M_NET_LINKS, -1);
		pthread_mutex_unlock(&r->lock);
		free(l);
		return e;
	}
	*out = l;
	return 0;
}

/* A new policy for a live link: its rules emptied and filled again, its
 * resolver started again with the new names. */
static int update_in_ns(void *arg, void *ctx)
{
	struct attach_args *a = arg;
	struct net_router *r = ctx;
	char *rules = link_rules(r, a->l, a->p, false);
	int e;

	if (!rules) {
		snprintf(a->err, a->errlen, "out of memory");
		return -ENOMEM;
	}
	reap(a->l->resolver);
	a->l->resolver = 0;
	e = nft_apply(r, rules, a->err, a->errlen);
	free(rules);
	if (e < 0) {
		/* Neither the old policy nor the new: nothing, until one applies. */
		char refuse[96];

		snprintf(refuse, sizeof(refuse), "flush chain inet petri s%u\n"
			 "add rule inet petri s%u goto z%u\n", a->l->slot, a->l->slot, a->l->slot);
		nft_run_cmd_from_buffer(r->nft, refuse);
		return e;
	}
	return resolver_start(r, a->l, a->p, a->err, a->errlen);
}

int net_update(struct net_link *l, const struct net_policy *p, char *err, size_t errlen)
{
	struct attach_args a = { .l = l, .p = p, .err = err, .errlen = errlen };

	if (p->mode == NET_NONE) {
		snprintf(err, errlen, "a link's policy is never none: detach it");
		return -EINVAL;
	}
	return workq_call(l->r->q, update_in_ns, &a);
}

struct usage_args {
	unsigned slot;
	uint64_t sent, received;
};

/* A named counter's bytes, from nftables' JSON listing of it. */
static int counter_bytes(struct net_router *r, char which, unsigned k, uint64_t *bytes)
{
	char cmd[96];
	json_t *j, *v;
	size_t i;
	int e = -EIO;

	snprintf(cmd, sizeof(cmd), "list counter inet petri %c%u", which, k);
	if (!(j = nft_list(r, cmd)))
		return -ENOENT;
	json_array_foreach(json_object_get(j, "nftables"), i, v) {
		json_t *c = json_object_get(v, "counter");

		if (json_is_integer(json_object_get(c, "bytes"))) {
			*bytes = (uint64_t)json_integer_value(json_object_get(c, "bytes"));
			e = 0;
		}
	}
	json_decref(j);
	return e;
}

static int usage_in_ns(void *arg, void *ctx)
{
	struct usage_args *u = arg;
	struct net_router *r = ctx;
	int e = counter_bytes(r, 'o', u->slot, &u->sent);

	return e < 0 ? e : counter_bytes(r, 'i', u->slot, &u->received);
}

/* A dynamic set's addresses into the array out (deduplicated, at most
 * NET_SEEN_MAX), then the set emptied. */
static void set_take(struct net_router *r, char which, unsigned k, json_t *out)
{
	char cmd[128];
	json_t *j, *v;
	size_t i;

	snprintf(cmd, sizeof(cmd), "list set inet petri %c%u", which, k);
	if (!(j = nft_list(r, cmd)))
		return;
	json_array_foreach(json_object_get(j, "nftables"), i, v) {
		json_t *elem = json_object_get(json_object_get(v, "set"), "elem"), *e;
		size_t n;

		json_array_foreach(elem, n, e)
			if (json_is_string(e) && json_array_size(out) < NET_SEEN_MAX)
				json_array_append(out, e);
	}
	json_decref(j);
	snprintf(cmd, sizeof(cmd), "flush set inet petri %c%u", which, k);
	nft_run_cmd_from_buffer(r->nft, cmd);
}

/* Add name to the array out unless it is there (or out is full). */
static void add_name(json_t *out, const char *name, size_t len)
{
	json_t *v;
	size_t i;

	if (len == 0 || len > NET_NAME_MAX || json_array_size(out) >= NET_SEEN_MAX)
		return;
	json_array_foreach(out, i, v)
		if (strlen(json_string_value(v)) == len && !memcmp(json_string_value(v), name, len))
			return;
	json_array_append_new(out, json_stringn(name, len));
}

/* One line of the resolver's log: "dnsmasq[PID]: reply NAME is ADDR" (an
 * allowed name answered) or "... config NAME is NXDOMAIN" (a name the
 * policy refuses, answered by the resolver itself).  "reply error is
 * SERVFAIL" (or REFUSED, NOTIMP...) is dnsmasq's word for an upstream's
 * error answer, whose name it does not say: no name. */
static void log_line(const char *line, size_t len, json_t *names, json_t *refused)
{
	const char *p = memmem(line, len, "]: ", 3), *end = line + len, *sp;
	bool reply;

	if (!p)
		return;
	p += 3;
	if ((size_t)(end - p) > 6 && !memcmp(p, "reply ", 6))
		reply = true;
	else if ((size_t)(end - p) > 7 && !memcmp(p, "config ", 7))
		reply = false;
	else
		return;
	p += reply ? 6 : 7;
	if (!(sp = memchr(p, ' ', (size_t)(end - p))))
		return;
	if (reply && sp - p == 5 && !memcmp(p, "error", 5) && end - sp > 4 &&
	    !isdigit((unsigned char)sp[4]))
		return;
	if (reply)
		add_name(names, p, (size_t)(sp - p));
	else if ((size_t)(end - sp) == 12 && !memcmp(sp, " is NXDOMAIN", 12))
		add_name(refused, p, (size_t)(sp - p));
}

/* What the resolver logged since the last read (at most 64 KiB a call:
 * the rest waits for the next, or is dropped by dnsmasq when its queue is
 * full). */
static void log_take(struct net_link *l, json_t *names, json_t *refused)
{
	char buf[8192];
	size_t total = 0;

	while (l->log >= 0 && total < (64u << 10)) {
		ssize_t n = read(l->log, buf, sizeof(buf));
		size_t start = 0;

		if (n <= 0)
			break;
		total += (size_t)n;
		for (size_t i = 0; i < (size_t)n; i++) {
			if (buf[i] != '\n')
				continue;
			if (l->npartial) {
				size_t add = i - start;

				if (l->npartial + add <= sizeof(l->partial)) {
					memcpy(l->partial + l->npartial, buf + start, add);
					log_line(l->partial, l->npartial + add, names, refused);
				}
				l->npartial = 0;
			} else
				log_line(buf + start, i - start, names, refused);
			start = i + 1;
		}
		if (start < (size_t)n) {
			size_t rest = (size_t)n - start;

			if (l->npartial + rest <= sizeof(l->partial)) {
				memcpy(l->partial + l->npartial, buf + start, rest);
				l->npartial += rest;
			} else
				l->npartial = 0;	/* no name is this long: dropped */
		}
	}
}

struct seen_args {
	struct net_link *l;
	json_t *out;
};

static int seen_in_ns(void *arg, void *ctx)
{
	struct seen_args *a = arg;
	struct net_router *r = ctx;
	json_t *connected = json_array(), *refused = json_array(), *names = json_array(),
	       *names_refused = json_array();

	if (connected && refused) {
		set_take(r, 'c', a->l->slot, connected);
		set_take(r, 'r', a->l->slot, refused);
	}
	if (names && names_refused)
		log_take(a->l, names, names_refused);
	a->out = json_pack("{s:o*, s:o*, s:o*, s:o*}", "connected", connected, "refused", refused,
			   "names", names, "names_refused", names_refused);
	return a->out ? 0 : -ENOMEM;
}

json_t *net_seen(struct net_link *l)
{
	struct seen_args a = { .l = l };

	return workq_call(l->r->q, seen_in_ns, &a) == 0 ? a.out : NULL;
}

int net_usage(struct net_link *l, uint64_t *sent, uint64_t *received)
{
	struct usage_args u = { .slot = l->slot };
	int e = workq_call(l->r->q, usage_in_ns, &u);

	*sent = u.sent;
	*received = u.received;
	return e;
}

/* Forget the connections of link id (their conntrack entries, marked with
 * it), so that nothing of them reaches a later session of the same
 * address: 0, or -errno (no conntrack netlink: the marks still keep them
 * apart). */
static int conntrack_forget(uint32_t id)
{
	struct mnl_socket *nl = nl_open(NETLINK_NETFILTER);
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;
	int e;

	if (!nl)
		return -errno;
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_INET;
	nfg->version = NFNETLINK_V0;
	mnl_attr_put_u32(nlh, CTA_MARK, htonl(id));
	mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(~NET_CUT));	/* cut or not */
	e = nl_do(nl, nlh);
	mnl_socket_close(nl);
	return e == -ENOENT ? 0 : e;	/* none had it */
}

static int detach_in_ns(void *arg, void *ctx)
{
	struct net_link *l = arg;
	struct net_router *r = ctx;
	struct mnl_socket *nl = nl_open(NETLINK_ROUTE);
	char ifname[IFNAMSIZ];

	reap(l->resolver);
	l->resolver = 0;
	if (l->log >= 0)
		close(l->log);
	l->log = -1;
	link_rules_remove(r, l->slot);
	conntrack_forget(l->id);
	slot_ifname(l->slot, ifname);
	if (nl) {
		link_del(nl, ifname);
		mnl_socket_close(nl);
	}
	return 0;
}

void net_detach(struct net_link *l)
{
	struct net_router *r;

	if (!l)
		return;
	r = l->r;
	workq_call(r->q, detach_in_ns, l);
	pthread_mutex_lock(&r->lock);
	r->links[l->slot] = NULL;
	metrics_gauge_add(M_NET_LINKS, -1);
	pthread_mutex_unlock(&r->lock);
	free(l);
}

static int stop_in_ns(void *arg, void *ctx)
{
	struct net_router *r = ctx;
	(void)arg;
	for (unsigned k = 0; k < NET_LINKS_MAX; k++)
		if (r->links[k])
			detach_in_ns(r->links[k], r);
	if (r->slirp_exit >= 0) {
		close(r->slirp_exit);
		r->slirp_exit = -1;
	}
	if (r->slirp > 0) {
		struct pollfd p = { .fd = (int)syscall(SYS_pidfd_open, r->slirp, 0),
				    .events = POLLIN };

		/* It ends when exit closes; a moment, then it is killed. */
		if (p.fd >= 0) {
			poll(&p, 1, 1000);
			close(p.fd);
		}
		reap(r->slirp);
		r->slirp = 0;
	}
	if (r->nft) {
		nft_ctx_free(r->nft);
		r->nft = NULL;
	}
	return 0;
}

void net_router_stop(struct net_router *r)
{
	if (!r)
		return;
	if (r->watching) {
		if (write(r->watch_stop[1], "", 1) < 0)
			log_err("net: cannot stop the address watch: %s", strerror(errno));
		pthread_join(r->watcher, NULL);
	}
	if (r->watch_nl)
		mnl_socket_close(r->watch_nl);
	if (r->q) {
		workq_call(r->q, stop_in_ns, NULL);
		workq_free(r->q);
	}
	/* The session layer detaches every link before it stops the router;
	 * one left would be a use after free later, so it is leaked instead. */
	for (unsigned k = 0; k < NET_LINKS_MAX; k++)
		if (r->links[k])
			log_err("net: the link of slot %u outlived the router", k);
	if (r->ns >= 0)
		close(r->ns);
	for (int i = 0; i < 2; i++) {
		if (r->alive[i] >= 0)
			close(r->alive[i]);
		if (r->watch_stop[i] >= 0)
			close(r->watch_stop[i]);
	}
	if (r->host_ns >= 0)
		close(r->host_ns);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
