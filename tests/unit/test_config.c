/* The operator's configuration file and the limits a client may ask for. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "jail/jail.h"
#include "unit.h"

static char path[64];

/* A new file in /tmp holding text; its name in file (the caller unlinks). */
static void write_temp(char file[64], const char *text)
{
	int fd;

	snprintf(file, 64, "/tmp/petri-config-XXXXXX");
	fd = mkstemp(file);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void write_config(const char *text)
{
	write_temp(path, text);
}

START_TEST(test_defaults)
{
	struct petri_config c;
	char err[256];

	ck_assert_int_eq(config_load(&c, NULL, err, sizeof(err)), 0);
	ck_assert_str_eq(c.listen, "127.0.0.1:8080");
	ck_assert_uint_eq(c.napi_keys, 0);
	ck_assert(c.warm && c.cgroups);
	ck_assert_uint_eq(c.uid_count, JAIL_UID_COUNT_DEFAULT);
	/* Fair CPU: a session the kernel's default share, refills half of
	 * it, the daemon twice. */
	ck_assert(c.cpu_weight == 100 && c.pool_cpu_weight == 50 && c.daemon_cpu_weight == 200);
	ck_assert_uint_le(c.defaults.memory_mb, c.max.memory_mb);
	/* The record is kept in the state directory unless told otherwise. */
	ck_assert(c.record_default);
	ck_assert(strstr(c.record, "/record.sqlite") != NULL);
	/* The node is named after the host, as a node's name. */
	ck_assert(id_node_valid(c.node));
	config_release(&c);
}
END_TEST

START_TEST(test_file)
{
	struct petri_config c;
	char err[256];

	write_config("; a comment\n[server]\nlisten = unix:/run/p.sock\n"
		     "api_keys = one, two ,three\nmax_sessions = 7\n"
		     "record = /var/lib/petri/r.sqlite\n"
		     "[sessions]\nidle_timeout_s = 30\npool_size = 0\nwarm = no\n"
		     "[limits]\nmemory_mb = 256\ncpu = 0.5\n"
		     "[max_limits]\nmemory_mb = 512\n"
		     "[sandbox]\nro_bind = /srv\nenv = A=b=c\nenv = B=\ncgroups = false\n"
		     "uid_base = 300000\nuid_count = 10\ncpu_weight = 300\n"
		     "pool_cpu_weight = 1\ndaemon_cpu_weight = 10000\n");
	ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
	unlink(path);
	ck_assert_str_eq(c.listen, "unix:/run/p.sock");
	ck_assert_uint_eq(c.napi_keys, 3);
	ck_assert_str_eq(c.api_keys[1], "two");
	ck_assert_str_eq(c.api_keys[2], "three");
	ck_assert_uint_eq(c.max_sessions, 7);
	ck_assert_str_eq(c.record, "/var/lib/petri/r.sqlite");
	ck_assert(c.idle_timeout_s == 30 && c.pool_min == 0 && c.pool_max == 0 && !c.warm && !c.cgroups);
	ck_assert(c.uid_base == 300000 && c.uid_count == 10);	/* 7 + 0 + 3 fit */
	ck_assert(c.cpu_weight == 300 && c.pool_cpu_weight == 1 && c.daemon_cpu_weight == 10000);
	ck_assert(c.defaults.memory_mb == 256 && c.defaults.cpu == 0.5 && c.max.memory_mb == 512);
	ck_assert_str_eq(c.ro_binds[0], "/srv");
	ck_assert_ptr_null(c.ro_binds[1]);
	ck_assert_str_eq(c.env[0], "A=b=c");
	ck_assert_str_eq(c.env[1], "B=");
	config_release(&c);
}
END_TEST

START_TEST(test_refused)
{
	static const char *const bad[] = {
		"[server]\nmax_sesions = 3\n",		/* a typo is an error */
		"[server]\nmax_sessions = -1\n",
		"[server]\nmax_sessions = 3x\n",
		"[limits]\nmemory_mb = 8\n",		/* below the floor */
		"[limits]\ncpu = nan\n",
		"[limits]\nmemory_mb = 9000\n",	/* a default above its maximum */
		"[sandbox]\nuid_base = 0\n",		/* never root */
		"[sandbox]\nuid_count = 0\n",
		"[sandbox]\nuid_count = 1000001\n",
		/* 100 sessions + pools of at most 8 + 4 templates + the probe
		 * + a refill need 114 */
		"[sandbox]\nuid_count = 113\n",
		"[server]\nmax_sessions = 500\n[sandbox]\nuid_count = 501\n",
		"[sandbox]\ncgroup_parent = ../x\n",
		"[sandbox]\ncpu_weight = 0\n",		/* cgroup.h's 1..10000 */
		"[sandbox]\npool_cpu_weight = 10001\n",
		"[sandbox]\ndaemon_cpu_weight = -5\n",
		"[sandbox]\nenv = 1A=b\n",
		"[sandbox]\nenv = noequals\n",
		"[sandbox]\nro_bind = relative\n",
		"[python]\npreload = os; rm\n",	/* module names only */
		"[python]\npreload = -c\n",
		"[python]\npreload = a, .b\n",
		"[python]\npath_preload = x\n",
		"[server]\nrecord = relative.sqlite\n",
		"[server]\nnode = petri-0\n",		/* util/ids.h: [a-z0-9]{1,16} */
		"[server]\nnode = Petri0\n",
		"[server]\nnode = 0123456789abcdef0\n",
		"[server]\ntrusted_proxies = 10.0.0.1/8\n",	/* host bits: a mistake */
		"[server]\ntrusted_proxies = router.example\n",
		"[cluster]\nagent_listen = unix:/run/agent\n",
		"[cluster]\ndrain_grace_s = -1\n",
		"[cluster]\nunknown = 1\n",
		"[server]\napi_keys = k1\n[cluster]\nadmin_keys = k1\n",	/* a tenant's key */
		"[nosection]\nx = 1\n",
		"[server\nbroken\n",
		"[language.perl]\nfile = main.pl\n",			/* no run */
		"[language.perl]\nrun = perl x\nfile = ../x.pl\n",
		"[language.perl]\nrun = perl x\nfile = x.pl\nfile = y.pl\n",	/* twice */
		"[language.perl]\nrun = perl x\nfile = x.pl\nsudo = yes\n",
		"[language.bash]\nrun = sh x\nfile = x\n",	/* a built-in's name */
		"[language.perl]\nrun = perl x\nfile = x.pl\naliases = py\n",
	};
	struct petri_config c;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_config(bad[i]);
		ck_assert_msg(config_load(&c, path, err, sizeof(err)) < 0, "accepted: %s", bad[i]);
		ck_assert_msg(err[0], "no message for: %s", bad[i]);
		unlink(path);
	}
	ck_assert_int_lt(config_load(&c, "/nonexistent/petri.ini", err, sizeof(err)), 0);
}
END_TEST

static void load_ok(struct petri_config *c, const char *text)
{
	char err[512];

	write_config(text);
	ck_assert_msg(config_load(c, path, err, sizeof(err)) == 0, "%s: %s", text, err);
	unlink(path);
}

/* The message config_load() gives for text, which it must refuse. */
static const char *load_refused(const char *text)
{
	static char err[512];
	struct petri_config c;

	write_config(text);
	ck_assert_msg(config_load(&c, path, err, sizeof(err)) < 0, "accepted: %s", text);
	unlink(path);
	return err;
}

START_TEST(test_pool_sizes)
{
	struct petri_config c;
	const char *e;

	ck_assert_int_eq(config_load(&c, NULL, (char[64]){ 0 }, 64), 0);
	ck_assert_uint_eq(c.pool_min, CONFIG_POOL_MIN_DEFAULT);
	ck_assert_uint_eq(c.pool_max, CONFIG_POOL_MAX_DEFAULT);
	ck_assert(c.pool_window_s == 10);
	config_release(&c);
	/* pool_size: a fixed pool, as before pool_min and pool_max. */
	load_ok(&c, "[sessions]\npool_size = 5\n");
	ck_assert(c.pool_min == 5 && c.pool_max == 5);
	config_release(&c);
	load_ok(&c, "[sessions]\npool_min = 0\npool_max = 20\npool_window_s = 2.5\n");
	ck_assert(c.pool_min == 0 && c.pool_max == 20 && c.pool_window_s == 2.5);
	config_release(&c);
	load_ok(&c, "[sessions]\npool_max = 1\npool_min = 1\n");
	ck_assert(c.pool_min == 1 && c.pool_max == 1);
	config_release(&c);
	/* pool_max alone, and the uid range counts the pool at its largest. */
	load_ok(&c, "[server]\nmax_sessions = 10\n[sessions]\npool_max = 4\n"
		    "[sandbox]\nuid_count = 17\n[python]\nlight_template = false\n");
	ck_assert(c.pool_min == 2 && c.pool_max == 4);
	config_release(&c);
	/* Two templates more, and a refill. */
	load_ok(&c, "[server]\nmax_sessions = 10\n[sessions]\npool_max = 4\n"
		    "[sandbox]\nuid_count = 20\n");
	ck_assert(c.pool_min == 2 && c.pool_max == 4);
	config_release(&c);

	e = load_refused("[sessions]\npool_size = 2\npool_max = 4\n");
	ck_assert_msg(strstr(e, "either pool_size or pool_min and pool_max"), "%s", e);
	e = load_refused("[sessions]\npool_min = 1\npool_size = 2\n");
	ck_assert_msg(strstr(e, "either pool_size or pool_min and pool_max"), "%s", e);
	e = load_refused("[sessions]\npool_min = 5\npool_max = 4\n");
	ck_assert_msg(strstr(e, "pool_min = 5 in [sessions] is above pool_max = 4"), "%s", e);
	ck_assert_msg(!strstr(e, "default"), "%s", e);
	e = load_refused("[sessions]\npool_min = 9\n");
	ck_assert_msg(strstr(e, "above pool_max = 8 (its default): set pool_max too"), "%s", e);
	e = load_refused("[server]\nmax_sessions = 10\n[sessions]\npool_max = 5\n"
			 "[sandbox]\nuid_count = 17\n[python]\nlight_template = false\n");
	ck_assert_msg(strstr(e, "max_sessions + pool_max + 3 = 18"), "%s", e);
	/* Four templates, and a refill of one pool beside the other's. */
	e = load_refused("[server]\nmax_sessions = 10\n[sessions]\npool_max = 5\n"
			 "[sandbox]\nuid_count = 20\n");
	ck_assert_msg(strstr(e, "max_sessions + pool_max + 6 = 21"), "%s", e);
	e = load_refused("[sessions]\npool_max = 1001\n");
	ck_assert_msg(strstr(e, "pool_max = 1001"), "%s", e);
	load_refused("[sessions]\npool_min = -1\n");
	load_refused("[sessions]\npool_window_s = 0.5\n");
	load_refused("[sessions]\npool_window_s = 3601\n");
	load_refused("[sessions]\npool_window_s = nan\n");
}
END_TEST

/* [sessions] warm_wait_s: how long a sandbox waits for a starting template. */
START_TEST(test_warm_wait)
{
	struct petri_config c;

	ck_assert_int_eq(config_load(&c, NULL, (char[64]){ 0 }, 64), 0);
	ck_assert(c.warm_wait_s == CONFIG_WARM_WAIT_DEFAULT && c.warm_wait_s > 0);
	config_release(&c);
	load_ok(&c, "[sessions]\nwarm_wait_s = 0\n");
	ck_assert(c.warm_wait_s == 0);
	config_release(&c);
	load_ok(&c, "[sessions]\nwarm_wait_s = 2.5\n");
	ck_assert(c.warm_wait_s == 2.5);
	config_release(&c);
	load_refused("[sessions]\nwarm_wait_s = -1\n");
	load_refused("[sessions]\nwarm_wait_s = 601\n");
	load_refused("[sessions]\nwarm_wait_s = nan\n");
}
END_TEST

START_TEST(test_languages)
{
	struct petri_config c;
	char err[256];

	write_config("[language.perl]\nfile = main.pl\nrun = perl main.pl\n"
		     "aliases = pl, perl5\nextensions = .pl\n"
		     "[language.rust]\nfile = {tmp}/main.rs\ncompile = rustc -o main main.rs\n"
		     "run = {tmp}/main\nversion = rustc --version\n");
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nlanguages, 2);
	ck_assert_str_eq(c.languages[0].name, "perl");
	ck_assert_str_eq(c.languages[0].aliases[1], "perl5");
	ck_assert_ptr_null(c.languages[0].aliases[2]);
	ck_assert_str_eq(c.languages[0].summary, "perl code, run with: perl main.pl");
	ck_assert_str_eq(c.languages[1].compile, "rustc -o main main.rs");
	ck_assert_ptr_null(c.languages[1].aliases[0]);	/* empty, never NULL */
	config_release(&c);
	ck_assert_uint_eq(c.nlanguages, 0);
	unlink(path);
}
END_TEST

/* [python] path and wheelhouse, and every bind checked at load: one that
 * cannot work is refused with its setting named, not at each sandbox's
 * start. */
START_TEST(test_python_and_binds)
{
	static const struct { const char *text, *named; } bad[] = {
		{ "[sandbox]\nro_bind = /tmp/data\n", "ro_bind = /tmp/data in [sandbox]" },
		{ "[sandbox]\nro_bind = /nonexistent-petri\n", "ro_bind = /nonexistent-petri" },
		{ "[python]\npath = /usr/lib/python3\n", "path = /usr/lib/python3 in [python]" },
		{ "[python]\npath = /srv, /etc/x\n", "path = /etc/x in [python]" },
		{ "[python]\nwheelhouse = /etc/hostname\n", "wheelhouse = /etc/hostname" },
		{ "[python]\nwheelhouse = /proc/self\n", "wheelhouse = /proc/self" },
		{ "[python]\nwheelhouse = relative\n", "wheelhouse = relative" },
		{ "[python]\npath = /srv:/opt\n", "path = /srv:/opt" },
		{ "[python]\nwheelhouse = /a dir\n", "wheelhouse = /a dir" },
		{ "[python]\npreloaded = x\n", "preloaded = x" },
	};
	struct petri_config c;
	char err[512];

	write_config("[python]\npath = /srv, /mnt\npath = /media\nwheelhouse = /srv\n");
	ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
	unlink(path);
	ck_assert_uint_eq(c.npython_path, 3);
	ck_assert_str_eq(c.python_path[1], "/mnt");
	ck_assert_ptr_null(c.python_path[3]);
	ck_assert_str_eq(c.wheelhouse, "/srv");
	config_release(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_config(bad[i].text);
		ck_assert_msg(config_load(&c, path, err, sizeof(err)) < 0, "accepted: %s",
			      bad[i].text);
		ck_assert_msg(strstr(err, bad[i].named), "'%s' not named in: %s", bad[i].named,
			      err);
		unlink(path);
	}
}
END_TEST

START_TEST(test_preload)
{
	struct petri_config c;
	const char *const *pre;
	char err[256], text[1024];
	size_t n;

	config_defaults(&c);	/* the built-in list, when the file has none */
	pre = config_preload(&c);
	ck_assert_ptr_nonnull(pre[0]);
	for (n = 0; pre[n]; n++)
		ck_assert(config_preload_name_ok(pre[n]));

	/* Lines add up; the first replaces the default. */
	write_config("[python]\npreload = json ,  xml.dom.minidom,_x9\npreload = a.b\n");
	ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
	unlink(path);
	pre = config_preload(&c);
	ck_assert_str_eq(pre[0], "json");
	ck_assert_str_eq(pre[1], "xml.dom.minidom");
	ck_assert_str_eq(pre[2], "_x9");
	ck_assert_str_eq(pre[3], "a.b");
	ck_assert_ptr_null(pre[4]);
	/* Which code needs them: a whole word naming a module's first part. */
	ck_assert(config_light_template(&c));
	ck_assert(config_preload_named(&c, "import json"));
	ck_assert(config_preload_named(&c, "x = xml.dom.minidom.parseString(s)"));
	ck_assert(config_preload_named(&c, "print('a', _x9)"));
	ck_assert(config_preload_named(&c, "from a import b"));
	ck_assert(config_preload_named(&c, "json"));
	ck_assert(!config_preload_named(&c, "print(1 + 1)"));
	ck_assert(!config_preload_named(&c, "import jsonschema, xmlrpc\nab = _x90"));
	ck_assert(!config_preload_named(&c, "x.dom = 'minidom'; b.ab"));
	ck_assert(!config_preload_named(&c, ""));
	{
		static const char *const names[] = { "exec", "mpl_toolkits.mplot3d", NULL };

		ck_assert(config_code_names("exec(s)", names));
		ck_assert(config_code_names("from mpl_toolkits import x", names));
		ck_assert(!config_code_names("executor = 1; mpl_toolkit", names));
	}
	c.light_template = false;
	ck_assert(!config_light_template(&c));
	c.light_template = true;
	c.warm = false;
	ck_assert(!config_light_template(&c));
	config_release(&c);

	/* An empty value preloads nothing. */
	write_config("[python]\npreload =\n");
	ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
	unlink(path);
	ck_assert_ptr_null(config_preload(&c)[0]);
	/* The one template is light already. */
	ck_assert(!config_light_template(&c));
	config_release(&c);

	/* 64 modules are allowed, 65 are not. */
	for (int total = 64; total <= 65; total++) {
		n = (size_t)snprintf(text, sizeof(text), "[python]\n");
		for (int i = 0; i < total; i += 16) {
			n += (size_t)snprintf(text + n, sizeof(text) - n, "preload = m%d", i);
			for (int k = i + 1; k < i + 16 && k < total; k++)
				n += (size_t)snprintf(text + n, sizeof(text) - n, ", m%d", k);
			n += (size_t)snprintf(text + n, sizeof(text) - n, "\n");
		}
		write_config(text);
		ck_assert_int_eq(config_load(&c, path, err, sizeof(err)) == 0, total == 64);
		unlink(path);
		if (total == 64) {
			ck_assert_str_eq(config_preload(&c)[63], "m63");
			config_release(&c);
		}
	}

	ck_assert(config_preload_name_ok("PIL.Image"));
	ck_assert(!config_preload_name_ok(""));
	ck_assert(!config_preload_name_ok("-c"));
	ck_assert(!config_preload_name_ok("9lives"));
	ck_assert(!config_preload_name_ok("a.9"));
	ck_assert(!config_preload_name_ok(".a"));
	ck_assert(!config_preload_name_ok("a."));
	ck_assert(!config_preload_name_ok("a..b"));
	ck_assert(!config_preload_name_ok("os; rm"));
	ck_assert(!config_preload_name_ok("os/path"));
	ck_assert(!config_preload_name_ok("caf\xc3\xa9"));	/* ASCII only */
	memset(text, 'a', 129);
	text[129] = '\0';
	ck_assert(!config_preload_name_ok(text));
	text[128] = '\0';
	ck_assert(config_preload_name_ok(text));
}
END_TEST

START_TEST(test_long_line)
{
	struct petri_config c;
	char err[256], text[512];
	int n;

	/* The parser reads at most 199 bytes of a line and the rest as the
	 * next line: a value cut short must be an error, never a setting. */
	n = snprintf(text, sizeof(text), "[python]\npreload = json");
	while (n < 300)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ", json");
	snprintf(text + n, sizeof(text) - (size_t)n, "\n");
	write_config(text);
	ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -EINVAL);
	unlink(path);
	ck_assert_msg(strstr(err, ":2: the line is longer than"), "%s", err);
}
END_TEST

START_TEST(test_node)
{
	struct petri_config c;
	char host[ID_NODE_MAX + 1];

	load_ok(&c, "[server]\nnode = n1\n");
	ck_assert_str_eq(c.node, "n1");
	config_release(&c);
	load_ok(&c, "[server]\nnode = 0123456789abcdef\n");
	ck_assert_str_eq(c.node, "0123456789abcdef");
	config_release(&c);
	load_ok(&c, "[server]\ntrusted_proxies = 10.0.0.0/8, 192.0.2.7\n"
		"trusted_proxies = 2001:db8::/32\n[cluster]\nadmin_keys = a1, a2\n"
		"agent_listen = 127.0.0.1:0\ndrain_grace_s = 30\n");
	ck_assert_uint_eq(c.ntrusted_proxies, 3);
	ck_assert_uint_eq(c.nadmin_keys, 2);
	ck_assert_str_eq(c.agent_listen, "127.0.0.1:0");
	ck_assert(c.drain_grace_s == 30);
	config_release(&c);
	/* Empty: the host's, as by default. */
	config_defaults(&c);
	snprintf(host, sizeof(host), "%s", c.node);
	load_ok(&c, "[server]\nnode = n1\nnode =\n");
	ck_assert_str_eq(c.node, host);
	config_release(&c);
}
END_TEST

START_TEST(test_keys_files)
{
	char api[64], admin[64], text[512];
	struct petri_config c;
	const char *err;

	write_temp(api, "# the tenants\nt1, t2\n\nt3\n");
	write_temp(admin, "# the operators\na1\n#a2\n  \na3 , a4\r\n");
	snprintf(text, sizeof(text), "[cluster]\nadmin_keys_file = %s\nadmin_keys = a0\n"
		 "[server]\napi_keys_file = %s\n", admin, api);
	load_ok(&c, text);
	ck_assert_uint_eq(c.napi_keys, 3);
	ck_assert_str_eq(c.api_keys[2], "t3");
	ck_assert_uint_eq(c.nadmin_keys, 4);
	ck_assert_str_eq(c.admin_keys[0], "a1");
	ck_assert_str_eq(c.admin_keys[1], "a3");
	ck_assert_str_eq(c.admin_keys[2], "a4");
	ck_assert_str_eq(c.admin_keys[3], "a0");
	config_release(&c);

	/* An admin key that is a tenant's, however it comes: from either
	 * file, before or after the other list. */
	snprintf(text, sizeof(text), "[cluster]\nadmin_keys_file = %s\n[server]\n"
		 "api_keys = a3\n", admin);
	ck_assert_ptr_nonnull(strstr(load_refused(text), "admin_keys"));
	snprintf(text, sizeof(text), "[server]\napi_keys = a1\n[cluster]\n"
		 "admin_keys_file = %s\n", admin);
	ck_assert_ptr_nonnull(strstr(load_refused(text), "admin_keys"));
	snprintf(text, sizeof(text), "[cluster]\nadmin_keys = t2\n[server]\n"
		 "api_keys_file = %s\n", api);
	ck_assert_ptr_nonnull(strstr(load_refused(text), "admin_keys"));
	snprintf(text, sizeof(text), "[server]\napi_keys_file = %s\n[cluster]\n"
		 "admin_keys_file = %s\nadmin_keys_file = %s\n", api, admin, api);
	ck_assert_ptr_nonnull(strstr(load_refused(text), "admin_keys"));
	unlink(api);
	unlink(admin);

	/* A file that cannot be read is an error that names it and says why. */
	err = load_refused("[cluster]\nadmin_keys_file = /nonexistent/admin\n");
	ck_assert_msg(strstr(err, "admin_keys_file in [cluster]: cannot read "
			     "'/nonexistent/admin': No such file or directory"), "%s", err);
	err = load_refused("[server]\napi_keys_file = /nonexistent/keys\n");
	ck_assert_msg(strstr(err, "api_keys_file in [server]: cannot read "
			     "'/nonexistent/keys'"), "%s", err);
	err = load_refused("[cluster]\nadmin_keys_file = /\n");
	ck_assert_msg(strstr(err, "Is a directory"), "%s", err);
}
END_TEST

START_TEST(test_listen)
{
	struct petri_config c;
	char err[256];

	ck_assert(config_listen_is_local("127.0.0.1:80"));
	ck_assert(config_listen_is_local("127.1.2.3:80"));
	ck_assert(config_listen_is_local("[::1]:80"));
	ck_assert(config_listen_is_local("localhost:80"));
	ck_assert(config_listen_is_local("unix:/run/petri.sock"));
	ck_assert(!config_listen_is_local("0.0.0.0:80"));
	ck_assert(!config_listen_is_local("[::]:80"));
	ck_assert(!config_listen_is_local("10.0.0.1:80"));
	ck_assert(!config_listen_is_local("example.com:80"));
	config_defaults(&c);
	snprintf(c.listen, sizeof(c.listen), "0.0.0.0:8080");
	ck_assert_int_eq(config_check_listen(&c, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "API keys"));
}
END_TEST

Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_file);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_pool_sizes);
	tcase_add_test(tc, test_warm_wait);
	tcase_add_test(tc, test_python_and_binds);
	tcase_add_test(tc, test_preload);
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_listen);
	tcase_add_test(tc, test_node);
	tcase_add_test(tc, test_keys_files);
	tcase_add_test(tc, test_languages);
	suite_add_tcase(s, tc);
	return s;
}
