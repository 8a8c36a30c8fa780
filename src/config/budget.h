/* budget — the host's shared tables, shared out before anything starts.
 *
 * Every sandbox of every daemon on a host draws on three tables the kernel
 * keeps for the whole machine: pids (kernel.pid_max), threads
 * (kernel.threads-max) and ptys (kernel.pty.max, less kernel.pty.reserve,
 * which only the host's own devpts may use).  A sandbox's cgroup bounds
 * its own share, but max_sessions of them at once could still take a whole
 * table and make fork() or openpty() fail for the host.  So at start petri
 * reads the tables (budget_read_host) and checks, or sizes, the
 * configuration against them (budget_apply), keeping a reserve for the
 * host:
 *
 *   pids:  (max_sessions + 1) x [max_limits] pids + (pool_max + 2) x
 *          BUDGET_IDLE_PIDS  <=  min(pid_max, threads-max) - reserve,
 *          reserve = max(BUDGET_PID_FLOOR, table / 8).
 *          The +1 is the probe (session/probe.c), which the cap does not
 *          count; the pool's ready sandboxes and the two templates (one
 *          retiring) run no client code and hold a few pids each.
 *   ptys:  (max_sessions + 1) x [sandbox] ptys  <=  pty.max - pty.reserve
 *          - reserve, reserve = max(BUDGET_PTY_FLOOR, table / 4).
 *
 * max_sessions stands for the sessions the command may hold at once: one
 * for petri run.
 *
 * A value the file did not set is sized to fit ([max_limits] pids no
 * higher than its default, [sandbox] ptys no higher than
 * JAIL_PTYS_DEFAULT, neither below its floor); a value the file set that
 * cannot fit, or a share below the floor, is a configuration error that
 * names the keys and the numbers.  A table the host does not show (a /proc
 * without the file) is not checked.
 *
 * budget_apply() is pure (the host's numbers are its argument): tests give
 * it any host they like. */
#ifndef PETRI_BUDGET_H
#define PETRI_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define BUDGET_PID_FLOOR 4096	/* pids and threads kept for the host, at least */
#define BUDGET_PTY_FLOOR 64	/* ptys kept for the host's other containers, at least */
#define BUDGET_IDLE_PIDS 16	/* a template or a ready sandbox: pid 1, the runtime, its threads */
#define BUDGET_MIN_PTYS 4	/* the least a sized [sandbox] ptys may be */

/* The host's tables; 0: unknown (not checked). */
struct host_tables {
	uint64_t pid_max;	/* /proc/sys/kernel/pid_max */
	uint64_t threads_max;	/* /proc/sys/kernel/threads-max */
	uint64_t pty_max;	/* /proc/sys/kernel/pty/max */
	uint64_t pty_reserve;	/* /proc/sys/kernel/pty/reserve */
};

/* What budget_apply() found and decided, for `petri check`. */
struct budget {
	uint32_t sessions;	/* the sessions counted */
	uint64_t pid_table;	/* min(pid_max, threads-max); 0: not checked */
	uint64_t pid_reserve;	/* kept for the host */
	uint64_t pid_worst;	/* every sandbox at its most */
	uint32_t pids;		/* [max_limits] pids, as applied */
	bool pids_sized;	/* lowered from its default to fit */
	uint64_t pty_table;	/* pty.max - pty.reserve; 0: not checked */
	uint64_t pty_reserve;	/* kept for the host's other devpts instances */
	uint64_t pty_worst;
	uint32_t ptys;		/* [sandbox] ptys, as applied */
	bool ptys_sized;	/* sized to fit (the file did not set it) */
};

/* Read the host's tables from /proc; a file that cannot be read leaves
 * its field 0. */
void budget_read_host(struct host_tables *h);

/* Check cfg against the host's tables h for sessions sessions at once
 * (cfg->max_sessions for a daemon, 1 for petri run, which holds one
 * sandbox), sizing cfg->max.pids and cfg->ptys where the file left them to
 * petri (see above); b says what was found.  0, or -EINVAL with the reason
 * in err (cfg then unchanged). */
int budget_apply(struct petri_config *cfg, const struct host_tables *h, uint32_t sessions,
		 struct budget *b, char *err, size_t errlen);

#endif
