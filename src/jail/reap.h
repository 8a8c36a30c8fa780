/* reap — what pid 1 of a sandbox does once the sandbox runs: reap every
 * process, forward signals to the main process, report the main process's
 * wait status, and end the sandbox when it exits or the supervisor goes.
 *
 * Shared by the pid 1 of cold sandboxes and templates (a copy of the
 * supervisor, src/jail/init.c) and by petri-init, the small program a
 * sandbox forked from a template runs as pid 1 (src/jail/pid1.c), so that
 * pid 1 there is not a copy of the Python process. */
#ifndef PETRI_REAP_H
#define PETRI_REAP_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* The signals reap_signals() blocks, in *mask. */
void reap_mask(sigset_t *mask);

/* The signals pid 1 passes on to the main process (and SIGCHLD): block
 * them and return a signalfd for them, or -errno.  Blocked, they are
 * queued for pid 1 even when sent from inside the pid namespace, which
 * the kernel otherwise drops for an init without a handler. */
int reap_signals(sigset_t *mask);

/* Serve as init until the main process has exited (keep_going: until the
 * supervisor's end of sync_fd closes, for a template whose sandboxes are
 * pid namespaces under ours), then kill what is left and exit 0.  Never
 * returns.  sfd: from reap_signals(). */
__attribute__((noreturn)) void reap_serve(int sfd, int sync_fd, int status_fd,
					  pid_t main_pid, bool keep_going);

#endif
