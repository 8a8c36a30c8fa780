/* net/policy — what a session's code may reach on the network.
 *
 * A policy is a mode and two lists of rules:
 *
 *   none       the sandbox has loopback only (the default: no link is made)
 *   allowlist  it reaches what `allow` names and `deny` does not
 *   open       it reaches everything `deny` does not
 *
 * A rule is a domain name ("pypi.internal": that name; denied, the names
 * under it too, as the resolver denies them), a wildcard
 * ("*.example.org": every name under example.org, not example.org itself),
 * an IPv4 address or range ("192.0.2.7", "10.1.2.0/24"), or "*" in an
 * allow list (open).  Deny wins over allow.  Whatever a policy says, the
 * router (net/router.h) never forwards to the host's own addresses, other
 * sandboxes, loopback, link-local (cloud metadata) or multicast, nor to a
 * private range the operator's `reachable` does not name.
 *
 * The operator's [network] section (struct net_config) sets the policy a
 * session gets when its client asks for none, and the most a client may
 * ask for (clients_may).  Parsing here is text only; the JSON of a request
 * is read by src/exec/request.c, the file by src/config/config.c. */
#ifndef PETRI_NET_POLICY_H
#define PETRI_NET_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cidr.h"

enum net_mode { NET_NONE = 0, NET_ALLOWLIST, NET_OPEN };

/* Ranges no session ever reaches (beside the host's own addresses):
 * "this network", loopback, link-local (cloud metadata, the router's
 * plumbing, other sandboxes), multicast and reserved, and Azure's host
 * agent (root on a VM may reach it, and the uplink's sockets are root's);
 * and the private ranges, reached only where the operator names them
 * `reachable`.  As nftables set elements (router.c) and for
 * net_never_reached(). */
#define NET_NEVER_RANGES "0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3, 168.63.129.16"
#define NET_PRIVATE_RANGES \
	"10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15"

/* Rules in each list of one policy, at most: each name is a resolver
 * argument, each range a set element. */
#define NET_RULES_MAX 64
/* A domain name's length in text, at most (RFC 1035, without the root). */
#define NET_NAME_MAX 253
/* Ranges in [network] reachable, at most. */
#define NET_REACHABLE_MAX 64

struct net_rule {
	bool is_name;
	bool wildcard;			/* "*.NAME": NAME's subdomains */
	char name[NET_NAME_MAX + 1];	/* lower case, no trailing dot */
	struct cidr range;		/* when not a name: IPv4 mapped */
};

struct net_policy {
	enum net_mode mode;
	size_t nallow, ndeny;
	struct net_rule allow[NET_RULES_MAX];
	struct net_rule deny[NET_RULES_MAX];
};

/* A package index sessions' pip or npm use ([network] package_index,
 * npm_registry): its URL, and its host as a rule names it (a name or one
 * IPv4 address), to ask a policy whether a session reaches it. */
#define NET_URL_MAX 512
struct net_index {
	char url[NET_URL_MAX + 1];	/* "": none */
	struct net_rule host;
	char hostport[NET_NAME_MAX + 8];	/* HOST[:PORT], as pip trusts it */
	bool plain;			/* http://, not https:// */
};

/* The operator's [network] (docs/configuration.md). */
struct net_config {
	struct net_policy deflt;	/* what a session gets by default */
	enum net_mode clients_may;	/* the most a client may ask for */
	struct cidr reachable[NET_REACHABLE_MAX];
	size_t nreachable;
	/* Where the resolver forwards allowed names: an IPv4 address and a
	 * port; port 0: the uplink's own resolver (the host's). */
	uint32_t upstream_addr;		/* network order */
	uint16_t upstream_port;		/* host order */
	/* Each session's connections open at once, and new ones a second
	 * (with a burst of twice as many), at most. */
	uint32_t max_connections;
	uint32_t connections_per_s;
	/* Where pip and npm in a session whose policy reaches them look for
	 * packages (url "": nowhere, as without a network). */
	struct net_index pip, npm;
};

#define NET_CONNECTIONS_DEFAULT 256
#define NET_RATE_DEFAULT 50

/* Does any session of this configuration need the router (a default or a
 * client's ask beyond none)? */
bool net_config_enabled(const struct net_config *c);

/* "none", "allowlist", "open" (also names for errors and JSON). */
const char *net_mode_name(enum net_mode m);
bool net_mode_parse(const char *s, enum net_mode *out);

/* One rule of text into out.  deny: "*" is not a rule there.  true, or
 * false with a sentence in err. */
bool net_rule_parse(const char *s, bool deny, struct net_rule *out, char *err, size_t errlen);
/* The rule as a client wrote it (a name, "*.name", "a.b.c.d" or
 * "a.b.c.d/n") into out. */
void net_rule_text(const struct net_rule *r, char *out, size_t len);

/* Add a rule to a policy's list; an allow "*" makes the policy open, an
 * allow rule of any other kind makes a none policy an allowlist.  true, or
 * false with a sentence in err (too many rules, a bad rule). */
bool net_policy_add(struct net_policy *p, const char *rule, bool deny, char *err,
		    size_t errlen);

/* Is what p asks within what c lets a client ask (an allowed range wider
 * than a /8 asks for what "*" asks)?  true, or false with a sentence in
 * err. */
bool net_policy_permitted(const struct net_config *c, const struct net_policy *p, char *err,
			  size_t errlen);

/* Is name a name under domain ("a.b.example.org" under "example.org"; not
 * example.org itself)?  Both lower case, as rules hold them. */
bool net_name_under(const char *name, const char *domain);

/* Does p's deny list cover host (a rule naming one name or one address):
 * a denied address or range holding it, a denied name that is it or
 * above it, a wildcard above it? */
bool net_policy_denies(const struct net_policy *p, const struct net_rule *host);

/* Does p let a sandbox reach host (a rule naming one name or one address,
 * as net_index's): allowed (or open) and not denied (a denied name denies
 * the names under it too, as the resolver does)?  A name's addresses are
 * the resolver's to check; the router's never-reachable ranges still hold
 * whatever this says. */
bool net_policy_reaches(const struct net_policy *p, const struct net_rule *host);

/* Is the address (IPv4 mapped) one no session reaches under c, whatever
 * its policy: in NET_NEVER_RANGES, or private and not `reachable`?  A
 * sentence of why, or NULL. */
const char *net_never_reached(const struct net_config *c, const unsigned char addr[16]);

/* An index's URL (http:// or https://, a host that is a domain name or an
 * IPv4 address, an optional port and path; printable ASCII) into out.
 * true, or false with a sentence in err. */
bool net_index_parse(const char *url, struct net_index *out, char *err, size_t errlen);

/* "ADDR" or "ADDR:PORT" (IPv4) into c's upstream. */
bool net_upstream_parse(const char *s, struct net_config *c);

/* Add the operator's deny rules (c's default policy's) to p's: they hold
 * whatever a client asks.  false, with a sentence in err, when p has no
 * room for them. */
bool net_policy_add_operator_denies(const struct net_config *c, struct net_policy *p,
				    char *err, size_t errlen);

#endif
