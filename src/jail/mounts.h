/* mounts — the sandbox's filesystem as a plan: a list of operations built
 * by the parent (where allocation is fine), then applied by the child in
 * its new mount namespace with system calls only.
 *
 * The plan describes the new root relative to an empty tmpfs: read-only
 * binds of /usr and a few /etc entries, the /bin, /lib* links as on the
 * host, a synthesized /etc, /dev with five device nodes and a private
 * devpts, a fresh /proc with its dangerous corners masked and the files
 * that move with the neighbours replaced by the sandbox's own, and
 * size-limited tmpfs /tmp, /work and /dev/shm.  Keeping it data makes it
 * testable without namespaces. */
#ifndef PETRI_MOUNTS_H
#define PETRI_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "jail/jail.h"

enum mount_op {
	MOUNT_DIR,	/* mkdir dst (and parents) */
	MOUNT_TMPFS,	/* tmpfs at dst, options in data */
	MOUNT_BIND,	/* host src at dst; read-only unless MOUNT_F_RW */
	MOUNT_PROC,	/* a proc instance of the current pid namespace at dst */
	MOUNT_SYMLINK,	/* symlink: dst -> src */
	MOUNT_FILE,	/* a file at dst holding data[0..len) */
	MOUNT_MASK,	/* hide dst (inside the new root) under an empty ro bind */
	MOUNT_ALIAS,	/* dst shows src, both inside the new root: a writable
			 * bind that keeps src's nosuid and nodev */
	MOUNT_DEVPTS,	/* a devpts instance of the sandbox's own at dst,
			 * options in data */
	MOUNT_FAKE,	/* a read-only file holding data[0..len) over dst (a
			 * file of the new /proc); consecutive entries share
			 * one scratch tmpfs, detached once they are bound */
};

#define MOUNT_F_RW	 (1u << 0)	/* bind stays writable (device nodes) */
#define MOUNT_F_OPTIONAL (1u << 1)	/* skip silently when src is missing */
#define MOUNT_F_DIR	 (1u << 2)	/* src is a directory */
#define MOUNT_F_NOEXEC	 (1u << 3)
#define MOUNT_F_SELF	 (1u << 4)	/* MOUNT_BIND: src is inside the new root */

struct mount_entry {
	enum mount_op op;
	unsigned flags;
	const char *src;
	const char *dst;	/* absolute path inside the sandbox */
	const char *data;
	size_t len;
	mode_t mode;
};

/* The plan owns every string it points to. */
struct mount_plan {
	struct mount_entry *v;
	size_t n, cap;
	char **strings;
	size_t nstrings, capstrings;
};

/* Build the plan for cfg.  uid/gid own the writable tmpfs mounts; btime
 * is what the sandbox's /proc/stat says the machine booted (the start of
 * its own clocks, init.h's struct init_epoch).  Returns 0 or
 * -ENOMEM/-EINVAL (a path in cfg that is not absolute, or that tries to
 * shadow a built-in mount). */
int mount_plan_build(struct mount_plan *plan, const struct jail_config *cfg,
		     uid_t uid, gid_t gid, long long btime);
void mount_plan_release(struct mount_plan *plan);

/* Apply the plan below newroot (an empty, writable tmpfs).  Child side:
 * no allocation.  On failure writes "what: strerror" to err and returns
 * -errno. */
int mount_plan_apply(const struct mount_plan *plan, const char *newroot,
		     char *err, size_t errlen);

/* The whole dance in the child: make mounts private, mount the tmpfs root
 * on a scratch directory, apply the plan, pivot_root into it, detach the
 * old root and make the root read-only. */
int mount_setup_root(const struct mount_plan *plan, char *err, size_t errlen);

/* The mounts a sandbox forked from a template makes for itself: a fresh
 * /proc for its own pid namespace (masked and replaced as in a cold
 * sandbox; lim's memory_bytes is its meminfo, btime as above), a devpts
 * instance of its own and fresh tmpfs /tmp, /work and /dev/shm.
 * Everything else it shares, read-only, with its template. */
int mount_plan_forked(struct mount_plan *plan, const struct jail_limits *lim,
		      uid_t uid, gid_t gid, long long btime);

/* Apply a mount_plan_forked() plan in a new mount namespace that is a copy
 * of the template's: the inherited /proc, /tmp, /work and /dev/shm are
 * detached and replaced.  Child side: no allocation. */
int mount_refresh(const struct mount_plan *plan, char *err, size_t errlen);

/* A human-readable line per entry ("bind-ro /usr -> /usr"), for
 * `petri check --verbose` and tests. */
int mount_plan_describe(const struct mount_plan *plan, char **out);

#endif
