/* cgroup — per-sandbox control groups, for cgroup v2 and cgroup v1.
 *
 * One cg_manager per process knows where cgroups live; one cg per sandbox
 * holds the sandbox's limits and accounting.  Everything is plain file I/O
 * under a filesystem root (normally /sys/fs/cgroup), so the unit tests can
 * point it at a fake tree.
 *
 * Layout.  Sandbox cgroups are named "p<pid>-<starttime>-<seq>" after the
 * petri process that made them (pid and the start time from /proc/<pid>/stat
 * field 22), so that a later petri can tell the cgroups of a crashed
 * predecessor (owner gone) from those of a live neighbour, and sweep them.
 *   v2: <root>/<parent>/p...   with memory, pids, cpu enabled in the
 *       subtree_control of every level from the root down to <parent>.
 *   v1: <root>/<ctrl>/<parent>/p...  for each of memory, pids, cpu, cpuacct
 *       and freezer that is mounted.
 * Default <parent>: v2 "/petri"; v1 the caller's own cgroup in each
 * hierarchy followed by "/petri" (so limits placed on petri itself still
 * hold for its sandboxes).  v2 for a delegate (cg_options.delegated, what an
 * unprivileged petri asks): the caller's own cgroup, which must be
 * delegated to it (writable), followed by "/petri"; the caller first moves
 * itself into "<own>/petri-supervisor", since a v2 cgroup that enables
 * controllers for its children may hold no process itself.  A root petri
 * does the same when systemd marked its cgroup as delegated (Delegate=yes
 * sets the xattr trusted.delegate), so that a unit's limits (MemoryMax=)
 * hold for its sandboxes and stopping the unit reaches them.  So does any
 * petri whose own cgroup is the root of a cgroup namespace other than the
 * host's (a container's: containerd's and docker's default on v2): that
 * root is a cgroup handed over whole, and the kernel applies the same "no
 * internal processes" rule to it as to any non-root cgroup.
 *
 * The sweep trusts /proc/<pid>: use one parent per pid namespace (two
 * petri daemons in different pid namespaces must not share a parent).
 * A cg copies what it needs from its manager and may outlive it.
 *
 * Errors: 0 or a negative errno; messages go to an err buffer where given.
 */
#ifndef PETRI_CGROUP_H
#define PETRI_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/jail.h"

struct cg_manager;
struct cg;

struct cg_limits {
	/* 0: none; swap is capped to the same total.  v1 also caps the TCP
	 * buffers of the cgroup's sockets (memory.kmem.tcp.limit_in_bytes, a
	 * counter of its own there) at CG_TCP_SHARE of it; v2 counts them in
	 * memory.current under the one limit. */
	uint64_t memory_bytes;
	uint32_t pids;			/* 0: none */
	uint32_t cpu_millicores;	/* 0: none; 1000 = one full core */
	/* The cgroup's share of the CPU when CPUs are contended, on v2's
	 * scale (cpu.weight, CG_WEIGHT_MIN..CG_WEIGHT_MAX, the kernel's
	 * default 100); v1 writes cpu.shares, 1024 per 100.  0: the kernel's
	 * default. */
	uint32_t cpu_weight;
};

#define CG_WEIGHT_MIN 1
#define CG_WEIGHT_MAX 10000
#define CG_WEIGHT_DEFAULT 100

#define CG_TCP_SHARE 4		/* v1: TCP buffers <= memory_bytes / 4 */

struct cg_stats {
	uint64_t cpu_ns;
	uint64_t memory_peak;		/* since cg_create() or cg_reset_peak() */
	uint64_t memory_current;
	uint64_t oom_kills;
};

/* Detect the cgroup version and controllers under fs_root and prepare the
 * parent cgroup (mkdir, enable controllers).  parent is a cgroup path like
 * "/petri" (NULL: the default above).  On v2, swap accounting is detected
 * from the parent's memory.swap.max, so a parent of "/" reports none.  A v2
 * tree without any controller is accepted: kill, count and CPU time still
 * work, the cg_has_*() report false and limits fall back to rlimits.
 * Returns -ENOENT (no hierarchy), -EACCES, -EPERM, -EROFS (not ours to
 * change)... with a message when cgroups cannot be used.  Success does
 * not prove that a cgroup can be made and joined (a parent made earlier by
 * root exists, but is not ours): a caller without root tries one. */
int cg_manager_new(const char *fs_root, const char *parent,
		   struct cg_manager **out, char *err, size_t errlen);

/* Which cgroup namespace we run in.  The host's (the kernel's initial
 * one) sees the hierarchy's real root, which may hold processes and enable
 * controllers at once; any other one's root is a cgroup like any other. */
enum cg_ns {
	CG_NS_DETECT,			/* ask cg_ns_detect() */
	CG_NS_INITIAL,
	CG_NS_PRIVATE,
};
/* CG_NS_PRIVATE when /proc/self/ns/cgroup is not the initial cgroup
 * namespace; CG_NS_INITIAL when it is, and when that cannot be told (no
 * such file: a kernel before 4.6 has no cgroup namespaces). */
enum cg_ns cg_ns_detect(void);

struct cg_options {
	const char *parent;		/* as cg_manager_new()'s */
	/* v2 without a parent: nest in our own, delegated cgroup (above) */
	bool delegated;
	/* The text of /proc/self/cgroup to go by; NULL: read it (tests give
	 * their own, to place a fake tree's caller) */
	const char *self_cgroup;
	/* The cgroup namespace to go by; CG_NS_DETECT (0): cg_ns_detect()
	 * (tests say which, for a fake tree) */
	enum cg_ns ns;
	/* v2, nested in our own cgroup: the CPU weight of the leaf petri
	 * moves itself into (petri-supervisor) beside its sandboxes' parent
	 * (the scale of cg_limits.cpu_weight; 0: the kernel's default) */
	uint32_t daemon_weight;
};
int cg_manager_open(const char *fs_root, const struct cg_options *o,
		    struct cg_manager **out, char *err, size_t errlen);
/* What the manager could not have although cgroups work, as a sentence
 * ("other processes share our cgroup ..."), or "". */
const char *cg_manager_note(const struct cg_manager *m);
void cg_manager_free(struct cg_manager *m);
/* How long cg_kill() keeps killing before it gives up on a cgroup that
 * does not empty (a task stuck in the kernel); default 2000 ms.  Applies to
 * the cgroups made (or swept) after the call.  The unit tests shorten it:
 * their fake trees never empty. */
void cg_manager_set_kill_timeout(struct cg_manager *m, unsigned ms);

enum jail_cg_version cg_version(const struct cg_manager *m);
bool cg_has_memory(const struct cg_manager *m);
bool cg_has_swap(const struct cg_manager *m);
bool cg_has_pids(const struct cg_manager *m);
bool cg_has_cpu(const struct cg_manager *m);
/* The directory sandbox cgroups are made in (v1: the memory hierarchy's). */
const char *cg_parent_dir(const struct cg_manager *m);

/* Make a new cgroup with the given limits.  A limit whose controller is
 * missing is skipped (callers fall back to rlimits and say so). */
int cg_create(struct cg_manager *m, const struct cg_limits *lim,
	      struct cg **out);
/* The cgroup's directory (v1: in the memory hierarchy), for tests and logs. */
const char *cg_path(const struct cg *cg);
/* A new CPU weight (as cg_limits.cpu_weight; 0 is refused): the share
 * the cgroup gets from now on.  0 where there is no cpu controller. */
int cg_set_cpu_weight(struct cg *cg, uint32_t weight);
/* Move pid into the cgroup (every hierarchy for v1). */
int cg_add_pid(struct cg *cg, pid_t pid);
/* Fills what it can (a missing file reads as 0) and returns the first
 * error. */
int cg_stats(struct cg *cg, struct cg_stats *st);
/* -EOPNOTSUPP where the kernel cannot reset the peak (v2 before 6.12): the
 * peak then stays "since creation". */
int cg_reset_peak(struct cg *cg);
/* Joining a cgroup from a fresh child of a multi-threaded process (see
 * jail_fork_charged()): the parent opens everything with cg_join_open()
 * before it forks, the child calls only cg_join_self() (system calls on
 * those fds: async-signal-safe), the parent closes its copies with
 * cg_join_close().  Moving a process in bypasses pids.max (the kernel
 * checks it only at fork), so cg_join_self() checks it once the process is
 * in: a cgroup at its limit refuses the newcomer with -EAGAIN.  Unused fds
 * are -1. */
#define CG_JOIN_MAX 5
struct cg_join {
	int procs[CG_JOIN_MAX];		/* cgroup.procs of each hierarchy */
	int pids_max, pids_current;	/* the pids controller's, if any */
};
int cg_join_open(struct cg *cg, struct cg_join *cj);
int cg_join_self(const struct cg_join *cj);
void cg_join_close(struct cg_join *cj);

/* Number of processes in the cgroup, or -errno. */
int cg_count_procs(struct cg *cg);
/* SIGKILL every process in the cgroup until it is empty (v2: cgroup.kill;
 * v1: freeze, kill, thaw, repeat).  -EBUSY if still not empty at the
 * manager's kill timeout (cg_manager_set_kill_timeout()). */
int cg_kill(struct cg *cg);
/* cg_kill(), rmdir every directory, free.  Returns -EBUSY (and still frees)
 * if a directory could not be removed.  NULL is allowed. */
int cg_destroy(struct cg *cg);

/* Kill and remove sandbox cgroups under the parent whose owner process is
 * gone.  Returns how many were removed, or -errno. */
int cg_sweep(struct cg_manager *m);

#endif
