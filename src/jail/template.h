/* template — the template's side of the warm path: making a sandbox by
 * forking a process that already has the runtime loaded.
 *
 * Runs inside a template sandbox (a jail spawned with JAIL_TEMPLATE).
 * Directly, when the template is single-threaded: a raw clone of the
 * template into new mount, pid, net, ipc and uts namespaces is B.  Else in
 * a fresh child (A) of the template, made by the runtime's own fork() so
 * that every thread's locks are in order:
 *
 *   A: unshare(mount, pid, net, ipc, uts); fork B; exit
 *
 *   B: pid 1 of the new pid namespace.  Tells the supervisor its pid
 *      (SCM_CREDENTIALS on the control socket: the kernel translates it
 *      into the supervisor's pid namespace), waits for "go" (the supervisor
 *      has moved it into its cgroup), replaces /proc, /tmp, /work and
 *      /dev/shm, becomes the sandbox's leased uid and moves into a user
 *      namespace of its own that maps JAIL_UID to it, forks the main
 *      process C and becomes its reaper.
 *   C: drops every privilege, no_new_privs, Landlock, seccomp, and returns
 *      from template_fork() into the runtime, which serves the session.
 *
 * The five descriptors come from the supervisor (see jail_fork()). */
#ifndef PETRI_TEMPLATE_H
#define PETRI_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#include "jail/jail.h"
#include "jail/policy.h"

enum { TEMPLATE_NRLIMITS = 12 };

struct template_request {
	int stdout_fd, stderr_fd, ctl_fd, status_fd, sync_fd;
	struct jail_limits limits;	/* sizes of the fresh tmpfs mounts */
	struct {
		int resource;
		struct rlimit lim;
	} rlimits[TEMPLATE_NRLIMITS];
	int nrlimits;
	const char *hostname;
	/* The sandbox's leased uid (and gid), as the template's user namespace
	 * sees it: it owns the new tmpfs mounts, and pid 1 becomes it before
	 * making the sandbox's own user namespace (see init.h). */
	uid_t uid;
};

/* direct: in the template itself (single-threaded only): returns B's pid
 * in the template, or -errno.  Not direct: in A.  Either way returns 0 in
 * the new sandbox's main process C; A and B never return.  A failure in A
 * or B is reported on the status fd. */
int template_fork(const struct template_request *rq, const struct policy *pol,
		  int landlock_abi, bool direct);

#endif
