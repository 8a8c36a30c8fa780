/* share — a budget of the server's that its clients hold together (the
 * bytes of request bodies not yet whole, the open event streams), shared
 * so that no one client can take all of it.  Internal to src/api.
 *
 * Each holder is a tenant: the API key its request was made with (for an
 * E2B sandbox's data plane, the key that made the sandbox), or, when the
 * server has no keys (or the request carries none: /healthz), the client's
 * address (an IPv4 address, IPv4-mapped included; an IPv6 address's /64,
 * which one host may fill with addresses at will; every unix-socket
 * client is one tenant).  A tenant may
 * hold at most its share of the total: config_share_of() divides it among
 * the configured keys (config.h).
 *
 * Thread-safe (one mutex per share); what it allocates per tenant is freed
 * when the tenant holds nothing. */
#ifndef PETRI_API_SHARE_H
#define PETRI_API_SHARE_H

#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/config.h"

struct share_tenant {
	int key;			/* index into cfg->api_keys; -1: by addr */
	unsigned char addr[16];		/* IPv4 (mapped) or IPv6; zero for unix */
};

/* The tenant of a request made with key index key_index (-1: none) by the
 * client at addr (16 bytes, IPv4 mapped: util/cidr.h; NULL: a unix
 * socket's). */
void share_tenant_of_bytes(const unsigned char *addr, int key_index, struct share_tenant *t);
/* The same from the client's socket address sa (NULL: a unix socket's). */
void share_tenant_of_addr(const struct sockaddr *sa, int key_index, struct share_tenant *t);

struct share;
/* A budget of total, each tenant at most per_tenant.  0 or -ENOMEM. */
int share_new(uint64_t total, uint64_t per_tenant, struct share **out);
void share_free(struct share *sh);
/* Hold n more for t: 0; -EDQUOT when t would hold more than its share;
 * -EBUSY when all tenants would hold more than the total; -ENOMEM.  On
 * failure nothing is held. */
int share_take(struct share *sh, const struct share_tenant *t, uint64_t n);
/* Hold n more for t whatever it holds already (what is made already must be
 * counted, as an answer is): 0 or -ENOMEM (then nothing is held). */
int share_charge(struct share *sh, const struct share_tenant *t, uint64_t n);
/* May t begin something that will hold more: 0; -EDQUOT when t holds its
 * share already; -EBUSY when all tenants hold the total and t holds some of
 * it (a tenant that holds nothing may always begin one: the others'
 * excess does not shut it out). */
int share_room(struct share *sh, const struct share_tenant *t);
/* What t holds now (NULL: all tenants together). */
uint64_t share_held(struct share *sh, const struct share_tenant *t);
/* Give back n of what t holds. */
void share_give(struct share *sh, const struct share_tenant *t, uint64_t n);
uint64_t share_per_tenant(const struct share *sh);

#endif
