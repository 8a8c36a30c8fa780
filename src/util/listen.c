#include "util/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int listen_tcp(const char *listen_at, int backlog, char *address, size_t addrlen, char *err,
	       size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE |
				  AI_NUMERICSERV }, *ai = NULL;
	char host[256], port[16], name[INET6_ADDRSTRLEN];
	const char *colon = strrchr(listen_at, ':');
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t n;
	int fd = -1, one = 1, r;

	if (!colon || colon == listen_at || strlen(colon + 1) >= sizeof(port) ||
	    (n = (size_t)(colon - listen_at)) >= sizeof(host)) {
		snprintf(err, errlen, "listen: expected HOST:PORT or unix:PATH, got '%s'", listen_at);
		return -EINVAL;
	}
	memcpy(host, listen_at, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	snprintf(port, sizeof(port), "%s", colon + 1);
	if ((r = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(err, errlen, "listen: cannot resolve '%s': %s", listen_at, gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;

		snprintf(err, errlen, "listen on %s: %s", listen_at, strerror(e));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -e;
	}
	freeaddrinfo(ai);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, name, sizeof(name));
		snprintf(address, addrlen, "[%s]:%u", name, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, name, sizeof(name));
		snprintf(address, addrlen, "%s:%u", name, ntohs(s4->sin_port));
	}
	return fd;
}
