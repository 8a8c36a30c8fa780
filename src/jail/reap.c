/* pid 1's life after set-up (see reap.h).  System calls only: this runs in
 * a copy of the supervisor, or in petri-init, a static program. */
#include "jail/reap.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init.h"
#include "jail/safe.h"

/* Signals pid 1 passes on to the main process.  Everything else aimed at
 * pid 1 from inside is ignored by the kernel (pid 1 has no handler). */
static const int forwarded[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
};

void init_send_record(int fd, char tag, int32_t value, const char *text)
{
	struct init_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.tag = tag;
	rec.value = value;
	if (text)
		safe_strlcat(rec.text, text, sizeof(rec.text));
	(void)safe_write_all(fd, &rec, sizeof(rec));
}

void reap_mask(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(mask, forwarded[i]);
}

int reap_signals(sigset_t *mask)
{
	int sfd;

	reap_mask(mask);
	if (sigprocmask(SIG_BLOCK, mask, NULL) < 0)
		return -errno;
	sfd = signalfd(-1, mask, SFD_CLOEXEC);
	return sfd < 0 ? -errno : sfd;
}

/* Reap everything there is to reap now; true once the main process is
 * gone, its status in *wstatus. */
static bool reap(pid_t main_pid, int *wstatus)
{
	bool done = false;
	int st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == main_pid) {
			*wstatus = st;
			done = true;
		}
	return done;
}

void reap_serve(int sfd, int sync_fd, int status_fd, pid_t main_pid, bool keep_going)
{
	struct pollfd pfd[2] = {
		{ .fd = sfd, .events = POLLIN },
		{ .fd = sync_fd, .events = POLLIN },
	};
	struct signalfd_siginfo si;
	int wstatus = 0;
	/* Look first: the main process may have ended before the signalfd
	 * existed (its SIGCHLD is queued then, but a look costs nothing). */
	bool check = true;

	for (;;) {
		if (check && main_pid > 0 && reap(main_pid, &wstatus)) {
			init_send_record(status_fd, INIT_EXIT, wstatus, NULL);
			if (!keep_going)
				break;
			main_pid = -1;
		}
		check = false;
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)	/* supervisor gone: end everything */
			break;
		if (!(pfd[0].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			if (main_pid > 0)
				kill(main_pid, (int)si.ssi_signo);
			continue;
		}
		if (main_pid > 0)
			check = true;
		else
			reap(-1, &wstatus);	/* a template's orphans */
	}
	/* Whatever the main process left behind goes with it. */
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}
