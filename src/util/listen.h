/* listen — a TCP socket listening where the operator said: "HOST:PORT" or
 * "[IPv6]:PORT" (port 0: the kernel picks one), for the API and for the
 * node's agent (src/cluster/agent.h). */
#ifndef PETRI_LISTEN_H
#define PETRI_LISTEN_H

#include <stddef.h>

/* The listening socket (close-on-exec, SO_REUSEADDR, backlog entries), and
 * the address it got ("127.0.0.1:8080", "[::1]:8080") in address; or
 * -errno with a message naming what in err. */
int listen_tcp(const char *listen_at, int backlog, char *address, size_t addrlen, char *err,
	       size_t errlen);

#endif
