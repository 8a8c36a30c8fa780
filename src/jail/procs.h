/* procs — the processes of one sandbox, seen through the sandbox's own
 * /proc: listed, described and signalled by the supervisor.
 *
 * Why its own /proc and not the host's.  A procfs instance shows the pid
 * namespace it was mounted for and nothing else: a pid looked up under it
 * is a pid of the sandbox, numbered as the sandbox numbers it, and can
 * never name a host process, whatever was reused meanwhile.  The jail opens
 * it once, when the sandbox is set up and before any code of the sandbox
 * runs (procs_open()), and keeps the descriptor: it pins the superblock and
 * with it the pid namespace, so the namespace cannot be freed and another
 * made in its place while the descriptor lives.  A directory fd of
 * <proc>/<pid> pins that one process: reads through it fail once the
 * process is gone (never describing the next owner of the number), and
 * pidfd_send_signal() takes it as a pidfd.  So enumeration and signals are
 * race-free with no check of cgroup membership or uids, and they work the
 * same with cgroups (v1, v2) and without (rlimits only).  Processes petri
 * puts in a sandbox's cgroup from outside its namespaces (the upload
 * writers of jail_fork_charged()) are not in it, and are not listed.
 *
 * Everything read is written by the kernel but chosen by the sandbox (a
 * command name, a command line rewritten by its process): bounded here,
 * never trusted to be text.
 *
 * Errors: 0 or a negative errno. */
#ifndef PETRI_PROCS_H
#define PETRI_PROCS_H

#include <stddef.h>
#include <sys/types.h>

#include "jail/jail.h"

/* The sandbox's /proc, from the host: pid1 is its pid 1 as the host sees
 * it, still alive.  Verified to be a procfs whose pid 1 lives in the same
 * pid namespace as the host's pid1.  *fd is a directory descriptor
 * (O_RDONLY, close-on-exec), or -1 on failure. */
int procs_open(pid_t pid1, int *fd);

/* jail_procs() and jail_proc_signal() on that descriptor; also: the
 * process jail_protect() named, or 0. */
int procs_list(int proc_fd, pid_t also, struct jail_proc *out, size_t max, size_t *total);
int procs_signal(int proc_fd, pid_t also, pid_t pid, int sig);
int procs_oom_score_adj(int proc_fd, pid_t pid, int adj);

/* The fields of a /proc/PID/stat line (line[0..len), not NUL-terminated)
 * that a jail_proc holds: state, ppid, threads, name, CPU time in clock
 * ticks, start time in ticks since boot, rss in pages.  The command name
 * may hold anything, ')' and spaces included: fields are counted after the
 * last ')'.  0, or -EINVAL when the line is not one. */
struct procs_stat {
	char state;
	pid_t ppid;
	unsigned long threads;
	char name[16];
	unsigned long long cpu_ticks, start_ticks, rss_pages;
};
int procs_parse_stat(const char *line, size_t len, struct procs_stat *st);

#endif
