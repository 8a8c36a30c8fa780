/* The table of languages (src/exec/languages.c): lookups, the one error
 * message, and that the documents built into the binary agree with it — the
 * OpenAPI document's enums and the driver's own list — and so does MCP's
 * tools/list, whatever is edited first. */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "util/embed.h"
#include "exec/languages.h"
#include "session/probe.h"
#include "unit.h"
#include "util/buf.h"

START_TEST(names_aliases_and_extensions)
{
	char names[64];

	ck_assert_str_eq(lang_default(), "python");	/* the default */
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
	ck_assert_str_eq(lang_find("js")->name, "javascript");
	ck_assert_str_eq(lang_find("R")->name, "r");
	ck_assert_str_eq(lang_by_path("plot.R")->name, "r");
	ck_assert_str_eq(lang_by_path("app.js")->name, "javascript");
	ck_assert_str_eq(lang_find("ts")->name, "typescript");
	ck_assert_str_eq(lang_by_path("app.ts")->name, "typescript");
	ck_assert_ptr_null(lang_at(0)->file);	/* Python is the driver's own */
	for (size_t i = 1; i < lang_count(); i++)
		ck_assert(lang_at(i)->file && lang_at(i)->run);
	lang_names(names, sizeof(names));
	ck_assert_str_eq(names, "python, bash, c, javascript, typescript, r or java");
	lang_names(names, 8);
	ck_assert_str_eq(names, "python,");	/* cut, still terminated */
}
END_TEST

START_TEST(one_message_that_a_client_cannot_shape)
{
	char m[256];
	json_t *v;

	lang_unknown_message(m, sizeof(m), "ruby");
	ck_assert_str_eq(m, "unknown language 'ruby': must be python, bash, c, javascript, typescript, r or java");
	lang_unknown_message(m, sizeof(m), NULL);
	ck_assert_str_eq(m, "'language' must be a string: python, bash, c, javascript, typescript, r or java");
	lang_unknown_message(m, sizeof(m), "a'b");
	ck_assert_str_eq(m, "unknown language: must be python, bash, c, javascript, typescript, r or java");
	lang_unknown_message(m, sizeof(m), "line\nbreak");
	ck_assert_str_eq(m, "unknown language: must be python, bash, c, javascript, typescript, r or java");
	lang_unknown_message(m, sizeof(m), "\xc3\xa9");
	ck_assert_str_eq(m, "unknown language: must be python, bash, c, javascript, typescript, r or java");
	lang_unknown_message(m, sizeof(m), "abcdefghijklmnopqrstuvwxyz0123456789");
	ck_assert_str_eq(m, "unknown language: must be python, bash, c, javascript, typescript, r or java");

	v = json_stringn("py\0x", 4);
	ck_assert_ptr_null(lang_from_json(v, m, sizeof(m)));
	ck_assert_str_eq(m, "unknown language: must be python, bash, c, javascript, typescript, r or java");
	json_decref(v);
	v = json_integer(3);
	ck_assert_ptr_null(lang_from_json(v, m, sizeof(m)));
	ck_assert_str_eq(m, "'language' must be a string: python, bash, c, javascript, typescript, r or java");
	json_decref(v);
	v = json_string("python3");
	ck_assert_str_eq(lang_from_json(v, m, sizeof(m))->name, "python");
	json_decref(v);
}
END_TEST

/* No "language" enum anywhere (an operator adds languages, GET
 * /v1/languages lists them); the Language schema names every built-in. */
static int count_enums(const json_t *node)
{
	const char *k;
	json_t *v;
	size_t i;
	int n = 0;

	if (json_is_array(node))
		json_array_foreach(node, i, v)
			n += count_enums(v);
	json_object_foreach((json_t *)node, k, v) {
		if ((!strcmp(k, "language") || !strcmp(k, "Language")) &&
		    json_object_get(v, "enum"))
			n++;
		n += count_enums(v);
	}
	return n;
}

START_TEST(openapi_names_the_table)
{
	json_t *doc = json_loadb(petri_openapi_json,
				 (size_t)(petri_openapi_json_end - petri_openapi_json), 0, NULL);
	const char *desc;

	ck_assert_ptr_nonnull(doc);
	ck_assert_int_eq(count_enums(doc), 0);
	desc = json_string_value(json_object_get(json_object_get(json_object_get(
		json_object_get(doc, "components"), "schemas"), "Language"), "description"));
	ck_assert_ptr_nonnull(desc);
	for (size_t i = 0; i < lang_count(); i++) {
		char quoted[64];

		snprintf(quoted, sizeof(quoted), "`%s`", lang_at(i)->name);
		ck_assert_msg(strstr(desc, quoted), "Language does not name %s", quoted);
	}
	ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "paths"), "/v1/languages"));
	json_decref(doc);
}
END_TEST

/* The table claims nothing the driver cannot run: what has no program is
 * the driver's own. */
START_TEST(driver_runs_every_language)
{
	size_t len = (size_t)(petri_driver_py_end - petri_driver_py), n = 0;
	struct buf want = BUF_INIT;

	ck_assert_int_eq(buf_append_str(&want, "\nIN_PROCESS = ("), 0);
	for (size_t i = 0; i < lang_count(); i++)
		if (!lang_at(i)->file)
			ck_assert_int_eq(buf_appendf(&want, "%s'%s'", n++ ? ", " : "",
						     lang_at(i)->name), 0);
	ck_assert_int_eq(buf_append(&want, n == 1 ? ",)" : ")", 2), 0);
	ck_assert_int_eq(buf_append(&want, "", 1), 0);	/* the NUL */
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
	m = json_pack("[s, s, s, s, s, s, s]", "python", "bash", "c", "javascript", "typescript", "r",
		      "java");
	ck_assert(json_equal(json_object_get(lang, "enum"), m));
	json_decref(m);
	desc = json_string_value(json_object_get(lang, "description"));
	ck_assert_ptr_nonnull(strstr(desc, "python (the default): "));
	ck_assert_ptr_nonnull(strstr(desc, "(also: py, python3)"));
	ck_assert_ptr_nonnull(strstr(desc, "gcc"));
	json_decref(r);

	ck_assert_ptr_nonnull(strstr(call(c, "{\"code\":\"1\",\"language\":\"ruby\"}", &r),
			      "unknown language 'ruby': must be python, bash, c, javascript, typescript, r or java"));
	json_decref(r);
	/* An alias passes the checks and gets as far as wanting a sandbox. */
	ck_assert_ptr_nonnull(strstr(call(c, "{\"code\":\"1\",\"language\":\"sh\"}", &r),
			      "no sandboxes"));
	json_decref(r);
	mcp_conn_put(c);
}
END_TEST

/* [language.NAME] as lang_check() takes it, and the table once added. */
START_TEST(operator_languages)
{
	static const char *const pl_aliases[] = { "pl", NULL };
	static const char *const pl_ext[] = { ".pl", NULL };
	static const char *const taken[] = { "js", NULL };
	struct language perl = {
		.name = "perl", .aliases = pl_aliases, .extensions = pl_ext, .summary = "Perl",
		.file = "main.pl", .run = "perl main.pl",
	};
	struct language bad[2];
	char err[512], m[1536];

	ck_assert_int_eq(lang_check(&perl, 1, err, sizeof(err)), 0);
	/* Each way a section can be wrong, named. */
	bad[0] = perl;
	bad[0].name = "python";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "[language.python]: the name 'python' is already"));
	bad[0] = perl;
	bad[0].aliases = taken;
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "'js' is already a language's"));
	bad[0] = perl;
	bad[1] = perl;
	ck_assert_int_eq(lang_check(bad, 2, err, sizeof(err)), -1);	/* twice */
	for (size_t i = 0; i < 6; i++) {
		static const char *const files[] = {
			"../main.pl", "/etc/passwd", ".hidden", "a b.pl", "{tmp}/", "x;rm -rf",
		};

		bad[0] = perl;
		bad[0].file = files[i];
		ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
		ck_assert_ptr_nonnull(strstr(err, "[language.perl]: 'file'"));
	}
	bad[0] = perl;
	bad[0].file = "{tmp}/Main.java";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), 0);
	bad[0].run = NULL;
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	bad[0].run = "perl\nmain.pl";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	/* What the driver would refuse (and end the session over) is refused
	 * here: a no-break space, a C1 control, bytes that are not UTF-8. */
	bad[0].run = "perl\xc2\xa0main.pl";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	bad[0].run = "perl main.pl \xff";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	bad[0].run = "perl main.pl";
	bad[0].summary = "Perl \xff";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "'summary'"));
	bad[0].summary = "Perl 5, \xc3\xa9" "crit";	/* UTF-8 text is fine */
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), 0);
	bad[0] = perl;
	bad[0].name = "1perl";
	ck_assert_int_eq(lang_check(bad, 1, err, sizeof(err)), -1);

	lang_configure(&perl, 1);
	ck_assert_uint_eq(lang_count(), 8);
	ck_assert_ptr_eq(lang_find("pl"), &perl);
	ck_assert_ptr_eq(lang_by_path("x.pl"), &perl);
	lang_unknown_message(m, sizeof(m), "ruby");
	ck_assert_str_eq(m, "unknown language 'ruby': must be python, bash, c, javascript, "
			 "typescript, r, java or perl");
	lang_configure(NULL, 0);
	ck_assert_ptr_null(lang_find("perl"));
}
END_TEST

/* What the probe printed, as a sandbox could print it: the tools of its
 * table each with a version or null (not found), nothing else accepted;
 * described in the table's order, every tool named, null where not found. */
START_TEST(probe_finds_the_tools)
{
	static const char ok[] =
		"{\"python\": \"3.11.2\", \"packages\": {\"numpy\": \"1.24.2\"}, "
		"\"languages\": {\"bash\": \"GNU bash\"}, "
		"\"tools\": {\"git\": \"git version 2.39.5\", \"unzip\": null}}";
	static const char *const bad[] = {
		"{\"python\": \"3\", \"packages\": {}, \"languages\": {}}",
		"{\"python\": \"3\", \"packages\": {}, \"languages\": {}, \"tools\": []}",
		"{\"python\": \"3\", \"packages\": {}, \"languages\": {}, "
		"\"tools\": {\"nmap\": \"7\"}}",
		"{\"python\": \"3\", \"packages\": {}, \"languages\": {}, "
		"\"tools\": {\"git\": 2}}",
	};
	char *code = probe_code();
	json_t *found, *d, *tools, *t;
	size_t i;

	/* The probe asks for every tool of the table. */
	ck_assert(code && strstr(code, "git --version") && strstr(code, "unzip -v"));
	free(code);
	found = probe_parse(ok, strlen(ok));
	ck_assert_ptr_nonnull(found);
	d = probe_describe(found, NULL);
	tools = json_object_get(d, "tools");
	ck_assert_uint_ge(json_array_size(tools), 14);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "name")), "git");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, 0), "version")),
			 "git version 2.39.5");
	json_array_foreach(tools, i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")), "git"))
			ck_assert(json_is_null(json_object_get(t, "version")));
	json_decref(d);
	json_decref(found);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!probe_parse(bad[i], strlen(bad[i])), "%s", bad[i]);
	/* Not known yet: null, as the packages. */
	d = probe_describe(NULL, "still finding out");
	ck_assert(json_is_null(json_object_get(d, "tools")));
	json_decref(d);
}
END_TEST

Suite *languages_suite(void)
{
	Suite *s = suite_create("languages");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, names_aliases_and_extensions);
	tcase_add_test(tc, one_message_that_a_client_cannot_shape);
	tcase_add_test(tc, openapi_names_the_table);
	tcase_add_test(tc, operator_languages);
	tcase_add_test(tc, driver_runs_every_language);
	tcase_add_test(tc, mcp_reads_the_table);
	tcase_add_test(tc, probe_finds_the_tools);
	suite_add_tcase(s, tc);
	return s;
}
