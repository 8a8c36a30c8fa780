/* processes — what a box's code left running, as every front end shows it:
 * the processes of the sandbox other than its pid 1 and the driver
 * (jail_procs()), and a signal to one of them. */
#ifndef PETRI_PROCESSES_H
#define PETRI_PROCESSES_H

#include <jansson.h>
#include <stddef.h>

#include "runtime/box.h"

/* {"processes": [{"pid", "ppid", "name", "command": [argv...],
 * "command_truncated", "state", "threads", "started_at", "elapsed_s",
 * "rss_bytes", "cpu_ms"}], "count": N, "truncated": bool}: at most
 * JAIL_PROCS_MAX processes in the order of their pids, count how many
 * there were.  Every string is valid UTF-8 (what the kernel reports of a
 * process is the process's choice).  0 with *out, or -errno. */
int processes_list(struct box *b, json_t **out);
/* That object for n processes of total (NULL: out of memory). */
struct jail_proc;
json_t *processes_json(const struct jail_proc *procs, size_t n, size_t total);

/* Send sig to the process pid (as the box's code numbers it): 0; -ESRCH,
 * no such process; -EPERM, pid 1 or the driver, which end only with the
 * sandbox (why says which, in a sentence); -EOPNOTSUPP. */
int processes_signal(struct box *b, int pid, int sig, char *why, size_t whylen);

#endif
