// attack: clone3(2), whose flags live in memory a seccomp filter cannot read: CLONE_NEWUSER|CLONE_NEWNS, and CLONE_INTO_CGROUP
// expect: clone3 answers ENOSYS whatever its arguments (glibc then falls back to clone)
// status: ok
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	struct clone_args a;
	int bad = 0;
	uint64_t flags[] = { CLONE_NEWUSER | CLONE_NEWNS, 0, CLONE_NEWPID, CLONE_INTO_CGROUP };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		memset(&a, 0, sizeof(a));
		a.flags = flags[i];
		a.exit_signal = SIGCHLD;
		long r = syscall(435, &a, sizeof(a));
		if (r == 0)
			_exit(0);
		if (r > 0) {
			waitpid((pid_t)r, NULL, 0);
			fprintf(stderr, "ESCAPE: clone3(%#llx) made a process\n", (unsigned long long)flags[i]);
			bad = 1;
		} else if (errno != ENOSYS) {
			fprintf(stderr, "clone3(%#llx): %s, expected ENOSYS\n", (unsigned long long)flags[i], strerror(errno));
			bad = 1;
		}
	}
	if (!bad)
		fprintf(stderr, "CONTAINED: clone3 answers ENOSYS\n");
	return 0;
}
