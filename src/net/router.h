/* net/router — the way out of a sandbox, for the sessions whose policy
 * allows one (net/policy.h).
 *
 * Theory of operation
 * -------------------
 *
 * A sandbox's network namespace holds loopback only.  A session with a
 * network gets one more link, a veth pair: `eth0` in the sandbox, its peer
 * `pnK` in the router's namespace, a network namespace of the daemon's own
 * that nothing else lives in.  The router's namespace reaches the world
 * through slirp4netns, a user-space network stack that turns each
 * connection into a socket of its own process on the host: the host's own
 * routing, forwarding and firewall are never changed.
 *
 *   sandbox netns          router netns (nftables)          host netns
 *   eth0 169.254.a.b ----- pnK 169.254.0.1 .. tap0 ======= slirp4netns -> sockets
 *   resolv.conf:            dnsmasq K on 127.1.x.y
 *   169.254.0.1              (DNAT of pnK's port 53)
 *
 * Every decision is the kernel's or a proven tool's:
 *
 * - nftables in the router's namespace forwards a sandbox's packets only to
 *   what its policy allows: its own set of allowed addresses (the ranges it
 *   names, and what its resolver put there), never the host's addresses,
 *   loopback, link-local (cloud metadata), multicast, other sandboxes, nor
 *   a private range the operator did not name `reachable`; deny sets win;
 *   refusals are rejected (the connection fails at once).  IPv6 is not
 *   forwarded.
 * - dnsmasq, one per session, answers the sandbox's queries: allowed names
 *   are forwarded upstream and their addresses added to the session's set
 *   (its nftset option); every other name is NXDOMAIN.  A name thus opens
 *   exactly the addresses it resolved to, for that session only.
 *
 * Threads: the router's own thread (a workq of one) moved into the router's
 * namespace when the router started and never leaves it; every netlink,
 * nftables and dnsmasq action runs there, so a socket it opens is never in
 * the host's namespace by mistake.  Callers block until their action is
 * done (net_attach/net_detach are called by the session layer, never on an
 * event loop).  A second thread stays in the daemon's namespace and hears
 * the kernel tell of the host's addresses changing; it has the router's
 * thread renew the set of them.
 *
 * Lifetimes: dnsmasq and slirp4netns die with the router's thread
 * (PR_SET_PDEATHSIG), so with the daemon, kill -9 included; the router's
 * namespace and every pnK in it go when the last of them goes; a sandbox's
 * eth0 goes with its namespace.  net_detach() removes a session's link,
 * rules and resolver at once. */
#ifndef PETRI_NET_ROUTER_H
#define PETRI_NET_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "net/policy.h"

/* Network sessions at once, at most (each a /32 and a resolver). */
#define NET_LINKS_MAX 4096

struct net_router;
struct net_link;

/* Start the router for c (copied): its namespace, its uplink and base
 * rules.  0, or -errno with a sentence in err (no slirp4netns, no
 * nftables, no privilege to make a network namespace). */
int net_router_start(const struct net_config *c, struct net_router **out, char *err,
		     size_t errlen);
/* Stop the router: every link's resolver, the uplink, the namespace.
 * Links not detached yet are detached.  NULL allowed. */
void net_router_stop(struct net_router *r);

/* Give the sandbox whose network namespace is netns_fd a link under
 * policy p (not NET_NONE).  0, or -errno with a sentence in err (-EAGAIN:
 * NET_LINKS_MAX links already). */
int net_attach(struct net_router *r, int netns_fd, const struct net_policy *p,
	       struct net_link **out, char *err, size_t errlen);
/* A new policy p (not NET_NONE) for the link: its addresses and names as p
 * says from now on, for connections already open too (what its resolver
 * had let in before is forgotten; a TCP connection to an address p does not
 * allow is reset at both ends).  0, or -errno with a sentence in err: the
 * link then refuses everything until a policy applies. */
int net_update(struct net_link *l, const struct net_policy *p, char *err, size_t errlen);
/* The bytes the link's sandbox sent and received through the router (IP
 * packets, headers included) since it was made.  0 or -errno. */
int net_usage(struct net_link *l, uint64_t *sent, uint64_t *received);
/* What the link's sandbox reached and was refused since the last call (or
 * since the link was made): {"connected": [addresses], "refused":
 * [addresses], "names": [names resolved], "names_refused": [names the
 * policy refused]}, each at most 256, from nftables' sets of the link and
 * its resolver's log.  A new reference, or NULL. */
json_t *net_seen(struct net_link *l);
/* Remove the link, its rules and its resolver.  NULL allowed. */
void net_detach(struct net_link *l);

#endif
