// attack: unshare(CLONE_NEWUSER) to become root in a new user namespace, then unshare(CLONE_NEWNS) and mount
// expect: EPERM from seccomp; no new namespace (and its uid 0) ever exists
// status: ok
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	if (unshare(CLONE_NEWUSER) == 0) {
		fprintf(stderr, "ESCAPE: a new user namespace\n");
		bad = 1;
		if (unshare(CLONE_NEWNS) == 0 && mount("none", "/tmp", "tmpfs", 0, NULL) == 0)
			fprintf(stderr, "ESCAPE: mounted a tmpfs\n");
	} else if (errno != EPERM) {
		fprintf(stderr, "ESCAPE? unshare failed with %s, not EPERM\n", strerror(errno));
		bad = 1;
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) == 0) {
		fprintf(stderr, "ESCAPE: all namespaces\n");
		bad = 1;
	}
	if (!bad)
		fprintf(stderr, "CONTAINED: unshare refused with EPERM\n");
	return 0;
}
