// attack: the new mount API: fsopen("tmpfs") + fsconfig + fsmount + move_mount; open_tree(OPEN_TREE_CLONE) of "/"; fspick; mount_setattr to make /usr writable
// expect: EPERM from seccomp for every call
// status: ok
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static int bad;
static void expect_eperm(const char *what, long r)
{
	if (r >= 0 || errno != EPERM) {
		fprintf(stderr, "ESCAPE: %s -> %ld (%s)\n", what, r, strerror(errno));
		bad = 1;
	}
}
int main(void)
{
	struct { unsigned long long set, clr, prop, userns; } attr = { 0, 1 /* MOUNT_ATTR_RDONLY */, 0, 0 };
	expect_eperm("fsopen", syscall(430, "tmpfs", 0));
	expect_eperm("fsconfig", syscall(431, 3, 6 /* FSCONFIG_CMD_CREATE */, NULL, NULL, 0));
	expect_eperm("fsmount", syscall(432, 3, 0, 0));
	expect_eperm("open_tree", syscall(428, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */ | 0x8000 /* AT_RECURSIVE */));
	expect_eperm("move_mount", syscall(429, AT_FDCWD, "/usr", AT_FDCWD, "/tmp", 0));
	expect_eperm("fspick", syscall(433, AT_FDCWD, "/usr", 0));
	expect_eperm("mount_setattr", syscall(442, AT_FDCWD, "/usr", 0, &attr, sizeof(attr)));
	if (!bad)
		fprintf(stderr, "CONTAINED: the new mount API is refused\n");
	return 0;
}
