#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/policy.h"
#include "util/sanitized.h"
#include "unit.h"

static struct policy pol;

static void build(void)
{
	char err[256];

	ck_assert_msg(policy_build(&pol, err, sizeof(err)) == 0, "%s", err);
}

/* Run fn in a child under the filter; return its wait status. */
static int in_child(void (*fn)(void))
{
	int st;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (policy_load(&pol) < 0)
			_exit(99);
		fn();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

#define EXPECT(call, err) do { \
	errno = 0; \
	if ((call) != -1 || errno != (err)) \
		_exit(10 + __LINE__ % 100); \
} while (0)

static void refused_calls(void)
{
	EXPECT(syscall(SYS_unshare, CLONE_NEWUSER), EPERM);
	EXPECT(syscall(SYS_setns, 0, 0), EPERM);
	EXPECT(syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL), EPERM);
	EXPECT(syscall(SYS_ptrace, 0, 0, 0, 0), EPERM);
	EXPECT(syscall(SYS_bpf, 0, NULL, 0), EPERM);
	EXPECT(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	EXPECT(syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM);
	EXPECT(syscall(SYS_userfaultfd, 0), EPERM);
	EXPECT(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
	EXPECT(syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0), EPERM);
	EXPECT(syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
	EXPECT(syscall(SYS_init_module, NULL, 0, ""), EPERM);
	EXPECT(syscall(SYS_reboot, 0, 0, 0, NULL), EPERM);
	EXPECT(syscall(SYS_swapon, "/x", 0), EPERM);
	EXPECT(syscall(SYS_acct, NULL), EPERM);
	EXPECT(syscall(SYS_chroot, "/"), EPERM);
	EXPECT(syscall(SYS_pivot_root, "/", "/"), EPERM);
	EXPECT(syscall(SYS_open_tree, -1, "/", 0), EPERM);
	EXPECT(syscall(SYS_fsopen, "tmpfs", 0), EPERM);
	/* clone with a namespace flag, even with a high bit set above it */
	EXPECT(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0), EPERM);
	EXPECT(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0), EPERM);
	EXPECT(syscall(SYS_clone3, NULL, 0), ENOSYS);
	/* sockets other than unix, IP and route netlink */
	EXPECT(socket(AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
	EXPECT(socket(AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT);
	EXPECT(socket(AF_ALG, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
	EXPECT(syscall(SYS_socket, (1ul << 32) | AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
	/* netlink: only NETLINK_ROUTE (audit, uevents, xfrm, sock_diag,
	 * netfilter, generic are refused), also with the high half set */
	EXPECT(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT), EPROTONOSUPPORT);
	EXPECT(socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT), EPROTONOSUPPORT);
	EXPECT(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_XFRM), EPROTONOSUPPORT);
	EXPECT(socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG), EPROTONOSUPPORT);
	EXPECT(socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER), EPROTONOSUPPORT);
	EXPECT(socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, (1ul << 32) | NETLINK_AUDIT),
	       EPROTONOSUPPORT);
	/* IP types other than stream, datagram and raw, the type compared
	 * without its flag bits: SOCK_PACKET on AF_INET is AF_PACKET */
	EXPECT(socket(AF_INET, SOCK_PACKET, 0), ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_PACKET | SOCK_CLOEXEC, 0), ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_PACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0x300),
	       ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET6, SOCK_PACKET, 0), ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP), ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET6, SOCK_DCCP, IPPROTO_DCCP), ESOCKTNOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_RDM, 0), ESOCKTNOSUPPORT);
	/* protocols the kernel would load a module for */
	EXPECT(socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), EPROTONOSUPPORT);
	EXPECT(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP), EPROTONOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_DGRAM, 115 /* IPPROTO_L2TP */), EPROTONOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE), EPROTONOSUPPORT);
	EXPECT(socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMP), EPROTONOSUPPORT);
	EXPECT(socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMPV6), EPROTONOSUPPORT);
	EXPECT(syscall(SYS_socket, AF_INET, SOCK_STREAM, (1ul << 32) | IPPROTO_SCTP),
	       EPROTONOSUPPORT);
	/* pairs: unix only */
	{
		static const int families[] = {
			AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_TIPC, AF_VSOCK,
			AF_ALG, AF_BLUETOOTH,
		};
		int sv[2];

		for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
			EXPECT(socketpair(families[i], SOCK_DGRAM, 0, sv), EAFNOSUPPORT);
		EXPECT(syscall(SYS_socketpair, (1ul << 32) | AF_TIPC, SOCK_DGRAM, 0, sv),
		       EAFNOSUPPORT);
	}
	/* dnotify, inotify and fanotify: watches on shared inodes */
	EXPECT(fcntl(0, F_NOTIFY, DN_ACCESS | DN_MULTISHOT), EPERM);
	EXPECT(syscall(SYS_fcntl, 0, (1ul << 32) | F_NOTIFY, DN_ACCESS), EPERM);
	EXPECT(syscall(SYS_inotify_init1, 0), EPERM);
	EXPECT(syscall(SYS_inotify_init), EPERM);
	EXPECT(syscall(SYS_inotify_add_watch, 0, "/", 0xfff), EPERM);
	EXPECT(syscall(SYS_fanotify_init, 0, 0), EPERM);
	EXPECT(syscall(SYS_fanotify_mark, 0, 0, 0, 0, "/"), EPERM);
	/* fadvise: advice the kernel does not know */
	if (posix_fadvise(0, 0, 0, 6) != EINVAL)
		_exit(8);
	EXPECT(syscall(SYS_fadvise64, 0, 0, 0, -1), EINVAL);
	/* DONTNEED succeeds without running: on a descriptor that is not
	 * open the kernel would say EBADF */
	if (syscall(SYS_fadvise64, 999, 0, 0, POSIX_FADV_DONTNEED) != 0 ||
	    syscall(SYS_fadvise64, 999, 0, 0, (1ul << 32) | POSIX_FADV_DONTNEED) != 0)
		_exit(9);
	/* terminal injection, also with the high half of the command set */
	EXPECT(ioctl(0, TIOCSTI, "x"), EPERM);
	EXPECT(syscall(SYS_ioctl, 0, (1ul << 32) | TIOCSTI, "x"), EPERM);
	EXPECT(ioctl(0, TIOCLINUX, "x"), EPERM);
	/* line disciplines other than n_tty load modules on the host */
	{
		int ldisc = 21;	/* N_GSM0710 */

		EXPECT(ioctl(0, TIOCSETD, &ldisc), EPERM);
	}
	/* supplementary groups, capabilities */
	EXPECT(syscall(SYS_setgroups, 0, NULL), EPERM);
	/* ids other than -1 and the sandbox's own, also in the high half */
	EXPECT(syscall(SYS_setuid, 0), EPERM);
	EXPECT(syscall(SYS_setgid, 0), EPERM);
	EXPECT(syscall(SYS_setreuid, -1, 0), EPERM);
	EXPECT(syscall(SYS_setregid, 0, -1), EPERM);
	EXPECT(syscall(SYS_setresuid, -1, -1, 0), EPERM);
	EXPECT(syscall(SYS_setresgid, 1000, 0, 1000), EPERM);
	EXPECT(syscall(SYS_setuid, (1ul << 32) | 0), EPERM);
	EXPECT(syscall(SYS_chown, "/nonexistent", 0, -1), EPERM);
	EXPECT(syscall(SYS_lchown, "/nonexistent", -1, 0), EPERM);
	EXPECT(syscall(SYS_fchown, -1, 65534, -1), EPERM);
	EXPECT(syscall(SYS_fchownat, AT_FDCWD, "/nonexistent", 1000, 0, 0), EPERM);
	EXPECT(syscall(SYS_vmsplice, 0, NULL, 0, 0), EPERM);
	/* personality: no READ_IMPLIES_EXEC or address-space tricks */
	EXPECT(personality(READ_IMPLIES_EXEC), EPERM);
	EXPECT(personality(ADDR_NO_RANDOMIZE), EPERM);
	/* deadline scheduling and utilization clamps */
	EXPECT(syscall(SYS_sched_setattr, 0, NULL, 0), EPERM);
	/* a call on neither list (it tells which pages of a shared file are
	 * cached; glibc has no fallback that ENOSYS would break) */
	EXPECT(syscall(SYS_mincore, NULL, 0, NULL), ENOSYS);
}

static void allowed_calls(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	pid_t pid;

	int sv[2];

	if (fd < 0 || socket(AF_INET, SOCK_DGRAM, 0) < 0 ||
	    socket(AF_INET6, SOCK_DGRAM, 0) < 0 ||
	    socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) < 0 ||
	    socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP) < 0 ||
	    socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP) < 0 ||
	    socket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP) < 0)
		_exit(2);
	/* ping and raw sockets reach the kernel (which may refuse them for
	 * its own reasons: ping_group_range, CAP_NET_RAW) */
	errno = 0;
	if ((socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) < 0 && errno == EPROTONOSUPPORT) ||
	    (socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6) < 0 && errno == EPROTONOSUPPORT) ||
	    (socket(AF_INET, SOCK_RAW, IPPROTO_UDP) < 0 && errno == ESOCKTNOSUPPORT))
		_exit(6);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0)
		_exit(7);
	/* fcntl but F_NOTIFY; fadvise with harmless advice runs */
	if (fcntl(fd, F_GETFL) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		_exit(8);
	{
		static const int advice[] = {
			POSIX_FADV_NORMAL, POSIX_FADV_RANDOM, POSIX_FADV_SEQUENTIAL,
			POSIX_FADV_WILLNEED, POSIX_FADV_NOREUSE,
		};
		int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

		for (size_t i = 0; i < sizeof(advice) / sizeof(advice[0]); i++)
			if (file < 0 || posix_fadvise(file, 0, 0, advice[i]) != 0 ||
			    posix_fadvise(999, 0, 0, advice[i]) != EBADF)
				_exit(9);
	}
	if (personality(0xffffffff) == -1)
		_exit(3);
	/* route netlink: the kernel's own answer (a socket) */
	if (socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE) < 0 ||
	    socket(AF_NETLINK, SOCK_DGRAM, 0) < 0)
		_exit(10);
	/* calls the kernel answers for itself: never ENOSYS or the filter's
	 * EPERM (the test runs as root, so the id calls change nothing) */
	errno = 0;
	if (syscall(SYS_listxattr, "/", NULL, 0) < 0 && (errno == ENOSYS || errno == EPERM))
		_exit(11);
	if (syscall(SYS_flistxattr, -1, NULL, 0) != -1 || errno != EBADF ||
	    /* writing them too: what they reach is the kernel's to refuse */
	    syscall(SYS_setxattr, "/nonexistent", "user.x", "", 0, 0) != -1 || errno != ENOENT ||
	    syscall(SYS_lsetxattr, "/nonexistent", "user.x", "", 0, 0) != -1 ||
	    errno != ENOENT ||
	    syscall(SYS_fsetxattr, -1, "user.x", "", 0, 0) != -1 || errno != EBADF ||
	    syscall(SYS_removexattr, "/nonexistent", "user.x") != -1 || errno != ENOENT ||
	    syscall(SYS_lremovexattr, "/nonexistent", "user.x") != -1 || errno != ENOENT ||
	    syscall(SYS_fremovexattr, -1, "user.x") != -1 || errno != EBADF ||
	    syscall(SYS_fchown, -1, -1, -1) != -1 || errno != EBADF ||
	    syscall(SYS_chown, "/nonexistent", 1000, 1000) != -1 || errno != ENOENT ||
	    syscall(SYS_fchownat, AT_FDCWD, "/nonexistent", -1, 1000, 0) != -1 ||
	    errno != ENOENT ||
	    syscall(SYS_splice, -1, NULL, -1, NULL, 1, 0) != -1 || errno != EBADF ||
	    syscall(SYS_tee, -1, -1, 1, 0) != -1 || errno != EBADF ||
	    syscall(SYS_pidfd_open, -1, 0) != -1 || errno != EINVAL)
		_exit(12);
	{
		struct sched_param sp = { .sched_priority = 0 };
		struct timespec ts;

		if (sched_setscheduler(0, SCHED_OTHER, &sp) != 0 || sched_setparam(0, &sp) != 0 ||
		    sched_rr_get_interval(0, &ts) != 0)
			_exit(15);
	}
	if (syscall(SYS_setreuid, -1, -1) != 0 || syscall(SYS_setregid, -1, -1) != 0 ||
	    syscall(SYS_setresuid, -1, -1, -1) != 0 || syscall(SYS_setresgid, -1, -1, -1) != 0)
		_exit(13);
	{
		int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);

		if (pfd < 0 || syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) != 0)
			_exit(14);
		close(pfd);
	}
	pid = fork();	/* glibc: clone without namespace flags */
	if (pid < 0)
		_exit(4);
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	/* last: this child (root) becomes the sandbox's own ids */
	if (syscall(SYS_setgid, 1000) != 0 || syscall(SYS_setuid, 1000) != 0 ||
	    syscall(SYS_setresuid, 1000, 1000, -1) != 0)
		_exit(16);
}

static void i386_call(void)
{
	long ret;

	/* getpid through the 32-bit entry point */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	(void)ret;
	_exit(5);
}

static void x32_call(void)
{
	syscall(0x40000000 | SYS_getpid);
	_exit(5);
}

START_TEST(test_build)
{
	size_t nallowed, ndenied;
	const char *const *a = policy_allowed_names(&nallowed);
	const char *const *d = policy_denied_names(&ndenied);

	build();
	ck_assert_uint_gt(pol.allowed, 50);
	ck_assert_uint_eq(pol.allowed, nallowed);
	ck_assert_ptr_nonnull(pol.prog.filter);
	for (size_t i = 0; i < nallowed; i++)
		for (size_t k = 0; k < ndenied; k++)
			ck_assert_msg(strcmp(a[i], d[k]) != 0, "%s on both lists", a[i]);
	policy_release(&pol);
}
END_TEST

START_TEST(test_refused)
{
	int st;

	build();
	st = in_child(refused_calls);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "a refused call passed (status %#x, exit code = 10 + line %% 100)", st);
	policy_release(&pol);
}
END_TEST

START_TEST(test_allowed)
{
	int st;

	build();
	st = in_child(allowed_calls);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	policy_release(&pol);
}
END_TEST

START_TEST(test_x32_kills)
{
	int st;

	build();
	st = in_child(x32_call);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status %#x", st);
	policy_release(&pol);
}
END_TEST

/* A helper's filter (the archive writer's kind): what it names, data
 * mappings, and nothing else. */
static void helper_calls(void)
{
	void *m;

	EXPECT(socket(AF_INET, SOCK_STREAM, 0), ENOSYS);
	EXPECT(socket(AF_UNIX, SOCK_STREAM, 0), ENOSYS);
	EXPECT(syscall(SYS_unshare, CLONE_NEWNET), ENOSYS);
	EXPECT(syscall(SYS_execve, "/bin/true", NULL, NULL), ENOSYS);
	EXPECT(syscall(SYS_ptrace, 0, 0, 0, 0), ENOSYS);
	errno = 0;
	if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
	    MAP_FAILED || errno != ENOSYS)
		_exit(2);
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		_exit(3);
	EXPECT(mprotect(m, 4096, PROT_READ | PROT_EXEC), ENOSYS);
	if (mprotect(m, 4096, PROT_READ) < 0 || write(-1, "", 0) != -1 || errno != EBADF)
		_exit(4);
}

START_TEST(test_helper_only)
{
	static const char *const names[] = { "write", "exit_group", "nonsense_call", NULL };
	char err[256];
	int st;

	ck_assert_msg(policy_build_only(&pol, names, err, sizeof(err)) == 0, "%s", err);
	/* write, exit_group, mmap, mprotect (and the sanitizer's sigaltstack) */
	ck_assert_uint_eq(pol.allowed, 4 + SANITIZED_BUILD);
	st = in_child(helper_calls);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "status %#x (exit code = 10 + line %% 100 of the call that passed)", st);
	st = in_child(x32_call);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status %#x", st);
	policy_release(&pol);
}
END_TEST

/* Does this kernel take the 32-bit entry point at all?  Without the filter:
 * a kernel built or booted without IA32 emulation (or a hypervisor that
 * does not pass int 0x80 on) answers it with SIGSEGV, and there is then
 * nothing for the filter to refuse. */
static bool has_i386_entry(void)
{
	int st;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		i386_call();
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 5;
}

START_TEST(test_i386_kills)
{
	int st;

	if (!has_i386_entry()) {
		fprintf(stderr, "skipped test_i386_kills: this kernel has no 32-bit syscall "
			"entry (int 0x80 is SIGSEGV without any filter)\n");
		return;
	}
	build();
	st = in_child(i386_call);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status %#x", st);
	policy_release(&pol);
}
END_TEST

Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("seccomp");

	tcase_add_test(tc, test_build);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_allowed);
	tcase_add_test(tc, test_x32_kills);
	tcase_add_test(tc, test_i386_kills);
	tcase_add_test(tc, test_helper_only);
	suite_add_tcase(s, tc);
	return s;
}
