// attack: ptrace a sibling (a forked child of the same uid) and PTRACE_TRACEME, to inject code into anything else
// expect: EPERM from seccomp, even on our own child
// status: ok
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	pid_t c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	if (ptrace(PTRACE_ATTACH, c, 0, 0) == 0 || errno != EPERM) {
		fprintf(stderr, "ESCAPE: PTRACE_ATTACH %s\n", strerror(errno));
		bad = 1;
	}
	if (ptrace(PTRACE_SEIZE, c, 0, 0) == 0 || errno != EPERM) {
		fprintf(stderr, "ESCAPE: PTRACE_SEIZE %s\n", strerror(errno));
		bad = 1;
	}
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) == 0 || errno != EPERM) {
		fprintf(stderr, "ESCAPE: PTRACE_TRACEME\n");
		bad = 1;
	}
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	if (!bad)
		fprintf(stderr, "CONTAINED: ptrace refused\n");
	return 0;
}
