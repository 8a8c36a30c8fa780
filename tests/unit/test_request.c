/* The request model (src/exec/request.c, limits.c): one set of rules for
 * every front end, checked here on the functions they all call. */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "exec/limits.h"
#include "exec/request.h"
#include "jail/jail.h"
#include "unit.h"

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &je);

	ck_assert_msg(j != NULL, "bad test JSON: %s", text);
	return j;
}

/* request_limits() on {"limits": text}: true, or false with e. */
static bool limits(const struct petri_config *c, const char *text, struct petri_limits *out,
		   struct request_error *e)
{
	json_t *j = parse(text);
	bool ok = request_limits(c, j, out, e);

	json_decref(j);
	return ok;
}

START_TEST(test_limits_defaults_and_max)
{
	struct petri_config c;
	struct petri_limits l;
	struct request_error e;

	config_defaults(&c);
	ck_assert(request_limits(&c, NULL, &l, &e));
	ck_assert_int_eq(l.memory_mb, c.defaults.memory_mb);
	ck_assert(limits(&c, "{\"memory_mb\": 64, \"cpu_quota\": 0.5}", &l, &e));
	ck_assert_int_eq(l.memory_mb, 64);
	ck_assert(l.cpu == 0.5);
	ck_assert_int_eq(l.pids, c.defaults.pids);	/* not asked: the default */
	/* Above the operator's maximum: refused, never capped. */
	ck_assert(!limits(&c, "{\"memory_mb\": 4097}", &l, &e));
	ck_assert_str_eq(e.code, "invalid_request");
	ck_assert_ptr_nonnull(strstr(e.message, "'limits.memory_mb'"));
	ck_assert_ptr_nonnull(strstr(e.message, "from 32 to 4096"));
	/* The maximum is the configuration's, not a constant. */
	c.max.memory_mb = 8192;
	ck_assert(limits(&c, "{\"memory_mb\": 4097}", &l, &e));
}
END_TEST

START_TEST(test_limits_refused)
{
	static const char *const bad[] = {
		"{\"memory_mb\": 16}", "{\"pids\": 4}", "{\"memory_mb\": 64.5}",
		"{\"timeout_s\": 0.01}", "{\"timeout_s\": 601}", "{\"cpu\": \"1\"}",
		"{\"disk_mb\": 0}", "{\"output_kb\": -1}", "{\"swap\": 1}", "[]", "3",
	};
	struct petri_config c;
	struct petri_limits l;
	struct request_error e;

	config_defaults(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.message[0] = '\0';
		ck_assert_msg(!limits(&c, bad[i], &l, &e), "accepted: %s", bad[i]);
		ck_assert_msg(e.message[0], "no message for %s", bad[i]);
	}
}
END_TEST

/* The configuration file follows the same table: its minimums, no
 * aliases, and a default above its maximum is named. */
START_TEST(test_config_follows_the_rules)
{
	static const char *const cases[][2] = {
		{ "[limits]\nmemory_mb = 16\n", "memory_mb" },
		{ "[limits]\npids = 4\n", "pids" },
		{ "[max_limits]\ncpu_quota = 2\n", "cpu_quota" },
		{ "[limits]\ntimeout_s = 700\n", "timeout_s" },
	};
	char path[] = "/tmp/petri-unit-request-XXXXXX", err[512];
	struct petri_config c;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f = fopen(path, "w");

		fputs(cases[i][0], f);
		fclose(f);
		ck_assert_msg(config_load(&c, path, err, sizeof(err)) < 0, "accepted: %s",
			      cases[i][0]);
		ck_assert_msg(strstr(err, cases[i][1]), "'%s' not named in: %s", cases[i][1], err);
	}
	unlink(path);
}
END_TEST

START_TEST(test_exec)
{
	struct petri_config c;
	struct petri_limits lim;
	struct request_error e;
	struct exec_request ex;
	json_t *j;

	config_defaults(&c);
	lim = c.defaults;
	lim.timeout_s = 10;
	j = parse("{\"code\": \"1\", \"language\": \"sh\", \"env\": {\"A\": \"b\"}}");
	ck_assert(request_exec(&c, j, "python", &lim, &ex, &e));
	ck_assert_str_eq(ex.language, "bash");		/* the alias's name */
	ck_assert(ex.timeout_s == 10);			/* the sandbox's limit */
	ck_assert_str_eq(ex.env[0], "A=b");
	ck_assert_ptr_null(ex.env[1]);
	request_exec_release(&ex);
	json_decref(j);

	/* A timeout above the sandbox's own limit, even within the server's
	 * maximum, is refused: the same rule for HTTP and MCP. */
	j = parse("{\"code\": \"1\", \"timeout_s\": 11}");
	ck_assert(!request_exec(&c, j, "python", &lim, &ex, &e));
	ck_assert_ptr_nonnull(strstr(e.message, "from 0.1 to 10"));
	request_exec_release(&ex);
	json_decref(j);

	j = parse("{\"code\": \"1\", \"env\": {\"PATH\": \"/evil\"}}");
	ck_assert(!request_exec(&c, j, "python", &lim, &ex, &e));
	ck_assert_ptr_nonnull(strstr(e.message, "set by petri"));
	request_exec_release(&ex);
	json_decref(j);

	j = parse("{\"code\": \"1\", \"language\": \"cobol\"}");
	ck_assert(!request_exec(&c, j, "python", &lim, &ex, &e));
	ck_assert_ptr_nonnull(strstr(e.message, "python"));
	request_exec_release(&ex);
	json_decref(j);

	j = parse("{\"language\": \"python\"}");
	ck_assert(!request_exec(&c, j, "python", &lim, &ex, &e));
	ck_assert_ptr_nonnull(strstr(e.message, "'code'"));
	request_exec_release(&ex);
	json_decref(j);
}
END_TEST

/* "tests": "junit:PATH", its path checked as a file's is. */
START_TEST(test_exec_tests)
{
	static const struct {
		const char *body, *junit, *code;
	} cases[] = {
		{ "{\"code\": \"1\"}", NULL, NULL },
		{ "{\"code\": \"1\", \"tests\": null}", NULL, NULL },
		{ "{\"code\": \"1\", \"tests\": \"junit:report.xml\"}", "report.xml", NULL },
		{ "{\"code\": \"1\", \"tests\": \"junit:/work/out/r.xml\"}", "out/r.xml", NULL },
		{ "{\"code\": \"1\", \"tests\": \"junit:../etc/passwd\"}", NULL, "invalid_path" },
		{ "{\"code\": \"1\", \"tests\": \"junit:/etc/passwd\"}", NULL, "invalid_path" },
		{ "{\"code\": \"1\", \"tests\": \"junit:\"}", NULL, "invalid_path" },
		{ "{\"code\": \"1\", \"tests\": \"tap:out.tap\"}", NULL, "invalid_request" },
		{ "{\"code\": \"1\", \"tests\": true}", NULL, "invalid_request" },
	};
	struct petri_config c;
	struct request_error e;
	struct exec_request ex;

	config_defaults(&c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = parse(cases[i].body);
		bool ok = request_exec(&c, j, "python", &c.defaults, &ex, &e);

		ck_assert_msg(ok == !cases[i].code, "%s", cases[i].body);
		if (ok && cases[i].junit)
			ck_assert_str_eq(ex.junit, cases[i].junit);
		else if (ok)
			ck_assert_ptr_null(ex.junit);
		else
			ck_assert_msg(!strcmp(e.code, cases[i].code) && strstr(e.message, "'tests'"),
				      "%s: %s %s", cases[i].body, e.code, e.message);
		request_exec_release(&ex);
		json_decref(j);
	}
}
END_TEST

START_TEST(test_oneshot)
{
	struct petri_config c;
	struct request_error e;
	struct oneshot o;
	json_t *j;

	config_defaults(&c);
	j = parse("{\"code\": \"1\", \"limits\": {\"timeout_s\": 5}, \"files\": [{\"path\": "
		  "\"a/b.csv\", \"content_base64\": \"eA==\"}], \"return_files\": [\"*.csv\"]}");
	ck_assert(request_oneshot(&c, j, &o, &e));
	ck_assert(o.ex.one_shot);
	ck_assert(o.ex.timeout_s == 5);
	ck_assert_int_eq(o.nfiles, 1);
	ck_assert_str_eq(o.files[0].path, "a/b.csv");
	ck_assert_int_eq(o.files[0].len, 1);
	ck_assert(o.return_files);
	ck_assert_int_eq(o.npatterns, 1);
	oneshot_release(&o);
	json_decref(j);

	j = parse("{\"code\": \"1\", \"files\": [{\"path\": \"../x\", \"content_base64\": \"\"}]}");
	ck_assert(!request_oneshot(&c, j, &o, &e));
	ck_assert_str_eq(e.code, "invalid_path");
	oneshot_release(&o);
	json_decref(j);

	j = parse("{\"code\": \"1\", \"return_files\": \"yes\"}");
	ck_assert(!request_oneshot(&c, j, &o, &e));
	oneshot_release(&o);
	json_decref(j);
}
END_TEST

START_TEST(test_to_jail)
{
	struct petri_limits l = { .memory_mb = 100, .cpu = 0.5, .pids = 16, .disk_mb = 64,
				  .timeout_s = 1, .output_kb = 1 };
	struct jail_limits j;

	limits_to_jail(&l, &j);
	ck_assert_uint_eq(j.memory_bytes, 100ull << 20);
	ck_assert_uint_eq(j.cpu_millicores, 500);
	ck_assert_uint_eq(j.pids, 16);
	ck_assert_uint_eq(j.work_bytes, 64ull << 20);
	ck_assert_uint_eq(j.tmp_bytes, 48ull << 20);	/* half of /work + 16 MiB */
	l.disk_mb = 4096;
	limits_to_jail(&l, &j);
	ck_assert_uint_eq(j.tmp_bytes, 256ull << 20);	/* at most */
}
END_TEST

/* A process to stop: its pid (a JSON integer, or digits as a URL path
 * carries them) and the signal, by a name of the short list. */
START_TEST(test_pid_and_signal)
{
	static const char *const bad_pids[] = {
		"0", "-1", "2147483648", "1.5", "\"\"", "\"4x\"", "\"-4\"", "\"+4\"",
		"\" 4\"", "\"99999999999\"", "null", "true", "[4]",
	};
	static const char *const bad_signals[] = {
		"\"SEGV\"", "\"STOP\"", "\"9\"", "9", "\"\"", "\"SIG\"", "\"TERMX\"", "[]",
	};
	struct request_error e;
	const char *name;
	json_t *v;
	int pid, sig;

	v = parse("4");
	ck_assert(request_pid(v, &pid, &e) && pid == 4);
	json_decref(v);
	v = parse("\"2147483647\"");
	ck_assert(request_pid(v, &pid, &e) && pid == 2147483647);
	json_decref(v);
	for (size_t i = 0; i < sizeof(bad_pids) / sizeof(bad_pids[0]); i++) {
		v = parse(bad_pids[i]);
		ck_assert_msg(!request_pid(v, &pid, &e), "%s", bad_pids[i]);
		ck_assert_str_eq(e.code, "invalid_request");
		json_decref(v);
	}
	ck_assert(request_signal(NULL, &sig, &name, &e) && sig == SIGTERM);
	ck_assert_str_eq(name, "TERM");
	v = parse("\"sigkill\"");
	ck_assert(request_signal(v, &sig, &name, &e) && sig == SIGKILL);
	ck_assert_str_eq(name, "KILL");
	json_decref(v);
	v = parse("\"HUP\"");
	ck_assert(request_signal(v, &sig, &name, &e) && sig == SIGHUP);
	json_decref(v);
	for (size_t i = 0; i < sizeof(bad_signals) / sizeof(bad_signals[0]); i++) {
		v = parse(bad_signals[i]);
		ck_assert_msg(!request_signal(v, &sig, &name, &e), "%s", bad_signals[i]);
		ck_assert_ptr_nonnull(strstr(e.message, "'signal' must be one of"));
		json_decref(v);
	}
}
END_TEST

START_TEST(test_default_path)
{
	char buf[4096];

	setenv("PETRI_CONFIG", "/nonexistent/petri.ini", 1);
	ck_assert_str_eq(config_default_path(buf, sizeof(buf)), "/nonexistent/petri.ini");
	setenv("PETRI_CONFIG", "", 1);
	ck_assert_ptr_null(config_default_path(buf, sizeof(buf)));
	unsetenv("PETRI_CONFIG");
	if (geteuid() != 0) {
		setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
		ck_assert_ptr_null(config_default_path(buf, sizeof(buf)));	/* absent */
	}
}
END_TEST

Suite *request_suite(void)
{
	Suite *s = suite_create("request");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_limits_defaults_and_max);
	tcase_add_test(tc, test_limits_refused);
	tcase_add_test(tc, test_config_follows_the_rules);
	tcase_add_test(tc, test_exec);
	tcase_add_test(tc, test_exec_tests);
	tcase_add_test(tc, test_oneshot);
	tcase_add_test(tc, test_to_jail);
	tcase_add_test(tc, test_pid_and_signal);
	tcase_add_test(tc, test_default_path);
	suite_add_tcase(s, tc);
	return s;
}
