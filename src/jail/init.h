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

/* How a sandbox's processes behave; see jail.h for the warm path. */
enum init_mode {
	INIT_COLD,	/* pid 1 and a main process that execs argv */
	INIT_TEMPLATE,	/* a template: the main process keeps its capabilities
			 * in the user namespace (it makes sandboxes) and has no
			 * seccomp; pid 1 outlives it, for the sandboxes made */
	INIT_FORKED,	/* a sandbox made by a template: pid 1 refreshes the
			 * mounts it inherited; the main process returns to
			 * its caller instead of exec */
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
	uid_t setup_uid;	/* 0 when the userns root is mapped, else JAIL_UID */
	gid_t setup_gid;
	uid_t run_uid;		/* what pid 1 and the main process become: JAIL_UID,
				 * or a template's own uid in its namespace */
	gid_t run_gid;
	/* INIT_FORKED: the sandbox's leased ids in the template's user
	 * namespace.  pid 1 becomes them once its mounts are made, then
	 * makes a user namespace of its own that maps run_uid to them. */
	uid_t lease_uid;
	gid_t lease_gid;
	struct {
		int resource;
		struct rlimit lim;
	} rlimits[INIT_NRLIMITS];
	int nrlimits;
	/* Descriptors of the child's ends. */
	int sync_fd;		/* "go" from the parent; EOF = parent gone */
	int status_fd;		/* records to the parent */
	int stdout_fd, stderr_fd, ctl_fd;
};

/* Entry point of the cloned child (cold and template sandboxes): wait for
 * "go", set up, and become pid 1.  Never returns. */
__attribute__((noreturn)) void init_main(const struct init_args *a);

/* For INIT_FORKED, in a process that is pid 1 of fresh namespaces and in
 * its cgroup already: set up, fork the main process and return 0 in it
 * (with fds 0-3 in place and every privilege dropped); pid 1 never
 * returns.  On failure the error is reported on the status fd and the
 * process exits. */
int init_forked(const struct init_args *a);

/* Report one record on the status fd (async-signal-safe). */
void init_send_record(int fd, char tag, int32_t value, const char *text);

#endif
