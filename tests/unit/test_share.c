/* A budget shared between tenants (src/api/share.h): one tenant holds at
 * most its share, all at most the total, and what is given back is free. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>

#include "api/share.h"
#include "unit.h"

static struct share_tenant key(int k)
{
	struct share_tenant t;

	memset(&t, 0, sizeof(t));
	t.key = k;
	return t;
}

static struct share_tenant addr(unsigned char last)
{
	struct share_tenant t = key(-1);

	t.addr[15] = last;
	return t;
}

START_TEST(test_a_tenant_holds_at_most_its_share)
{
	struct share *sh;
	struct share_tenant a = key(0), b = key(1);

	ck_assert_int_eq(share_new(100, 50, &sh), 0);
	ck_assert_int_eq(share_take(sh, &a, 30), 0);
	ck_assert_int_eq(share_take(sh, &a, 20), 0);
	ck_assert_int_eq(share_take(sh, &a, 1), -EDQUOT);
	/* the other key still has all of its share */
	ck_assert_int_eq(share_take(sh, &b, 50), 0);
	share_give(sh, &a, 20);
	ck_assert_int_eq(share_take(sh, &a, 20), 0);
	share_give(sh, &a, 50);
	share_give(sh, &b, 50);
	ck_assert_int_eq(share_take(sh, &a, 50), 0);
	share_give(sh, &a, 50);
	share_free(sh);
}
END_TEST

START_TEST(test_all_together_hold_at_most_the_total)
{
	struct share *sh;
	struct share_tenant t[5];

	ck_assert_int_eq(share_new(100, 25, &sh), 0);
	for (int i = 0; i < 5; i++)
		t[i] = addr((unsigned char)i);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(share_take(sh, &t[i], 25), 0);
	ck_assert_int_eq(share_take(sh, &t[4], 1), -EBUSY);
	/* a key and an address are different tenants, as are two addresses */
	share_give(sh, &t[0], 25);
	ck_assert_int_eq(share_take(sh, &t[4], 25), 0);
	share_free(sh);		/* frees what is still held */
}
END_TEST

START_TEST(test_the_share_divides_among_the_keys)
{
	struct petri_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	ck_assert_uint_eq(config_share_of(&cfg, 32), 8);	/* no keys: a quarter */
	cfg.napi_keys = 1;
	ck_assert_uint_eq(config_share_of(&cfg, 32), 32);	/* the only tenant */
	cfg.napi_keys = 2;
	ck_assert_uint_eq(config_share_of(&cfg, 32), 16);
	cfg.napi_keys = 100;
	ck_assert_uint_eq(config_share_of(&cfg, 32), 8);
	ck_assert_uint_eq(config_share_of(&cfg, 2), 1);	/* never 0 */
}
END_TEST

/* What is made already (an answer) is charged past the share; what may
 * begin is asked with share_room(). */
START_TEST(test_charged_past_the_share_then_refused)
{
	struct share *sh;
	struct share_tenant a = key(0), b = key(1), c = key(2);

	ck_assert_int_eq(share_new(100, 50, &sh), 0);
	ck_assert_int_eq(share_room(sh, &a), 0);
	ck_assert_int_eq(share_charge(sh, &a, 80), 0);	/* one answer, past the share */
	ck_assert_uint_eq(share_held(sh, &a), 80);
	ck_assert_int_eq(share_room(sh, &a), -EDQUOT);
	ck_assert_int_eq(share_room(sh, &b), 0);
	ck_assert_int_eq(share_charge(sh, &b, 30), 0);
	ck_assert_uint_eq(share_held(sh, NULL), 110);
	/* over the total: a tenant that holds some waits, one that holds
	 * nothing may still begin one */
	ck_assert_int_eq(share_room(sh, &b), -EBUSY);
	ck_assert_int_eq(share_room(sh, &c), 0);
	share_give(sh, &a, 80);
	ck_assert_int_eq(share_room(sh, &a), 0);
	ck_assert_int_eq(share_room(sh, &b), 0);
	share_give(sh, &b, 30);
	ck_assert_uint_eq(share_held(sh, NULL), 0);
	share_free(sh);
}
END_TEST

/* The tenant of a client at ip, without a key. */
static struct share_tenant of(const char *ip)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	bool v6 = strchr(ip, ':');
	struct share_tenant t;

	ck_assert_int_eq(v6 ? inet_pton(AF_INET6, ip, &s6.sin6_addr) :
			      inet_pton(AF_INET, ip, &s4.sin_addr), 1);
	share_tenant_of_addr(v6 ? (struct sockaddr *)&s6 : (struct sockaddr *)&s4, -1, &t);
	return t;
}

static bool same_tenant(struct share_tenant a, struct share_tenant b)
{
	return a.key == b.key && !memcmp(a.addr, b.addr, sizeof(a.addr));
}

START_TEST(test_an_ipv6_host_is_one_tenant_per_64)
{
	struct share *sh;
	struct share_tenant a = of("2001:db8:1:2::1"), b = of("2001:db8:1:2:ffff:1:2:3");
	struct share_tenant c = of("2001:db8:1:3::1"), k;

	/* every address of one /64 holds the same share... */
	ck_assert(same_tenant(a, b));
	ck_assert_int_eq(share_new(100, 50, &sh), 0);
	ck_assert_int_eq(share_take(sh, &a, 50), 0);
	ck_assert_int_eq(share_take(sh, &b, 1), -EDQUOT);
	/* ...and the next /64 is another tenant */
	ck_assert(!same_tenant(a, c));
	ck_assert_int_eq(share_take(sh, &c, 50), 0);
	share_give(sh, &a, 50);
	share_give(sh, &c, 50);
	share_free(sh);
	/* IPv4, mapped or not, stays one tenant per address */
	ck_assert(same_tenant(of("192.0.2.1"), of("::ffff:192.0.2.1")));
	ck_assert(!same_tenant(of("::ffff:192.0.2.1"), of("::ffff:192.0.2.2")));
	ck_assert(!same_tenant(of("192.0.2.1"), of("192.0.2.2")));
	/* a key is its own tenant whatever the address; no address is one */
	share_tenant_of_addr((struct sockaddr *)&(struct sockaddr_in){ .sin_family = AF_INET },
			     2, &k);
	ck_assert(same_tenant(k, key(2)));
	share_tenant_of_addr(NULL, -1, &k);
	ck_assert(same_tenant(k, key(-1)));
}
END_TEST

Suite *share_suite(void)
{
	Suite *s = suite_create("share");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_a_tenant_holds_at_most_its_share);
	tcase_add_test(tc, test_all_together_hold_at_most_the_total);
	tcase_add_test(tc, test_the_share_divides_among_the_keys);
	tcase_add_test(tc, test_charged_past_the_share_then_refused);
	tcase_add_test(tc, test_an_ipv6_host_is_one_tenant_per_64);
	suite_add_tcase(s, tc);
	return s;
}
