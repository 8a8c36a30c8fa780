// attack: scan every TCP port of 127.0.0.1 and ::1 for something listening (the daemon's own port, the host's services)
// expect: nothing: the sandbox's loopback is its own and empty
// status: ok
// limits: timeout=30
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
/* A connect to a port of the ephemeral range can pick that very port as
 * its source and connect to itself (TCP simultaneous open): not a listener. */
static int self_connected(int s)
{
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof(l), pl = sizeof(p);

	if (getsockname(s, (struct sockaddr *)&l, &ll) < 0 || getpeername(s, (struct sockaddr *)&p, &pl) < 0)
		return 0;
	return ll == pl && memcmp(&l, &p, ll) == 0;
}

int main(void)
{
	int open_ports = 0;
	for (int port = 1; port < 65536; port++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		struct sockaddr_in6 b = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 && !self_connected(s)) {
			fprintf(stderr, "ESCAPE: 127.0.0.1:%d answers\n", port);
			open_ports++;
		}
		close(s);
		s = socket(AF_INET6, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&b, sizeof(b)) == 0 && !self_connected(s)) {
			fprintf(stderr, "ESCAPE: [::1]:%d answers\n", port);
			open_ports++;
		}
		close(s);
	}
	if (!open_ports)
		fprintf(stderr, "CONTAINED: no port open on the sandbox's loopback\n");
	return 0;
}
