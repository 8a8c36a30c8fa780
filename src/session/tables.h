/* tables — the host's tables that every sandbox draws from, and petri's
 * budget of them.
 *
 * A cgroup bounds what one sandbox takes, but two tables of the kernel are
 * shared by every process of the host, and the sum of the sandboxes'
 * bounds can be larger than they are:
 *
 * - tasks: every process and thread takes a pid (kernel.pid_max) and a
 *   task (kernel.threads-max).  A sandbox's pids.max counts both; when the
 *   sum of the sandboxes' pids.max passes the table, one tenant's fork bomb
 *   across its sessions makes fork() fail for the whole host (a review:
 *   pid_max 32768, the default 100 sessions at pids 1024 allow ~101,000).
 * - ptys: every devpts instance but the host's own draws from
 *   kernel.pty.max less kernel.pty.reserve (4096 - 1024 by default), shared
 *   with every container of the host.
 *
 * petri keeps part of each for the host and its other users (the reserve)
 * and budgets the rest: the operator's configuration must fit it at start
 * (max_sessions sandboxes at the default limits, the pool and petri's own
 * probe), and a session or one-shot that asks for more pids than the
 * budget has left is refused (the session manager counts what the live
 * sandboxes hold).
 *
 * Pure functions of what was read; host_tables_read() is the only one that
 * touches the file system. */
#ifndef PETRI_SESSION_TABLES_H
#define PETRI_SESSION_TABLES_H

#include <stdint.h>

struct host_tables {
	uint64_t pid_max;	/* kernel.pid_max */
	uint64_t threads_max;	/* kernel.threads-max */
	uint64_t pty_max;	/* kernel.pty.max */
	uint64_t pty_reserve;	/* kernel.pty.reserve: the host's own devpts only */
};

/* Read the tables under proc ("/proc"; a directory of the same layout in
 * tests).  0, or -errno when one of them cannot be read or is not a
 * number (then *t is zero). */
int host_tables_read(const char *proc, struct host_tables *t);

/* What petri's sandboxes may hold of each, all together: the table less the
 * reserve (0 when the table is smaller than the reserve). */
uint64_t host_tasks_budget(const struct host_tables *t);
uint64_t host_ptys_budget(const struct host_tables *t);

#endif
