// attack: socket(2) with every address family 0..63 and every type, looking for one the filter forgot (bluetooth, can, xdp, tipc, rds...)
// expect: only AF_UNIX, AF_INET and AF_INET6 are allowed; everything else EAFNOSUPPORT
// status: ok
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void)
{
	int bad = 0;
	for (int fam = 0; fam < 64; fam++)
		for (int type = 1; type <= 10; type++) {
			int s = socket(fam, type, 0);
			if (s >= 0) {
				close(s);
				if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6) {
					fprintf(stderr, "ESCAPE: socket(%d, %d)\n", fam, type);
					bad = 1;
				}
			} else if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6 && errno != EAFNOSUPPORT) {
				fprintf(stderr, "ESCAPE? socket(%d, %d): %s, expected EAFNOSUPPORT\n", fam, type, strerror(errno));
				bad = 1;
			}
		}
	if (!bad)
		fprintf(stderr, "CONTAINED: only unix, inet and inet6\n");
	return 0;
}
