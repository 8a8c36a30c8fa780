/* Syscall sweep, compiled and run inside a sandbox by test_syscall_sweep.py.
 *
 * Calls every x86_64 system call number 0..NR_MAX, every x32 number
 * (0x40000000 | n) and a sample of i386 numbers (int 0x80), each in a fresh
 * child (so a SIGSYS, a crash or a block ends only that child), with
 * harmless or invalid arguments, and reports one line per call on stderr
 * (stdout is not used: see hostile.WARM_STDOUT_LOST):
 *
 *     SWEEP <abi> <nr> <outcome> <detail>
 *
 * outcome: ret (returned >= 0), err (returned -1; detail = errno),
 *          sig (killed; detail = signal), exit (ended; detail = status),
 *          skip (not called: it would end or block the caller by design).
 * A child blocked for a second is killed with SIGALRM: "sig 14" = it ran.
 *
 * `syscall_sweep --i386-getpid` makes one harmless call, getpid through
 * int 0x80, and nothing else: the host-side tests run it OUTSIDE any
 * sandbox to learn whether this kernel takes the 32-bit entry point at all
 * (one without it answers SIGSEGV with no filter in place, and then the
 * sandbox's filter never sees an i386 call to kill). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_MAX 511
#define X32_BIT 0x40000000L

/* The result travels through a pipe: the child may have no usable stack
 * frame after some calls, so it writes and _exits at once. */
struct rec { long ret; int err; };

static long args_for(long nr, long a[6])
{
	for (int i = 0; i < 6; i++)
		a[i] = -1;	/* invalid fd, address, size or flag: EBADF, EFAULT, EINVAL */
	switch (nr) {
	case SYS_clone:		/* plain fork semantics: the grandchild _exits */
		a[0] = SIGCHLD; a[1] = 0; a[2] = 0; a[3] = 0; a[4] = 0;
		break;
	case SYS_socket:	/* an allowed family, an invalid type */
		a[0] = 1; a[1] = -1; a[2] = 0;
		break;
	case SYS_socketpair:	/* the only allowed family, an invalid type */
		a[0] = 1; a[1] = -1; a[2] = 0;
		break;
	case SYS_fcntl:		/* an allowed command (not F_NOTIFY) on a bad fd */
		a[0] = -1; a[1] = 1 /* F_GETFD */;
		break;
	case SYS_fadvise64:	/* harmless advice (not DONTNEED, which is answered
				 * without running) on a bad fd */
		a[0] = -1; a[1] = 0; a[2] = 0; a[3] = 0 /* POSIX_FADV_NORMAL */;
		break;
	case SYS_ioctl:		/* an allowed request on a bad fd */
		a[0] = -1; a[1] = 0x541B /* FIONREAD */; a[2] = 0;
		break;
	case SYS_personality:	/* query */
		a[0] = 0xffffffffL;
		break;
	case SYS_kill: case SYS_tkill:	/* signal 0 to a pid that cannot exist */
		a[0] = 0x3fffffff; a[1] = 0;
		break;
	case SYS_tgkill:
		a[0] = 0x3fffffff; a[1] = 0x3fffffff; a[2] = 0;
		break;
	case SYS_alarm:		/* keep our own alarm */
		a[0] = 5;
		break;
	case SYS_set_tid_address: case SYS_brk:
		a[0] = 0;
		break;
	case SYS_futex: {	/* an unknown op would answer ENOSYS from the kernel */
		static int word;
		a[0] = (long)&word; a[1] = 1 /* FUTEX_WAKE */; a[2] = 0;
		break;
	}
	}
	return nr;
}

/* Never called: they end the caller or block it by design. */
static const char *skipped(long nr)
{
	switch (nr) {
	case SYS_exit: return "exit";
	case SYS_exit_group: return "exit_group";
	case SYS_rt_sigreturn: return "rt_sigreturn";
	case SYS_vfork: return "vfork";
	case SYS_pause: return "pause";
	case SYS_rt_sigsuspend: return "rt_sigsuspend";
	}
	return NULL;
}

static long do_syscall(int abi, long nr, const long a[6])
{
	long r;

	if (abi == 32) {
		__asm__ volatile ("int $0x80" : "=a"(r)
				  : "a"(nr), "b"(a[0]), "c"(a[1]), "d"(a[2]), "S"(a[3]), "D"(a[4])
				  : "memory");
		return r;
	}
	register long r10 __asm__("r10") = a[3];
	register long r8 __asm__("r8") = a[4];
	register long r9 __asm__("r9") = a[5];
	__asm__ volatile ("syscall" : "=a"(r)
			  : "a"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
			  : "rcx", "r11", "memory");
	return r;
}

static void probe(int abi, long nr)
{
	const char *label = abi == 64 ? "x86_64" : abi == 0 ? "x32" : "i386";
	long base = abi == 0 ? (nr & ~X32_BIT) : nr;
	int fds[2], st;
	struct rec rec;
	long a[6];
	pid_t c;

	if (abi == 64 && skipped(nr)) {
		fprintf(stderr, "SWEEP %s %ld skip %s\n", label, nr, skipped(nr));
		return;
	}
	args_for(base, a);
	if (pipe(fds) < 0) {
		perror("pipe");
		exit(2);
	}
	fflush(stderr);
	c = fork();
	if (c < 0) {
		perror("fork");
		exit(2);
	}
	if (c == 0) {
		pid_t self = getpid();
		long r;

		close(fds[0]);
		alarm(1);
		r = do_syscall(abi, nr, a);
		if (getpid() != self)
			_exit(0);	/* a grandchild made by clone/fork */
		rec.ret = r;
		rec.err = r < 0 && r > -4096 ? (int)-r : 0;
		if (write(fds[1], &rec, sizeof(rec)) != sizeof(rec))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	memset(&rec, 0, sizeof(rec));
	ssize_t n = read(fds[0], &rec, sizeof(rec));
	close(fds[0]);
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;		/* grandchildren of clone/fork */
	if (n == (ssize_t)sizeof(rec)) {
		if (rec.err)
			fprintf(stderr, "SWEEP %s %ld err %d\n", label, nr, rec.err);
		else
			fprintf(stderr, "SWEEP %s %ld ret %ld\n", label, nr, rec.ret);
	} else if (WIFSIGNALED(st)) {
		fprintf(stderr, "SWEEP %s %ld sig %d\n", label, nr, WTERMSIG(st));
	} else {
		fprintf(stderr, "SWEEP %s %ld exit %d\n", label, nr, WEXITSTATUS(st));
	}
}

int main(int argc, char **argv)
{
	static const long i386_sample[] = {
		1, 2, 3, 4, 5, 11, 20, 21, 23, 26, 37, 39, 45, 54, 90, 102, 120, 125, 162, 172,
		190, 192, 240, 243, 252, 295, 310, 322, 350, 356, 386, 400, 425, 435, 449,
	};

	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 && strcmp(argv[1], "--i386-getpid") == 0) {
		probe(32, 20);
		return 0;
	}
	for (long nr = 0; nr <= NR_MAX; nr++)
		probe(64, nr);
	for (long nr = 0; nr <= NR_MAX + 36; nr++)
		probe(0, X32_BIT | nr);
	for (size_t i = 0; i < sizeof(i386_sample) / sizeof(i386_sample[0]); i++)
		probe(32, i386_sample[i]);
	fprintf(stderr, "SWEEP done\n");
	return 0;
}
