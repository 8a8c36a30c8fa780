/* The MCP protocol core without a sandbox: framing rules, errors, the
 * lifecycle, version negotiation, batches; and what a model reads of a
 * result (src/mcp/render.c). */
#include <string.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "mcp/render.h"
#include "unit.h"
#include "util/utf8.h"

static struct petri_config cfg;

static struct mcp_conn *conn(void)
{
	struct mcp_conn *c;

	config_defaults(&cfg);
	/* No session manager: nothing here may reach a sandbox. */
	ck_assert_int_eq(mcp_conn_new(NULL, &cfg, "test", &c), 0);
	return c;
}

/* Handle one message given as text; NULL when nothing is sent back. */
static json_t *send_text(struct mcp_conn *c, const char *text)
{
	json_t *err, *msg = mcp_parse(text, strlen(text), &err), *r;

	if (!msg)
		return err;
	r = mcp_conn_handle(c, msg);
	json_decref(msg);
	return r;
}

static int error_code(const json_t *r)
{
	return (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static void initialize(struct mcp_conn *c, const char *version, const char *expect)
{
	char text[512];
	json_t *r;

	snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
		 "\"params\":{\"protocolVersion\":\"%s\",\"capabilities\":{},"
		 "\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}", version);
	r = send_text(c, text);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"),
							   "protocolVersion")), expect);
	ck_assert_str_eq(mcp_conn_version(c), expect);
	json_decref(r);
}

START_TEST(test_parse_errors)
{
	struct mcp_conn *c = conn();
	json_t *r = send_text(c, "{\"jsonrpc\": \"2.0\", \"id\": 1,");

	ck_assert_int_eq(error_code(r), MCP_PARSE_ERROR);
	ck_assert(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	r = send_text(c, "{\"a\": 1, \"a\": 2}");			/* duplicate keys */
	ck_assert_int_eq(error_code(r), MCP_PARSE_ERROR);
	json_decref(r);
	r = send_text(c, "{\"s\": \"\\u0000\"}");			/* NUL in a string */
	ck_assert_int_eq(error_code(r), MCP_PARSE_ERROR);
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

START_TEST(test_invalid_requests)
{
	static const struct { const char *text; int code; bool null_id; } cases[] = {
		{ "7", MCP_INVALID_REQUEST, true },
		{ "{\"id\": 1, \"method\": \"ping\"}", MCP_INVALID_REQUEST, false },
		{ "{\"jsonrpc\": \"2.0\", \"id\": [1], \"method\": \"ping\"}", MCP_INVALID_REQUEST, true },
		{ "{\"jsonrpc\": \"2.0\", \"id\": null, \"method\": \"ping\"}", MCP_INVALID_REQUEST, true },
		{ "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": true}", MCP_INVALID_REQUEST, false },
		{ "{\"jsonrpc\": \"2.0\", \"id\": 1}", MCP_INVALID_REQUEST, false },
		{ "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"params\": [1]}",
		  MCP_INVALID_PARAMS, false },
		{ "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"params\": \"x\"}",
		  MCP_INVALID_REQUEST, false },
	};
	struct mcp_conn *c = conn();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *r = send_text(c, cases[i].text);

		ck_assert_msg(r && error_code(r) == cases[i].code, "case %zu: %s", i, cases[i].text);
		ck_assert_int_eq(json_is_null(json_object_get(r, "id")), cases[i].null_id);
		json_decref(r);
	}
	mcp_conn_put(c);
}
END_TEST

START_TEST(test_lifecycle)
{
	struct mcp_conn *c = conn();
	json_t *r;

	ck_assert_str_eq(mcp_conn_version(c), "");
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	ck_assert_str_eq(json_string_value(json_object_get(r, "id")), "p");
	ck_assert(json_is_object(json_object_get(r, "result")));
	ck_assert_uint_eq(json_object_size(json_object_get(r, "result")), 0);
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	ck_assert_int_eq(error_code(r), MCP_INVALID_REQUEST);	/* not initialized */
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
	ck_assert_int_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	initialize(c, "2025-03-26", "2025-03-26");
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\","
		      "\"params\":{\"protocolVersion\":\"2025-03-26\"}}");
	ck_assert_int_eq(error_code(r), MCP_INVALID_REQUEST);	/* once */
	json_decref(r);
	ck_assert_ptr_null(send_text(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	ck_assert_ptr_null(send_text(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
				     "\"params\":{\"requestId\":99}}"));
	ck_assert_ptr_null(send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"prompts/list\"}");
	ck_assert_int_eq(error_code(r), MCP_METHOD_NOT_FOUND);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 6);
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
		      "\"params\":{\"name\":\"nope\"}}");
	ck_assert_int_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
		      "\"params\":{\"name\":\"execute\",\"arguments\":[1]}}");
	ck_assert_int_eq(error_code(r), MCP_INVALID_PARAMS);
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

/* Without sandboxes: the tool list still answers, bad arguments are still
 * explained, and a call that would need a sandbox is an error result. */
START_TEST(test_tools_without_sandboxes)
{
	struct mcp_conn *c = conn();
	json_t *r, *tools, *res;

	initialize(c, "2025-06-18", "2025-06-18");
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	tools = json_object_get(json_object_get(r, "result"), "tools");
	ck_assert_uint_eq(json_array_size(tools), 11);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
			 "execute");
	ck_assert(json_is_false(json_object_get(json_object_get(json_array_get(tools, 0),
								"inputSchema"),
						"additionalProperties")));
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
		      "{\"name\":\"execute\",\"arguments\":{\"code\":1}}}");
	res = json_object_get(r, "result");
	ck_assert(json_is_true(json_object_get(res, "isError")));
	ck_assert(strstr(json_string_value(json_object_get(json_array_get(
		json_object_get(res, "content"), 0), "text")), "'code' must be a string"));
	json_decref(r);
	r = send_text(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":"
		      "{\"name\":\"execute\",\"arguments\":{\"code\":\"1\"}}}");
	res = json_object_get(r, "result");
	ck_assert(json_is_true(json_object_get(res, "isError")));
	ck_assert(strstr(json_string_value(json_object_get(json_array_get(
		json_object_get(res, "content"), 0), "text")), "no sandboxes"));
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

START_TEST(test_version_negotiation)
{
	static const char *const same[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };

	for (size_t i = 0; i < 4; i++) {
		struct mcp_conn *c = conn();

		initialize(c, same[i], same[i]);
		ck_assert(mcp_version_supported(same[i]));
		mcp_conn_put(c);
	}
	for (size_t i = 0; i < 3; i++) {
		static const char *const other[] = { "2024-10-07", "2099-01-01", "v1" };
		struct mcp_conn *c = conn();

		initialize(c, other[i], MCP_VERSION_LATEST);
		ck_assert(!mcp_version_supported(other[i]));
		mcp_conn_put(c);
	}
}
END_TEST

START_TEST(test_batches)
{
	struct mcp_conn *c = conn();
	json_t *r;

	r = send_text(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
	ck_assert_int_eq(error_code(r), MCP_INVALID_REQUEST);	/* before initialize */
	json_decref(r);
	initialize(c, "2025-03-26", "2025-03-26");
	r = send_text(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
		      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
		      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}, 5]");
	ck_assert(json_is_array(r));
	ck_assert_uint_eq(json_array_size(r), 3);
	ck_assert_int_eq(error_code(json_array_get(r, 1)), MCP_METHOD_NOT_FOUND);
	ck_assert_int_eq(error_code(json_array_get(r, 2)), MCP_INVALID_REQUEST);
	json_decref(r);
	ck_assert_ptr_null(send_text(c, "[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]"));
	r = send_text(c, "[]");
	ck_assert_int_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	mcp_conn_put(c);

	c = conn();
	initialize(c, "2025-06-18", "2025-06-18");
	r = send_text(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
	ck_assert_int_eq(error_code(r), MCP_INVALID_REQUEST);
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

START_TEST(test_message_kinds)
{
	const char *texts[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}",
		"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"id\":1,\"method\":\"b\"}]",
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
	};
	json_t *err, *m;

	m = mcp_parse(texts[0], strlen(texts[0]), &err);
	ck_assert(mcp_is_initialize(m) && mcp_has_request(m));
	json_decref(m);
	m = mcp_parse(texts[1], strlen(texts[1]), &err);
	ck_assert(!mcp_is_initialize(m) && mcp_has_request(m));
	json_decref(m);
	m = mcp_parse(texts[2], strlen(texts[2]), &err);
	ck_assert(!mcp_has_request(m));
	json_decref(m);
}
END_TEST

START_TEST(test_render_clip)
{
	struct buf b = BUF_INIT;
	char big[1000];

	ck_assert_int_eq(render_clip(&b, "short", 5, 100), 0);
	ck_assert_str_eq(b.data, "short");
	buf_reset(&b);
	memset(big, 'm', sizeof(big));
	memcpy(big, "HEAD", 4);
	memcpy(big + sizeof(big) - 4, "TAIL", 4);
	ck_assert_int_eq(render_clip(&b, big, sizeof(big), 100), 0);
	ck_assert(strncmp(b.data, "HEAD", 4) == 0);
	ck_assert(strstr(b.data, "[... 900 bytes left out here, of 1000 in all ...]"));
	ck_assert(b.len > 4 && memcmp(b.data + b.len - 4, "TAIL", 4) == 0);
	buf_reset(&b);
	/* Never split a character; invalid bytes become U+FFFD. */
	ck_assert_int_eq(render_clip(&b, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xff", 9, 4), 0);
	ck_assert(utf8_valid(b.data, b.len));
	ck_assert(strstr(b.data, "\xc3\xa9"));
	buf_release(&b);
}
END_TEST

START_TEST(test_render_execution)
{
	struct result r;
	json_t *content, *img;
	bool is_error;
	const char *text;

	ck_assert_int_eq(result_init(&r), 0);
	result_stream_add(&r.out, "hi\n", 3, 100);
	json_array_append_new(r.results, json_pack("{s:s}", "text/plain", "42"));
	json_array_append_new(r.results, json_pack("{s:s, s:s}", "text/plain", "<Figure>",
						   "image/png", "iVBORw0KGgo="));
	result_set_error_str(&r, "ValueError", "bad", "Traceback...\nValueError: bad\n");
	r.status = RESULT_ERROR;
	content = render_execution(&r, &is_error);
	ck_assert(is_error);
	ck_assert_uint_eq(json_array_size(content), 2);
	text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
	ck_assert(strstr(text, "--- stdout ---\nhi\n"));
	ck_assert(strstr(text, "--- result ---\n42\n[image 1 (image/png): <Figure>]"));
	ck_assert(strstr(text, "--- error ---\nTraceback...\nValueError: bad\n"));
	img = json_array_get(content, 1);
	ck_assert_str_eq(json_string_value(json_object_get(img, "type")), "image");
	ck_assert_str_eq(json_string_value(json_object_get(img, "mimeType")), "image/png");
	json_decref(content);
	result_release(&r);

	ck_assert_int_eq(result_init(&r), 0);
	r.status = RESULT_TIMEOUT;
	snprintf(r.reason, sizeof(r.reason), "wall-clock limit of 1 s");
	content = render_execution(&r, &is_error);
	text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
	ck_assert(is_error && strstr(text, "--- timeout ---\nwall-clock limit of 1 s"));
	json_decref(content);
	result_release(&r);
}
END_TEST

/* Test results: the counts, then only the failures and errors, each with
 * its place and message. */
START_TEST(test_render_tests)
{
	struct result r;
	json_t *content, *cases = json_array();
	bool is_error;
	const char *text, *fail, *err;

	ck_assert_int_eq(result_init(&r), 0);
	json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:s, s:n, s:n}", "name", "test_ok",
					       "classname", "test_calc", "status", "passed",
					       "message", "", "file", "line"));
	json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "name",
					       "test_bad", "classname", "test_calc", "status",
					       "failed", "message", "assert 3 == 4\n+  where 3 = add(1, 2)",
					       "file", "test_calc.py", "line", 8));
	json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:s, s:n, s:n}", "name", "fixture",
					       "classname", "", "status", "error",
					       "message", "failed on setup", "file", "line"));
	json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:s, s:n, s:n}", "name", "later",
					       "classname", "c", "status", "skipped",
					       "message", "not now", "file", "line"));
	r.tests = json_pack("{s:i, s:i, s:i, s:i, s:o, s:b, s:[s]}", "passed", 3, "failed", 1,
			    "errors", 1, "skipped", 1, "cases", cases, "truncated", 0,
			    "reports", "report.xml");
	r.status = RESULT_ERROR;
	r.has_exit_code = true;
	r.exit_code = 1;
	content = render_execution(&r, &is_error);
	text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
	ck_assert_msg(strstr(text, "--- tests ---\ntests: 3 passed, 1 failed, 1 error, 1 skipped\n"),
		      "%s", text);
	fail = strstr(text, "FAILED test_calc::test_bad (test_calc.py:8)\n"
			    "    assert 3 == 4\n    +  where 3 = add(1, 2)\n");
	err = strstr(text, "ERROR fixture\n    failed on setup\n");
	ck_assert_msg(fail && err && fail < err, "%s", text);
	/* Passed and skipped cases are only counted. */
	ck_assert(!strstr(text, "test_ok") && !strstr(text, "not now"));
	json_decref(content);
	result_release(&r);

	/* A report asked for that could not be read. */
	ck_assert_int_eq(result_init(&r), 0);
	r.tests = json_pack("{s:[], s:s}", "reports", "error",
			    "cannot read the test report 'missing.xml': No such file or directory");
	content = render_execution(&r, &is_error);
	text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
	ck_assert_msg(strstr(text, "--- tests ---\n[cannot read the test report 'missing.xml'"),
		      "%s", text);
	ck_assert(!strstr(text, "passed"));
	json_decref(content);
	result_release(&r);
}
END_TEST

Suite *mcp_suite(void)
{
	Suite *s = suite_create("mcp");
	TCase *tc = tcase_create("protocol");

	tcase_add_test(tc, test_parse_errors);
	tcase_add_test(tc, test_invalid_requests);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_tools_without_sandboxes);
	tcase_add_test(tc, test_version_negotiation);
	tcase_add_test(tc, test_batches);
	tcase_add_test(tc, test_message_kinds);
	tcase_add_test(tc, test_render_clip);
	tcase_add_test(tc, test_render_execution);
	tcase_add_test(tc, test_render_tests);
	suite_add_tcase(s, tc);
	return s;
}
