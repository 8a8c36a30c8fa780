// attack: the classic chroot escape: chroot into a subdirectory while keeping a handle on the old root, then chdir("..") x 64 and chroot(".")
// expect: chroot refused with EPERM (seccomp); nothing of the host reachable
// status: ok
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	int fd = open("/", O_RDONLY | O_DIRECTORY);
	mkdir("/tmp/jail", 0755);
	if (chroot("/tmp/jail") == 0) {
		fprintf(stderr, "chroot worked\n");
		fchdir(fd);
		for (int i = 0; i < 64; i++)
			chdir("..");
		if (chroot(".") == 0)
			bad = 1;
		if (access("/root", F_OK) == 0 || access("/home", F_OK) == 0 || access("/var", F_OK) == 0) {
			fprintf(stderr, "ESCAPE: host root reached\n");
			return 0;
		}
	} else if (errno != EPERM) {
		fprintf(stderr, "chroot failed with %s (expected EPERM)\n", strerror(errno));
		bad = 1;
	}
	fprintf(stderr, bad ? "ESCAPE: chroot allowed\n" : "CONTAINED: chroot refused with EPERM\n");
	return 0;
}
