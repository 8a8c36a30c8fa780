/* The table of languages (src/runtime/languages.c): lookups, the one error
 * message, and that the documents built into the binary agree with it — the
 * OpenAPI document's enums and the driver's own list — and so does MCP's
 * tools/list, whatever is edited first. */
#include <string.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "runtime/embed.h"
#include "runtime/languages.h"
#include "unit.h"
#include "util/buf.h"

START_TEST(names_aliases_and_extensions)
{
	char names[64];

	ck_assert_str_eq(lang_table[0].name, "python");	/* the default */
	ck_assert_str_eq(lang_find("python")->name, "python");
	ck_assert_str_eq(lang_find("py")->name, "python");
	ck_assert_str_eq(lang_find("python3")->name, "python");
	ck_assert_str_eq(lang_find("sh")->name, "bash");
	ck_assert_str_eq(lang_find("c")->name, "c");
	ck_assert_ptr_null(lang_find("Python"));
	ck_assert_ptr_null(lang_find(""));
	ck_assert_ptr_null(lang_find(NULL));
	ck_assert_ptr_null(lang_find(".py"));	/* an extension is no name */
	ck_assert_str_eq(lang_by_path("a/b.py")->name, "python");
	ck_assert_str_eq(lang_by_path("x.bash")->name, "bash");
	ck_assert_str_eq(lang_by_path("main.c")->name, "c");
	ck_assert_ptr_null(lang_by_path("Makefile"));
	ck_assert_ptr_null(lang_by_path("x.rb"));
	lang_names(names, sizeof(names));
	ck_assert_str_eq(names, "python, bash or c");
	lang_names(names, 8);
	ck_assert_str_eq(names, "python,");	/* cut, still terminated */
}
END_TEST

START_TEST(one_message_that_a_client_cannot_shape)
{
	char m[256];
	json_t *v;

	lang_unknown_message(m, sizeof(m), "ruby");
	ck_assert_str_eq(m, "unknown language 'ruby': must be python, bash or c");
	lang_unknown_message(m, sizeof(m), NULL);
	ck_assert_str_eq(m, "'language' must be a string: python, bash or c");
	lang_unknown_message(m, sizeof(m), "a'b");
	ck_assert_str_eq(m, "unknown language: must be python, bash or c");
	lang_unknown_message(m, sizeof(m), "line\nbreak");
	ck_assert_str_eq(m, "unknown language: must be python, bash or c");
	lang_unknown_message(m, sizeof(m), "\xc3\xa9");
	ck_assert_str_eq(m, "unknown language: must be python, bash or c");
	lang_unknown_message(m, sizeof(m), "abcdefghijklmnopqrstuvwxyz0123456789");
	ck_assert_str_eq(m, "unknown language: must be python, bash or c");

	v = json_stringn("py\0x", 4);
	ck_assert_ptr_null(lang_from_json(v, m, sizeof(m)));
	ck_assert_str_eq(m, "unknown language: must be python, bash or c");
	json_decref(v);
	v = json_integer(3);
	ck_assert_ptr_null(lang_from_json(v, m, sizeof(m)));
	ck_assert_str_eq(m, "'language' must be a string: python, bash or c");
	json_decref(v);
	v = json_string("python3");
	ck_assert_str_eq(lang_from_json(v, m, sizeof(m))->name, "python");
	json_decref(v);
}
END_TEST

/* Every "language" enum in the document: with null (a request) it is every
 * name and alias; without (components/schemas/Language, what responses
 * give), the names alone.  Returns how many it checked. */
static int check_enums(const json_t *node, const json_t *names, const json_t *accepted)
{
	const char *k;
	json_t *v;
	size_t i;
	int n = 0;

	if (json_is_array(node))
		json_array_foreach(node, i, v)
			n += check_enums(v, names, accepted);
	json_object_foreach((json_t *)node, k, v) {
		json_t *e = json_object_get(v, "enum");

		if ((!strcmp(k, "language") || !strcmp(k, "Language")) && json_is_array(e)) {
			bool request = json_is_null(json_array_get(e, json_array_size(e) - 1));

			ck_assert_msg(json_equal(e, request ? accepted : names),
				      "docs/openapi.json: enum of '%s' is not the table's", k);
			n++;
		}
		n += check_enums(v, names, accepted);
	}
	return n;
}

START_TEST(openapi_enums_are_the_table)
{
	json_t *doc = json_loadb(petri_openapi_json,
				 (size_t)(petri_openapi_json_end - petri_openapi_json), 0, NULL);
	json_t *names = json_array(), *accepted = json_array();

	ck_assert_ptr_nonnull(doc);
	for (size_t i = 0; i < lang_count; i++) {
		json_array_append_new(names, json_string(lang_table[i].name));
		json_array_append_new(accepted, json_string(lang_table[i].name));
		for (size_t k = 0; lang_table[i].aliases[k]; k++)
			json_array_append_new(accepted, json_string(lang_table[i].aliases[k]));
	}
	json_array_append_new(accepted, json_null());
	/* Session.language, the three requests, components/schemas/Language. */
	ck_assert_int_eq(check_enums(doc, names, accepted), 4);
	json_decref(names);
	json_decref(accepted);
	json_decref(doc);
}
END_TEST

/* The table claims nothing the driver cannot run. */
START_TEST(driver_runs_every_language)
{
	size_t len = (size_t)(petri_driver_py_end - petri_driver_py);
	struct buf want = BUF_INIT;

	ck_assert_int_eq(buf_append_str(&want, "\nLANGUAGES = ("), 0);
	for (size_t i = 0; i < lang_count; i++)
		ck_assert_int_eq(buf_appendf(&want, "%s'%s'", i ? ", " : "", lang_table[i].name), 0);
	ck_assert_int_eq(buf_append(&want, ")\n", 3), 0);	/* with the NUL */
	ck_assert_msg(memmem(petri_driver_py, len, want.data, want.len - 1),
		      "driver.py has no line '%s'", want.data + 1);
	buf_release(&want);
}
END_TEST

static struct petri_config cfg;

static const char *call(struct mcp_conn *c, const char *args, json_t **r)
{
	char msg[512];
	json_t *res;

	snprintf(msg, sizeof(msg), "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"execute\",\"arguments\":%s}}", args);
	*r = mcp_conn_handle(c, res = json_loads(msg, 0, NULL));
	json_decref(res);
	res = json_object_get(*r, "result");
	ck_assert(json_is_true(json_object_get(res, "isError")));
	return json_string_value(json_object_get(json_array_get(json_object_get(res, "content"),
								  0), "text"));
}

START_TEST(mcp_reads_the_table)
{
	struct mcp_conn *c;
	json_t *r, *m, *lang;
	const char *desc;

	config_defaults(&cfg);
	ck_assert_int_eq(mcp_conn_new(NULL, &cfg, "test", &c), 0);	/* no sandboxes */
	m = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
		       "{\"protocolVersion\":\"2025-06-18\"}}", 0, NULL);
	json_decref(mcp_conn_handle(c, m));
	json_decref(m);
	m = json_loads("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", 0, NULL);
	r = mcp_conn_handle(c, m);
	json_decref(m);
	lang = json_object_get(json_object_get(json_object_get(json_array_get(
		json_object_get(json_object_get(r, "result"), "tools"), 0), "inputSchema"),
		"properties"), "language");
	m = json_pack("[s, s, s]", "python", "bash", "c");
	ck_assert(json_equal(json_object_get(lang, "enum"), m));
	json_decref(m);
	desc = json_string_value(json_object_get(lang, "description"));
	ck_assert_ptr_nonnull(strstr(desc, "python (the default): "));
	ck_assert_ptr_nonnull(strstr(desc, "(also: py, python3)"));
	ck_assert_ptr_nonnull(strstr(desc, "gcc"));
	json_decref(r);

	ck_assert_ptr_nonnull(strstr(call(c, "{\"code\":\"1\",\"language\":\"ruby\"}", &r),
			      "unknown language 'ruby': must be python, bash or c"));
	json_decref(r);
	/* An alias passes the checks and gets as far as wanting a sandbox. */
	ck_assert_ptr_nonnull(strstr(call(c, "{\"code\":\"1\",\"language\":\"sh\"}", &r),
			      "no sandboxes"));
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

Suite *languages_suite(void)
{
	Suite *s = suite_create("languages");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, names_aliases_and_extensions);
	tcase_add_test(tc, one_message_that_a_client_cannot_shape);
	tcase_add_test(tc, openapi_enums_are_the_table);
	tcase_add_test(tc, driver_runs_every_language);
	tcase_add_test(tc, mcp_reads_the_table);
	suite_add_tcase(s, tc);
	return s;
}
