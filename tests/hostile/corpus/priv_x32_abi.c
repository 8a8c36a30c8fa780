// attack: system calls through the x32 ABI (nr | 0x40000000): getpid, then the x32 numbers of unshare and mount, which a filter keyed on x86_64 numbers might miss
// expect: the filter kills the calling process with SIGSYS before anything runs
// status: ok
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static int try_nr(long nr, long a0)
{
	pid_t c = fork();
	int st;
	if (c == 0) {
		long r;
		__asm__ volatile ("syscall" : "=a"(r) : "a"(nr), "D"(a0), "S"(0), "d"(0) : "rcx", "r11", "memory");
		_exit(r >= 0 ? 0 : 1);
	}
	waitpid(c, &st, 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}
int main(void)
{
	long nrs[] = { 0x40000000 | 39, 0x40000000 | 272, 0x40000000 | 165, 0x40000000 | 512 };
	int bad = 0;
	for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
		int s = try_nr(nrs[i], 0x10000000 /* CLONE_NEWUSER for unshare */);
		if (s != SIGSYS) {
			fprintf(stderr, "ESCAPE: x32 call %#lx was not killed (%d)\n", nrs[i], s);
			bad = 1;
		}
	}
	if (!bad)
		fprintf(stderr, "CONTAINED: every x32 call killed with SIGSYS\n");
	return 0;
}
