#include "config/budget.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "jail/jail.h"

static uint64_t read_u64(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

void budget_read_host(struct host_tables *h)
{
	h->pid_max = read_u64("/proc/sys/kernel/pid_max");
	h->threads_max = read_u64("/proc/sys/kernel/threads-max");
	h->pty_max = read_u64("/proc/sys/kernel/pty/max");
	h->pty_reserve = read_u64("/proc/sys/kernel/pty/reserve");
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_known(uint64_t a, uint64_t b) { return !a ? b : !b ? a : a < b ? a : b; }

/* pids: the sessions (and the probe) at [max_limits] pids, the idle
 * sandboxes at BUDGET_IDLE_PIDS, within the table less the reserve. */
static int budget_pids(struct petri_config *c, const struct host_tables *h, uint32_t n,
		       struct budget *b, char *err, size_t errlen)
{
	uint64_t sessions = (uint64_t)n + 1;
	uint64_t idle = ((uint64_t)c->pool_max + 2) * BUDGET_IDLE_PIDS;
	uint64_t usable, share;
	const char *table_name;

	b->pids = c->max.pids;
	b->pid_table = min_known(h->pid_max, h->threads_max);
	if (!b->pid_table)
		return 0;
	table_name = b->pid_table == h->pid_max ? "kernel.pid_max" : "kernel.threads-max";
	/* The host's own processes (its services, a root shell to mend
	 * things, this daemon's threads, the other daemons' supervisors):
	 * a busy server runs a few thousand, and the reserve grows with
	 * the table so that a large host keeps a proportionate margin. */
	b->pid_reserve = max_u64(BUDGET_PID_FLOOR, b->pid_table / 8);
	usable = b->pid_table > b->pid_reserve + idle ? b->pid_table - b->pid_reserve - idle : 0;
	share = usable / sessions;
	if (c->max_pids_set) {
		if ((uint64_t)c->max.pids > share) {
			snprintf(err, errlen,
				 "[max_limits] pids = %u for each of max_sessions = %u sessions (and "
				 "the probe) is %" PRIu64 " processes, and %" PRIu64 " more for the "
				 "templates and the pool: more than the %" PRIu64 " this host leaves "
				 "to sandboxes (%s = %" PRIu64 " less %" PRIu64 " kept for the host); "
				 "at most %" PRIu64 " each fits: lower [max_limits] pids or "
				 "max_sessions, or raise %s",
				 c->max.pids, n, sessions * c->max.pids, idle,
				 b->pid_table > b->pid_reserve ? b->pid_table - b->pid_reserve : 0,
				 table_name, b->pid_table, b->pid_reserve, share, table_name);
			return -EINVAL;
		}
	} else if ((uint64_t)c->max.pids > share) {
		if (share < c->defaults.pids) {
			snprintf(err, errlen,
				 "max_sessions = %u sessions (and the probe) at [limits] pids = %u "
				 "need %" PRIu64 " processes, and %" PRIu64 " more for the templates "
				 "and the pool: more than the %" PRIu64 " this host leaves to "
				 "sandboxes (%s = %" PRIu64 " less %" PRIu64 " kept for the host); "
				 "lower max_sessions or [limits] pids, or raise %s",
				 n, c->defaults.pids, sessions * c->defaults.pids, idle,
				 b->pid_table > b->pid_reserve ? b->pid_table - b->pid_reserve : 0,
				 table_name, b->pid_table, b->pid_reserve, table_name);
			return -EINVAL;
		}
		b->pids = (uint32_t)share;
		b->pids_sized = true;
	}
	b->pid_worst = sessions * b->pids + idle;
	return 0;
}

/* ptys: every session (and the probe) at [sandbox] ptys within what the
 * kernel leaves to devpts instances other than the host's, less a reserve
 * for the host's other containers.  Templates and ready sandboxes open
 * none. */
static int budget_ptys(struct petri_config *c, const struct host_tables *h, uint32_t n,
		       struct budget *b, char *err, size_t errlen)
{
	uint64_t sessions = (uint64_t)n + 1;
	uint64_t usable, share;

	b->ptys = c->ptys_set ? c->ptys : JAIL_PTYS_DEFAULT;
	if (!h->pty_max)
		return 0;
	b->pty_table = h->pty_max > h->pty_reserve ? h->pty_max - h->pty_reserve : 0;
	b->pty_reserve = max_u64(BUDGET_PTY_FLOOR, b->pty_table / 4);
	usable = b->pty_table > b->pty_reserve ? b->pty_table - b->pty_reserve : 0;
	share = usable / sessions;
	if (c->ptys_set && (uint64_t)c->ptys > share) {
		snprintf(err, errlen,
			 "ptys = %u in [sandbox] for each of max_sessions = %u sessions (and the "
			 "probe) is %" PRIu64 " ptys: more than the %" PRIu64 " this host leaves "
			 "to sandboxes (kernel.pty.max = %" PRIu64 " less kernel.pty.reserve = "
			 "%" PRIu64 " less %" PRIu64 " kept for other containers); at most %"
			 PRIu64 " each fits: lower ptys or max_sessions, or raise kernel.pty.max",
			 c->ptys, n, sessions * c->ptys, usable, h->pty_max,
			 h->pty_reserve, b->pty_reserve, share);
		return -EINVAL;
	}
	if (!c->ptys_set && share < b->ptys) {
		if (share < BUDGET_MIN_PTYS) {
			snprintf(err, errlen,
				 "max_sessions = %u sessions (and the probe) cannot each have %d "
				 "ptys: this host leaves %" PRIu64 " to sandboxes (kernel.pty.max = "
				 "%" PRIu64 " less kernel.pty.reserve = %" PRIu64 " less %" PRIu64
				 " kept for other containers); lower max_sessions, set ptys in "
				 "[sandbox] to at most %" PRIu64 ", or raise kernel.pty.max",
				 n, BUDGET_MIN_PTYS, usable, h->pty_max,
				 h->pty_reserve, b->pty_reserve, share);
			return -EINVAL;
		}
		b->ptys = (uint32_t)share;
		b->ptys_sized = true;
	}
	b->pty_worst = sessions * b->ptys;
	return 0;
}

int budget_apply(struct petri_config *cfg, const struct host_tables *h, uint32_t sessions,
		 struct budget *b, char *err, size_t errlen)
{
	int r;

	*b = (struct budget){ 0 };
	b->sessions = sessions;
	if ((r = budget_pids(cfg, h, sessions, b, err, errlen)) < 0 ||
	    (r = budget_ptys(cfg, h, sessions, b, err, errlen)) < 0)
		return r;
	cfg->max.pids = b->pids;
	cfg->ptys = b->ptys;
	return 0;
}
