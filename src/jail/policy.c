#include "jail/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/jail.h"
#include "util/sanitized.h"

/* What the Python data stack (numpy, pandas, matplotlib, scipy, sqlite3,
 * threads, subprocess), bash, coreutils and gcc need, found by tracing them
 * inside the sandbox (tests/cli/test_policy.py keeps it honest).  Calls with
 * dangerous arguments are allowed below with conditions instead. */
static const char *const allowed[] = {
	/* files and descriptors */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
	"pwritev", "open", "openat", "creat", "close", "close_range", "lseek",
	"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
	"access", "faccessat", "faccessat2", "readlink", "readlinkat",
	"getdents64", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
	"rename", "renameat", "renameat2", "link", "linkat", "symlink",
	"symlinkat", "chmod", "fchmod", "fchmodat", "truncate", "ftruncate",
	"fallocate", "fsync", "fdatasync", "umask", "chdir", "fchdir", "getcwd",
	"utimensat", "dup", "dup2", "dup3", "flock", "pipe", "pipe2",
	"mknodat", "sendfile", "copy_file_range", "memfd_create",
	/* Extended attributes.  Reading them reaches nothing a stat() does
	 * not: shutil.copy2/copystat/move and cp -a list them on every copy.
	 * Writing them reaches only the sandbox's own tmpfs files (the rest
	 * is read-only, or not its user's), and there only user.* on its
	 * regular files and directories and the ACLs of its own files: the
	 * other namespaces need a capability no sandbox process holds
	 * (security.* CAP_SYS_ADMIN or CAP_SETFCAP in its user namespace,
	 * trusted.* CAP_SYS_ADMIN in the host's), but for a name an active
	 * LSM owns (security.selinux), which that LSM decides as it does for
	 * an unprivileged user outside.  Their space is bounded by
	 * tmpfs (nr_inodes) and charged to the sandbox's memory cgroup
	 * (docs/security.md).  E2B's file metadata is user.e2b.* of a file. */
	"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
	"flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
	"lremovexattr", "fremovexattr",
	/* Moving pages between a pipe and a file or socket: the code sendfile
	 * and copy_file_range (allowed above) already reach; sendfile into a
	 * pipe already puts a page of a shared read-only file into a pipe the
	 * caller writes to (Dirty Pipe's shape), so denying splice protects
	 * nothing.  vmsplice, which maps the caller's memory into a pipe,
	 * stays denied. */
	"splice", "tee",
	/* memory */
	"mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync",
	"get_mempolicy",
	/* processes and threads */
	"vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tgkill",
	/* A descriptor for a process of the sandbox's own pid namespace (the
	 * only ones it can name) and a signal through it, as kill() does:
	 * asyncio and subprocess wait on one.  pidfd_getfd (another process's
	 * descriptors) is denied. */
	"pidfd_open", "pidfd_send_signal",
	/* The file-system ids: without CAP_SETUID the kernel keeps them at the
	 * caller's own and answers with the old value either way. */
	"setfsuid", "setfsgid",
	"getpid", "getppid", "gettid", "getuid", "geteuid",
	"getgid", "getegid", "getresuid", "getresgid", "getgroups", "setsid",
	"setpgid", "getpgid", "getpgrp", "getsid", "prctl", "arch_prctl",
	"set_tid_address", "set_robust_list", "rseq", "futex", "sched_yield",
	"sched_getaffinity", "sched_setaffinity", "sched_getparam",
	"sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "sched_getattr",
	/* Setting the scheduling policy: with RLIMIT_RTPRIO 0 (set for every
	 * sandbox) and no CAP_SYS_NICE the kernel allows only the ordinary
	 * policies (SCHED_OTHER, BATCH, IDLE), which never raise the caller's
	 * claim on the CPU; posix_spawn with a scheduler setting makes these.
	 * sched_setattr (deadline scheduling, utilization clamps) is denied. */
	"sched_setscheduler", "sched_setparam",
	"getpriority", "setpriority", "getrusage", "getrlimit", "setrlimit",
	"prlimit64",
	/* time and signals */
	"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
	"gettimeofday", "time", "times", "alarm", "pause", "getitimer",
	"setitimer", "timer_create", "timer_settime", "timer_gettime",
	"timer_getoverrun", "timer_delete", "rt_sigaction", "rt_sigprocmask",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigpending",
	"sigaltstack", "restart_syscall", "eventfd2",
	/* waiting */
	"poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait",
	/* sockets (loopback, and a session's link when its policy allows a
	 * network: src/net/router.h) */
	"bind", "listen", "accept", "accept4", "connect",
	"getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg",
	"sendmmsg", "recvmmsg",	/* the C library's resolver sends A and AAAA at once */
	"shutdown", "setsockopt", "getsockopt",
	/* information */
	"uname", "sysinfo", "getrandom",
	NULL
};

/* Named so that they fail with EPERM ("Operation not permitted") rather
 * than ENOSYS, which would suggest an old kernel.  inotify and fanotify are
 * here for the same reason as fcntl(F_NOTIFY) below: a watch is on an
 * inode, and the read-only binds of /usr share their inodes with the host
 * and with every other sandbox, so a watch would report their file accesses
 * (a neighbour's `import sqlite3`, the host's own reads). */
static const char *const denied[] = {
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev",
	"process_madvise", "pidfd_getfd", "kcmp", "bpf", "perf_event_open",
	"keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "reboot", "swapon",
	"swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup",
	"iopl", "ioperm", "uselib", "open_by_handle_at", "name_to_handle_at",
	"fanotify_init", "fanotify_mark", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch", "settimeofday", "clock_settime", "adjtimex",
	"clock_adjtime", "sethostname", "setdomainname", "lookup_dcookie",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"seccomp", "setgroups", "capset", "sched_setattr",
	"mbind", "set_mempolicy", "migrate_pages", "move_pages", "vmsplice",
	"io_setup", "io_submit", "io_getevents", "io_cancel", "io_destroy",
	"msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
	"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	"nfsservctl", "sysfs", "_sysctl", "ustat", "afs_syscall", "tuxcall",
	"security", "create_module", "get_kernel_syms", "query_module",
	"modify_ldt",
	NULL
};

/* Allowed with argument checks, done in our own BPF prologue (see
 * prologue[] below) where the exact comparison is plain to read:
 *
 * - clone without namespace flags.  clone3 answers ENOSYS: its flags live
 *   in memory a filter cannot read, and glibc then falls back to clone.
 * - socket for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only, and for
 *   the IP families only the stream, datagram and raw types (the type compared after
 *   masking off SOCK_NONBLOCK | SOCK_CLOEXEC, as the kernel does): the
 *   kernel turns (AF_INET, SOCK_PACKET) into an AF_PACKET socket after any
 *   family check, and SOCK_SEQPACKET/SOCK_DCCP reach SCTP and DCCP.  Stream
 *   only as TCP, datagram only as UDP or ping: any other protocol makes the
 *   kernel load a module on the host (sctp, l2tp_ip, ...) to serve it.
 *   Netlink only as NETLINK_ROUTE, in the sandbox's own network namespace
 *   (loopback only): it lists that namespace's links and addresses
 *   (socket.if_nameindex, getifaddrs, `ip addr`), and every request that
 *   changes something needs CAP_NET_ADMIN, which no sandbox process has.
 *   The other families reach more of the host (audit, uevents, xfrm,
 *   sock_diag, netfilter, generic netlink's modules) and answer
 *   EPROTONOSUPPORT, as a kernel without them would.
 * - socketpair for AF_UNIX only: only unix sockets come in pairs, but the
 *   kernel creates the socket of any family (loading its module) before it
 *   finds that out.
 * - ioctl except TIOCSTI/TIOCLINUX (typing into, and driving, a terminal
 *   the sandbox did not open) and TIOCSETD: a pty's line discipline is
 *   n_tty for every ordinary program, and setting another makes the host
 *   kernel load its module (n_gsm, n_hdlc, slip...: a history of bugs).
 * - personality only to query or set PER_LINUX.
 * - the id calls (setuid, setreuid, setresuid and the gid ones) and the
 *   owner calls (chown, fchown, lchown, fchownat) only with ids that change
 *   nothing: -1 or the sandbox's own JAIL_UID/JAIL_GID, which every process
 *   of every sandbox has.  The kernel would allow no other id anyway (no
 *   sandbox process holds CAP_SETUID, CAP_SETGID or CAP_CHOWN), but answers
 *   EINVAL for an id its user namespace does not map and EPERM for one it
 *   does, so the answer would differ between the cold and the warm path and
 *   from outside, where an unprivileged user always gets EPERM: the filter
 *   gives that EPERM.  What changes nothing then works as for any user:
 *   setuid(getuid()), setreuid(-1, -1) (privilege-dropping code,
 *   subprocess(user=...)), chown of one's own file to oneself (shutil,
 *   tar), and fchown on a bad descriptor answers EBADF.  setgroups and
 *   capset stay denied.
 * - fcntl except F_NOTIFY (dnotify): see the inotify note above.
 * - fadvise64 with advice that only reads ahead or describes the access
 *   pattern.  POSIX_FADV_DONTNEED drops clean pages of the file from the
 *   page cache, and the only files where it does anything are the
 *   read-only binds shared with the host and every other sandbox (tmpfs
 *   ignores fadvise): an eviction tool for cache-timing attacks on them.
 *   It answers 0 without running rather than EPERM: the advice is a hint
 *   the kernel itself may ignore, so no caller can depend on its effect,
 *   EPERM is not among the errors posix_fadvise(3) documents, and tools
 *   that use it (dd iflag=nocache, databases, backup tools) would report a
 *   failure for nothing.  Advice numbers the kernel does not know answer
 *   EINVAL, as the kernel would, so that advice added later is refused until
 *   it is reviewed. */
static const char *const conditional[] = {
	"clone", "socket", "socketpair", "ioctl", "personality", "fcntl",
	"fadvise64", "setuid", "setgid", "setreuid", "setregid", "setresuid",
	"setresgid", "chown", "fchown", "lchown", "fchownat", NULL
};

/* The kernel's own mask for the type argument of socket() (net.h, not
 * exported to user space): the bits above it are SOCK_NONBLOCK/SOCK_CLOEXEC. */
#define SOCK_TYPE_MASK 0xf

#define CLONE_NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | \
			CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

static size_t count_names(const char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

const char *const *policy_allowed_names(size_t *count)
{
	static const char *all[sizeof(allowed) / sizeof(allowed[0]) +
			       sizeof(conditional) / sizeof(conditional[0])];

	if (!all[0]) {
		size_t n = 0;

		for (size_t i = 0; allowed[i]; i++)
			all[n++] = allowed[i];
		for (size_t i = 0; conditional[i]; i++)
			all[n++] = conditional[i];
		all[n] = NULL;
	}
	if (count)
		*count = count_names(all);
	return all;
}

const char *const *policy_denied_names(size_t *count)
{
	if (count)
		*count = count_names(denied);
	return denied;
}

/* Every call of names (those this kernel's libseccomp knows) fails with
 * error. */
static int deny(scmp_filter_ctx ctx, const char *const *names, int error, char *err,
		size_t errlen)
{
	for (size_t i = 0; names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]), r;

		if (nr == __NR_SCMP_ERROR)
			continue;
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(error), nr, 0)) < 0) {
			snprintf(err, errlen, "seccomp: cannot deny '%s': %s", names[i],
				 strerror(-r));
			return r;
		}
	}
	return 0;
}

static int add_rules(scmp_filter_ctx ctx, unsigned *nallowed, char *err,
		     size_t errlen)
{
	const char *const *lists[] = { allowed, conditional };
	int r;

	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; lists[l][i]; i++) {
			int nr = seccomp_syscall_resolve_name(lists[l][i]);

			if (nr == __NR_SCMP_ERROR)
				continue;	/* not on this architecture */
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
			if (r < 0) {
				snprintf(err, errlen, "seccomp: cannot allow '%s': %s",
					 lists[l][i], strerror(-r));
				return r;
			}
			(*nallowed)++;
		}
	}
	if ((r = deny(ctx, denied, EPERM, err, errlen)) < 0)
		return r;
	/* clone3 is on no list: the default action answers ENOSYS. */
	return 0;
}

/* ---- the prologue ----------------------------------------------------- */

#define X32_SYSCALL_BIT 0x40000000u
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + (n) * sizeof(uint64_t))
#define RET_ERRNO(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
#define LOAD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
/* "if the syscall is nr, run the next `len` instructions, else skip them" */
#define FOR_SYSCALL(sysno, len) \
	LOAD(offsetof(struct seccomp_data, nr)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (sysno), 0, (len))

/* One id argument of an OWN_IDS block: -1 or id, else to the block's
 * EPERM; left counts the id arguments still to check, this one included. */
#define OWN_ID(arg, id, left) \
	LOAD(ARG_LO(arg)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 1, 0), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (id), 0, 3 * (left) - 2)
#define OWN_IDS_END \
	BPF_JUMP(BPF_JMP | BPF_JA | BPF_K, 1, 0, 0), \
	RET_ERRNO(EPERM)
/* A call whose n id arguments must each change nothing (conditional[]). */
#define OWN_IDS_1(sysno, a0, id0) \
	FOR_SYSCALL(sysno, 5), OWN_ID(a0, id0, 1), OWN_IDS_END
#define OWN_IDS_2(sysno, a0, id0, a1, id1) \
	FOR_SYSCALL(sysno, 8), OWN_ID(a0, id0, 2), OWN_ID(a1, id1, 1), OWN_IDS_END
#define OWN_IDS_3(sysno, id) \
	FOR_SYSCALL(sysno, 11), OWN_ID(0, id, 3), OWN_ID(1, id, 2), OWN_ID(2, id, 1), \
	OWN_IDS_END

/* Argument checks run before libseccomp's program.  Each block ends in a
 * return or falls through to the next; the low 32 bits of an argument are
 * what the kernel reads for these int-typed arguments (x86_64 is little
 * endian, so they are at the argument's own offset). */
static const struct sock_filter prologue[] = {
	/* Only the x86_64 ABI: i386 (int 0x80) and x32 numbers kill.  A
	 * helper's filter (policy_build_only) has these ARCH_CHECK_LEN alone. */
	LOAD(offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	LOAD(offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#define ARCH_CHECK_LEN 6

	FOR_SYSCALL(__NR_clone, 3),
	LOAD(ARG_LO(0)),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1),
	RET_ERRNO(EPERM),

	FOR_SYSCALL(__NR_ioctl, 5),
	LOAD(ARG_LO(1)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSETD, 0, 1),
	RET_ERRNO(EPERM),

	/* Jump offsets below count instructions from the one after the
	 * jump; "next" is the first instruction after the block. */
	FOR_SYSCALL(__NR_socket, 31),
	LOAD(ARG_LO(0)),				/*  0 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 29, 0),	/* -> next */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0),	/* -> 6 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0),	/* -> 6 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 23, 0),	/* -> 28 */
	RET_ERRNO(EAFNOSUPPORT),
	LOAD(ARG_LO(1)),				/*  6: the type */
	BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SOCK_TYPE_MASK),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 3, 0),	/* -> 12 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, 6, 0),	/* -> 16 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_RAW, 20, 0),	/* -> next */
	RET_ERRNO(ESOCKTNOSUPPORT),
	LOAD(ARG_LO(2)),				/* 12: stream */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 17, 0),		/* -> next */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 16, 0),	/* -> next */
	RET_ERRNO(EPROTONOSUPPORT),
	LOAD(ARG_LO(2)),				/* 16: datagram */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 13, 0),		/* -> next */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 12, 0),	/* -> next */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMP, 2, 0),	/* -> 22 */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMPV6, 4, 0),	/* -> 25 */
	RET_ERRNO(EPROTONOSUPPORT),
	LOAD(ARG_LO(0)),				/* 22: ping, IPv4 only */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 7, 0),	/* -> next */
	RET_ERRNO(EPROTONOSUPPORT),
	LOAD(ARG_LO(0)),				/* 25: ping, IPv6 only */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 4, 0),	/* -> next */
	RET_ERRNO(EPROTONOSUPPORT),
	LOAD(ARG_LO(2)),				/* 28: netlink, route only */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NETLINK_ROUTE, 1, 0),	/* -> next */
	RET_ERRNO(EPROTONOSUPPORT),

	FOR_SYSCALL(__NR_socketpair, 3),
	LOAD(ARG_LO(0)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0),
	RET_ERRNO(EAFNOSUPPORT),

	FOR_SYSCALL(__NR_fcntl, 3),
	LOAD(ARG_LO(1)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_NOTIFY, 0, 1),
	RET_ERRNO(EPERM),

	/* advice is the fourth argument on x86_64; DONTNEED is 4 here */
	FOR_SYSCALL(__NR_fadvise64, 5),
	LOAD(ARG_LO(3)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, POSIX_FADV_DONTNEED, 0, 1),
	RET_ERRNO(0),		/* success without effect, see conditional[] */
	BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, POSIX_FADV_NOREUSE, 0, 1),
	RET_ERRNO(EINVAL),

	FOR_SYSCALL(__NR_personality, 4),
	LOAD(ARG_LO(0)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 2, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PER_LINUX, 1, 0),
	RET_ERRNO(EPERM),

	OWN_IDS_1(__NR_setuid, 0, JAIL_UID),
	OWN_IDS_1(__NR_setgid, 0, JAIL_GID),
	OWN_IDS_2(__NR_setreuid, 0, JAIL_UID, 1, JAIL_UID),
	OWN_IDS_2(__NR_setregid, 0, JAIL_GID, 1, JAIL_GID),
	OWN_IDS_3(__NR_setresuid, JAIL_UID),
	OWN_IDS_3(__NR_setresgid, JAIL_GID),
	OWN_IDS_2(__NR_chown, 1, JAIL_UID, 2, JAIL_GID),
	OWN_IDS_2(__NR_lchown, 1, JAIL_UID, 2, JAIL_GID),
	OWN_IDS_2(__NR_fchown, 1, JAIL_UID, 2, JAIL_GID),
	OWN_IDS_2(__NR_fchownat, 2, JAIL_UID, 3, JAIL_GID),
};

/* Export libseccomp's program as raw BPF (2.5 has no in-memory export, so
 * through a memfd) and put the first plen instructions of the prologue in
 * front of it. */
static int export_with_prologue(scmp_filter_ctx ctx, size_t plen, struct sock_fprog *prog)
{
	struct sock_filter *v = NULL;
	off_t size;
	size_t n;
	int fd, r;

	fd = memfd_create("petri-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((r = seccomp_export_bpf(ctx, fd)) < 0)
		goto out;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter)) {
		r = -EINVAL;
		goto out;
	}
	n = (size_t)size / sizeof(struct sock_filter);
	if (plen + n > BPF_MAXINSNS) {
		r = -E2BIG;
		goto out;
	}
	v = calloc(plen + n, sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(v, prologue, plen * sizeof(prologue[0]));
	if (pread(fd, v + plen, (size_t)size, 0) != size) {
		r = errno ? -errno : -EIO;
		goto out;
	}
	prog->filter = v;
	prog->len = (unsigned short)(plen + n);
	v = NULL;
	r = 0;
out:
	free(v);
	close(fd);
	return r;
}

/* A helper's rules: names, and mmap and mprotect without PROT_EXEC. */
static int add_only(scmp_filter_ctx ctx, const char *const *names, unsigned *nallowed,
		    char *err, size_t errlen)
{
	int r;

	for (size_t i = 0; names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);

		if (nr == __NR_SCMP_ERROR)
			continue;
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0) {
			snprintf(err, errlen, "seccomp: cannot allow '%s': %s", names[i],
				 strerror(-r));
			return r;
		}
		(*nallowed)++;
	}
#if SANITIZED_BUILD
	/* A sanitizer's runtime looks at the alternate signal stack before
	 * every call that does not return (_exit, longjmp): a sanitized
	 * build's helpers could not end without it. */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sigaltstack), 0)) < 0) {
		snprintf(err, errlen, "seccomp: cannot allow sigaltstack: %s", strerror(-r));
		return r;
	}
	(*nallowed)++;
#endif
	/* Data, never new code: what a helper runs was mapped by its exec. */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				  SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0 ||
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				  SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0) {
		snprintf(err, errlen, "seccomp: cannot allow mmap: %s", strerror(-r));
		return r;
	}
	*nallowed += 2;
	return 0;
}

/* The sandbox's policy (names NULL) or a helper's. */
static int build(struct policy *pol, const char *const *names, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	int r;

	memset(pol, 0, sizeof(*pol));
	ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return -ENOMEM;
	}
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
				  SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0) {
		snprintf(err, errlen, "seccomp: cannot set attributes: %s", strerror(-r));
		goto out;
	}
	r = names ? add_only(ctx, names, &pol->allowed, err, errlen) :
		    add_rules(ctx, &pol->allowed, err, errlen);
	if (r < 0)
		goto out;
	if ((r = export_with_prologue(ctx, names ? ARCH_CHECK_LEN :
					   sizeof(prologue) / sizeof(prologue[0]),
				      &pol->prog)) < 0)
		snprintf(err, errlen, "seccomp: cannot export the filter: %s",
			 strerror(-r));
out:
	seccomp_release(ctx);
	return r;
}

int policy_build(struct policy *pol, char *err, size_t errlen)
{
	return build(pol, NULL, err, errlen);
}

int policy_build_only(struct policy *pol, const char *const *names, char *err, size_t errlen)
{
	return build(pol, names, err, errlen);
}

void policy_release(struct policy *pol)
{
	free(pol->prog.filter);
	memset(pol, 0, sizeof(*pol));
}

int policy_load(const struct policy *pol)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &pol->prog) < 0)
		return -errno;
	return 0;
}
