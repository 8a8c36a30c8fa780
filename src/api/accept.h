/* accept — the thread that accepts the API's connections and hands each to
 * one of the event threads, each a libmicrohttpd daemon of its own (one
 * epoll thread, no listening socket: MHD_add_connection).
 *
 * Why not let libmicrohttpd accept, with a pool of epoll threads: it cannot
 * stop doing so safely.  MHD_quiesce_daemon() removes the listening socket
 * from each thread's epoll set while that thread may be removing it too (on
 * seeing the quiesce, or at the connection limit), and whichever comes
 * second aborts the process ("Failed to remove listen FD from epoll set",
 * libmicrohttpd 0.9.75 to 1.0.1): a SIGTERM that met a request in flight
 * sometimes killed the daemon before it ended its sandboxes.  Here the
 * server stops accepting by ending this thread and closing the socket: the
 * port refuses at once, and a router sends the next request elsewhere.
 *
 * Why one daemon per event thread, not a pool fed by MHD_add_connection: a
 * pool picks the thread itself, from counts that lag the connections just
 * added, and a thread handed one past its limit leaves a lock held and
 * hangs (libmicrohttpd 0.9.75, fixed in 0.9.77).  Here every count is
 * exact, taken before the hand-over, so no daemon ever meets its limit:
 *
 *   - at most limit connections in all (each daemon its part, the least
 *     loaded taking the next); at the limit nothing is accepted until one
 *     closes, and the next connections wait in the kernel's backlog;
 *   - at most per_addr from one client address (an IPv6 /64, as
 *     share.h counts tenants; unix-socket clients are not counted), a
 *     connection past it closed at once, as libmicrohttpd's own cap did.
 *
 * Threads: one thread of its own, from acceptor_start() to acceptor_stop();
 * acceptor_closed() is called on the event threads. */
#ifndef PETRI_API_ACCEPT_H
#define PETRI_API_ACCEPT_H

#include <microhttpd.h>

struct acceptor;

/* Accept on listen_fd (made non-blocking here) for the nd daemons d (each
 * started with MHD_USE_NO_LISTEN_SOCKET and MHD_USE_ITC, its own limit at
 * least its part of limit), at most limit connections in all and per_addr
 * from one address (0: no cap).  0 or -errno. */
int acceptor_start(int listen_fd, struct MHD_Daemon *const *d, unsigned nd, unsigned limit,
		   unsigned per_addr, struct acceptor **out);

/* MHD_CONNECTION_NOTIFY_CLOSED of a connection it handed over. */
void acceptor_closed(struct acceptor *a, struct MHD_Connection *conn);

/* Stop accepting: when it returns the thread has ended.  The listening
 * socket stays the caller's to close.  Idempotent. */
void acceptor_stop(struct acceptor *a);

/* After every daemon's MHD_stop_daemon(), which reports what it closes. */
void acceptor_free(struct acceptor *a);

#endif
