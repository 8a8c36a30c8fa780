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

enum { INIT_NRLIMITS = 8 };

struct init_args {
	const char *const *argv;
	const char *const *envp;
	const char *hostname;
	const struct mount_plan *plan;
	const struct policy *policy;
	int landlock_abi;
	uid_t setup_uid;	/* 0 when the userns root is mapped, else JAIL_UID */
	gid_t setup_gid;
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

/* Entry point of the cloned child.  Never returns. */
__attribute__((noreturn)) void init_main(const struct init_args *a);

#endif
