/* petri check — what this host supports, what petri will do without each
 * missing piece, and a real sandbox started to prove it works. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "config/config.h"
#include "exec/limits.h"
#include "jail/jail.h"
#include "net/router.h"
#include "runtime/box.h"
#include "exec/languages.h"
#include "runtime/zygote.h"
#include "session/probe.h"
#include "util/clock.h"
#include "util/log.h"

static double now_ms(void)
{
	return clock_mono_s() * 1e3;
}

static const char *yes(bool b) { return b ? "yes" : "no"; }

/* A network for sessions, as petri serve would make one: the router (its
 * namespace, slirp4netns, nftables) and a link to the cold sandbox under
 * an allow-list of one address; the time of each.  0, or -errno with err. */
static int check_network(const struct petri_config *cfg, struct box *box, double *router_ms,
			 double *link_ms, char *err, size_t errlen)
{
	struct net_policy *p = calloc(1, sizeof(*p));
	struct net_router *r = NULL;
	struct net_link *l = NULL;
	double t0 = now_ms();
	int e, fd;

	*router_ms = *link_ms = 0;
	if (!p)
		return -ENOMEM;
	if (!box) {
		snprintf(err, errlen, "no sandbox to give a link");
		e = -ESRCH;
		goto out;
	}
	if ((e = net_router_start(&cfg->network, &r, err, errlen)) < 0)
		goto out;
	*router_ms = now_ms() - t0;
	net_policy_add(p, "192.0.2.1", false, err, errlen);
	if ((fd = jail_netns(box_jail(box))) < 0) {
		e = fd;
		snprintf(err, errlen, "the sandbox ended");
		goto out;
	}
	t0 = now_ms();
	e = net_attach(r, fd, p, &l, err, errlen);
	*link_ms = now_ms() - t0;
	close(fd);
	net_detach(l);
out:
	net_router_stop(r);
	free(p);
	return e;
}

#define CHECK_WIDTH 78	/* columns of the report */

/* text from column col (where the caller's line has got to), broken at
 * spaces before CHECK_WIDTH, continued 17 columns in, ended by '\n'. */
static void print_wrapped(size_t col, const char *text)
{
	if (!*text)
		putchar('\n');
	while (*text) {
		size_t room = col < CHECK_WIDTH - 20 ? CHECK_WIDTH - col : 20;
		size_t n = strlen(text);

		if (n > room) {
			size_t cut = room;

			while (cut > 0 && text[cut] != ' ')
				cut--;
			n = cut ? cut : strcspn(text, " ");
		}
		printf("%.*s\n", (int)n, text);
		text += n;
		text += strspn(text, " ");
		if (*text)
			printf("%17s", "");
		col = 17;
	}
}

/* What the cold sandbox has, as petri serve's probe finds it: the
 * languages with their versions, the packages (session/probe.h). */
static json_t *find_out(struct box *box)
{
	struct exec_request ex;
	struct result res;
	json_t *found = NULL, *d;
	char *code = probe_code();

	if (box && code && result_init(&res) == 0) {
		ex = probe_exec(code);
		if (box_exec(box, &ex, NULL, &res) == 0 && res.status == RESULT_OK)
			found = probe_parse(res.out.data.data, res.out.data.len);
		result_release(&res);
	}
	free(code);
	d = probe_describe(found, found ? NULL : "the probe failed in the sandbox");
	json_decref(found);
	return d;
}

/* "languages:       python (also py, python3): 3.11.2," one to a line,
 * then the tools likewise, then the packages, six to a line. */
static void print_found(const json_t *found)
{
	const json_t *langs = json_object_get(found, "languages");
	const json_t *tools = json_object_get(found, "tools");
	const json_t *packages = json_object_get(found, "packages"), *v;
	size_t i;

	printf("languages:       ");
	json_array_foreach(langs, i, v) {
		const json_t *al = json_object_get(v, "aliases");
		const char *version = json_string_value(json_object_get(v, "version"));
		size_t k;

		printf("%s%s", i ? ",\n                 " : "",
		       json_string_value(json_object_get(v, "name")));
		if (json_array_size(al)) {
			printf(" (also");
			json_array_foreach(al, k, v)
				printf("%s %s", k ? "," : "", json_string_value(v));
			printf(")");
		}
		printf(": %s", version ? version : "NOT FOUND in the sandbox");
	}
	printf("\n");
	if (json_is_array(tools)) {
		printf("tools:           ");
		json_array_foreach(tools, i, v) {
			const char *version = json_string_value(json_object_get(v, "version"));

			printf("%s%s: %s", i ? ",\n                 " : "",
			       json_string_value(json_object_get(v, "name")),
			       version ? version : "NOT FOUND in the sandbox");
		}
		printf("\n");
	} else {
		printf("tools:           unknown (%s)\n",
		       json_string_value(json_object_get(found, "error")));
	}
	if (!json_is_array(packages)) {
		printf("packages:        unknown (%s)\n",
		       json_string_value(json_object_get(found, "error")));
		return;
	}
	printf("packages:        %zu Python packages (GET /v1/languages lists them):",
	       json_array_size(packages));
	json_array_foreach(packages, i, v)
		printf("%s%s %s", i % 6 ? ", " : "\n                 ",
		       json_string_value(json_object_get(v, "name")),
		       json_string_value(json_object_get(v, "version")));
	printf("\n");
}

int cmd_check(int argc, char **argv)
{
	bool json_out = argc > 1 && !strcmp(argv[1], "--json");
	struct jail_host *host;
	const struct jail_host_info *in;
	struct jail_host_config hc;
	struct box_config cfg = { 0 };
	struct box *box = NULL, *warm = NULL;
	struct zygote *z = NULL;
	struct cli_local l;
	json_t *found = NULL;
	const char *const *preload;
	char err[512] = "", zerr[512] = "", nerr[512] = "", losses[1024];
	double t0, spawn_ms, zygote_ms = 0, fork_ms = 0, router_ms, link_ms;
	long uids_free;
	int r, zr, nr;

	if (argc > 1 && !json_out) {
		fprintf(stderr, "usage: petri check [--json]\n");
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	cli_local_config(&l, NULL);	/* the operator's languages, binds, cgroups */
	cli_host_config(&l.cfg, &hc);
	host = cli_jail_host_with(&hc);
	in = jail_host_info(host);
	uids_free = jail_host_uids_free(host);	/* before our own sandboxes */
	/* A session's sandbox, as petri serve starts it with this
	 * configuration: its limits, binds and Python. */
	limits_to_jail(&l.cfg.defaults, &cfg.limits);
	cfg.ro_binds = (const char *const *)l.cfg.ro_binds;
	cfg.python_path = (const char *const *)l.cfg.python_path;
	cfg.wheelhouse = l.cfg.wheelhouse[0] ? l.cfg.wheelhouse : NULL;
	cli_local_cache(&l);
	cfg.cache_files = l.cfg.cache_files;
	cfg.ncache_files = l.cfg.ncache_files;
	preload = config_preload(&l.cfg);	/* the operator's, or the default */
	t0 = now_ms();
	r = box_start(host, &cfg, &box, err, sizeof(err));
	spawn_ms = now_ms() - t0;
	found = find_out(box);
	nr = check_network(&l.cfg, box, &router_ms, &link_ms, nerr, sizeof(nerr));
	/* The warm path, as petri serve uses it. */
	t0 = now_ms();
	zr = zygote_start(host, &cfg, preload, -1, &z, zerr, sizeof(zerr));
	zygote_ms = now_ms() - t0;
	if (zr == 0) {
		t0 = now_ms();
		zr = zygote_fork(z, &cfg, &warm, zerr, sizeof(zerr));
		fork_ms = now_ms() - t0;
	}

	if (json_out) {
		json_t *j = json_pack(
			"{s:b, s:b, s:{s:I, s:I, s:I, s:I, s:I}, s:{s:i, s:b, s:b, s:b, s:b, s:s, s:s},"
			" s:{s:b, s:i}, s:i, s:{s:b, s:s, s:s, s:f, s:s},"
			" s:{s:b, s:s, s:f, s:f}, s:{s:b, s:s, s:s, s:f, s:f}}",
			"user_namespaces", in->userns, "privileged", in->privileged,
			"uid_map", "sandbox_uid", (json_int_t)JAIL_UID,
			"host_uid", (json_int_t)in->host_uid,
			"uid_count", (json_int_t)in->uid_count,
			"uids_free", (json_int_t)uids_free,
			"host_root_uid", (json_int_t)(in->host_root_uid == (uid_t)-1 ?
						     -1 : (json_int_t)in->host_root_uid),
			"cgroup", "version", (int)in->cgroup, "memory", in->cg_memory,
			"swap", in->cg_swap, "pids", in->cg_pids, "cpu", in->cg_cpu,
			"parent", in->cg_parent, "problem", in->cg_problem,
			"seccomp", "available", in->seccomp, "allowed_syscalls",
			(int)in->seccomp_allowed,
			"landlock_abi", in->landlock_abi,
			"sandbox", "works", r == 0, "error", err,
			"python", box ? box_python_version(box) : "",
			"spawn_ms", spawn_ms, "path", "cold",
			"warm", "works", zr == 0, "error", zerr, "template_ms", zygote_ms,
			"fork_ms", fork_ms,
			"network", "works", nr == 0, "error", nerr,
			"clients_may", net_mode_name(l.cfg.network.clients_may),
			"router_ms", router_ms, "link_ms", link_ms);

		json_object_update_new(j, found);
		found = NULL;
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
		goto out;
	}

	printf("user namespaces: %s", yes(in->userns));
	if (in->privileged)
		printf(" (running as root: sandbox uid %u maps to a host uid of its own,\n"
		       "                 leased from %u-%u, %ld of %u free; the namespace's\n"
		       "                 root to %u)\n", JAIL_UID, (unsigned)in->host_uid,
		       (unsigned)(in->host_uid + in->uid_count - 1), uids_free,
		       (unsigned)in->uid_count, (unsigned)in->host_root_uid);
	else
		printf(" (unprivileged: sandbox uid %u maps to your uid %u, in every\n"
		       "                 sandbox: they share its per-user kernel quotas)\n",
		       JAIL_UID, (unsigned)in->host_uid);
	/* Before the sandbox line: that sandbox runs with what is said here. */
	cli_cgroup_losses(in, losses, sizeof(losses));
	if (in->cgroup == JAIL_CG_NONE) {
		printf("cgroups:         off: ");
		print_wrapped(17 + 5, in->cg_problem);
		printf("                 the fallback is used, rlimits: ");
		print_wrapped(17 + 31, losses);
	} else {
		printf("cgroups:         v%d under %s\n"
		       "                 memory %s, swap accounting %s, pids %s, cpu %s\n",
		       (int)in->cgroup, in->cg_parent, yes(in->cg_memory),
		       yes(in->cg_swap), yes(in->cg_pids), yes(in->cg_cpu));
		if (in->cg_problem[0]) {
			printf("                 ");
			print_wrapped(17, in->cg_problem);
		}
		if (losses[0]) {
			printf("                 without them: ");
			print_wrapped(17 + 14, losses);
		}
	}
	if (in->cgroup != JAIL_CG_NONE && in->cg_memory && !in->cg_swap)
		printf("                 without swap accounting a process can exceed the\n"
		       "                 memory limit by using swap\n");
	printf("seccomp:         %s, %u system calls allowed (petri policy lists them)\n",
	       yes(in->seccomp), in->seccomp_allowed);
	if (in->landlock_abi > 0)
		printf("landlock:        ABI %d: filesystem writes confined%s\n",
		       in->landlock_abi,
		       in->landlock_abi >= 6 ? ", signals and abstract sockets scoped" : "");
	else
		printf("landlock:        not available: the mount namespace and read-only\n"
		       "                 mounts alone confine the filesystem\n");
	if (r == 0)
		printf("sandbox:         works: Python %s started in %.0f ms (cold path;\n"
		       "                 every language runs inside the same sandbox)\n",
		       box_python_version(box), spawn_ms);
	else
		printf("sandbox:         FAILED: %s\n", err);
	print_found(found);
	if (zr == 0)
		printf("warm path:       works: a template with the data stack started in %.0f ms;\n"
		       "                 a session forked from it was ready in %.1f ms (petri\n"
		       "                 serve uses it for Python sessions)\n", zygote_ms, fork_ms);
	else
		printf("warm path:       not available (%s):\n"
		       "                 petri serve starts every sandbox cold\n", zerr);
	if (nr == 0)
		printf("network:         works: the router started in %.0f ms, a session's link\n"
		       "                 took %.1f ms; sessions get %s by default, a client may\n"
		       "                 ask for %s ([network], docs/security.md)\n", router_ms,
		       link_ms, net_mode_name(l.cfg.network.deflt.mode),
		       net_mode_name(l.cfg.network.clients_may));
	else
		printf("network:         not available (%s):\n"
		       "                 sessions have loopback only%s\n", nerr,
		       net_config_enabled(&l.cfg.network) ? ", though [network] allows more" : "");
out:
	json_decref(found);
	box_free(warm);
	zygote_free(z);
	box_free(box);
	jail_host_free(host);
	lang_configure(NULL, 0);
	cli_local_release_cache(&l);
	config_release(&l.cfg);
	return r == 0 ? 0 : 1;
}
