/* share — a budget shared fairly between tenants (share.h). */
#include "api/share.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/cidr.h"

#define BUCKETS 64

struct holder {
	struct share_tenant t;
	uint64_t held;
	struct holder *next;
};

struct share {
	pthread_mutex_t lock;
	uint64_t total, per_tenant, held;
	struct holder *bucket[BUCKETS];
};

void share_tenant_of_bytes(const unsigned char *addr, int key_index, struct share_tenant *t)
{
	memset(t, 0, sizeof(*t));
	t->key = key_index;
	if (key_index >= 0 || !addr)
		return;
	/* A host is given a /64 (RFC 6177; SLAAC's privacy addresses change
	 * within it at will): its first 64 bits name the tenant, or one
	 * client would be as many tenants as it cares to use addresses.  An
	 * IPv4 address, mapped (::ffff:a.b.c.d), stays one address. */
	memcpy(t->addr, addr, IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)addr) ? 16 : 8);
}

void share_tenant_of_addr(const struct sockaddr *sa, int key_index, struct share_tenant *t)
{
	unsigned char addr[16];

	share_tenant_of_bytes(cidr_addr_of(sa, addr) ? addr : NULL, key_index, t);
}

int share_new(uint64_t total, uint64_t per_tenant, struct share **out)
{
	struct share *sh = calloc(1, sizeof(*sh));

	*out = NULL;
	if (!sh)
		return -ENOMEM;
	pthread_mutex_init(&sh->lock, NULL);
	sh->total = total;
	sh->per_tenant = per_tenant;
	*out = sh;
	return 0;
}

void share_free(struct share *sh)
{
	if (!sh)
		return;
	for (size_t i = 0; i < BUCKETS; i++)
		while (sh->bucket[i]) {
			struct holder *h = sh->bucket[i];

			sh->bucket[i] = h->next;
			free(h);
		}
	pthread_mutex_destroy(&sh->lock);
	free(sh);
}

uint64_t share_per_tenant(const struct share *sh)
{
	return sh->per_tenant;
}

static size_t bucket_of(const struct share_tenant *t)
{
	uint32_t h = 2166136261u ^ (uint32_t)t->key;	/* FNV-1a */

	for (size_t i = 0; i < sizeof(t->addr); i++)
		h = (h ^ t->addr[i]) * 16777619u;
	return h % BUCKETS;
}

static bool same(const struct share_tenant *a, const struct share_tenant *b)
{
	return a->key == b->key && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* Where t's holder is, or goes (sh->lock held). */
static struct holder **find(struct share *sh, const struct share_tenant *t)
{
	struct holder **p = &sh->bucket[bucket_of(t)];

	while (*p && !same(&(*p)->t, t))
		p = &(*p)->next;
	return p;
}

/* Hold n more for t; within its share and the total unless forced. */
static int hold(struct share *sh, const struct share_tenant *t, uint64_t n, bool force)
{
	struct holder **p, *h;
	int r = 0;

	pthread_mutex_lock(&sh->lock);
	p = find(sh, t);
	h = *p;
	if (!force && (h ? h->held : 0) + n > sh->per_tenant) {
		r = -EDQUOT;
	} else if (!force && sh->held + n > sh->total) {
		r = -EBUSY;
	} else if (!h && !(h = *p = calloc(1, sizeof(*h)))) {
		r = -ENOMEM;
	} else {
		h->t = *t;
		h->held += n;
		sh->held += n;
	}
	pthread_mutex_unlock(&sh->lock);
	return r;
}

int share_take(struct share *sh, const struct share_tenant *t, uint64_t n)
{
	return hold(sh, t, n, false);
}

int share_charge(struct share *sh, const struct share_tenant *t, uint64_t n)
{
	return hold(sh, t, n, true);
}

uint64_t share_held(struct share *sh, const struct share_tenant *t)
{
	uint64_t n;

	pthread_mutex_lock(&sh->lock);
	if (!t)
		n = sh->held;
	else
		n = *find(sh, t) ? (*find(sh, t))->held : 0;
	pthread_mutex_unlock(&sh->lock);
	return n;
}

int share_room(struct share *sh, const struct share_tenant *t)
{
	struct holder *h;
	int r = 0;

	pthread_mutex_lock(&sh->lock);
	h = *find(sh, t);
	if (h && h->held >= sh->per_tenant)
		r = -EDQUOT;
	else if (h && h->held && sh->held >= sh->total)
		r = -EBUSY;
	pthread_mutex_unlock(&sh->lock);
	return r;
}

void share_give(struct share *sh, const struct share_tenant *t, uint64_t n)
{
	struct holder **p, *h;

	if (!n)
		return;
	pthread_mutex_lock(&sh->lock);
	p = find(sh, t);
	if ((h = *p)) {
		n = n < h->held ? n : h->held;
		h->held -= n;
		sh->held -= n;
		if (!h->held) {
			*p = h->next;
			free(h);
		}
	}
	pthread_mutex_unlock(&sh->lock);
}
