/* A budget shared between tenants (src/api/share.h): one tenant holds at
 * most its share, all at most the total, and what is given back is free. */
#include <errno.h>
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

Suite *share_suite(void)
{
	Suite *s = suite_create("share");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_a_tenant_holds_at_most_its_share);
	tcase_add_test(tc, test_all_together_hold_at_most_the_total);
	tcase_add_test(tc, test_the_share_divides_among_the_keys);
	tcase_add_test(tc, test_charged_past_the_share_then_refused);
	suite_add_tcase(s, tc);
	return s;
}
