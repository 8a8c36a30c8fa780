/* template — the template's side of the warm path: making a sandbox by
 * forking a process that already has the runtime loaded.
 *
 * Runs inside a template sandbox (a jail spawned with JAIL_TEMPLATE),
 * in a fresh child (A) of the template, made by the runtime's own fork()
 * so that the runtime's at-fork bookkeeping ran:
 *
 *   A: unshare(mount, pid, net, ipc, uts); fork B; exit
 *   B: pid 1 of the new pid namespace.  Tells the supervisor its pid
 *      (SCM_CREDENTIALS on the control socket: the kernel translates it
 *      into the supervisor's pid namespace), waits for "go" (the supervisor
 *      has moved it into its cgroup), replaces /proc, /tmp, /work and
 *      /dev/shm, forks the main process C and becomes its reaper.
 *   C: drops every privilege, no_new_privs, Landlock, seccomp, and returns
 *      from template_fork() into the runtime, which serves the session.
 *
 * The five descriptors come from the supervisor (see jail_fork()). */
#ifndef PETRI_TEMPLATE_H
#define PETRI_TEMPLATE_H

#include <stddef.h>
#include <sys/resource.h>

#include "jail/jail.h"
#include "jail/policy.h"

enum { TEMPLATE_NRLIMITS = 8 };

struct template_request {
	int stdout_fd, stderr_fd, ctl_fd, status_fd, sync_fd;
	struct jail_limits limits;	/* sizes of the fresh tmpfs mounts */
	struct {
		int resource;
		struct rlimit lim;
	} rlimits[TEMPLATE_NRLIMITS];
	int nrlimits;
	const char *hostname;
};

/* In A.  Returns 0 in the new sandbox's main process C; A and B never
 * return.  A failure before B exists is reported on the status fd. */
int template_fork(const struct template_request *rq, const struct policy *pol,
		  int landlock_abi);

#endif
