#include "runtime/zygote.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config.h"
#include "util/log.h"

#define TEMPLATE_READY_TIMEOUT_MS 60000
/* The ready message, with a line per module that failed to import (the
 * driver cuts each error to fit: CONFIG_PRELOAD_MAX of them fit here). */
#define READY_MSG_MAX (32u << 10)

struct zygote {
	struct jail *tmpl;
	char python[32];
};

/* The template's own sandbox: room for the data stack, no user code. */
static void template_limits(struct jail_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->inodes = 65536;
	l->memory_bytes = 2048ull << 20;
	l->cpu_millicores = 0;
	l->pids = 0;	/* its sandboxes are counted in their own cgroups */
	l->work_bytes = 1 << 20;
	l->tmp_bytes = 64 << 20;
	/* Its sandboxes set their own rlimits, and may not raise a hard limit
	 * above the template's: leave room. */
	l->fsize_bytes = RLIM_INFINITY;
	l->nofile = 0;		/* inherit ours */
}

/* Modules the template could not import: logged, not fatal (the session
 * imports them itself, or fails as it would without a template). */
static void log_preload_failures(const json_t *failed)
{
	size_t i;
	json_t *f;

	json_array_foreach(failed, i, f)
		log_warn("the warm template cannot preload %s: %s",
			 json_string_value(json_object_get(f, "module")) ?: "?",
			 json_string_value(json_object_get(f, "error")) ?: "?");
}

/* How much of its memory the template put into huge pages (collapse() in
 * src/runtime/pyext.c). */
static void log_huge_pages(const json_t *mib)
{
	if (json_integer_value(mib) > 0)
		log_info("the warm template put %lld MiB of its memory into huge pages",
			 (long long)json_integer_value(mib));
	else
		log_info("the warm template has no memory in huge pages (too little to "
			 "collapse, transparent_hugepage \"never\", or a kernel before 6.1)");
}

static int wait_template_ready(struct zygote *z, int cancel_fd, char *err, size_t errlen)
{
	struct pollfd pfd[2] = {
		{ .fd = jail_ctl_fd(z->tmpl), .events = POLLIN },
		{ .fd = cancel_fd, .events = POLLIN },
	};
	char *buf = NULL;
	json_t *msg = NULL;
	ssize_t n;
	int r;

	do
		r = poll(pfd, cancel_fd >= 0 ? 2 : 1, TEMPLATE_READY_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		snprintf(err, errlen, "the template did not get ready");
		return -ETIMEDOUT;
	}
	if (cancel_fd >= 0 && pfd[1].revents) {
		snprintf(err, errlen, "cancelled");
		return -ECANCELED;
	}
	if (!(buf = malloc(READY_MSG_MAX)))
		return -ENOMEM;
	n = recv(pfd[0].fd, buf, READY_MSG_MAX - 1, 0);
	if (n <= 0) {
		snprintf(err, errlen, "the template exited while starting");
		r = -EPIPE;
		goto out;
	}
	buf[n] = '\0';
	msg = json_loads(buf, 0, NULL);
	if (!msg || strcmp(json_string_value(json_object_get(msg, "type")) ?: "", "ready")) {
		snprintf(err, errlen, "the template sent no ready message");
		r = -EPROTO;
		goto out;
	}
	snprintf(z->python, sizeof(z->python), "%s",
		 json_string_value(json_object_get(msg, "python")) ?: "");
	log_preload_failures(json_object_get(msg, "preload_failed"));
	log_huge_pages(json_object_get(msg, "huge_pages_mib"));
	r = 0;
out:
	json_decref(msg);
	free(buf);
	return r;
}

/* The template's command line: the driver's (box_jail_config) and the
 * modules to preload, each checked again here (an argument that starts
 * with '-' or holds anything but a dotted name never reaches python3). */
static int template_argv(const char *const *base, const char *const *preload,
			 const char **argv, size_t cap, char *err, size_t errlen)
{
	size_t n = 0, k;

	for (; base[n]; n++)
		argv[n] = base[n];
	for (k = 0; preload && preload[k]; k++) {
		if (k >= CONFIG_PRELOAD_MAX || n + 1 >= cap) {
			snprintf(err, errlen, "more than %d modules to preload", CONFIG_PRELOAD_MAX);
			return -EINVAL;
		}
		if (!config_preload_name_ok(preload[k])) {
			snprintf(err, errlen, "'%.*s' is not a module name to preload",
				 CONFIG_PRELOAD_NAME_MAX, preload[k]);
			return -EINVAL;
		}
		argv[n++] = preload[k];
	}
	argv[n] = NULL;
	return 0;
}

int zygote_start(struct jail_host *host, const struct box_config *cfg,
		 const char *const *preload, int cancel_fd, struct zygote **out, char *err,
		 size_t errlen)
{
	/* The mounts and the Python its sandboxes share; never the
	 * environment, which is each session's (zygote_fork()). */
	struct box_config bc = {
		.ro_binds = cfg->ro_binds, .python_path = cfg->python_path,
		.wheelhouse = cfg->wheelhouse, .cache_files = cfg->cache_files,
		.ncache_files = cfg->ncache_files,
	};
	const char *argv[16 + CONFIG_PRELOAD_MAX];
	struct box_jail_parts *parts = NULL;
	struct jail_config jc;
	struct zygote *z;
	int r;

	*out = NULL;
	if (!jail_host_info(host)->privileged) {
		/* A template's main process keeps its capabilities as the
		 * namespace's root, and its sandboxes each become a uid of
		 * their own in its namespace: without root we can map one id,
		 * ours, and an exec as it drops every capability. */
		snprintf(err, errlen, "the warm path needs root: without it only your own "
			 "uid can be mapped into a sandbox");
		return -EOPNOTSUPP;
	}
	if (!jail_host_info(host)->cg_pids) {
		/* Sandboxes of one template are forks of one process
		 * tree: only a pids cgroup of each bounds them apart
		 * (RLIMIT_NPROC, which they get as cold ones do, is a
		 * backstop per user). */
		snprintf(err, errlen, "the warm path needs the pids cgroup controller");
		return -EOPNOTSUPP;
	}
	z = calloc(1, sizeof(*z));
	parts = malloc(sizeof(*parts));
	if (!z || !parts) {
		r = -ENOMEM;
		goto fail;
	}
	template_limits(&bc.limits);
	/* Its forks are the pool's refills: the pool's share of the CPU. */
	bc.limits.cpu_weight = cfg->limits.cpu_weight;
	if ((r = box_jail_config(&bc, &jc, parts, true)) < 0) {
		snprintf(err, errlen, "too many binds");
		goto fail;
	}
	if ((r = template_argv(jc.argv, preload, argv, sizeof(argv) / sizeof(argv[0]),
			       err, errlen)) < 0)
		goto fail;
	jc.argv = argv;
	jc.flags = JAIL_F_TEMPLATE;
	if ((r = jail_spawn(host, &jc, &z->tmpl, err, errlen)) < 0 ||
	    (r = wait_template_ready(z, cancel_fd, err, errlen)) < 0)
		goto fail;
	free(parts);
	*out = z;
	return 0;
fail:
	free(parts);
	zygote_free(z);
	return r;
}

int zygote_fork(struct zygote *z, const struct box_config *cfg, struct box **out,
		char *err, size_t errlen)
{
	struct jail_config jc = { .limits = cfg->limits };
	struct jail *j;
	int r;

	*out = NULL;
	if ((r = jail_fork(z->tmpl, &jc, &j, err, errlen)) < 0 ||
	    (r = box_adopt(j, out, err, errlen)) < 0)
		return r;
	/* The session's variables go straight to its driver, never through
	 * the template, whose memory every later sandbox inherits. */
	if (cfg->env && cfg->env[0] && (r = box_send_env(*out, cfg->env)) < 0) {
		snprintf(err, errlen, "cannot pass the environment: %s", strerror(-r));
		box_free(*out);
		*out = NULL;
	}
	return r;
}

bool zygote_alive(struct zygote *z)
{
	return jail_template_alive(z->tmpl);
}

void zygote_free(struct zygote *z)
{
	if (!z)
		return;
	jail_free(z->tmpl);
	free(z);
}
