/* jail — make a sandbox, watch it, destroy it.  The only header of src/jail/
 * that the rest of petri includes.  The jail knows nothing of sessions,
 * languages or results: it runs one program (argv) as the main process of a
 * fresh sandbox and hands back file descriptors to talk to it.
 *
 * Theory of operation
 * -------------------
 *
 *   supervisor (caller)                 sandbox
 *   -------------------                 -------
 *   jail_spawn():
 *     lease a host uid (see below),
 *     create the cgroup, set limits
 *     clone(NEWUSER|NEWNS|NEWPID|       pid 1 ("init", a fork of the caller)
 *           NEWNET|NEWIPC|NEWUTS) ---->   waits for "go" on the sync pipe
 *     write uid_map/gid_map,
 *     move pid 1 into the cgroup,
 *     send "go" ---------------------->   becomes uid 0 (or 1000) of the userns
 *                                         unshare(NEWCGROUP): the cgroup root
 *                                         is now the sandbox's own cgroup
 *                                         mount propagation private; build a
 *                                         tmpfs root; pivot_root; old root
 *                                         detached; hostname; loopback up
 *                                   <---  "ready" on the status pipe
 *     open /proc/<pid1>/root/work
 *     (the workspace, for file I/O)
 *     and its /proc; "opened" -------->   fork the main process:
 *                                           setsid, fds 0-3, rlimits, caps
 *                                           dropped, uid 1000, no_new_privs,
 *                                           Landlock, seccomp, execve(argv)
 *                                         pid 1 drops its own privileges and
 *                                         seccomp, then reaps zombies and
 *                                         forwards signals to the main process
 *   read stdout/stderr/ctl  <---------    main process talks on fds 1, 2, 3
 *                                         when the main process exits, pid 1
 *                           <---------    reports its wait status, kills
 *                                         everything left and exits
 *   jail_free(): SIGKILL pid 1 (the kernel kills the whole pid namespace),
 *   kill what is left in the cgroup, reap, rmdir the cgroup, give the
 *   uid back.
 *
 * The child side runs between clone() and execve() in a copy of a possibly
 * multi-threaded caller: it uses no malloc and no stdio, only system calls
 * on data prepared by the parent.  PR_SET_PDEATHSIG follows the *thread*
 * that called jail_spawn(): call it from a thread that outlives the sandbox.
 *
 * Errors: functions return 0 or a negative errno; where a message helps, it
 * is written to the caller's `err` buffer (always NUL-terminated).
 */
#ifndef PETRI_JAIL_H
#define PETRI_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The uid and gid of the code inside every sandbox, and its name. */
#define JAIL_UID 1000
#define JAIL_GID 1000
#define JAIL_USER "sandbox"

/* Host ids.  As root, every live sandbox (a template too) runs as a host
 * uid, and the gid of the same number, of its own: leased (src/jail/lease.h)
 * from [uid_base + JAIL_UID, uid_base + JAIL_UID + uid_count), so that no
 * two sandboxes share the kernel's per-user quotas, whichever daemon of the
 * host made them.  The namespace's root, used only while a sandbox is set
 * up (and by a template's main process), maps to uid_base.  Without root
 * there is one host uid, ours, for every sandbox. */
#define JAIL_UID_BASE_DEFAULT 2000000000u
#define JAIL_UID_COUNT_DEFAULT 65536u
#define JAIL_UID_COUNT_MAX 1000000u
/* Where the workspace is mounted inside; the main process starts there. */
#define JAIL_WORKDIR "/work"
#define JAIL_HOME_ALIAS "/home/user"	/* JAIL_WORKDIR again, by E2B's name */
/* pid 1 of a sandbox forked from a template (src/jail/pid1.c): a template's
 * jail_config must carry it among its files, executable and not readable
 * to the sandbox (mode 0711). */
#define JAIL_PID1_PATH "/opt/petri/petri-init"

struct jail_limits {
	uint64_t memory_bytes;	/* cgroup memory limit, swap included; 0: none */
	uint32_t pids;		/* cgroup pids.max and RLIMIT_NPROC; 0: none */
	uint32_t cpu_millicores;/* CPU quota, 1000 = one core; 0: none */
	uint32_t cpu_weight;	/* share when contended, cgroup.h's scale; 0: none */
	uint64_t work_bytes;	/* size of the /work tmpfs */
	uint64_t tmp_bytes;	/* size of the /tmp tmpfs (and /dev/shm) */
	uint64_t inodes;	/* inode cap of each writable tmpfs */
	uint64_t fsize_bytes;	/* RLIMIT_FSIZE; 0: work_bytes + tmp_bytes */
	uint32_t nofile;	/* RLIMIT_NOFILE */
	uint32_t cpu_seconds;	/* RLIMIT_CPU per process; 0: none */
	uint32_t ptys;		/* max of its devpts instance; 0: JAIL_PTYS_DEFAULT */
};

/* Ptys of one sandbox: enough for a few terminals (E2B's pty API, expect,
 * script), small enough that the host's shared table holds every sandbox's
 * (src/session/tables.h). */
#define JAIL_PTYS_DEFAULT 16
#define JAIL_PTYS_MAX 1024

/* A file synthesized into the read-only root, e.g. the runtime driver. */
struct jail_file {
	const char *path;	/* absolute path inside the sandbox */
	const void *data;
	size_t len;
	mode_t mode;
};

struct jail_config {
	const char *const *argv;	/* argv[0] is an absolute path inside */
	const char *const *envp;
	struct jail_limits limits;
	const struct jail_file *files;
	size_t nfiles;
	/* NULL-terminated host paths bound read-only at the same path inside,
	 * on top of the built-in ones (/usr and a few /etc entries). */
	const char *const *ro_binds;
	const char *hostname;		/* NULL: "petri" */
	unsigned flags;			/* JAIL_F_* */
};

/* A template: its main process keeps its capabilities inside the user
 * namespace and has no seccomp filter (it makes sandboxes, see
 * jail_fork()); it must run no untrusted code.  Its pid 1 outlives it, for
 * the sandboxes it made.  Its control socket is SOCK_SEQPACKET. */
#define JAIL_F_TEMPLATE (1u << 0)

/* What this host can do; filled by jail_host_init(). */
enum jail_cg_version { JAIL_CG_NONE = 0, JAIL_CG_V1 = 1, JAIL_CG_V2 = 2 };

struct jail_host_info {
	bool userns;			/* user namespaces usable */
	bool privileged;		/* we can map a range of host ids */
	enum jail_cg_version cgroup;
	bool cg_memory, cg_swap, cg_pids, cg_cpu;
	char cg_parent[512];		/* where sandbox cgroups are made */
	/* Why cgroups are off (cgroup NONE: limits are rlimits), or what of
	 * them is missing although they are on; "" when nothing is. */
	char cg_problem[512];
	int landlock_abi;		/* 0: not available */
	bool seccomp;
	unsigned seccomp_allowed;	/* syscalls on the allow-list */
	uid_t host_uid;			/* first host uid of the sandboxes' range */
	gid_t host_gid;
	uint32_t uid_count;		/* its size: 1 without root (no leases) */
	uid_t host_root_uid;		/* host uid of the userns root; -1: unmapped */
};

struct jail_host_config {
	/* When petri runs as root: the host uid and gid of the namespace's
	 * root; sandboxes lease theirs from uid_count ids starting at
	 * uid_base + JAIL_UID (see above).  0: the defaults. */
	uid_t uid_base;
	uint32_t uid_count;
	/* Where to create cgroups; NULL or "": detect. */
	const char *cgroup_parent;
	/* The CPU weight of the daemon's own cgroup where it makes one (cgroup
	 * v2 nested in its own, delegated cgroup: cgroup.h); 0: the kernel's */
	uint32_t daemon_cpu_weight;
	/* Do not use cgroups even if available (rlimits only). */
	bool no_cgroups;
};

struct jail_host;
struct jail;

/* Probe the host once per process.  On success *out owns the context; free
 * it with jail_host_free().  A host whose cgroups this process cannot use
 * (none mounted; without root, no delegated subtree: not writable, or
 * read-only) still succeeds: limits fall back to rlimits, info says so
 * (cgroup JAIL_CG_NONE, cg_problem).  Without root it proves the cgroups
 * by making one and moving a process into it.  Any other cgroup failure,
 * and a host without user namespaces or seccomp, fail with a message in
 * err. */
int jail_host_init(const struct jail_host_config *cfg, struct jail_host **out,
		   char *err, size_t errlen);
void jail_host_free(struct jail_host *host);
const struct jail_host_info *jail_host_info(const struct jail_host *host);

/* Remove cgroups left by petri processes that no longer run.  Returns the
 * number removed or a negative errno. */
int jail_host_sweep(struct jail_host *host);
/* How many host uids of the range are free (held by no live sandbox of
 * any daemon), or -errno. */
long jail_host_uids_free(struct jail_host *host);

/* Spawn a sandbox running cfg->argv.  Blocks until the sandbox is set up
 * (a few milliseconds) or failed.  On success *out owns the sandbox. */
int jail_spawn(struct jail_host *host, const struct jail_config *cfg,
	       struct jail **out, char *err, size_t errlen);

/* A pidfd for the sandbox's pid 1 (readable when it has exited).  The jail
 * owns the descriptors below; never close them. */
int jail_pidfd(const struct jail *j);
int jail_stdout_fd(const struct jail *j);	/* main process's fd 1 */
int jail_stderr_fd(const struct jail *j);	/* main process's fd 2 */
int jail_ctl_fd(const struct jail *j);		/* socket to fd 3 inside */
int jail_status_fd(const struct jail *j);	/* see jail_read_status() */
/* A directory fd of /work inside the sandbox, for file transfers. Resolve
 * paths under it with openat2(RESOLVE_IN_ROOT) only. */
int jail_work_fd(const struct jail *j);
/* The sandbox's own filesystems, each a tmpfs of its own: /work (also by
 * its name JAIL_HOME_ALIAS), /tmp and /dev/shm.  For an absolute path as
 * the sandbox names it (matched by its first components only: check it
 * before resolving *rest), the
 * directory fd of the one that holds it, with *rest its part below ("" for
 * the directory itself); -1 for a path on none of them (the read-only
 * system, /proc, /dev).  Resolve *rest under the fd with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_XDEV) only. */
int jail_dir_fd(const struct jail *j, const char *path, const char **rest);
/* The host uid and gid that the sandbox's user (JAIL_UID) is: the owner of
 * its files as the host sees them. */
void jail_owner(const struct jail *j, uid_t *uid, gid_t *gid);

/* Run fn(arg) in a new short-lived process charged to the sandbox: it joins
 * the sandbox's cgroups (every hierarchy) before fn runs, so what fn makes
 * (tmpfs pages of a file it writes into /work, say) counts against the
 * sandbox's memory limit and not the caller's, and it counts against the
 * sandbox's pids limit.  It stays in the host's namespaces with the
 * caller's credentials: fn narrows them itself (setfsuid...).  fn runs in
 * the child of a possibly multi-threaded caller: async-signal-safe calls
 * only (system calls on data prepared before the call, no malloc, no
 * stdio).  fn's 0 or -errno becomes the exit code as the positive errno.
 * On success *pid is the child, which the caller must reap with waitpid();
 * it exits with EAGAIN before fn runs when the sandbox is at its pids
 * limit.  Without cgroups (rlimits only) fn runs uncharged.  Killing the
 * sandbox (jail_kill, a cgroup OOM kill) kills the child too. */
int jail_fork_charged(struct jail *j, int (*fn)(void *arg), void *arg, pid_t *pid);

/* The main process has exited: how.  */
struct jail_exit {
	bool exited;		/* main process gone (status valid) */
	int wstatus;		/* as from waitpid() */
};

/* Read what pid 1 reported on the status fd (non-blocking).  Returns 1 if
 * the main process's exit was read into *ex, 0 if nothing yet, or -errno. */
int jail_read_status(struct jail *j, struct jail_exit *ex);

/* Deliver sig to the main process (pid 1 forwards it).  -ESRCH if gone. */
int jail_signal(struct jail *j, int sig);
/* Kill every process of the sandbox now and wait until the cgroup is empty.
 * Idempotent. */
int jail_kill(struct jail *j);
/* SIGKILL the sandbox's pid 1, which takes its whole pid namespace with it,
 * without waiting: the fast first half of jail_kill(). */
void jail_stop(struct jail *j);

/* The processes of a sandbox, numbered as the sandbox numbers them.  pid 1
 * is its init, and the main process is always pid 2: pid 1 forks it before
 * anything else runs in the namespace, and the sandbox ends with it. */
#define JAIL_INIT_PID 1
#define JAIL_MAIN_PID 2
#define JAIL_PROCS_MAX 1024	/* described by one jail_procs(), at most */
#define JAIL_PROC_CMD_MAX 512	/* bytes of a command line kept */

struct jail_proc {
	pid_t pid;
	pid_t ppid;		/* 0: none in the sandbox (pid 1's parent) */
	char state;		/* /proc/PID/stat's letter: R S D Z T t X I ... */
	uint32_t threads;
	char name[16];		/* the kernel's command name: any bytes, NUL-ended */
	/* The command line, each argument NUL-terminated as the process left
	 * it (a process may rewrite it: any bytes); at most
	 * JAIL_PROC_CMD_MAX bytes, cut says it was longer. */
	char cmd[JAIL_PROC_CMD_MAX];
	size_t cmd_len;
	bool cmd_cut;
	double started_at;	/* seconds since the epoch */
	double elapsed_s;
	uint64_t rss_bytes;
	uint64_t cpu_ns;	/* user + system */
};

/* Name a process of the sandbox (its number inside) that is petri's, as
 * pid 1 and the main process are: the interpreter the main process forks
 * (runtime/driver.py).  jail_procs() leaves it out and jail_proc_signal()
 * refuses it.  Any thread; the last one named counts. */
void jail_protect(struct jail *j, pid_t pid);

/* The sandbox's processes other than pid 1, the main process and the
 * process jail_protect() named, in the order of their pids: at most max (<= JAIL_PROCS_MAX) described into out,
 * *total says how many there were.  Reads the sandbox's own /proc (see
 * src/jail/procs.h), bounded in what it reads of each; a process that ends
 * meanwhile is left out.  Returns the number described, or -errno
 * (-EOPNOTSUPP: this sandbox's /proc could not be opened).  Any thread may
 * call it and jail_proc_signal() while another runs an execution. */
int jail_procs(struct jail *j, struct jail_proc *out, size_t max, size_t *total);
/* Send sig to the process pid of the sandbox (its number inside).  0;
 * -ESRCH when the sandbox has no such process (a thread of one is not
 * one); -EPERM for pid 1, the main process and the one jail_protect()
 * named.  Never reaches a process outside the sandbox. */
int jail_proc_signal(struct jail *j, pid_t pid, int sig);
/* A terminal of the sandbox's own devpts instance (its limits' ptys at
 * most), opened as its user: the master for the host, the slave for a
 * process of the sandbox.  0; -EAGAIN (the instance is full), -ENOTTY (no
 * devpts), -errno. */
int jail_open_pty(struct jail *j, int *master, int *slave);
/* A TCP connection to 127.0.0.1:port as the sandbox's network namespace
 * has it (a server its code runs), made by a short-lived child charged to
 * the sandbox (jail_fork_charged()) that joins its user and network
 * namespaces through its pidfd, and handed back: *fd, non-blocking, its
 * connect possibly still in progress (poll for POLLOUT, then SO_ERROR).
 * 0; -ECONNREFUSED (nothing listens there), -EAGAIN (the sandbox is at
 * its pids limit), -ESRCH (it ended), -errno. */
int jail_connect(struct jail *j, unsigned short port, int *fd);
/* A descriptor of the sandbox's network namespace (for the router,
 * src/net/router.h, to give it a link), the caller's to close.  Opened by
 * the host pid of the sandbox's pid 1 and then checked against its pidfd,
 * so a recycled pid is never taken for it.  fd or -errno (-ESRCH: it
 * ended). */
int jail_netns(struct jail *j);
/* Set the oom_score_adj (-1000..1000) of the sandbox's process pid (its
 * number inside), which the process may not lower itself: what the
 * kernel weighs when the sandbox's memory cgroup is full.  0 or -errno. */
int jail_oom_score_adj(struct jail *j, pid_t pid, int adj);

struct jail_usage {
	uint64_t cpu_ns;	/* user + system, all processes */
	uint64_t memory_peak;	/* bytes, since the last jail_reset_peak() */
	uint64_t memory_current;
	uint64_t oom_kills;	/* processes killed by the memory limit */
	bool from_cgroup;	/* false: only what rusage tells (less) */
};

int jail_usage(struct jail *j, struct jail_usage *u);
/* Start a new peak-memory window (for the next execution). */
int jail_reset_peak(struct jail *j);
/* A new CPU weight for the sandbox's cgroup (jail_limits.cpu_weight's
 * scale; 0 is refused), e.g. a pooled sandbox's once a session takes it.
 * 0 (also without cgroups) or -errno. */
int jail_set_cpu_weight(struct jail *j, uint32_t weight);

/* Kill, reap, remove the cgroup, close every fd, free.  Returns only when
 * no process of the sandbox remains (or after a bounded wait, logging what
 * could not be removed).  NULL is allowed. */
void jail_free(struct jail *j);

/* The warm path: a new sandbox forked from a template (a jail spawned with
 * JAIL_F_TEMPLATE whose main process runs the template side, see
 * src/jail/template.h).  Only cfg->limits and cfg->hostname are used; the
 * program is the template's.  Nothing of the request is session data: the
 * template's memory is inherited by every later sandbox.  Like jail_spawn(), blocks
 * until the sandbox is set up.  Requires cgroups (-EINVAL otherwise).
 * Sandboxes made this way live in user namespaces of their own, children of
 * the template's (which maps the whole uid range: each one's main process
 * becomes its leased uid there, then maps JAIL_UID to it in a namespace of
 * its own; its pid 1, petri-init, stays in the template's as that uid), and
 * in pid namespaces under the template's pid 1: jail_free() of the
 * template stops the template but keeps pid 1 until the last of them is
 * freed. */
int jail_fork(struct jail *tmpl, const struct jail_config *cfg, struct jail **out,
	      char *err, size_t errlen);
/* Is the template's main process still running? */
bool jail_template_alive(struct jail *tmpl);

/* Can the host path be one of jail_config's ro_binds: bound read-only
 * (nosuid, nodev) at the same place in every sandbox?  0, or -errno with
 * the reason in why ("is on, under or over /tmp, which every sandbox mounts
 * itself"; to follow the path's name): a path that is not clean and
 * absolute, that lands on, under or over one of the sandbox's own mounts
 * (/proc, /dev, /work, /tmp, /etc, /usr, /home, /opt/petri, the /bin and
 * /lib* links), that is missing, that is neither a directory nor a regular
 * file (not a directory, with want_dir), or that the sandbox's users cannot
 * read.  A bind refused here would make every sandbox fail to start. */
int jail_bind_check(const char *path, bool want_dir, char *why, size_t whylen);

/* The allow-listed system call names of the seccomp policy, NULL-terminated;
 * and their count. */
const char *const *jail_seccomp_allowed(size_t *count);

/* Confine the calling process, one of petri's own helpers after its exec
 * (one thread), to the system calls in names (NULL-terminated, libseccomp's
 * spelling) and mmap/mprotect without PROT_EXEC; every other call fails
 * with ENOSYS from then on, and no_new_privs is set.  0 or -errno, with a
 * message in err. */
int jail_seccomp_only(const char *const *names, char *err, size_t errlen);

#endif
