/* lease — one host uid (and the gid of the same number) per live sandbox,
 * out of a configured range, never shared by two holders on one host.
 *
 * Every sandbox running as the same host uid shares the kernel's per-user
 * quotas (unix fds in flight, epoll watches, pipe buffer pages, inotify,
 * user namespaces...): one tenant exhausting them breaks every other.  A
 * distinct uid per sandbox gives each its own.
 *
 * A lease is a lock file named after the uid in a root-owned directory
 * (JAIL_LEASE_DIR): flock(LOCK_EX) on an O_CLOEXEC descriptor held for the
 * lease's life.  Two petri daemons whose ranges overlap therefore never hand
 * out the same uid, and a daemon that dies (even by SIGKILL) lets go of its
 * leases with its descriptors.  Release unlinks the file while still holding
 * the lock; a taker re-checks, once locked, that the name still points at
 * the inode it locked (else it lost the race with such an unlink and tries
 * again).  The files of a dead daemon are harmless (unlocked: free) and
 * swept at the next start.
 *
 * Threads: lease_take() and lease_drop() may be called from any thread. */
#ifndef PETRI_LEASE_H
#define PETRI_LEASE_H

#include <stdint.h>
#include <sys/types.h>

#define JAIL_LEASE_DIR "/run/petri/uids"

struct lease_pool;

struct lease {
	uid_t uid;	/* the leased host uid (and gid) */
	int fd;		/* the locked file; -1: none held */
};

/* A pool of the uids [first, first + count) with its lock files in dir
 * (created 0700 if missing; it must belong to root, or to us, and be
 * writable by no one else).  Sweeps the stale files of dead holders. */
int lease_pool_open(const char *dir, uid_t first, uint32_t count,
		    struct lease_pool **out, char *err, size_t errlen);
void lease_pool_free(struct lease_pool *p);

/* Lease a free uid: 0, or -EAGAIN when every uid of the range is held. */
int lease_take(struct lease_pool *p, struct lease *out);
/* Give a lease back (its file goes).  A lease with fd -1 is left alone. */
void lease_drop(struct lease_pool *p, struct lease *l);

/* How many uids of the range no one holds, or -errno. */
long lease_count_free(struct lease_pool *p);
/* Remove the files of dir that no one holds.  Returns how many, or -errno. */
int lease_sweep(struct lease_pool *p);

#endif
