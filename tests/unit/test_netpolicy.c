/* A session's network policy in text (src/net/policy.h): what a rule is,
 * what a policy becomes, and what the operator lets a client ask. */
#include <stdio.h>
#include <string.h>

#include "net/policy.h"
#include "unit.h"

static char err[256];

static void rule_ok(const char *s, bool deny, const char *back)
{
	struct net_rule r;
	char text[300];

	ck_assert_msg(net_rule_parse(s, deny, &r, err, sizeof(err)), "%s: %s", s, err);
	net_rule_text(&r, text, sizeof(text));
	ck_assert_str_eq(text, back);
}

static void rule_bad(const char *s, bool deny, const char *why)
{
	struct net_rule r;

	err[0] = '\0';
	ck_assert_msg(!net_rule_parse(s, deny, &r, err, sizeof(err)), "%s parsed", s);
	ck_assert_msg(strstr(err, why), "%s: '%s' lacks '%s'", s, err, why);
}

START_TEST(test_rules)
{
	rule_ok("pypi.internal", false, "pypi.internal");
	rule_ok("PyPI.Internal.", false, "pypi.internal");	/* case, the root's dot */
	rule_ok("*.example.org", false, "*.example.org");
	rule_ok("_srv.tcp.example.org", false, "_srv.tcp.example.org");
	rule_ok("localhost", false, "localhost");
	rule_ok("192.0.2.7", false, "192.0.2.7");
	rule_ok("10.1.2.0/24", true, "10.1.2.0/24");
	rule_ok("0.0.0.0/0", false, "0.0.0.0/0");
	rule_bad("*", true, "cannot be denied");
	rule_bad("*.org", false, "top-level");
	rule_bad("10.0.0.1/8", false, "not an address or a range");
	rule_bad("1.2.3", false, "not an address");
	rule_bad("2001:db8::/32", false, "IPv4");
	rule_bad("a..b", false, "not a domain name");
	rule_bad("-a.b", false, "not a domain name");
	rule_bad("a-.b", false, "not a domain name");
	rule_bad("a b", false, "not a domain name");
	rule_bad("a/b", false, "not an address");
	rule_bad("", false, "1 to 253");
}
END_TEST

START_TEST(test_long_names)
{
	char name[300], label[70];

	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(name, sizeof(name), "%s.example", label);
	rule_bad(name, false, "longer than 63");
	memset(name, 'a', 254);
	for (int i = 50; i < 254; i += 51)
		name[i] = '.';
	name[254] = '\0';
	rule_bad(name, false, "1 to 253");
	name[253] = '\0';
	name[252] = 'a';
	rule_ok(name, false, name);
}
END_TEST

START_TEST(test_policy_modes)
{
	struct net_policy p = { .mode = NET_NONE };

	ck_assert(net_policy_add(&p, "old.example.org", true, err, sizeof(err)));
	ck_assert_int_eq(p.mode, NET_NONE);		/* a deny alone opens nothing */
	ck_assert(net_policy_add(&p, "example.org", false, err, sizeof(err)));
	ck_assert_int_eq(p.mode, NET_ALLOWLIST);
	ck_assert(net_policy_add(&p, "*", false, err, sizeof(err)));
	ck_assert_int_eq(p.mode, NET_OPEN);
	ck_assert_uint_eq(p.nallow, 1);
	ck_assert_uint_eq(p.ndeny, 1);
	for (int i = 1; i < NET_RULES_MAX; i++)
		ck_assert(net_policy_add(&p, "192.0.2.1", false, err, sizeof(err)));
	ck_assert(!net_policy_add(&p, "192.0.2.1", false, err, sizeof(err)));
	ck_assert(strstr(err, "at most"));
}
END_TEST

START_TEST(test_bounds)
{
	struct net_config c = { .clients_may = NET_ALLOWLIST };
	struct net_policy none = { .mode = NET_NONE }, list = { .mode = NET_ALLOWLIST },
			  open = { .mode = NET_OPEN };

	ck_assert(net_policy_permitted(&c, &none, err, sizeof(err)));
	ck_assert(net_policy_permitted(&c, &list, err, sizeof(err)));
	ck_assert(!net_policy_permitted(&c, &open, err, sizeof(err)));
	c.clients_may = NET_NONE;
	ck_assert(net_policy_permitted(&c, &none, err, sizeof(err)));
	ck_assert(!net_policy_permitted(&c, &list, err, sizeof(err)));
	ck_assert(strstr(err, "operator's default"));
	ck_assert(!net_config_enabled(&c));
	c.deflt.mode = NET_ALLOWLIST;
	ck_assert(net_config_enabled(&c));
}
END_TEST

START_TEST(test_upstream)
{
	struct net_config c = { 0 };

	ck_assert(net_upstream_parse("192.0.2.53", &c));
	ck_assert_uint_eq(c.upstream_port, 53);
	ck_assert(net_upstream_parse("192.0.2.53:5353", &c));
	ck_assert_uint_eq(c.upstream_port, 5353);
	ck_assert(!net_upstream_parse("192.0.2.53:", &c));
	ck_assert(!net_upstream_parse("192.0.2.53:0", &c));
	ck_assert(!net_upstream_parse("192.0.2.53:70000", &c));
	ck_assert(!net_upstream_parse("resolver", &c));
	ck_assert(!net_upstream_parse(":53", &c));
}
END_TEST

/* An index's URL, and whether a policy reaches its host. */
START_TEST(test_index)
{
	struct net_index ix;
	struct net_policy p = { .mode = NET_NONE };

	ck_assert_msg(net_index_parse("http://PyPI.Internal:8080/simple/", &ix, err, sizeof(err)),
		      "%s", err);
	ck_assert(ix.plain && ix.host.is_name);
	ck_assert_str_eq(ix.host.name, "pypi.internal");
	ck_assert_str_eq(ix.hostport, "PyPI.Internal:8080");
	ck_assert_str_eq(ix.url, "http://PyPI.Internal:8080/simple/");
	ck_assert(!net_policy_reaches(&p, &ix.host));		/* none reaches nothing */
	ck_assert(net_policy_add(&p, "*.internal.example", false, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));
	ck_assert(net_policy_add(&p, "pypi.internal", false, err, sizeof(err)));
	ck_assert(net_policy_reaches(&p, &ix.host));
	ck_assert(net_policy_add(&p, "pypi.internal", true, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));		/* deny wins */

	ck_assert(net_index_parse("https://192.0.2.7/npm/", &ix, err, sizeof(err)));
	ck_assert(!ix.plain && !ix.host.is_name);
	ck_assert_str_eq(ix.hostport, "192.0.2.7");
	p = (struct net_policy){ .mode = NET_NONE };
	ck_assert(net_policy_add(&p, "192.0.2.0/24", false, err, sizeof(err)));
	ck_assert(net_policy_reaches(&p, &ix.host));
	ck_assert(net_policy_add(&p, "*", false, err, sizeof(err)));
	ck_assert(net_policy_add(&p, "192.0.2.7", true, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));
	/* A wildcard covers names under it, not the name itself. */
	ck_assert(net_index_parse("https://a.b.example.org/", &ix, err, sizeof(err)));
	p = (struct net_policy){ .mode = NET_NONE };
	ck_assert(net_policy_add(&p, "*.example.org", false, err, sizeof(err)));
	ck_assert(net_policy_reaches(&p, &ix.host));
	ck_assert(net_index_parse("https://example.org/", &ix, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));
	ck_assert(net_index_parse("https://xexample.org/", &ix, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));
	/* A denied name denies the names under it, as the resolver does. */
	ck_assert(net_index_parse("https://pypi.corp.internal/", &ix, err, sizeof(err)));
	p = (struct net_policy){ .mode = NET_OPEN };
	ck_assert(net_policy_reaches(&p, &ix.host));
	ck_assert(net_policy_add(&p, "corp.internal", true, err, sizeof(err)));
	ck_assert(!net_policy_reaches(&p, &ix.host));

	for (const char *bad[] = { "ftp://pypi.internal/", "pypi.internal/simple",
				   "http://[2001:db8::1]/", "http://a b/", "http://x/\"\"",
				   "http:///simple/", "https://*.example.org/", "http://x/\x01",
				   "", NULL }, **b = bad; *b; b++)
		ck_assert_msg(!net_index_parse(*b, &ix, err, sizeof(err)) && !ix.url[0],
			      "%s parsed", *b);
	{
		char longer[NET_URL_MAX + 16] = "http://x/";

		memset(longer + 9, 'a', sizeof(longer) - 10);
		longer[sizeof(longer) - 1] = '\0';
		ck_assert(!net_index_parse(longer, &ix, err, sizeof(err)));
		ck_assert(strstr(err, "at most"));
	}
}
END_TEST

Suite *netpolicy_suite(void)
{
	Suite *s = suite_create("netpolicy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_rules);
	tcase_add_test(tc, test_long_names);
	tcase_add_test(tc, test_policy_modes);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_upstream);
	tcase_add_test(tc, test_index);
	suite_add_tcase(s, tc);
	return s;
}
