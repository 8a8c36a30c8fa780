/* petri-init — pid 1 of a sandbox forked from a template.
 *
 * The template's copy that becomes pid 1 (template.c) forks the sandbox's
 * main process, gives up every privilege, loads the sandbox's seccomp
 * filter and execs this: a static program of a few pages, so that pid 1
 * does not hold a copy of the Python process for the life of the sandbox.
 * It does what pid 1 of every sandbox does (reap.h), nothing more.
 *
 *   petri-init SYNC_FD STATUS_FD SIGNAL_FD MAIN_PID
 *
 * It arrives with every signal blocked and the signalfd of reap_signals()
 * made (by its predecessor: the seccomp filter allows no new one),
 * SIGCHLD at its default, no capability, no_new_privs and the filter in
 * force; built without the
 * sanitizers and linked statically (Makefile), it needs no file of the
 * sandbox but itself. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "jail/reap.h"

static int arg_int(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 1 << 30)
		return -1;
	return (int)v;
}

int main(int argc, char **argv)
{
	int sync_fd, status_fd, sfd, main_pid;
	sigset_t mask;

	/* Not dumpable (the file is not readable to us, which already says
	 * so at exec; this says it again): nothing inside may trace us or
	 * read our /proc entries. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || argc != 5)
		_exit(125);
	sync_fd = arg_int(argv[1]);
	status_fd = arg_int(argv[2]);
	sfd = arg_int(argv[3]);
	main_pid = arg_int(argv[4]);
	if (sync_fd < 0 || status_fd < 0 || sfd < 0 || main_pid <= 0)
		_exit(125);	/* the kernel kills the sandbox with us */
	/* The handlers are the defaults now: block only what we serve. */
	reap_mask(&mask);
	if (sigprocmask(SIG_SETMASK, &mask, NULL) < 0)
		_exit(125);
	reap_serve(sfd, sync_fd, status_fd, main_pid, false);
}
