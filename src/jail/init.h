/* init — the sandbox side of jail_spawn(): pid 1 of the new pid namespace
 * and the set-up of the main process before it execs.  Everything here
 * runs in a copy of the caller made by clone(): system calls only, on data
 * the parent prepared in struct init_args. */
#ifndef PETRI_INIT_H
#define PETRI_INIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "jail/jail.h"
#include "jail/mounts.h"
#include "jail/policy.h"

/* Records pid 1 writes on the status pipe; each is one atomic write. */
enum init_tag {
	INIT_READY = 'R',	/* root set up, main process being started */
	INIT_ERROR = 'E',	/* set-up failed; text says why */
	INIT_EXIT = 'X',	/* main process exited; value = wait status */
};

struct init_record {
	char tag;
	int32_t value;
	char text[247];
};

enum { INIT_NRLIMITS = 12 };

/* The start of a sandbox's own clocks, taken once before its first
 * process exists (before the daemon clones a cold sandbox, before the
 * template clones a warm one's pid 1).  Its time namespace moves
 * CLOCK_MONOTONIC and CLOCK_BOOTTIME back by mono and boot seconds, so
 * that /proc/uptime, the start times in /proc/PID/stat and both clocks
 * begin near zero there instead of telling the host's boot time, which
 * is the same in every sandbox of a boot and so links sessions as
 * boot_id would. */
struct init_epoch {
	long long mono, boot;	/* seconds of each clock at the start */
	long long btime;	/* the sandbox's boot, in its /proc/stat:
				 * CLOCK_REALTIME less its own boot time */
	long long host_btime;	/* the host's boot, for a template, which
				 * keeps the host's clocks */
};

/* Read the clocks now. */
void init_epoch_now(struct init_epoch *e);

/* Make the time namespace of e for our children (unshare(CLONE_NEWTIME),
 * its offsets written): the next process we fork, or we at our next
 * execve, enter it.  Needs CAP_SYS_ADMIN and CAP_SYS_TIME in our user
 * namespace; a kernel without time namespaces (CONFIG_TIME_NS, Linux
 * 5.6) is not an error: the clocks then stay the host's.  0, or -errno
 * with err filled in. */
int init_time_namespace(const struct init_epoch *e, char *err, size_t errlen);

/* How a sandbox's processes behave; see jail.h for the warm path. */
enum init_mode {
	INIT_COLD,	/* pid 1 and a main process that execs argv */
	INIT_TEMPLATE,	/* a template: the main process keeps its capabilities
			 * in the user namespace (it makes sandboxes) and has no
			 * seccomp; pid 1 outlives it, for the sandboxes made */
	INIT_FORKED,	/* a sandbox made by a template: the main process
			 * refreshes the mounts it inherited and returns to its
			 * caller instead of exec; pid 1 execs petri-init */
};

struct init_args {
	enum init_mode mode;
	const char *const *argv;	/* INIT_COLD and INIT_TEMPLATE */
	const char *const *envp;
	const char *hostname;
	const struct mount_plan *plan;	/* the root (cold, template) or the
					 * per-sandbox mounts (forked) */
	const struct policy *policy;
	int landlock_abi;
	struct init_epoch epoch;	/* INIT_COLD: pid 1 makes its time
					 * namespace (INIT_FORKED: B does, in
					 * template.c) */
	uid_t setup_uid;	/* 0 when the userns root is mapped, else JAIL_UID */
	gid_t setup_gid;
	uid_t run_uid;		/* what pid 1 and the main process become: JAIL_UID,
				 * or a template's own uid in its namespace */
	gid_t run_gid;
	/* INIT_FORKED: the sandbox's leased ids in the template's user
	 * namespace.  The main process becomes them once the mounts are
	 * made, then makes a user namespace of its own that maps run_uid to
	 * them; pid 1 becomes them, and stays in the template's. */
	uid_t lease_uid;
	gid_t lease_gid;
	struct {
		int resource;
		struct rlimit lim;
	} rlimits[INIT_NRLIMITS];
	int nrlimits;
	/* Descriptors of the child's ends. */
	int sync_fd;		/* "go" from the parent, then (cold, template)
				 * "opened" after READY; EOF = parent gone */
	int status_fd;		/* records to the parent */
	int stdout_fd, stderr_fd, ctl_fd;
};

/* Entry point of the cloned child (cold and template sandboxes): wait for
 * "go", set up, and become pid 1.  Never returns. */
__attribute__((noreturn)) void init_main(const struct init_args *a);

/* INIT_FORKED (template.c): a sandbox forked from a template is made of
 * B, pid 1 of its fresh namespaces, cloned with the template's memory
 * (CLONE_VM), and C, B's fork, the one copy of the template's process.
 *
 * In B: wait for "go" (the supervisor has moved B into its cgroup):
 * 0, or -EPIPE if the supervisor is gone. */
int init_forked_wait(const struct init_args *a);

/* In B, once C is forked: give up every privilege and exec petri-init
 * (JAIL_PID1_PATH, src/jail/pid1.c), which serves as pid 1 for the life
 * of the sandbox.  Never returns; a failure is reported on the status fd
 * and kills C. */
__attribute__((noreturn)) void init_forked_pid1(const struct init_args *a, pid_t main_pid);

/* In C: set up the namespaces (they are B's, and so C's), report ready
 * and return 0 with fds 0-3 in place and every privilege dropped.  On
 * failure the error is reported on the status fd and the process exits. */
int init_forked_main(const struct init_args *a);

/* Report one record on the status fd (async-signal-safe). */
void init_send_record(int fd, char tag, int32_t value, const char *text);

#endif
