// attack: push keystrokes into a terminal (TIOCSTI) or the console (TIOCLINUX) on fds 0-2 and /dev/tty, also with junk in the upper 32 bits of the request
// expect: EPERM from the argument check for both requests in every spelling; there is no terminal anyway
// status: ok
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	char c = 'x';
	unsigned long reqs[] = { TIOCSTI, TIOCLINUX, TIOCSTI | (1ul << 32), TIOCLINUX | (0xfffful << 40) };
	int tty = open("/dev/tty", O_RDWR);
	if (tty >= 0) {
		fprintf(stderr, "ESCAPE: /dev/tty opened\n");
		bad = 1;
	}
	for (int fd = 0; fd < 3; fd++)
		for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
			long r = syscall(SYS_ioctl, fd, reqs[i], &c);
			if (r == 0 || errno != EPERM) {
				fprintf(stderr, "ESCAPE: ioctl(%d, %#lx) -> %ld %s\n", fd, reqs[i], r, strerror(errno));
				bad = 1;
			}
		}
	if (!bad)
		fprintf(stderr, "CONTAINED: TIOCSTI and TIOCLINUX refused\n");
	return 0;
}
