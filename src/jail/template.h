/* template — the template's side of the warm path: making a sandbox by
 * forking a process that already has the runtime loaded.
 *
 * Runs inside a template sandbox (a jail spawned with JAIL_TEMPLATE),
 * in the template itself when it is single-threaded, else in a fresh child
 * of it made by the runtime's own fork() (so that every thread's locks are
 * in order), which exits once B has left its memory.  One copy of the
 * template's process is made per sandbox, C:
 *
 *   B: clone(CLONE_VM | CLONE_VFORK, new mount, pid, net, ipc and uts
 *      namespaces): pid 1 of the new pid namespace, running on a stack of
 *      its own in the template's memory while the template waits.  Tells
 *      the supervisor its pid (SCM_CREDENTIALS on the control socket: the
 *      kernel translates it into the supervisor's pid namespace), waits
 *      for "go" (the supervisor has moved it into its cgroup), forks C,
 *      then gives up every privilege, loads the seccomp filter and execs
 *      petri-init (src/jail/pid1.c), which reaps and forwards signals for
 *      the life of the sandbox.  The template goes on at that exec.
 *   C: a copy of the template, resuming in template_fork(): replaces /proc,
 *      /tmp, /work and /dev/shm, becomes the sandbox's leased uid and moves
 *      into a user namespace of its own that maps JAIL_UID to it, reports
 *      ready, drops every privilege, no_new_privs, Landlock, seccomp, and
 *      returns into the runtime, which serves the session.
 *
 * The five descriptors come from the supervisor (see jail_fork()), which
 * hears from B before the template answers its request. */
#ifndef PETRI_TEMPLATE_H
#define PETRI_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "jail/jail.h"
#include "jail/policy.h"

enum { TEMPLATE_NRLIMITS = 12 };

/* A fork request on the template's control socket (SOCK_SEQPACKET): one
 * message of exactly this struct, with the new sandbox's five descriptors
 * attached (stdout, stderr, control, status, sync).  Fixed-size and
 * binary, so that the template answers it without building a Python
 * object: every page the template touches between forks is copied on
 * write once per sandbox.  It carries no session data.  The template
 * answers {"ok": true} or {"ok": false, "error": "..."}. */
#define TEMPLATE_WIRE_MAGIC 0x31746570u	/* "pet1" */
#define TEMPLATE_HOSTNAME_MAX 64

struct template_wire {
	uint32_t magic;
	uint32_t uid;			/* as the template's namespace sees it */
	uint64_t work_bytes, tmp_bytes, inodes;
	uint64_t memory_bytes;		/* what its /proc/meminfo says; 0: the host's */
	uint32_t nrlimits;
	uint32_t ptys;			/* devpts max, 1..JAIL_PTYS_MAX */
	struct {
		int32_t resource;
		uint32_t reserved;	/* 0 */
		uint64_t soft, hard;
	} rlimits[TEMPLATE_NRLIMITS];
	char hostname[TEMPLATE_HOSTNAME_MAX];	/* NUL-terminated */
};

struct template_request {
	int stdout_fd, stderr_fd, ctl_fd, status_fd, sync_fd;
	struct jail_limits limits;	/* sizes of the fresh tmpfs mounts, memory */
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

/* Check a request as the template received it (len bytes, with fds[5])
 * and fill *rq, whose hostname points into *w.  0, or -EINVAL with a
 * reason in err. */
int template_decode(const struct template_wire *w, size_t len, const int fds[5],
		    struct template_request *rq, char *err, size_t errlen);

/* direct: in the template itself (single-threaded only): returns B's pid
 * in the template once B has exec'd petri-init (or died), or -errno.  Not
 * direct: in the template's fresh child, which exits then.  Either way
 * returns 0 in the new sandbox's main process C; B never returns.  A
 * failure in B or C is reported on the status fd. Not reentrant. */
int template_fork(const struct template_request *rq, const struct policy *pol,
		  int landlock_abi, bool direct);

#endif
