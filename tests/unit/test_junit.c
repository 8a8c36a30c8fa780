/* JUnit XML reports (src/exec/junit.c): what pytest and node --test
 * write, and what a hostile sandbox could write instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/junit.h"
#include "unit.h"
#include "util/buf.h"
#include "util/utf8.h"

/* pytest 7 (junit_family xunit2, the default): no file or line
 * attributes, the place only in the failure's text. */
static const char pytest_xml[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" "
	"errors=\"1\" failures=\"1\" skipped=\"1\" tests=\"4\" time=\"0.033\">"
	"<testcase classname=\"test_calc\" name=\"test_ok\" time=\"0.001\" />"
	"<testcase classname=\"test_calc\" name=\"test_bad\" time=\"0.001\">"
	"<failure message=\"assert 3 == 4&#10; +  where 3 = add(1, 2)\">def test_bad():\n"
	"        print(\"hello out\")\n"
	"&gt;       assert add(1, 2) == 4\n"
	"E       assert 3 == 4\n"
	"E        +  where 3 = add(1, 2)\n"
	"\n"
	"test_calc.py:8: AssertionError</failure>"
	"<system-out>hello out\n</system-out></testcase>"
	"<testcase classname=\"test_calc\" name=\"test_skip\" time=\"0.000\">"
	"<skipped type=\"pytest.skip\" message=\"not now\">/work/test_calc.py:11: not now</skipped>"
	"</testcase>"
	"<testcase classname=\"test_calc\" name=\"test_fixture\" time=\"0.000\">"
	"<error message=\"failed on setup with &quot;RuntimeError: fixture broke&quot;\">"
	"@pytest.fixture\n    def broken():\n&gt;       raise RuntimeError(\"fixture broke\")\n"
	"E       RuntimeError: fixture broke\n\ntest_calc.py:16: RuntimeError</error>"
	"</testcase></testsuite></testsuites>";

/* node --test --test-reporter=junit (node 20): cases right under the
 * root, a nested suite, the place in a stack. */
static const char node_xml[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<testsuites>\n"
	"\t<testcase name=\"adds\" time=\"0.002496\" classname=\"test\"/>\n"
	"\t<testcase name=\"fails\" time=\"0.002379\" classname=\"test\" "
	"failure=\"Expected values to be strictly equal:3 !== 4\">\n"
	"\t\t<failure type=\"testCodeFailure\" message=\"Expected values to be strictly "
	"equal:3 !== 4\">\n"
	"[Error [ERR_TEST_FAILURE]: Expected values to be strictly equal:\n\n3 !== 4\n] {\n"
	"  code: 'ERR_TEST_FAILURE',\n"
	"  cause: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n"
	"      at TestContext.&lt;anonymous> (file:///work/t.test.mjs:4:30)\n"
	"      at Test.runInAsyncScope (node:async_hooks:206:9)\n"
	"      at Test.run (node:internal/test_runner/test:796:25)\n"
	"}\n"
	"\t\t</failure>\n"
	"\t</testcase>\n"
	"\t<testsuite name=\"suite\" time=\"0.001635\" tests=\"2\" failures=\"1\" skipped=\"1\">\n"
	"\t\t<testcase name=\"inner fail\" time=\"0.000550\" classname=\"test\">\n"
	"\t\t\t<failure type=\"testCodeFailure\" message=\"bad inner\">\n"
	"Error [ERR_TEST_FAILURE]: bad inner\n"
	"    at new Promise (&lt;anonymous>) {\n"
	"  cause: Error: bad inner\n"
	"      at node:internal/test_runner/test:1133:71\n"
	"      at TestContext.&lt;anonymous> (/work/lib/t.test.mjs:5:58)\n"
	"}\n"
	"\t\t\t</failure>\n"
	"\t\t</testcase>\n"
	"\t\t<testcase name=\"skipped\" time=\"0.000346\" classname=\"test\">\n"
	"\t\t\t<skipped type=\"skipped\" message=\"later\"/>\n"
	"\t\t</testcase>\n"
	"\t</testsuite>\n"
	"\t<!-- tests 4 -->\n"
	"</testsuites>\n";

static int parse(struct junit *j, const char *xml, size_t len, char *err, size_t errlen)
{
	ck_assert_int_eq(junit_init(j), 0);
	return junit_parse(j, xml, len, err, errlen);
}

static const char *str(const json_t *c, const char *key)
{
	const char *s = json_string_value(json_object_get(c, key));

	ck_assert_msg(s, "'%s' is not a string", key);
	return s;
}

static json_t *case_at(const struct junit *j, size_t i)
{
	json_t *c = json_array_get(j->cases, i);

	ck_assert_ptr_nonnull(c);
	return c;
}

/* Every string of every case is valid UTF-8 and within its bound. */
static void check_bounds(const struct junit *j)
{
	json_t *c, *v;
	const char *k;
	size_t i;

	ck_assert_uint_le(json_array_size(j->cases), JUNIT_CASES_MAX);
	json_array_foreach(j->cases, i, c) {
		json_object_foreach(c, k, v) {
			if (!json_is_string(v))
				continue;
			ck_assert(utf8_valid(json_string_value(v), json_string_length(v)));
			ck_assert_uint_le(json_string_length(v), JUNIT_MESSAGE_MAX);
		}
		ck_assert_uint_le(strlen(str(c, "name")), JUNIT_NAME_MAX);
		ck_assert_uint_le(strlen(str(c, "classname")), JUNIT_NAME_MAX);
	}
}

START_TEST(test_junit_pytest)
{
	struct junit j;
	char err[256];
	json_t *c, *t;

	ck_assert_int_eq(parse(&j, pytest_xml, sizeof(pytest_xml) - 1, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 1);
	ck_assert_uint_eq(j.failed, 1);
	ck_assert_uint_eq(j.errors, 1);
	ck_assert_uint_eq(j.skipped, 1);
	ck_assert_uint_eq(json_array_size(j.cases), 4);
	ck_assert(!j.truncated);

	c = case_at(&j, 0);
	ck_assert_str_eq(str(c, "name"), "test_ok");
	ck_assert_str_eq(str(c, "status"), "passed");
	ck_assert(json_is_null(json_object_get(c, "file")));
	ck_assert(json_is_null(json_object_get(c, "line")));

	c = case_at(&j, 1);
	ck_assert_str_eq(str(c, "classname"), "test_calc");
	ck_assert_str_eq(str(c, "name"), "test_bad");
	ck_assert_str_eq(str(c, "status"), "failed");
	ck_assert_str_eq(str(c, "message"), "assert 3 == 4\n +  where 3 = add(1, 2)");
	ck_assert_str_eq(str(c, "file"), "test_calc.py");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 8);
	ck_assert(strstr(str(c, "details"), "E       assert 3 == 4"));
	ck_assert_str_eq(str(c, "output"), "hello out");

	c = case_at(&j, 2);
	ck_assert_str_eq(str(c, "status"), "skipped");
	ck_assert_str_eq(str(c, "message"), "not now");
	ck_assert_str_eq(str(c, "file"), "test_calc.py");	/* /work/ dropped */
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 11);

	c = case_at(&j, 3);
	ck_assert_str_eq(str(c, "status"), "error");
	ck_assert_str_eq(str(c, "message"), "failed on setup with \"RuntimeError: fixture broke\"");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 16);

	t = junit_to_json(&j);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(json_integer_value(json_object_get(t, "passed")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(t, "failed")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(t, "errors")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(t, "skipped")), 1);
	ck_assert(json_is_false(json_object_get(t, "truncated")));
	ck_assert_uint_eq(json_array_size(json_object_get(t, "cases")), 4);
	json_decref(t);
	check_bounds(&j);
	junit_release(&j);
}
END_TEST

START_TEST(test_junit_node)
{
	struct junit j;
	char err[256];
	json_t *c;

	ck_assert_int_eq(parse(&j, node_xml, sizeof(node_xml) - 1, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 1);
	ck_assert_uint_eq(j.failed, 2);
	ck_assert_uint_eq(j.skipped, 1);
	ck_assert_uint_eq(j.errors, 0);

	c = case_at(&j, 1);
	ck_assert_str_eq(str(c, "name"), "fails");
	ck_assert_str_eq(str(c, "message"), "Expected values to be strictly equal:3 !== 4");
	/* The first frame outside node's own code, file:///work/ dropped. */
	ck_assert_str_eq(str(c, "file"), "t.test.mjs");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 4);
	/* Trimmed: node puts its text between blank lines. */
	ck_assert_int_eq(str(c, "details")[0], '[');

	c = case_at(&j, 2);
	ck_assert_str_eq(str(c, "name"), "inner fail");	/* in a nested suite */
	ck_assert_str_eq(str(c, "file"), "lib/t.test.mjs");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 5);

	c = case_at(&j, 3);
	ck_assert_str_eq(str(c, "status"), "skipped");
	ck_assert_str_eq(str(c, "message"), "later");
	check_bounds(&j);
	junit_release(&j);
}
END_TEST

/* Attributes give the place when the text does not; a root <testsuite>;
 * the message from the text when there is no attribute; the first outcome
 * wins but a failure overrides a skip; CDATA is text. */
START_TEST(test_junit_shapes)
{
	static const char xml[] =
		"<testsuite name=\"s\">"
		"<testcase classname=\"pkg.T\" name=\"a\" file=\"/work/src/t.py\" line=\"7\"/>"
		"<testcase name=\"b\" file=\"t.py\" line=\"9\"><failure><![CDATA[first line\n"
		"second]]></failure><error message=\"later\"/></testcase>"
		"<testcase name=\"c\"><skipped/><failure message=\"real\">"
		"  File \"/usr/lib/python3/unittest/case.py\", line 873, in assertEqual\n"
		"  File \"/work/test_u.py\", line 12, in test_c\n"
		"  File \"/usr/lib/python3/unittest/case.py\", line 900, in fail\n"
		"</failure></testcase>"
		"<testcase name=\"d\" line=\"x\" file=\"\"><error message=\"e\">no place here</error>"
		"</testcase>"
		"</testsuite>";
	struct junit j;
	char err[256];
	json_t *c;

	ck_assert_int_eq(parse(&j, xml, sizeof(xml) - 1, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 1);
	ck_assert_uint_eq(j.failed, 2);
	ck_assert_uint_eq(j.errors, 1);

	c = case_at(&j, 0);
	ck_assert_str_eq(str(c, "classname"), "pkg.T");
	ck_assert_str_eq(str(c, "file"), "src/t.py");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 7);

	c = case_at(&j, 1);
	ck_assert_str_eq(str(c, "status"), "failed");
	ck_assert_str_eq(str(c, "message"), "first line");
	ck_assert_str_eq(str(c, "details"), "first line\nsecond");
	ck_assert_str_eq(str(c, "file"), "t.py");	/* the attributes' */
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 9);

	c = case_at(&j, 2);
	ck_assert_str_eq(str(c, "status"), "failed");
	ck_assert_str_eq(str(c, "message"), "real");
	/* The frame in /work, not the standard library's after it. */
	ck_assert_str_eq(str(c, "file"), "test_u.py");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 12);

	c = case_at(&j, 3);
	ck_assert(json_is_null(json_object_get(c, "file")));
	ck_assert(json_is_null(json_object_get(c, "line")));
	junit_release(&j);
}
END_TEST

/* Two reports add up; one that fails adds nothing. */
START_TEST(test_junit_merge)
{
	static const char broken[] =
		"<testsuites><testcase name=\"x\"/><testcase name=\"y\"/></testsuite></testsuites>";
	struct junit j;
	char err[256];

	ck_assert_int_eq(parse(&j, pytest_xml, sizeof(pytest_xml) - 1, err, sizeof(err)), 0);
	ck_assert_int_eq(junit_parse(&j, node_xml, sizeof(node_xml) - 1, err, sizeof(err)), 0);
	ck_assert_int_eq(junit_parse(&j, broken, sizeof(broken) - 1, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "mismatch"));
	ck_assert_uint_eq(j.passed, 2);
	ck_assert_uint_eq(j.failed, 3);
	ck_assert_uint_eq(json_array_size(j.cases), 8);
	junit_release(&j);
}
END_TEST

/* What is not a report says so, apart from a report that is broken. */
START_TEST(test_junit_not_reports)
{
	static const struct {
		const char *xml;
		int r;
		const char *why;
	} cases[] = {
		{ "", -ENOMSG, NULL },
		{ "not xml at all", -ENOMSG, NULL },
		{ "{\"json\": true}", -ENOMSG, NULL },
		{ "<html><body><testcase name=\"x\"/></body></html>", -ENOMSG, "<html>" },
		{ "<testsuites><testcase name=\"a\">", -EINVAL, "cut short" },
		{ "<testsuites><testcase name=\"a\"><failure>x", -EINVAL, "cut short" },
		{ "<testsuites></testsuites><testsuites/>", -EINVAL, NULL },
		{ "<testsuites><testcase name='a' name='b'/></testsuites>", -EINVAL, NULL },
	};
	struct junit j;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *xml = cases[i].xml;

		ck_assert_int_eq(junit_init(&j), 0);
		ck_assert_msg(junit_parse(&j, xml, strlen(xml), err, sizeof(err)) == cases[i].r,
			      "%s", xml);
		ck_assert_msg(err[0], "no reason for %s", xml);
		ck_assert(utf8_valid(err, strlen(err)));
		if (cases[i].why)
			ck_assert_msg(strstr(err, cases[i].why), "%s: %s", xml, err);
		ck_assert_uint_eq(j.passed + j.failed + j.errors + j.skipped, 0);
		ck_assert_uint_eq(json_array_size(j.cases), 0);
		ck_assert_int_eq(junit_sniff(xml, strlen(xml)), cases[i].r == -EINVAL);
		junit_release(&j);
	}
	/* The head of a long report is enough to know it is one. */
	ck_assert(junit_sniff(pytest_xml, 200));
	ck_assert(junit_sniff(node_xml, 60));
}
END_TEST

/* Read from fd until it would block. */
static size_t drain(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)n;
	return got;
}

static int parse_quietly(const char *xml, size_t len, char *err, size_t errlen,
			 size_t *stderr_bytes)
{
	struct junit j;
	char spill[4096];
	int pipefd[2], saved, r;

	ck_assert_int_eq(pipe2(pipefd, O_NONBLOCK), 0);
	fflush(stderr);
	saved = dup(2);
	dup2(pipefd[1], 2);
	r = parse(&j, xml, len, err, errlen);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(pipefd[1]);
	*stderr_bytes = drain(pipefd[0], spill, sizeof(spill));
	close(pipefd[0]);
	if (r == 0) {
		char *text = json_dumps(j.cases, 0);

		ck_assert(text && !strstr(text, "root:"));
		free(text);
		check_bounds(&j);
	}
	junit_release(&j);
	return r;
}

/* Entities: none is declared, expanded, or read from a file; a DTD ends
 * the parse; nothing reaches the daemon's stderr. */
START_TEST(test_junit_entities)
{
	static const char laughs[] =
		"<?xml version=\"1.0\"?>\n"
		"<!DOCTYPE testsuites [\n"
		" <!ENTITY a \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">\n"
		" <!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">\n"
		" <!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">\n"
		" <!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">\n"
		" <!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">\n"
		" <!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\">\n"
		" <!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">\n"
		"]>\n"
		"<testsuites><testcase name=\"&g;\"><failure message=\"&g;\">&g;</failure>"
		"</testcase></testsuites>";
	static const char xxe[] =
		"<?xml version=\"1.0\"?>\n"
		"<!DOCTYPE testsuite [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>\n"
		"<testsuite><testcase name=\"x\"><failure message=\"&xxe;\">&xxe;</failure>"
		"</testcase></testsuite>";
	static const char external_dtd[] =
		"<?xml version=\"1.0\"?>\n"
		"<!DOCTYPE testsuite SYSTEM \"file:///etc/passwd\">\n"
		"<testsuite><testcase name=\"x\"/></testsuite>";
	static const char undeclared[] =
		"<testsuite><testcase name=\"x\"><failure message=\"&xxe;\">&xxe;</failure>"
		"</testcase></testsuite>";
	static const char xinclude[] =
		"<testsuites xmlns:xi=\"http://www.w3.org/2001/XInclude\"><testcase name=\"x\">"
		"<failure><xi:include href=\"file:///etc/passwd\" parse=\"text\"/></failure>"
		"</testcase></testsuites>";
	static const char doctype_html[] =
		"<!DOCTYPE html><html><body/></html>";
	char err[256];
	size_t spilled;

	ck_assert_int_eq(parse_quietly(laughs, sizeof(laughs) - 1, err, sizeof(err), &spilled),
			 -EINVAL);
	ck_assert(strstr(err, "DOCTYPE"));
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(xxe, sizeof(xxe) - 1, err, sizeof(err), &spilled), -EINVAL);
	ck_assert(strstr(err, "DOCTYPE") && !strstr(err, "root:"));
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(external_dtd, sizeof(external_dtd) - 1, err, sizeof(err),
				       &spilled), -EINVAL);
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(undeclared, sizeof(undeclared) - 1, err, sizeof(err),
				       &spilled), -EINVAL);
	ck_assert(strstr(err, "xxe") && !strstr(err, "root:"));
	ck_assert_uint_eq(spilled, 0);
	/* Read, but the include is an element like any other: not followed. */
	ck_assert_int_eq(parse_quietly(xinclude, sizeof(xinclude) - 1, err, sizeof(err),
				       &spilled), 0);
	ck_assert_uint_eq(spilled, 0);
	/* Not a report: no error to report, in the auto-detection's terms. */
	ck_assert_int_eq(parse_quietly(doctype_html, sizeof(doctype_html) - 1, err, sizeof(err),
				       &spilled), -ENOMSG);
	ck_assert_uint_eq(spilled, 0);
}
END_TEST

/* Has this process loaded one of glibc's iconv modules? */
static bool gconv_loaded(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool yes = false;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		yes = yes || strstr(line, "/gconv/");
	fclose(f);
	return yes;
}

/* Bytes that are not what they claim, and encodings: those libxml2 reads
 * itself, never one that would load an iconv module. */
START_TEST(test_junit_encodings)
{
	static const char bad_utf8[] = "<testsuites><testcase name=\"\xff\xfe\"/></testsuites>";
	static const char bad_iso2022[] =
		"<?xml version=\"1.0\" encoding=\"ISO-2022-JP\"?>"
		"<testsuites><testcase name=\"\x1b$B\xff\xff\"/></testsuites>";
	static const char unknown[] =
		"<?xml version=\"1.0\" encoding=\"x-no-such-encoding\"?><testsuites/>";
	static const char latin1[] =
		"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>"
		"<testsuites><testcase name=\"caf\xe9\"><failure message=\"\xe9t\xe9\"/>"
		"</testcase></testsuites>";
	static const char bad_charref[] = "<testsuites><testcase name=\"&#xD800;\"/></testsuites>";
	/* UTF-16 (from its first bytes) declaring another encoding; UCS-4
	 * and EBCDIC (cp037), which libxml2 would read through iconv. */
	static const char utf16_declares[] =
		"<\0?\0x\0m\0l\0 \0v\0e\0r\0s\0i\0o\0n\0=\0\"\0\x31\0.\0\x30\0\"\0 \0"
		"e\0n\0c\0o\0d\0i\0n\0g\0=\0\"\0I\0S\0O\0-\0"
		"2\0\x30\0\x32\0\x32\0-\0J\0P\0\"\0?\0>\0<\0t\0e\0s\0t\0s\0u\0i\0t\0e\0/\0>\0";
	static const char ucs4[] = "<\0\0\0t\0\0\0e\0\0\0s\0\0\0t\0\0\0s\0\0\0/\0\0\0>\0\0\0";
	static const char ebcdic[] = "\x4c\x6f\xa7\x94\x93\x40\x6f\x6e";
	struct junit j;
	char err[256];
	size_t spilled;

	ck_assert_int_eq(parse_quietly(bad_utf8, sizeof(bad_utf8) - 1, err, sizeof(err),
				       &spilled), -EINVAL);
	ck_assert(utf8_valid(err, strlen(err)));
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(bad_iso2022, sizeof(bad_iso2022) - 1, err, sizeof(err),
				       &spilled), -ENOMSG);
	ck_assert_msg(strstr(err, "'ISO-2022-JP' is not one petri reads"), "%s", err);
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(unknown, sizeof(unknown) - 1, err, sizeof(err), &spilled),
			 -ENOMSG);
	ck_assert_uint_eq(spilled, 0);
	ck_assert_int_eq(parse_quietly(utf16_declares, sizeof(utf16_declares) - 1, err,
				       sizeof(err), &spilled), 0);
	ck_assert_int_eq(parse_quietly(ucs4, sizeof(ucs4) - 1, err, sizeof(err), &spilled),
			 -ENOMSG);
	ck_assert_int_eq(parse_quietly(ebcdic, sizeof(ebcdic) - 1, err, sizeof(err), &spilled),
			 -ENOMSG);
	ck_assert(strstr(err, "EBCDIC"));
	ck_assert(!gconv_loaded());
	ck_assert_int_eq(parse_quietly(bad_charref, sizeof(bad_charref) - 1, err, sizeof(err),
				       &spilled), -EINVAL);
	ck_assert_uint_eq(spilled, 0);
	/* A declared encoding is honoured: the cases come out as UTF-8. */
	ck_assert_int_eq(parse(&j, latin1, sizeof(latin1) - 1, err, sizeof(err)), 0);
	ck_assert_str_eq(str(case_at(&j, 0), "name"), "caf\xc3\xa9");
	ck_assert_str_eq(str(case_at(&j, 0), "message"), "\xc3\xa9t\xc3\xa9");
	junit_release(&j);
	ck_assert(!gconv_loaded());
}
END_TEST

START_TEST(test_junit_deep)
{
	struct buf xml = BUF_INIT;
	struct junit j;
	char err[256];

	/* Within the bound: a case in 60 nested suites. */
	for (int i = 0; i < 60; i++)
		buf_append_str(&xml, "<testsuite>");
	buf_append_str(&xml, "<testcase name=\"deep\"/>");
	for (int i = 0; i < 60; i++)
		buf_append_str(&xml, "</testsuite>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 1);
	junit_release(&j);

	/* 100 000 levels: refused at the bound, not after. */
	buf_reset(&xml);
	buf_append_str(&xml, "<testsuites>");
	for (int i = 0; i < 100000; i++)
		buf_append_str(&xml, "<a>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "deeper than 64"), "%s", err);
	junit_release(&j);
	buf_release(&xml);
}
END_TEST

/* A tag of many attributes: libxml2 2.9 checks each against every one
 * before it (180 000 in 1.9 MB were 13 s of CPU), so they are counted
 * first, quoted '=' and '>' and the text of comments and CDATA aside. */
START_TEST(test_junit_many_attributes)
{
	struct buf xml = BUF_INIT;
	struct junit j;
	char err[256];

	/* 256, with '=' and '>' in their values, and more '=' where no tag
	 * is: read. */
	buf_append_str(&xml, "<testsuites><!-- a=b a=b a=b --><testcase name=\"t\"");
	for (int i = 1; i < JUNIT_ATTRS_MAX; i++)
		buf_appendf(&xml, " a%d='x=\"y>z'", i);
	buf_append_str(&xml, "><system-out><![CDATA[");
	for (int i = 0; i < 1000; i++)
		buf_append_str(&xml, "\"=' ");
	buf_append_str(&xml, "]]></system-out></testcase></testsuites>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 1);
	junit_release(&j);

	/* 300 000 on one case: refused before libxml2 reads it. */
	buf_reset(&xml);
	buf_append_str(&xml, "<testsuites><testcase name=\"t\"");
	for (int i = 0; i < 300000; i++)
		buf_appendf(&xml, " a%d=\"\"", i);
	buf_append_str(&xml, "/></testsuites>");
	ck_assert_uint_le(xml.len, JUNIT_FILE_MAX);
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "more than 256 attributes"), "%s", err);
	junit_release(&j);

	/* The same as namespace declarations, in UTF-16. */
	buf_reset(&xml);
	buf_append(&xml, "\xff\xfe", 2);
	for (const char *p = "<testsuites><testcase"; *p; p++)
		buf_append(&xml, (char[]){ *p, 0 }, 2);
	for (int i = 0; i < 150000; i++) {
		static const char attr[] = " \0x\0m\0l\0n\0s\0:\0p\0=\0'\0u\0'\0";

		buf_append(&xml, attr, sizeof(attr) - 1);
	}
	ck_assert_uint_le(xml.len, JUNIT_FILE_MAX);
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "more than 256 attributes"), "%s", err);
	junit_release(&j);

	/* On the root: no report at all. */
	buf_reset(&xml);
	buf_append_str(&xml, "<testsuites");
	for (int i = 0; i < 1000; i++)
		buf_appendf(&xml, " a%d=\"\"", i);
	buf_append_str(&xml, "/>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), -ENOMSG);
	junit_release(&j);
	buf_release(&xml);
}
END_TEST

/* Huge names, messages and text: clipped, on a character boundary. */
START_TEST(test_junit_huge_strings)
{
	struct buf xml = BUF_INIT;
	struct junit j;
	char err[256];
	json_t *c;
	const char *details;

	buf_append_str(&xml, "<testsuites><testcase name=\"");
	for (int i = 0; i < 100000; i++)
		buf_append_str(&xml, "\xc3\xa9");	/* é: two bytes each */
	buf_append_str(&xml, "\" classname=\"c\"><failure message=\"");
	for (int i = 0; i < 100000; i++)
		buf_append_str(&xml, "\xe2\x82\xac");	/* €: three */
	buf_append_str(&xml, "\">");
	for (int i = 0; i < 50000; i++)
		buf_append_str(&xml, "filler line of a long traceback \xe2\x82\xac\n");
	buf_append_str(&xml, "test_x.py:42: AssertionError</failure><system-out><![CDATA[");
	for (int i = 0; i < 100000; i++)
		buf_append_str(&xml, "out ");
	buf_append_str(&xml, "the end]]></system-out></testcase></testsuites>");
	ck_assert_uint_le(xml.len, JUNIT_FILE_MAX);

	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), 0);
	check_bounds(&j);
	c = case_at(&j, 0);
	ck_assert_uint_le(strlen(str(c, "name")), JUNIT_NAME_MAX);
	ck_assert_uint_gt(strlen(str(c, "name")), JUNIT_NAME_MAX - 8);
	ck_assert(strstr(str(c, "name"), "\xe2\x80\xa6"));	/* … */
	ck_assert_uint_le(strlen(str(c, "message")), JUNIT_MESSAGE_MAX);
	details = str(c, "details");
	/* The end of the text is kept: where it failed. */
	ck_assert(!strncmp(details, "\xe2\x80\xa6", 3));
	ck_assert(strstr(details, "test_x.py:42: AssertionError"));
	ck_assert_str_eq(str(c, "file"), "test_x.py");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "line")), 42);
	ck_assert(strstr(str(c, "output"), "out the end"));
	ck_assert(j.text <= JUNIT_TEXT_MAX);
	junit_release(&j);
	buf_release(&xml);
}
END_TEST

/* More cases than are kept: the counts are whole, failures kept over the
 * passed cases before them. */
START_TEST(test_junit_many_cases)
{
	struct buf xml = BUF_INIT;
	struct junit j;
	char err[256];
	size_t failed = 0, i;
	json_t *c;

	buf_append_str(&xml, "<testsuites><testsuite>");
	for (i = 0; i < 3000; i++)
		buf_appendf(&xml, "<testcase classname=\"c\" name=\"ok%zu\"/>", i);
	for (i = 0; i < 50; i++)
		buf_appendf(&xml, "<testcase name=\"bad%zu\"><failure message=\"m\">t.py:%zu: "
			    "E</failure></testcase>", i, i + 1);
	buf_append_str(&xml, "</testsuite></testsuites>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.passed, 3000);
	ck_assert_uint_eq(j.failed, 50);
	ck_assert_uint_eq(json_array_size(j.cases), JUNIT_CASES_MAX);
	ck_assert(j.truncated);
	json_array_foreach(j.cases, i, c)
		failed += !strcmp(str(c, "status"), "failed");
	ck_assert_uint_eq(failed, 50);
	ck_assert_str_eq(str(case_at(&j, 0), "name"), "ok0");	/* the order kept */
	check_bounds(&j);
	junit_release(&j);

	/* Large failures: the bytes kept are bounded too. */
	buf_reset(&xml);
	buf_append_str(&xml, "<testsuites>");
	for (i = 0; i < 900; i++) {
		buf_appendf(&xml, "<testcase name=\"big%zu\"><failure message=\"", i);
		for (int k = 0; k < 300; k++)
			buf_append_str(&xml, "xxxxxxxxxx");
		buf_append_str(&xml, "\"/></testcase>");
	}
	buf_append_str(&xml, "</testsuites>");
	ck_assert_int_eq(parse(&j, xml.data, xml.len, err, sizeof(err)), 0);
	ck_assert_uint_eq(j.failed, 900);
	ck_assert_uint_lt(json_array_size(j.cases), 900);
	ck_assert(j.truncated && j.text <= JUNIT_TEXT_MAX);
	junit_release(&j);
	buf_release(&xml);
}
END_TEST

START_TEST(test_junit_oversized)
{
	size_t len = JUNIT_FILE_MAX + 1;
	char *xml = malloc(len), err[256];
	struct junit j;

	ck_assert_ptr_nonnull(xml);
	memset(xml, ' ', len);
	memcpy(xml, "<testsuites>", 12);
	ck_assert_int_eq(parse(&j, xml, len, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "4 MiB"));
	junit_release(&j);
	free(xml);
}
END_TEST

Suite *junit_suite(void)
{
	Suite *s = suite_create("junit");
	TCase *tc = tcase_create("junit");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_junit_pytest);
	tcase_add_test(tc, test_junit_node);
	tcase_add_test(tc, test_junit_shapes);
	tcase_add_test(tc, test_junit_merge);
	tcase_add_test(tc, test_junit_not_reports);
	tcase_add_test(tc, test_junit_entities);
	tcase_add_test(tc, test_junit_encodings);
	tcase_add_test(tc, test_junit_deep);
	tcase_add_test(tc, test_junit_many_attributes);
	tcase_add_test(tc, test_junit_huge_strings);
	tcase_add_test(tc, test_junit_many_cases);
	tcase_add_test(tc, test_junit_oversized);
	suite_add_tcase(s, tc);
	return s;
}
