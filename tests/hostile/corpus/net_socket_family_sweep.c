// attack: socket(2) with every address family 0..63 and every type, looking for one the filter forgot (bluetooth, can, xdp, tipc, rds...)
// expect: only AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (route only: net_netlink_socket.py) are allowed; everything else EAFNOSUPPORT
// status: ok
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#define ALLOWED(f) ((f) == AF_UNIX || (f) == AF_INET || (f) == AF_INET6 || (f) == AF_NETLINK)
int main(void)
{
	int bad = 0;
	for (int fam = 0; fam < 64; fam++)
		for (int type = 1; type <= 10; type++) {
			int s = socket(fam, type, 0);
			if (s >= 0) {
				close(s);
				if (!ALLOWED(fam)) {
					fprintf(stderr, "ESCAPE: socket(%d, %d)\n", fam, type);
					bad = 1;
				}
			} else if (!ALLOWED(fam) && errno != EAFNOSUPPORT) {
				fprintf(stderr, "ESCAPE? socket(%d, %d): %s, expected EAFNOSUPPORT\n", fam, type, strerror(errno));
				bad = 1;
			}
		}
	if (!bad)
		fprintf(stderr, "CONTAINED: only unix, inet, inet6 and netlink\n");
	return 0;
}
