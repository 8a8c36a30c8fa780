#include "jail/template.h"

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/init.h"
#include "jail/mounts.h"
#include "jail/safe.h"

/* Tell the supervisor who we are: the kernel writes our pid, as its pid
 * namespace sees it, into the credentials it receives. */
static int send_credentials(int fd)
{
	struct ucred cred = { .pid = getpid(), .uid = geteuid(), .gid = getegid() };
	char cbuf[CMSG_SPACE(sizeof(cred))];
	char byte = 'p';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;

	memset(cbuf, 0, sizeof(cbuf));
	c = CMSG_FIRSTHDR(&msg);
	if (!c)
		return -EINVAL;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof(cred));
	memcpy(CMSG_DATA(c), &cred, sizeof(cred));
	return sendmsg(fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

/* A hostname: letters, digits, '-' and '.', 1 to 63 of them. */
static bool hostname_ok(const char *h, size_t max)
{
	size_t n = strnlen(h, max);

	if (n == 0 || n == max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '.'))
			return false;
	}
	return true;
}

int template_decode(const struct template_wire *w, size_t len, const int fds[5],
		    struct template_request *rq, char *err, size_t errlen)
{
	const char *why = NULL;

	memset(rq, 0, sizeof(*rq));
	if (len != sizeof(*w) || w->magic != TEMPLATE_WIRE_MAGIC)
		why = "not a fork request";
	else if (w->uid < JAIL_UID)
		why = "bad uid";	/* below: the template's own ids */
	else if (w->nrlimits > TEMPLATE_NRLIMITS)
		why = "too many rlimits";
	else if (!hostname_ok(w->hostname, sizeof(w->hostname)))
		why = "bad hostname";
	else if (!w->work_bytes || !w->tmp_bytes || !w->inodes || !w->ptys ||
		 w->ptys > JAIL_PTYS_MAX)
		why = "bad mount sizes";
	for (uint32_t i = 0; !why && i < w->nrlimits; i++) {
		if (w->rlimits[i].resource < 0 || w->rlimits[i].resource >= RLIM_NLIMITS ||
		    w->rlimits[i].reserved || w->rlimits[i].soft > w->rlimits[i].hard)
			why = "bad rlimit";
		rq->rlimits[i].resource = w->rlimits[i].resource;
		rq->rlimits[i].lim.rlim_cur = w->rlimits[i].soft;
		rq->rlimits[i].lim.rlim_max = w->rlimits[i].hard;
	}
	if (why) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	rq->nrlimits = (int)w->nrlimits;
	rq->stdout_fd = fds[0];
	rq->stderr_fd = fds[1];
	rq->ctl_fd = fds[2];
	rq->status_fd = fds[3];
	rq->sync_fd = fds[4];
	rq->limits.work_bytes = w->work_bytes;
	rq->limits.tmp_bytes = w->tmp_bytes;
	rq->limits.inodes = w->inodes;
	rq->limits.ptys = w->ptys;
	rq->limits.memory_bytes = w->memory_bytes;
	rq->hostname = w->hostname;
	rq->uid = w->uid;
	return 0;
}

/* C, right after the jump: register glibc's rseq area again.  The kernel
 * gave B none (CLONE_VM drops it) and so none to its fork C, while glibc
 * in C still believes its thread registered: sched_getcpu() would name
 * the template's CPU at the fork for ever, and a per-CPU rseq section
 * would run unprotected.  The area is the template's copy, in C's memory. */
static void rseq_again(void)
{
	unsigned int len = __rseq_size < 32 ? 32 : __rseq_size;

	if (__rseq_size > 0)
		(void)syscall(SYS_rseq, (char *)__builtin_thread_pointer() + __rseq_offset,
			      len, 0, RSEQ_SIG);
}

/* B's stack, mapped once, with a guard page below it: B runs in the
 * template's memory while the template waits (CLONE_VFORK), and an
 * overflow must fault rather than write over the template's data. */
#define PID1_STACK_SIZE (64u << 10)
static char *pid1_stack_top;

static int pid1_stack(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p;

	if (pid1_stack_top)
		return 0;
	p = mmap(NULL, PID1_STACK_SIZE + (size_t)page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (mprotect(p, (size_t)page, PROT_NONE) < 0) {
		munmap(p, PID1_STACK_SIZE + (size_t)page);
		return -errno;
	}
	pid1_stack_top = p + (size_t)page + PID1_STACK_SIZE;
	return 0;
}

struct fork_ctx {
	const struct init_args *a;
	void *back[5];		/* __builtin_setjmp(): where C resumes */
};

/* B: pid 1 of the new namespaces, in the template's memory.  Tell the
 * supervisor who we are, wait for "go" (we are in the sandbox's cgroup
 * then), fork C, then become petri-init.  System calls only, and glibc's
 * _Fork(): C goes on running the template's code, which needs glibc's
 * bookkeeping of a new process (its thread id above all).  Every signal
 * stays blocked until the exec: the handlers here are the template's. */
static int pid1_entry(void *arg)
{
	struct fork_ctx *ctx = arg;
	const struct init_args *a = ctx->a;
	char err[240];
	sigset_t all;
	pid_t main_pid;
	int r;

	/* Nothing of the template's runs here: its signal handlers are
	 * Python's, in memory we share. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if ((r = send_credentials(a->ctl_fd)) < 0) {
		safe_fail(err, sizeof(err), "cannot send credentials", NULL, -r);
		init_send_record(a->status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	if (init_forked_wait(a) < 0)
		_exit(125);
	/* The sandbox's own clocks, for C, forked next, and for us at the
	 * exec of petri-init (CLONE_VM kept us in the template's). */
	if (init_time_namespace(&a->epoch, err, sizeof(err)) < 0) {
		init_send_record(a->status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	/* Our children must tell us when they end (the template ignores
	 * SIGCHLD; we have our own copy of its dispositions). */
	signal(SIGCHLD, SIG_DFL);
	/* _Fork(): glibc's bookkeeping of the new process (its thread id,
	 * the robust list) without the at-fork handlers, which would run
	 * here in the template's live memory. */
	main_pid = _Fork();
	if (main_pid == 0)
		__builtin_longjmp(ctx->back, 1);	/* C: back to template_fork() */
	if (main_pid < 0) {
		safe_fail(err, sizeof(err), "cannot fork the main process", NULL, errno);
		init_send_record(a->status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	init_forked_pid1(a, main_pid);
}

int template_fork(const struct template_request *rq, const struct policy *pol,
		  int landlock_abi, bool direct)
{
	const int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			  CLONE_NEWUTS;
	/* static: C finds it after the jump, whatever the compiler kept in
	 * registers (B writes nothing to it). */
	static struct fork_ctx ctx;
	static struct init_args a;
	static struct mount_plan plan;
	char err[240];
	pid_t pid;
	int r;

	memset(&a, 0, sizeof(a));
	a.mode = INIT_FORKED;
	a.hostname = rq->hostname ? rq->hostname : "petri";
	a.policy = pol;
	a.landlock_abi = landlock_abi;
	a.sync_fd = rq->sync_fd;
	a.status_fd = rq->status_fd;
	a.stdout_fd = rq->stdout_fd;
	a.stderr_fd = rq->stderr_fd;
	a.ctl_fd = rq->ctl_fd;
	a.run_uid = JAIL_UID;
	a.run_gid = JAIL_GID;
	a.lease_uid = rq->uid;
	a.lease_gid = (gid_t)rq->uid;
	for (int i = 0; i < rq->nrlimits && i < INIT_NRLIMITS; i++) {
		a.rlimits[i].resource = rq->rlimits[i].resource;
		a.rlimits[i].lim = rq->rlimits[i].lim;
		a.nrlimits++;
	}
	/* Before B: no process of the sandbox may start before its clocks
	 * do.  The template keeps the host's clocks (init.c), so these are
	 * the host's. */
	init_epoch_now(&a.epoch);
	if ((r = mount_plan_forked(&plan, &rq->limits, rq->uid, (gid_t)rq->uid,
				   a.epoch.btime)) < 0) {
		if (direct)
			return r;
		safe_fail(err, sizeof(err), "cannot plan the mounts", NULL, -r);
		init_send_record(rq->status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	a.plan = &plan;
	ctx.a = &a;
	if (__builtin_setjmp(ctx.back)) {
		/* C, the sandbox's main process: a copy of the template made
		 * by B's fork(), in B's namespaces and cgroup. */
		rseq_again();
		return init_forked_main(ctx.a);
	}
	/* B shares our memory and we wait until it execs petri-init (or
	 * dies): no copy of this process is made but C. */
	if ((r = pid1_stack()) < 0) {
		mount_plan_release(&plan);
		if (direct)
			return r;
		_exit(125);
	}
	pid = clone(pid1_entry, pid1_stack_top,
		    flags | CLONE_VM | CLONE_VFORK | SIGCHLD, &ctx);
	r = pid < 0 ? -errno : pid;
	mount_plan_release(&plan);
	if (direct)
		return r;
	/* A fresh child of the template: its work is done.  B is reparented
	 * to the template's pid 1, which reaps it. */
	if (r < 0) {
		safe_fail(err, sizeof(err), "cannot create namespaces", NULL, -r);
		init_send_record(rq->status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	_exit(0);
}
