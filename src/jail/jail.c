/* jail — the parent side of a sandbox: spawn, watch, kill, free.
 * See the theory of operation in jail.h; the child side is in init.c. */
#include "jail/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "jail/init.h"
#include "jail/landlock.h"
#include "jail/lease.h"
#include "jail/mounts.h"
#include "jail/policy.h"
#include "jail/procs.h"
#include "jail/safe.h"
#include "jail/template.h"
#include "util/log.h"

#define SPAWN_TIMEOUT_MS 10000
#define KILL_WAIT_MS 2000		/* for a pid namespace to go */

/* The sandbox's own filesystems, the host's way into its files
 * (jail_dir_fd()): /work first (jail_work_fd()). */
static const char *const own_dirs[] = { JAIL_WORKDIR, "/tmp", "/dev/shm" };
#define JAIL_DIRS (sizeof(own_dirs) / sizeof(own_dirs[0]))

struct jail_host {
	struct jail_host_info info;
	struct policy policy;
	struct cg_manager *cgm;		/* NULL: rlimits only */
	struct lease_pool *uids;	/* NULL: no range, one uid (not root) */
};

struct jail {
	struct jail_host *host;
	pid_t pid;
	int pidfd;
	int sync_fd;			/* kept open: its EOF tells pid 1 we died */
	int status_fd, stdout_fd, stderr_fd, ctl_fd;
	int dir_fd[JAIL_DIRS];		/* the sandbox's own filesystems (own_dirs) */
	int proc_fd;			/* the sandbox's own /proc (procs.h) */
	int pts_fd;			/* its devpts instance (jail_open_pty()) */
	_Atomic pid_t protected_pid;	/* jail_protect(), or 0 */
	struct cg *cg;
	struct lease lease;		/* the host uid of its processes */
	uid_t uid;			/* that uid (leased or not), and gid */
	gid_t gid;
	bool reaped;
	bool exit_seen;
	struct jail_exit exit;
	struct rusage rusage;		/* of pid 1 and all it reaped */
	/* warm path */
	struct jail *tmpl;		/* the template this was forked from */
	bool is_template;
	pthread_mutex_t fork_lock;	/* one fork request at a time */
	unsigned forks_alive;		/* sandboxes forked and not yet freed */
	bool retired;			/* jail_free()d while forks_alive > 0 */
};

static pthread_mutex_t templates_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- host ------------------------------------------------------------- */

/* Can this process make a user namespace at all? (Debian's
 * kernel.unprivileged_userns_clone, max_user_namespaces = 0, or an outer
 * seccomp policy can each say no.) */
static bool probe_userns(void)
{
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL,
				   NULL, 0);
	int st;

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(0);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Failures that say "cgroups are not this process's to use here" rather
 * than "something is broken": no hierarchy, not ours to write, read-only.
 * Only these fall back to rlimits; the rest fail the start. */
static bool cg_unavailable(int r)
{
	return r == -ENOENT || r == -EACCES || r == -EPERM || r == -EROFS;
}

/* Without root, that the parent exists proves nothing (root may have made
 * it earlier, and mkdir -p then succeeds): make a cgroup with limits and
 * move a process into it, as every sandbox will need. */
static int cg_try(struct cg_manager *m, char *why, size_t whylen)
{
	const struct cg_limits lim = { .memory_bytes = 64u << 20, .pids = 16,
				       .cpu_millicores = 1000 };
	struct cg *cg;
	int go[2], r, st;
	pid_t pid;
	char c;

	if ((r = cg_create(m, &lim, &cg)) < 0) {
		char whose[48] = "";

		if (r == -EACCES || r == -EPERM)
			snprintf(whose, sizeof(whose), " (not delegated to uid %u)",
				 (unsigned)geteuid());
		snprintf(why, whylen, "cgroup v%d: cannot create a cgroup in '%s': %s%s",
			 (int)cg_version(m), cg_parent_dir(m), strerror(-r), whose);
		return r;
	}
	if (pipe2(go, O_CLOEXEC) < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot make a pipe: %s", strerror(errno));
		cg_destroy(cg);
		return r;
	}
	/* The child waits for the pipe's EOF: when we close it, or die. */
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		_exit(read(go[0], &c, 1) < 0);
	}
	close(go[0]);
	r = pid < 0 ? -errno : cg_add_pid(cg, pid);
	if (r < 0)
		snprintf(why, whylen, "cgroup v%d: cannot move a process into cgroup '%s': %s",
			 (int)cg_version(m), cg_path(cg), strerror(-r));
	close(go[1]);
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	cg_destroy(cg);
	return r;
}

/* The cgroup layer: root makes its own parent (cgroup.h); any other user
 * can only use a subtree delegated to it, and finds out by trying.  What
 * is not available leaves h->cgm NULL, the reason in cg_problem: limits
 * fall back to rlimits and the CLI says so.  A real failure is an error. */
static int host_cgroups(struct jail_host *h, const struct jail_host_config *cfg,
			char *err, size_t errlen)
{
	struct jail_host_info *in = &h->info;
	const struct cg_options o = {
		.parent = cfg && cfg->cgroup_parent && *cfg->cgroup_parent ?
			  cfg->cgroup_parent : NULL,
		.delegated = !in->privileged,
		.daemon_weight = cfg ? cfg->daemon_cpu_weight : 0,
	};
	int r = cg_manager_open("/sys/fs/cgroup", &o, &h->cgm, in->cg_problem,
				sizeof(in->cg_problem));

	if (r == 0 && !in->privileged)
		r = cg_try(h->cgm, in->cg_problem, sizeof(in->cg_problem));
	if (r < 0) {
		cg_manager_free(h->cgm);
		h->cgm = NULL;
		if (cg_unavailable(r))
			return 0;
		snprintf(err, errlen, "cgroups: %s", in->cg_problem);
		return r;
	}
	in->cgroup = cg_version(h->cgm);
	in->cg_memory = cg_has_memory(h->cgm);
	in->cg_swap = cg_has_swap(h->cgm);
	in->cg_pids = cg_has_pids(h->cgm);
	in->cg_cpu = cg_has_cpu(h->cgm);
	snprintf(in->cg_parent, sizeof(in->cg_parent), "%s", cg_parent_dir(h->cgm));
	snprintf(in->cg_problem, sizeof(in->cg_problem), "%s", cg_manager_note(h->cgm));
	return 0;
}

int jail_host_init(const struct jail_host_config *cfg, struct jail_host **out,
		   char *err, size_t errlen)
{
	struct jail_host *h;
	struct jail_host_info *in;
	uid_t base = cfg && cfg->uid_base ? cfg->uid_base : JAIL_UID_BASE_DEFAULT;
	uint32_t count = cfg && cfg->uid_count ? cfg->uid_count : JAIL_UID_COUNT_DEFAULT;
	int r;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	in = &h->info;
	in->privileged = geteuid() == 0;
	if (in->privileged) {
		/* The sandbox must not inherit host root's supplementary
		 * groups: setgroups is denied inside, so drop them here. */
		if (setgroups(0, NULL) < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot drop supplementary groups: %s",
				 strerror(errno));
			goto fail;
		}
		in->host_root_uid = base;
		in->host_uid = base + JAIL_UID;
		in->host_gid = base + JAIL_GID;
		in->uid_count = count;
		/* uid_map takes 32-bit ids and (uid_t)-1 means none. */
		if ((uint64_t)in->host_uid + count >= UINT32_MAX) {
			r = -EINVAL;
			snprintf(err, errlen, "the uid range %u+%u goes past 2^32 - 2",
				 (unsigned)in->host_uid, count);
			goto fail;
		}
		if ((r = lease_pool_open(JAIL_LEASE_DIR, in->host_uid, count, &h->uids,
					 err, errlen)) < 0)
			goto fail;
	} else {
		in->host_root_uid = (uid_t)-1;
		in->host_uid = getuid();
		in->host_gid = getgid();
		in->uid_count = 1;
	}
	in->userns = probe_userns();
	if (!in->userns) {
		r = -EPERM;
		snprintf(err, errlen, "user namespaces are not available to this "
			 "process (see /proc/sys/user/max_user_namespaces and "
			 "kernel.unprivileged_userns_clone); petri cannot sandbox");
		goto fail;
	}
	if ((r = policy_build(&h->policy, err, errlen)) < 0)
		goto fail;
	in->seccomp = true;
	in->seccomp_allowed = h->policy.allowed;
	in->landlock_abi = landlock_abi();

	if (cfg && cfg->no_cgroups) {
		snprintf(in->cg_problem, sizeof(in->cg_problem),
			 "cgroups disabled by configuration");
	} else if ((r = host_cgroups(h, cfg, err, errlen)) < 0) {
		goto fail;
	}
	*out = h;
	return 0;
fail:
	jail_host_free(h);
	return r;
}

void jail_host_free(struct jail_host *h)
{
	if (!h)
		return;
	policy_release(&h->policy);
	cg_manager_free(h->cgm);
	lease_pool_free(h->uids);
	free(h);
}

const struct jail_host_info *jail_host_info(const struct jail_host *h)
{
	return &h->info;
}

int jail_host_sweep(struct jail_host *h)
{
	return h->cgm ? cg_sweep(h->cgm) : 0;
}

long jail_host_uids_free(struct jail_host *h)
{
	return h->uids ? lease_count_free(h->uids) : 1;
}

/* A host uid (and gid) for a new sandbox: leased from the range, or ours
 * when there is no range. */
static int take_uid(struct jail_host *h, struct jail *j, char *err, size_t errlen)
{
	int r;

	if (!h->uids) {
		j->uid = h->info.host_uid;
		j->gid = h->info.host_gid;
		return 0;
	}
	if ((r = lease_take(h->uids, &j->lease)) < 0) {
		snprintf(err, errlen, r == -EAGAIN ?
			 "every host uid of the range %u+%u is in use (see uid_count)" :
			 "cannot lease a host uid from %u+%u: %s",
			 (unsigned)h->info.host_uid, h->info.uid_count, strerror(-r));
		return r;
	}
	j->uid = j->lease.uid;
	j->gid = (gid_t)j->lease.uid;
	return 0;
}

/* The id that j's host uid is in a template's user namespace, which maps
 * the whole range from JAIL_UID on. */
static uid_t uid_in_template(const struct jail *j)
{
	return JAIL_UID + (j->uid - j->host->info.host_uid);
}

const char *const *jail_seccomp_allowed(size_t *count)
{
	return policy_allowed_names(count);
}

int jail_seccomp_only(const char *const *names, char *err, size_t errlen)
{
	struct policy pol;
	int r;

	if ((r = policy_build_only(&pol, names, err, errlen)) < 0)
		return r;
	if ((r = policy_load(&pol)) < 0)
		snprintf(err, errlen, "seccomp: cannot load the filter: %s", strerror(-r));
	policy_release(&pol);
	return r;
}

/* ---- spawn ------------------------------------------------------------ */

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* A cold sandbox maps JAIL_UID to its own host uid; a template maps the
 * whole range from JAIL_UID on, for the sandboxes it forks. */
static int write_id_maps(pid_t pid, const struct jail *j, bool whole_range)
{
	const struct jail_host_info *in = &j->host->info;
	uint32_t count = whole_range ? in->uid_count : 1;
	char path[64], map[128];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if ((r = safe_write_file(path, "deny", 4, 0, 0)) < 0)
		return r;
	for (int which = 0; which < 2; which++) {
		unsigned inside = which ? JAIL_GID : JAIL_UID;
		unsigned host = whole_range ? (which ? in->host_gid : in->host_uid) :
				(which ? j->gid : j->uid);

		if (in->host_root_uid != (uid_t)-1)
			snprintf(map, sizeof(map), "0 %u 1\n%u %u %u\n",
				 (unsigned)in->host_root_uid, inside, host, count);
		else
			snprintf(map, sizeof(map), "%u %u 1\n", inside, host);
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid,
			 which ? "gid_map" : "uid_map");
		if ((r = safe_write_file(path, map, strlen(map), 0, 0)) < 0)
			return r;
	}
	return 0;
}

static void add_rlimit(struct init_args *a, int resource, rlim_t soft, rlim_t hard)
{
	a->rlimits[a->nrlimits].resource = resource;
	a->rlimits[a->nrlimits].lim.rlim_cur = soft;
	a->rlimits[a->nrlimits].lim.rlim_max = hard;
	a->nrlimits++;
}

static void plan_rlimits(struct init_args *a, const struct jail_limits *l,
			 const struct jail_host_info *in)
{
	/* Only a backstop: the tmpfs sizes give ENOSPC first, as a full disk
	 * does, and no single file can exceed both mounts together. */
	uint64_t fsize = l->fsize_bytes ? l->fsize_bytes : l->work_bytes + l->tmp_bytes;

	add_rlimit(a, RLIMIT_CORE, 0, 0);
	add_rlimit(a, RLIMIT_MEMLOCK, 64 << 10, 64 << 10);
	add_rlimit(a, RLIMIT_MSGQUEUE, 0, 0);
	/* No real-time scheduling and no nice below 0, whatever the host's
	 * limits: the policy lets sched_setscheduler through because these
	 * leave it only the ordinary policies, which can only lower the
	 * caller's claim on the CPU. */
	add_rlimit(a, RLIMIT_RTPRIO, 0, 0);
	add_rlimit(a, RLIMIT_NICE, 0, 0);
	if (fsize)
		add_rlimit(a, RLIMIT_FSIZE, fsize, fsize);
	if (l->nofile)
		add_rlimit(a, RLIMIT_NOFILE, l->nofile, l->nofile);
	if (l->pids)
		add_rlimit(a, RLIMIT_NPROC, l->pids, l->pids);
	if (l->cpu_seconds)
		add_rlimit(a, RLIMIT_CPU, l->cpu_seconds, l->cpu_seconds + 1);
	/* Without a memory cgroup, cap private writable memory per process:
	 * cruder (a sum over processes can exceed it), but a bound. */
	if (l->memory_bytes && !in->cg_memory)
		add_rlimit(a, RLIMIT_DATA, l->memory_bytes, l->memory_bytes);
}

static int wait_ready(struct jail *j, char *err, size_t errlen)
{
	struct pollfd pfd = { .fd = j->status_fd, .events = POLLIN };
	struct init_record rec;
	ssize_t n;
	int r;

	do
		r = poll(&pfd, 1, SPAWN_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		snprintf(err, errlen, "sandbox set-up timed out");
		return -ETIMEDOUT;
	}
	n = read(j->status_fd, &rec, sizeof(rec));
	if (n == (ssize_t)sizeof(rec) && rec.tag == INIT_READY)
		return 0;
	if (n == (ssize_t)sizeof(rec) && rec.tag == INIT_ERROR) {
		rec.text[sizeof(rec.text) - 1] = '\0';
		snprintf(err, errlen, "sandbox set-up failed: %s", rec.text);
		return -EPROTO;
	}
	snprintf(err, errlen, "sandbox set-up failed: pid 1 exited");
	return -ECHILD;
}

static struct jail *jail_alloc(struct jail_host *host)
{
	struct jail *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->host = host;
	j->pid = -1;
	j->pidfd = j->sync_fd = j->status_fd = j->stdout_fd = -1;
	j->stderr_fd = j->ctl_fd = j->proc_fd = j->pts_fd = -1;
	for (size_t i = 0; i < JAIL_DIRS; i++)
		j->dir_fd[i] = -1;
	j->lease.fd = -1;
	pthread_mutex_init(&j->fork_lock, NULL);
	return j;
}

/* The sandbox's cgroup, with its limits (cold or forked alike). */
static int jail_cgroup(struct jail_host *host, const struct jail_limits *l, struct jail *j,
		       char *err, size_t errlen)
{
	const struct cg_limits lim = {
		.memory_bytes = l->memory_bytes, .pids = l->pids,
		.cpu_millicores = l->cpu_millicores, .cpu_weight = l->cpu_weight,
	};
	int r = cg_create(host->cgm, &lim, &j->cg);

	if (r < 0)
		snprintf(err, errlen, "cannot create a cgroup: %s", strerror(-r));
	return r;
}

/* The five channels between the supervisor and a sandbox.  [0] is the
 * read end of a pipe, [1] the write end; the sandbox keeps sync[0],
 * status[1], out[1], err[1] and ctl[1]. */
struct channels {
	int sync[2], status[2], out[2], err[2], ctl[2];
};

static void channels_init(struct channels *c)
{
	int *fd = &c->sync[0];

	for (size_t i = 0; i < sizeof(*c) / sizeof(int); i++)
		fd[i] = -1;
}

static int channels_open(struct channels *c, int ctl_type, char *err, size_t errlen)
{
	if (pipe2(c->sync, O_CLOEXEC) < 0 || pipe2(c->status, O_CLOEXEC) < 0 ||
	    pipe2(c->out, O_CLOEXEC) < 0 || pipe2(c->err, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, ctl_type | SOCK_CLOEXEC, 0, c->ctl) < 0) {
		snprintf(err, errlen, "cannot create pipes: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* The sandbox has its ends now: close ours of them, and give the jail the
 * supervisor's. */
static void channels_hand_over(struct channels *c, struct jail *j)
{
	close_fd(&c->sync[0]);
	close_fd(&c->status[1]);
	close_fd(&c->out[1]);
	close_fd(&c->err[1]);
	close_fd(&c->ctl[1]);
	j->sync_fd = c->sync[1];
	j->status_fd = c->status[0];
	j->stdout_fd = c->out[0];
	j->stderr_fd = c->err[0];
	j->ctl_fd = c->ctl[0];
	c->sync[1] = c->status[0] = c->out[0] = c->err[0] = c->ctl[0] = -1;
}

static void channels_close(struct channels *c)
{
	int *fd = &c->sync[0];

	for (size_t i = 0; i < sizeof(*c) / sizeof(int); i++)
		close_fd(&fd[i]);
}

/* pid 1 is waiting for "go": put it in its cgroup and start it. */
static int sandbox_go(struct jail *j, char *err, size_t errlen)
{
	int r;

	if (j->cg && (r = cg_add_pid(j->cg, j->pid)) < 0) {
		snprintf(err, errlen, "cannot move the sandbox into its cgroup: %s",
			 strerror(-r));
		return r;
	}
	if (write(j->sync_fd, "g", 1) != 1) {
		snprintf(err, errlen, "cannot start the sandbox: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* After "go": wait until the sandbox is set up, and open its own
 * filesystems (jail_dir_fd()). */
static int sandbox_ready(struct jail *j, char *err, size_t errlen)
{
	char path[64 + sizeof(JAIL_WORKDIR)];
	int r;

	if ((r = wait_ready(j, err, errlen)) < 0)
		return r;
	/* Before any code of the sandbox runs: each is the mount the jail
	 * made, not a link the code planted. */
	for (size_t i = 0; i < JAIL_DIRS; i++) {
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)j->pid, own_dirs[i]);
		j->dir_fd[i] = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (j->dir_fd[i] < 0) {
			snprintf(err, errlen, "cannot open the sandbox's %s: %s", own_dirs[i],
				 strerror(errno));
			return -errno;
		}
	}
	/* Its terminals' devpts, also now: without it, no PTY. */
	snprintf(path, sizeof(path), "/proc/%d/root/dev/pts", (int)j->pid);
	j->pts_fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->pts_fd < 0)
		log_warn("cannot open the devpts of sandbox %d: %s", (int)j->pid, strerror(errno));
	/* Also now.  Without it the sandbox works, but its processes cannot be listed (jail_procs()). */
	if ((r = procs_open(j->pid, &j->proc_fd)) < 0)
		log_warn("cannot open the /proc of sandbox %d: %s", (int)j->pid, strerror(-r));
	{
		int fds[] = { j->status_fd, j->stdout_fd, j->stderr_fd, j->ctl_fd };

		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	}
	return 0;
}

/* Common to both ways of making a sandbox. */
static int start_sandbox(struct jail *j, char *err, size_t errlen)
{
	int r = sandbox_go(j, err, errlen);

	return r < 0 ? r : sandbox_ready(j, err, errlen);
}

int jail_spawn(struct jail_host *host, const struct jail_config *cfg,
	       struct jail **out, char *err, size_t errlen)
{
	const struct jail_host_info *in = &host->info;
	const bool is_template = cfg->flags & JAIL_F_TEMPLATE;
	struct init_args a;
	struct init_epoch epoch;
	struct mount_plan plan = { 0 };
	struct jail *j;
	struct channels ch;
	uid_t run_uid;
	gid_t run_gid;
	int pidfd = -1, r;
	pid_t pid;

	*out = NULL;
	err[0] = '\0';
	channels_init(&ch);
	if (!cfg->argv || !cfg->argv[0] || cfg->argv[0][0] != '/' || !cfg->envp) {
		snprintf(err, errlen, "invalid sandbox program");
		return -EINVAL;
	}
	j = jail_alloc(host);
	if (!j)
		return -ENOMEM;
	if ((r = take_uid(host, j, err, errlen)) < 0)
		goto fail;
	/* A template's user namespace maps the whole range: its own uid is
	 * one of them (its pid 1 runs as it; its main process stays root). */
	run_uid = is_template ? uid_in_template(j) : JAIL_UID;
	run_gid = is_template ? (gid_t)uid_in_template(j) : JAIL_GID;
	/* Before the clone: no process of the sandbox may start before its
	 * clocks do (init.h). */
	init_epoch_now(&epoch);
	if ((r = mount_plan_build(&plan, cfg, run_uid, run_gid,
				  is_template ? epoch.host_btime : epoch.btime)) < 0) {
		snprintf(err, errlen, "cannot plan the sandbox's mounts: %s",
			 strerror(-r));
		goto fail;
	}
	if (host->cgm && (r = jail_cgroup(host, &cfg->limits, j, err, errlen)) < 0)
		goto fail;
	/* A template's control socket keeps message boundaries: each fork
	 * request travels with its descriptors. */
	if ((r = channels_open(&ch, cfg->flags & JAIL_F_TEMPLATE ? SOCK_SEQPACKET :
			       SOCK_STREAM, err, errlen)) < 0)
		goto fail;

	memset(&a, 0, sizeof(a));
	a.mode = cfg->flags & JAIL_F_TEMPLATE ? INIT_TEMPLATE : INIT_COLD;
	a.argv = cfg->argv;
	a.envp = cfg->envp;
	a.hostname = cfg->hostname ? cfg->hostname : "petri";
	a.plan = &plan;
	a.policy = &host->policy;
	a.landlock_abi = in->landlock_abi;
	a.epoch = epoch;
	a.setup_uid = in->host_root_uid != (uid_t)-1 ? 0 : JAIL_UID;
	a.setup_gid = in->host_root_uid != (uid_t)-1 ? 0 : JAIL_GID;
	a.run_uid = run_uid;
	a.run_gid = run_gid;
	plan_rlimits(&a, &cfg->limits, in);
	a.sync_fd = ch.sync[0];
	a.status_fd = ch.status[1];
	a.stdout_fd = ch.out[1];
	a.stderr_fd = ch.err[1];
	a.ctl_fd = ch.ctl[1];

	/* A raw clone: fork semantics (the child runs on a copy of this stack)
	 * straight into the new namespaces; CLONE_PIDFD gives a pidfd that
	 * cannot be confused with a recycled pid. */
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
			     CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
			     CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, 0);
	if (pid < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot clone the sandbox: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		init_main(&a);

	j->pid = pid;
	j->pidfd = pidfd;
	channels_hand_over(&ch, j);
	if ((r = write_id_maps(pid, j, is_template && host->uids)) < 0) {
		snprintf(err, errlen, "cannot write the user namespace's id maps: %s",
			 strerror(-r));
		goto fail;
	}
	if ((r = start_sandbox(j, err, errlen)) < 0)
		goto fail;
	/* The workspace and /proc are open: pid 1 may start the main process
	 * and stop being dumpable (init.c, become_pid1()). */
	if (write(j->sync_fd, "o", 1) != 1) {
		r = -errno;
		snprintf(err, errlen, "cannot start the sandbox: %s", strerror(errno));
		goto fail;
	}
	mount_plan_release(&plan);
	if (is_template) {
		j->is_template = true;
		fcntl(j->ctl_fd, F_SETFL, fcntl(j->ctl_fd, F_GETFL) & ~O_NONBLOCK);
	}
	*out = j;
	return 0;

fail:
	channels_close(&ch);
	mount_plan_release(&plan);
	jail_free(j);
	return r;
}

/* ---- a running sandbox ------------------------------------------------ */

int jail_pidfd(const struct jail *j) { return j->pidfd; }
int jail_stdout_fd(const struct jail *j) { return j->stdout_fd; }
int jail_stderr_fd(const struct jail *j) { return j->stderr_fd; }
int jail_ctl_fd(const struct jail *j) { return j->ctl_fd; }
int jail_status_fd(const struct jail *j) { return j->status_fd; }
int jail_work_fd(const struct jail *j) { return j->dir_fd[0]; }

int jail_dir_fd(const struct jail *j, const char *path, const char **rest)
{
	static const struct {
		const char *name;
		size_t dir;
	} names[] = {
		{ JAIL_WORKDIR, 0 }, { JAIL_HOME_ALIAS, 0 }, { "/tmp", 1 }, { "/dev/shm", 2 },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i].name);

		if (!strncmp(path, names[i].name, n) && (path[n] == '\0' || path[n] == '/')) {
			*rest = path[n] ? path + n + 1 : path + n;
			return j->dir_fd[names[i].dir];
		}
	}
	*rest = NULL;
	return -1;
}

int jail_fork_charged(struct jail *j, int (*fn)(void *arg), void *arg, pid_t *pid)
{
	struct cg_join cj;
	pid_t child;
	int r;

	*pid = -1;
	if (j->cg && (r = cg_join_open(j->cg, &cj)) < 0)
		return r;
	/* A raw clone, as for pid 1: no atfork handlers run in a copy of
	 * threads that may hold their locks. */
	child = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (child == 0) {
		r = j->cg ? cg_join_self(&cj) : 0;
		if (r == 0)
			r = fn(arg);
		_exit(r < 0 && r > -256 ? -r : r ? EIO : 0);
	}
	r = child < 0 ? -errno : 0;
	if (j->cg)
		cg_join_close(&cj);
	*pid = child;
	return r;
}

void jail_protect(struct jail *j, pid_t pid)
{
	atomic_store(&j->protected_pid, pid);
}

int jail_procs(struct jail *j, struct jail_proc *out, size_t max, size_t *total)
{
	return procs_list(j->proc_fd, atomic_load(&j->protected_pid), out, max, total);
}

int jail_proc_signal(struct jail *j, pid_t pid, int sig)
{
	return procs_signal(j->proc_fd, atomic_load(&j->protected_pid), pid, sig);
}

int jail_netns(struct jail *j)
{
	struct pollfd ended = { .fd = j->pidfd, .events = POLLIN };
	char path[64];
	int fd;

	if (j->reaped || j->pidfd < 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)j->pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* Still alive after the open: the pid was the sandbox's then. */
	if (poll(&ended, 1, 0) != 0) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

/* The child that connects ends at once; past this it is killed. */
#define CONNECT_WAIT_MS 5000

struct connect_args {
	int pidfd;
	unsigned short port;
	int back;			/* a socket to the caller */
};

/* In jail_fork_charged()'s child: async-signal-safe calls only. */
static int connect_inside(void *arg)
{
	const struct connect_args *a = arg;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(a->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = "c", .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	int lo = a->pidfd < a->back ? a->pidfd : a->back, hi = a->pidfd ^ a->back ^ lo;
	struct cmsghdr *cm;
	int s;

	/* Inside the sandbox's namespaces it holds nothing of the daemon's
	 * but these two. */
	if (lo > 0)
		syscall(SYS_close_range, 0, (unsigned)lo - 1, 0);
	if (hi > lo + 1)
		syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0);
	syscall(SYS_close_range, (unsigned)hi + 1, ~0U, 0);
	if (setns(a->pidfd, CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return -errno;
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)
		return -errno;
	memset(cbuf, 0, sizeof(cbuf));
	if (!(cm = CMSG_FIRSTHDR(&msg)))
		return -EINVAL;
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &s, sizeof(int));
	return sendmsg(a->back, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int jail_connect(struct jail *j, unsigned short port, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))], byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct connect_args a = { .pidfd = j->pidfd, .port = port };
	struct pollfd ended = { .fd = j->pidfd, .events = POLLIN };
	struct cmsghdr *cm;
	int sp[2], st = 0, r, cfd;
	pid_t child;

	*fd = -1;
	if (j->reaped || j->pidfd < 0)
		return -ESRCH;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	a.back = sp[1];
	r = jail_fork_charged(j, connect_inside, &a, &child);
	close(sp[1]);
	if (r < 0) {
		close(sp[0]);
		return r == -EAGAIN ? -ENOMEM : r;	/* the daemon's clone, not the sandbox */
	}
	/* It makes no call that waits and ends at once; one that does not
	 * (a sandbox's cgroup frozen?) is killed. */
	cfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (cfd >= 0) {
		struct pollfd pfd = { .fd = cfd, .events = POLLIN };

		if (poll(&pfd, 1, CONNECT_WAIT_MS) == 0)
			kill(child, SIGKILL);
		close(cfd);
	}
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	r = WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
	if (r == 0 && recvmsg(sp[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1 &&
	    !(msg.msg_flags & MSG_CTRUNC) && (cm = CMSG_FIRSTHDR(&msg)) &&
	    cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	else if (r == 0)
		r = -EIO;
	close(sp[0]);
	/* The sandbox ended: its pidfd says so (and cannot be joined then);
	 * any other failure is not its end. */
	if (r < 0 && r != -ECONNREFUSED && r != -EAGAIN && poll(&ended, 1, 0) > 0)
		r = -ESRCH;
	else if (r == -EINVAL || r == -ESRCH)
		r = -EIO;
	return r;
}

int jail_open_pty(struct jail *j, int *master, int *slave)
{
	struct open_how how = {
		.flags = O_RDWR | O_NOCTTY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	int m, s, r = 0;
	uid_t old_uid;
	gid_t old_gid;

	*master = *slave = -1;
	if (j->pts_fd < 0)
		return -ENOTTY;
	/* As the sandbox's user: its terminal is its own, as one it opened. */
	old_gid = (gid_t)syscall(SYS_setfsgid, j->gid);
	old_uid = (uid_t)syscall(SYS_setfsuid, j->uid);
	m = (int)syscall(SYS_openat2, j->pts_fd, "ptmx", &how, sizeof(how));
	if (m < 0)
		r = -errno;
	syscall(SYS_setfsuid, old_uid);
	syscall(SYS_setfsgid, old_gid);
	if (m < 0)
		return r == -ENOSPC ? -EAGAIN : r;	/* the instance's max */
	s = ioctl(m, TIOCSPTLCK, &(int){ 0 }) < 0 ? -1 :	/* unlockpt() */
	    ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		r = -errno;
		close(m);
		return r;
	}
	*master = m;
	*slave = s;
	return 0;
}

int jail_oom_score_adj(struct jail *j, pid_t pid, int adj)
{
	return procs_oom_score_adj(j->proc_fd, pid, adj);
}

void jail_owner(const struct jail *j, uid_t *uid, gid_t *gid)
{
	*uid = j->uid;
	*gid = j->gid;
}

int jail_read_status(struct jail *j, struct jail_exit *ex)
{
	struct init_record rec;

	if (j->exit_seen) {
		*ex = j->exit;
		return 1;
	}
	for (;;) {
		ssize_t n = read(j->status_fd, &rec, sizeof(rec));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (n == 0)
			return -EPIPE;	/* pid 1 gone without a word */
		if (n != (ssize_t)sizeof(rec))
			return -EPROTO;
		if (rec.tag == INIT_ERROR) {
			/* A late error: of the main process, or of a forked
			 * sandbox's pid 1 on its way to petri-init. */
			rec.text[sizeof(rec.text) - 1] = '\0';
			log_warn("sandbox %d: %s", (int)j->pid, rec.text);
		}
		if (rec.tag != INIT_EXIT)
			continue;
		j->exit_seen = true;
		j->exit.exited = true;
		j->exit.wstatus = rec.value;
		*ex = j->exit;
		return 1;
	}
}

int jail_signal(struct jail *j, int sig)
{
	if (j->reaped || j->pidfd < 0)
		return -ESRCH;
	if (syscall(SYS_pidfd_send_signal, j->pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}

void jail_stop(struct jail *j)
{
	if (!j->reaped && j->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
}

int jail_kill(struct jail *j)
{
	struct pollfd pfd = { .fd = j->pidfd, .events = POLLIN };
	int r = 0;

	/* pid 1 dying takes every process of its pid namespace with it: wait
	 * for that first (its pidfd turns readable once the namespace is
	 * gone), so that the cgroup pass below normally finds nothing to do.
	 * That pass is for anything that could have left the namespace; on
	 * cgroup v1 it freezes the cgroup, and a daemon killed while a cgroup
	 * is frozen would leave its processes frozen until the next start's
	 * sweep: rare is better. */
	jail_stop(j);
	if (!j->reaped && j->pidfd >= 0)
		while (poll(&pfd, 1, KILL_WAIT_MS) < 0 && errno == EINTR)
			;
	if (j->cg)
		r = cg_kill(j->cg);
	return r;
}

static void reap(struct jail *j)
{
	struct pollfd pfd = { .fd = j->pidfd, .events = POLLIN };
	int st;

	if (j->reaped || j->pid <= 0)
		return;
	if (j->tmpl) {
		/* Not our child: the template's pid 1 reaps it.  The pidfd
		 * says when it is gone. */
		while (poll(&pfd, 1, 5000) < 0 && errno == EINTR)
			;
		j->reaped = true;
		return;
	}
	while (wait4(j->pid, &st, __WALL, &j->rusage) < 0) {
		if (errno != EINTR)
			break;
	}
	j->reaped = true;
}

int jail_usage(struct jail *j, struct jail_usage *u)
{
	struct cg_stats st;
	int r;

	memset(u, 0, sizeof(*u));
	if (j->cg) {
		if ((r = cg_stats(j->cg, &st)) < 0)
			return r;
		u->cpu_ns = st.cpu_ns;
		u->memory_peak = st.memory_peak;
		u->memory_current = st.memory_current;
		u->oom_kills = st.oom_kills;
		u->from_cgroup = true;
		return 0;
	}
	if (j->reaped) {
		u->cpu_ns = (uint64_t)(j->rusage.ru_utime.tv_sec + j->rusage.ru_stime.tv_sec) *
			    1000000000ull +
			    (uint64_t)(j->rusage.ru_utime.tv_usec + j->rusage.ru_stime.tv_usec) * 1000ull;
		u->memory_peak = (uint64_t)j->rusage.ru_maxrss * 1024;
	}
	return 0;
}

int jail_reset_peak(struct jail *j)
{
	return j->cg ? cg_reset_peak(j->cg) : 0;
}

int jail_set_cpu_weight(struct jail *j, uint32_t weight)
{
	return j->cg ? cg_set_cpu_weight(j->cg, weight) : 0;
}

static void jail_destroy(struct jail *j)
{
	bool emptied = true;

	jail_kill(j);
	reap(j);
	if (j->cg && cg_destroy(j->cg) < 0) {
		emptied = false;
		log_warn("a sandbox cgroup could not be removed: its uid %u stays leased",
			 (unsigned)j->uid);
	}
	j->cg = NULL;
	/* Its processes are gone: the uid can serve another sandbox.  When the
	 * cgroup could not be emptied some may still run as that uid, and a
	 * new sandbox given it would share their quotas and could signal
	 * them: the lease (its locked fd) is kept for the daemon's life, and
	 * its file left to the sweep at the next start. */
	if (j->host->uids && emptied)
		lease_drop(j->host->uids, &j->lease);
	close_fd(&j->pidfd);
	close_fd(&j->sync_fd);
	close_fd(&j->status_fd);
	close_fd(&j->stdout_fd);
	close_fd(&j->stderr_fd);
	close_fd(&j->ctl_fd);
	for (size_t i = 0; i < JAIL_DIRS; i++)
		close_fd(&j->dir_fd[i]);
	close_fd(&j->proc_fd);
	close_fd(&j->pts_fd);
	pthread_mutex_destroy(&j->fork_lock);
	free(j);
}

void jail_free(struct jail *j)
{
	struct jail *tmpl = NULL;

	if (!j)
		return;
	pthread_mutex_lock(&templates_lock);
	if (j->is_template && j->forks_alive > 0) {
		/* Its sandboxes live in pid namespaces under the template's
		 * pid 1: stop the template process only, and free the rest
		 * with the last of them. */
		j->retired = true;
		pthread_mutex_unlock(&templates_lock);
		jail_signal(j, SIGTERM);
		return;
	}
	if (j->tmpl && --j->tmpl->forks_alive == 0 && j->tmpl->retired)
		tmpl = j->tmpl;
	pthread_mutex_unlock(&templates_lock);
	jail_destroy(j);
	if (tmpl)
		jail_destroy(tmpl);
}

/* ---- the warm path: sandboxes forked from a template ------------------ */

static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r;

	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r == 0 ? -ETIMEDOUT : 0;
}

/* The fork request (struct template_wire): one message with the five
 * descriptors.  uid is the new sandbox's, as the template's user namespace
 * sees it. */
static int send_fork_request(struct jail *tmpl, const struct jail_config *cfg,
			     uid_t uid, const int fds[5])
{
	struct init_args a;	/* only to compute the rlimits, as for a cold one */
	struct template_wire w;
	char cbuf[CMSG_SPACE(5 * sizeof(int))];
	struct iovec iov = { .iov_base = &w, .iov_len = sizeof(w) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	const char *hostname = cfg->hostname ? cfg->hostname : "petri";

	_Static_assert((int)TEMPLATE_NRLIMITS >= (int)INIT_NRLIMITS, "a fork request holds every rlimit");
	memset(&a, 0, sizeof(a));
	plan_rlimits(&a, &cfg->limits, &tmpl->host->info);
	memset(&w, 0, sizeof(w));
	w.magic = TEMPLATE_WIRE_MAGIC;
	w.uid = uid;
	w.work_bytes = cfg->limits.work_bytes;
	w.tmp_bytes = cfg->limits.tmp_bytes;
	w.inodes = cfg->limits.inodes ? cfg->limits.inodes : 65536;
	w.ptys = cfg->limits.ptys ? cfg->limits.ptys : JAIL_PTYS_DEFAULT;
	w.memory_bytes = cfg->limits.memory_bytes;
	/* All of them, RLIMIT_NPROC too: a forked sandbox has a user namespace
	 * of its own, where the kernel counts its processes apart from every
	 * other sandbox's, so it gets the limits a cold one gets. */
	for (int i = 0; i < a.nrlimits && i < TEMPLATE_NRLIMITS; i++) {
		w.rlimits[i].resource = a.rlimits[i].resource;
		w.rlimits[i].soft = a.rlimits[i].lim.rlim_cur;
		w.rlimits[i].hard = a.rlimits[i].lim.rlim_max;
		w.nrlimits++;
	}
	if (strlen(hostname) >= sizeof(w.hostname))
		return -ENAMETOOLONG;
	memcpy(w.hostname, hostname, strlen(hostname));
	memset(cbuf, 0, sizeof(cbuf));
	c = CMSG_FIRSTHDR(&msg);
	if (!c)
		return -EINVAL;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(5 * sizeof(int));
	memcpy(CMSG_DATA(c), fds, 5 * sizeof(int));
	return sendmsg(tmpl->ctl_fd, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* {"ok": true} or {"ok": false, "error": "..."} from the template. */
static int read_fork_reply(struct jail *tmpl, char *err, size_t errlen)
{
	char buf[4096];
	json_t *reply;
	ssize_t n;
	int r;

	if ((r = wait_readable(tmpl->ctl_fd, SPAWN_TIMEOUT_MS)) < 0) {
		snprintf(err, errlen, "the template did not answer");
		return r;
	}
	n = recv(tmpl->ctl_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0) {
		snprintf(err, errlen, "the template is gone");
		return -EPIPE;
	}
	buf[n] = '\0';
	reply = json_loads(buf, 0, NULL);
	if (json_is_true(json_object_get(reply, "ok"))) {
		json_decref(reply);
		return 0;
	}
	snprintf(err, errlen, "the template refused: %.200s",
		 json_string_value(json_object_get(reply, "error")) ?: "malformed reply");
	json_decref(reply);
	return -EPROTO;
}

/* The new pid 1's pid in our namespace, from the credentials the kernel
 * attached (and translated) to its first byte on the sandbox's control
 * socket.  The template may answer meanwhile: at once when it refuses, or
 * when it forks through a child of its own; a direct fork answers only
 * once pid 1 has left its memory, after "go".  *answered says whether its
 * answer has been read. */
static pid_t receive_pid(struct jail *tmpl, struct jail *j, bool *answered, char *err,
			 size_t errlen)
{
	char cbuf[CMSG_SPACE(sizeof(struct ucred))], byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct pollfd pfd[2] = {
		{ .fd = j->ctl_fd, .events = POLLIN },
		{ .fd = tmpl->ctl_fd, .events = POLLIN },
	};
	struct cmsghdr *c;
	struct ucred cred;
	int r;

	for (;;) {
		do
			r = poll(pfd, *answered ? 1 : 2, SPAWN_TIMEOUT_MS);
		while (r < 0 && errno == EINTR);
		if (r <= 0) {
			snprintf(err, errlen, "the forked sandbox did not report");
			return -ETIMEDOUT;
		}
		if (pfd[0].revents)
			break;
		*answered = true;
		if ((r = read_fork_reply(tmpl, err, errlen)) < 0)
			return r;
	}
	if (recvmsg(j->ctl_fd, &msg, 0) == 1)
		for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
			    c->cmsg_len == CMSG_LEN(sizeof(cred))) {
				memcpy(&cred, CMSG_DATA(c), sizeof(cred));
				if (cred.pid > 0)
					return cred.pid;
			}
	snprintf(err, errlen, "the forked sandbox did not report");
	return -EPROTO;
}

int jail_fork(struct jail *tmpl, const struct jail_config *cfg, struct jail **out,
	      char *err, size_t errlen)
{
	struct channels ch;
	struct jail *j = NULL;
	int one = 1, zero = 0, r;
	bool locked = false, asked = false, answered = false;
	char err2[256];
	pid_t pid;

	*out = NULL;
	err[0] = '\0';
	channels_init(&ch);
	if (!tmpl->is_template || tmpl->retired || !tmpl->host->cgm) {
		snprintf(err, errlen, "not a usable template");
		return -EINVAL;
	}
	j = jail_alloc(tmpl->host);
	if (!j)
		return -ENOMEM;
	if ((r = take_uid(tmpl->host, j, err, errlen)) < 0)
		goto fail;
	if ((r = jail_cgroup(tmpl->host, &cfg->limits, j, err, errlen)) < 0)
		goto fail;
	if ((r = channels_open(&ch, SOCK_STREAM, err, errlen)) < 0)
		goto fail;
	if (setsockopt(ch.ctl[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot ask for credentials: %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_lock(&tmpl->fork_lock);
	locked = true;
	{
		int fds[5] = { ch.out[1], ch.err[1], ch.ctl[1], ch.status[1], ch.sync[0] };

		if ((r = send_fork_request(tmpl, cfg, uid_in_template(j), fds)) < 0) {
			snprintf(err, errlen, "cannot ask the template: %s", strerror(-r));
			goto fail;
		}
	}
	asked = true;
	channels_hand_over(&ch, j);
	if ((pid = receive_pid(tmpl, j, &answered, err, errlen)) < 0) {
		r = pid;
		goto fail;
	}
	setsockopt(j->ctl_fd, SOL_SOCKET, SO_PASSCRED, &zero, sizeof(zero));
	j->pid = pid;
	j->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (j->pidfd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open the forked sandbox: %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_lock(&templates_lock);
	j->tmpl = tmpl;
	tmpl->forks_alive++;
	pthread_mutex_unlock(&templates_lock);
	if ((r = sandbox_go(j, err, errlen)) < 0)
		goto fail;
	if (!answered && (r = read_fork_reply(tmpl, err, errlen)) < 0)
		goto fail;
	answered = true;
	/* The template is free for the next request while this one sets up. */
	pthread_mutex_unlock(&tmpl->fork_lock);
	locked = false;
	if ((r = sandbox_ready(j, err, errlen)) < 0)
		goto fail;
	*out = j;
	return 0;
fail:
	channels_close(&ch);
	jail_free(j);	/* pid 1 sees EOF on "go" and ends: the template resumes */
	if (locked) {
		/* Its answer to this request must not be taken for the next
		 * one's: read it now.  A template that does not answer in
		 * turn is told to end (pid 1 passes SIGTERM on to it; pid 1
		 * itself stays, for the sandboxes it holds), and the pool
		 * starts another. */
		int r2 = asked && !answered ? read_fork_reply(tmpl, err2, sizeof(err2)) : 0;

		if (r2 == -ETIMEDOUT) {
			log_warn("the template lost track of a fork request: stopping it");
			jail_signal(tmpl, SIGTERM);
		}
		pthread_mutex_unlock(&tmpl->fork_lock);
	}
	return r;
}

bool jail_template_alive(struct jail *tmpl)
{
	struct jail_exit ex;

	return !tmpl->retired && jail_read_status(tmpl, &ex) == 0;
}
