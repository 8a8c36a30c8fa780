/* What petri ask takes from a model's API, which it does not trust: the
 * reply parser's checks and bounds, and Retry-After. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/chat.h"
#include "unit.h"

static int parse(const char *text, struct chat_reply *r, char *err, size_t errlen)
{
	json_t *j = json_loads(text, 0, NULL);
	int rc;

	ck_assert_ptr_nonnull(j);
	rc = chat_parse_reply(j, r, err, errlen);
	json_decref(j);
	return rc;
}

START_TEST(test_reply_text)
{
	struct chat_reply r;
	char err[256];

	ck_assert_int_eq(parse("{\"choices\":[{\"finish_reason\":\"stop\",\"message\":"
			       "{\"role\":\"assistant\",\"content\":\"42\"}}],"
			       "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}",
			       &r, err, sizeof(err)), 0);
	ck_assert_str_eq(r.content, "42");
	ck_assert_uint_eq(r.ncalls, 0);
	ck_assert_str_eq(r.finish_reason, "stop");
	ck_assert_int_eq(r.prompt_tokens, 7);
	ck_assert_int_eq(r.completion_tokens, 2);
	chat_reply_release(&r);

	/* Content as an array of parts: the text parts, joined. */
	ck_assert_int_eq(parse("{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\","
			       "\"text\":\"a\"},{\"type\":\"image_url\"},{\"type\":\"text\","
			       "\"text\":\"b\"}]}}]}", &r, err, sizeof(err)), 0);
	ck_assert_str_eq(r.content, "ab");
	ck_assert_int_eq(r.prompt_tokens, -1);
	chat_reply_release(&r);
}
END_TEST

START_TEST(test_reply_tool_calls)
{
	struct chat_reply r;
	char err[256];

	ck_assert_int_eq(parse("{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":["
			       "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":"
			       "\"execute\",\"arguments\":\"{\\\"code\\\": \\\"1\\\"}\"}},"
			       /* no id, arguments as an object (Ollama) */
			       "{\"function\":{\"name\":\"execute\",\"arguments\":{\"code\":\"2\"}}},"
			       /* arguments that are not JSON: kept, for the model to hear */
			       "{\"id\":\"c\",\"function\":{\"name\":\"execute\",\"arguments\":\"{bad\"}}"
			       "]}}]}", &r, err, sizeof(err)), 0);
	ck_assert_ptr_null(r.content);
	ck_assert_uint_eq(r.ncalls, 3);
	ck_assert_str_eq(r.calls[0].id, "call_a");
	ck_assert_str_eq(r.calls[0].arguments, "{\"code\": \"1\"}");
	ck_assert_str_eq(r.calls[1].id, "call_2");
	ck_assert_str_eq(r.calls[1].arguments, "{\"code\":\"2\"}");
	ck_assert_str_eq(r.calls[2].arguments, "{bad");
	chat_reply_release(&r);
}
END_TEST

START_TEST(test_reply_refused)
{
	static const char *const bad[] = {
		"{}",
		"{\"choices\":[]}",
		"{\"choices\":{}}",
		"{\"choices\":[{\"message\":\"hi\"}]}",
		"{\"choices\":[{\"message\":{\"content\":7}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":{}}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":[7]}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"\"}}]}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"x\","
		"\"arguments\":5}}]}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":[{\"type\":\"code\",\"function\":"
		"{\"name\":\"x\"}}]}}]}",
		"{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":5,\"function\":{\"name\":\"x\"}}]}}]}",
		"{\"error\":{\"message\":\"overloaded\"}}",
	};
	struct chat_reply r;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(parse(bad[i], &r, err, sizeof(err)) == -EPROTO, "accepted %s", bad[i]);
		ck_assert_msg(err[0], "no reason for %s", bad[i]);
		ck_assert_ptr_null(r.calls);
	}
}
END_TEST

START_TEST(test_reply_bounds)
{
	json_t *calls = json_array(), *resp;
	struct chat_reply r;
	char err[256], *name;

	for (int i = 0; i < CHAT_CALLS_MAX + 1; i++)
		json_array_append_new(calls, json_pack("{s:{s:s, s:s}}", "function", "name", "x",
						       "arguments", "{}"));
	resp = json_pack("{s:[{s:{s:o}}]}", "choices", "message", "tool_calls", calls);
	ck_assert_int_eq(chat_parse_reply(resp, &r, err, sizeof(err)), -EPROTO);
	ck_assert(strstr(err, "at most"));
	json_decref(resp);

	name = malloc(CHAT_NAME_MAX + 2);
	memset(name, 'n', CHAT_NAME_MAX + 1);
	name[CHAT_NAME_MAX + 1] = '\0';
	resp = json_pack("{s:[{s:{s:[{s:{s:s}}]}}]}", "choices", "message", "tool_calls",
			 "function", "name", name);
	ck_assert_int_eq(chat_parse_reply(resp, &r, err, sizeof(err)), -EPROTO);
	json_decref(resp);
	free(name);
}
END_TEST

START_TEST(test_retry_after)
{
	time_t now = 1700000000;	/* Tue, 14 Nov 2023 22:13:20 GMT */

	ck_assert(chat_retry_after("2", now) == 2.0);
	ck_assert(chat_retry_after("0", now) == 0.0);
	ck_assert(chat_retry_after("1.5", now) == 1.5);
	ck_assert(chat_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now) == 30.0);
	ck_assert(chat_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now) == 0.0);
	ck_assert(chat_retry_after("", now) < 0);
	ck_assert(chat_retry_after(NULL, now) < 0);
	ck_assert(chat_retry_after("soon", now) < 0);
	ck_assert(chat_retry_after("5 seconds", now) < 0);
}
END_TEST

Suite *agent_suite(void)
{
	Suite *s = suite_create("agent");
	TCase *tc = tcase_create("chat");

	tcase_add_test(tc, test_reply_text);
	tcase_add_test(tc, test_reply_tool_calls);
	tcase_add_test(tc, test_reply_refused);
	tcase_add_test(tc, test_reply_bounds);
	tcase_add_test(tc, test_retry_after);
	suite_add_tcase(s, tc);
	return s;
}
