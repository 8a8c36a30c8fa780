#include "jail/template.h"

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
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

int template_fork(const struct template_request *rq, const struct policy *pol,
		  int landlock_abi, bool direct)
{
	const int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			  CLONE_NEWUTS;
	struct init_args a;
	struct mount_plan plan;
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
	if ((r = mount_plan_forked(&plan, &rq->limits, rq->uid, (gid_t)rq->uid)) < 0) {
		safe_fail(err, sizeof(err), "cannot plan the mounts", NULL, -r);
		goto fail;
	}
	a.plan = &plan;
	if (direct) {
		/* pid 1 straight from the template: a raw clone, fork semantics,
		 * into the new namespaces.  Safe because the template is single
		 * threaded (the caller checks): no lock can be held by a thread
		 * that the copy lacks. */
		pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
		if (pid < 0) {
			r = -errno;
			mount_plan_release(&plan);
			return r;
		}
		if (pid > 0) {
			mount_plan_release(&plan);
			return pid;
		}
	} else {
		if (unshare(flags) < 0) {
			safe_fail(err, sizeof(err), "cannot create namespaces", NULL, errno);
			goto fail;
		}
		pid = fork();	/* B: pid 1 of the new pid namespace */
		if (pid < 0) {
			safe_fail(err, sizeof(err), "cannot fork pid 1", NULL, errno);
			goto fail;
		}
		if (pid > 0)
			_exit(0);	/* A's work is done; B is reparented to the
					 * template's pid 1, which reaps it */
	}
	if ((r = send_credentials(rq->ctl_fd)) < 0) {
		safe_fail(err, sizeof(err), "cannot send credentials", NULL, -r);
		goto fail;
	}
	return init_forked(&a);
fail:
	init_send_record(rq->status_fd, INIT_ERROR, 0, err);
	_exit(125);
}
