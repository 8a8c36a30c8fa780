// attack: raw clone(2) with each namespace flag, with flags in the upper 32 bits, and combined with CLONE_VM/CLONE_VFORK
// expect: the argument check refuses every namespace flag with EPERM; a plain clone still works
// status: ok
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static long raw_clone(unsigned long flags)
{
	long r = syscall(SYS_clone, flags, 0, 0, 0, 0);
	if (r == 0)
		_exit(42);	/* the child: gone at once */
	if (r > 0)
		waitpid((pid_t)r, NULL, __WALL);
	return r;
}
int main(void)
{
	unsigned long ns[] = { CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC,
			       CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWUSER | (1ul << 32),
			       CLONE_NEWNS | CLONE_FS };
	int bad = 0;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		long r = raw_clone(ns[i] | SIGCHLD);
		if (r >= 0 || errno != EPERM) {
			fprintf(stderr, "ESCAPE: clone(%#lx) -> %ld (%s)\n", ns[i], r, strerror(errno));
			bad = 1;
		}
	}
	if (raw_clone(SIGCHLD) <= 0) {
		fprintf(stderr, "a plain clone failed: %s\n", strerror(errno));
		bad = 1;
	}
	if (!bad)
		fprintf(stderr, "CONTAINED: every namespace flag refused\n");
	return 0;
}
