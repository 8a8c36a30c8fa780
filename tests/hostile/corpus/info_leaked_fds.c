// attack: look for descriptors leaked into the sandbox (a host file, a directory, the daemon's sockets)
// expect: a C child of the driver holds exactly fds 0-2 (pipes and /dev/null), nothing else
// status: ok
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	for (int fd = 0; fd < 65536; fd++) {
		struct stat st;
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		fstat(fd, &st);
		if (fd > 2) {
			fprintf(stderr, "ESCAPE: leaked fd %d mode %o dev %lx ino %lu\n", fd,
				st.st_mode, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
			bad = 1;
		} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			fprintf(stderr, "ESCAPE: fd %d is a file or directory\n", fd);
			bad = 1;
		}
	}
	if (!bad)
		fprintf(stderr, "CONTAINED: only fds 0-2\n");
	return 0;
}
