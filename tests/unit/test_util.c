/* Small helpers of src/util that the other suites do not cover: clocks,
 * strict numbers, the cost scan of JSON texts, ids and address ranges. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "unit.h"
#include "util/cidr.h"
#include "util/clock.h"
#include "util/ids.h"
#include "util/jsoncost.h"
#include "util/num.h"

START_TEST(test_clock_deadline)
{
	const double steps[] = { 0, 0.001, 0.25, 0.999999999, 1, 2.5, 600 };

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct timespec before, d;
		double ahead;

		clock_gettime(CLOCK_REALTIME, &before);
		d = clock_deadline(steps[i]);
		ck_assert_int_ge(d.tv_nsec, 0);
		ck_assert_int_lt(d.tv_nsec, 1000000000L);
		ahead = (double)(d.tv_sec - before.tv_sec) +
			(double)(d.tv_nsec - before.tv_nsec) / 1e9;
		/* At least the step ahead of a reading taken before (less a
		 * nanosecond of rounding); a wall-clock step or a slow machine
		 * can only make it later, so there is no upper bound here. */
		ck_assert(ahead >= steps[i] - 1e-9);
	}
}
END_TEST

START_TEST(test_clock_readings)
{
	double m0 = clock_mono_s(), m1 = clock_mono_s();

	ck_assert(m1 >= m0);
	/* The wall clock is seconds since the epoch: after 2020. */
	ck_assert(clock_wall_s() > 1577836800.0);
}
END_TEST

START_TEST(test_num_u32)
{
	const char *bad[] = { "", " ", "-1", "-0", "1.5", "1e3", "12abc", "0x10", "abc",
			      "4294967296", "18446744073709551616", "99999999999999999999" };
	uint32_t v = 7;

	ck_assert(num_u32("42", 0, 100, &v) && v == 42);
	ck_assert(num_u32("0", 0, 100, &v) && v == 0);
	ck_assert(num_u32("4294967295", 0, UINT32_MAX, &v) && v == UINT32_MAX);
	ck_assert(num_u32("010", 0, 100, &v) && v == 10);	/* decimal, not octal */
	ck_assert(!num_u32("0", 1, 1000, &v));
	ck_assert(!num_u32("1001", 1, 1000, &v));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		ck_assert_msg(!num_u32(bad[i], 0, UINT32_MAX, &v), "accepted '%s'", bad[i]);
		ck_assert_uint_eq(v, 7);	/* untouched on failure */
	}
}
END_TEST

START_TEST(test_num_double)
{
	const char *bad[] = { "", "x", "1.5s", "nan", "inf", "-inf", "1e999", "0.0005" };
	double v = 7;

	ck_assert(num_double("2.5", 0.001, 10, &v) && v == 2.5);
	ck_assert(num_double("1e1", 0.001, 10, &v) && v == 10);
	ck_assert(num_double("0.001", 0.001, 10, &v) && v == 0.001);
	ck_assert(!num_double("10.5", 0.001, 10, &v));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		ck_assert_msg(!num_double(bad[i], 0.001, 10, &v), "accepted '%s'", bad[i]);
		ck_assert(v == 7);
	}
}
END_TEST

START_TEST(test_jsoncost)
{
	const struct jsoncost_limits lim = { .max_nodes = 10, .max_depth = 3 };
	struct jsoncost c;

	ck_assert(jsoncost_within("", 0, &lim, &c) && c.nodes == 0);
	ck_assert(jsoncost_within("42", 2, &lim, &c) && c.nodes == 1 && c.depth == 0);
	ck_assert(jsoncost_within("{\"a\":[1,2]}", 11, &lim, &c));
	ck_assert_uint_eq(c.depth, 2);
	ck_assert_uint_le(c.nodes, 10);
	ck_assert_uint_ge(c.nodes, 4);		/* the object, "a", the array, 1, 2 */
	/* Structure inside strings costs nothing; escaped quotes stay inside. */
	ck_assert(jsoncost_within("\"[[[[{,,,,:::}]]]]\\\"[[[[\"", 25, &lim, &c));
	ck_assert_uint_eq(c.depth, 0);
	ck_assert(!jsoncost_within("[[[[1]]]]", 9, &lim, &c));
	ck_assert_uint_eq(c.depth, 4);
	ck_assert(!jsoncost_within("[{},{},{},{},{},{}]", 19, &lim, &c));
	/* A text that ends inside a string or a container is jansson's to refuse. */
	ck_assert(jsoncost_within("[\"abc", 5, &lim, NULL));
}
END_TEST

/* A node's name, from the configuration or the host's name, and the ids
 * that carry it (util/ids.h: routers read the layout). */
START_TEST(test_ids_name_their_node)
{
	char node[ID_NODE_MAX + 1], id[ID_LEN("ses", 32) + 1], small[20];

	ck_assert(id_node_valid("a"));
	ck_assert(id_node_valid("petri0"));
	ck_assert(id_node_valid("0123456789abcdef"));
	ck_assert(!id_node_valid(""));
	ck_assert(!id_node_valid("0123456789abcdef0"));	/* 17 */
	ck_assert(!id_node_valid("petri-0"));
	ck_assert(!id_node_valid("petri_0"));
	ck_assert(!id_node_valid("Petri"));
	ck_assert(!id_node_valid("p\xc3\xa9"));

	id_node_from_host("petri-0", node);
	ck_assert_str_eq(node, "petri0");
	id_node_from_host("Build-Box.example.org", node);
	ck_assert_str_eq(node, "buildbox");
	/* The last 16: a StatefulSet's ordinal stays. */
	id_node_from_host("petri-sandbox-nodes-12", node);
	ck_assert_str_eq(node, "risandboxnodes12");
	ck_assert(id_node_valid(node));
	id_node_from_host("", node);
	ck_assert_str_eq(node, ID_NODE_DEFAULT);
	id_node_from_host("---.x", node);
	ck_assert_str_eq(node, ID_NODE_DEFAULT);

	ck_assert_int_eq(id_make(id, sizeof(id), "ses", "0123456789abcdef", 32), 0);
	ck_assert_uint_eq(strlen(id), ID_LEN("ses", 32));
	ck_assert(!strncmp(id, "ses_0123456789abcdef-", 21));
	for (const char *p = id + 21; *p; p++)
		ck_assert((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
	ck_assert_int_eq(id_make(id, sizeof(id), "ses", "n1", 32), 0);
	ck_assert_uint_eq(strlen(id), 4 + 2 + 1 + 32);
	ck_assert_int_eq(id_make(id, sizeof(id), "ses", "n-1", 32), -EINVAL);
	ck_assert_int_eq(id_make(small, sizeof(small), "ses", "n1", 32), -EINVAL);
}
END_TEST

/* The ranges of trusted routers: IPv4 also as a dual-stack socket reports
 * it, prefixes exact to the bit, no host bits past the prefix. */
START_TEST(test_cidr)
{
	unsigned char a[16];
	struct cidr c;
	char text[64];

	ck_assert(cidr_parse("10.0.0.0/8", &c));
	ck_assert(cidr_addr_parse("10.255.1.2", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("::ffff:10.1.2.3", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("11.0.0.1", a) && !cidr_contains(&c, a));
	ck_assert(cidr_parse("192.0.2.7", &c) && c.bits == 128);
	ck_assert(cidr_addr_parse("192.0.2.7", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("192.0.2.6", a) && !cidr_contains(&c, a));
	ck_assert(cidr_parse("172.16.0.0/12", &c));
	ck_assert(cidr_addr_parse("172.31.255.255", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("172.32.0.0", a) && !cidr_contains(&c, a));
	ck_assert(cidr_parse("0.0.0.0/0", &c));
	ck_assert(cidr_addr_parse("8.8.8.8", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("2001:db8::1", a) && !cidr_contains(&c, a));
	ck_assert(cidr_parse("2001:db8::/33", &c));
	ck_assert(cidr_addr_parse("2001:db8:7fff::1", a) && cidr_contains(&c, a));
	ck_assert(cidr_addr_parse("2001:db8:8000::1", a) && !cidr_contains(&c, a));
	ck_assert(cidr_parse("::1", &c));
	ck_assert(cidr_addr_parse("::1", a) && cidr_any(&c, 1, a));
	for (const char *bad = "10.0.0.1/8\0" "10.0.0.0/33\0" "10.0.0.0/\0" "10.0.0.0/+8\0"
			       "10.0.0.0/8x\0" "2001:db8::1/32\0" "::/129\0" "host\0" "\0";
	     *bad; bad += strlen(bad) + 1)
		ck_assert_msg(!cidr_parse(bad, &c), "accepted %s", bad);
	ck_assert(!cidr_parse("", &c));
	ck_assert(!cidr_addr_parse("1.2.3", a));
	ck_assert(cidr_addr_parse("192.0.2.44", a));
	cidr_addr_text(a, text, sizeof(text));
	ck_assert_str_eq(text, "192.0.2.44");
	ck_assert(cidr_addr_parse("2001:db8::9", a));
	cidr_addr_text(a, text, sizeof(text));
	ck_assert_str_eq(text, "2001:db8::9");
}
END_TEST

Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_clock_deadline);
	tcase_add_test(tc, test_clock_readings);
	tcase_add_test(tc, test_num_u32);
	tcase_add_test(tc, test_num_double);
	tcase_add_test(tc, test_jsoncost);
	tcase_add_test(tc, test_ids_name_their_node);
	tcase_add_test(tc, test_cidr);
	suite_add_tcase(s, tc);
	return s;
}
