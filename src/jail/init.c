/* The sandbox's pid 1 and the main process's last steps before execve.
 * See the theory of operation in jail.h.  No allocation, no stdio: this is
 * a copy of a possibly multi-threaded process. */
#include "jail/init.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/safe.h"

/* Signals pid 1 passes on to the main process.  Everything else aimed at
 * pid 1 from inside is ignored by the kernel (pid 1 has no handler). */
static const int forwarded[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
};

static void send_record(int fd, char tag, int32_t value, const char *text)
{
	struct init_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.tag = tag;
	rec.value = value;
	if (text)
		safe_strlcat(rec.text, text, sizeof(rec.text));
	(void)safe_write_all(fd, &rec, sizeof(rec));
}

__attribute__((noreturn)) static void fail(const struct init_args *a,
					   const char *msg)
{
	send_record(a->status_fd, INIT_ERROR, 0, msg);
	_exit(125);
}

/* Close every descriptor but the ones in keep[] (sorted ascending). */
static void close_all_but(const int *keep, size_t n)
{
	unsigned int from = 0;

	for (size_t i = 0; i < n; i++) {
		if ((unsigned)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

static void sort_fds(int *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
			int t = v[k];

			v[k] = v[k - 1];
			v[k - 1] = t;
		}
}

static int loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		r = -errno;
	} else {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			r = -errno;
	}
	close(fd);
	return r;
}

/* Become JAIL_UID with no capability in any set.  The bounding set must go
 * first: dropping from it needs CAP_SETPCAP, which the uid change takes. */
static int drop_privileges(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	if (setresgid(JAIL_GID, JAIL_GID, JAIL_GID) < 0 ||
	    setresuid(JAIL_UID, JAIL_UID, JAIL_UID) < 0)
		return -errno;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* The main process, between fork and execve. */
__attribute__((noreturn)) static void start_main(const struct init_args *a)
{
	sigset_t none;
	char err[240];
	int null_fd, status_fd, r;
	struct sigaction dfl;

	if (setsid() < 0)
		fail(a, "setsid failed");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, "cannot set the parent-death signal");

	/* fds: 0 /dev/null, 1 stdout, 2 stderr, 3 control, 4 status (closed by
	 * execve); nothing else survives. */
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	status_fd = fcntl(a->status_fd, F_DUPFD_CLOEXEC, 10);
	if (null_fd < 0 || status_fd < 0)
		fail(a, "cannot open /dev/null");
	if (dup2(null_fd, 0) < 0 || dup2(a->stdout_fd, 1) < 0 ||
	    dup2(a->stderr_fd, 2) < 0 || dup2(a->ctl_fd, 3) < 0 ||
	    dup3(status_fd, 4, O_CLOEXEC) < 0)
		fail(a, "cannot set up file descriptors");
	syscall(SYS_close_range, 5, ~0U, 0);
	status_fd = 4;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < 65; sig++)
		sigaction(sig, &dfl, NULL);	/* SIG_IGN survives execve */
	for (int i = 0; i < a->nrlimits; i++)
		if (setrlimit(a->rlimits[i].resource, &a->rlimits[i].lim) < 0) {
			safe_fail(err, sizeof(err), "cannot set rlimit", NULL, errno);
			send_record(status_fd, INIT_ERROR, 0, err);
			_exit(125);
		}
	if ((r = drop_privileges()) < 0) {
		safe_fail(err, sizeof(err), "cannot drop privileges", NULL, -r);
		send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	/* The uid change reset it: set it again, then make sure pid 1 is
	 * still there (it could have died in between). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != 1)
		_exit(125);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		send_record(status_fd, INIT_ERROR, 0, "cannot set no_new_privs");
		_exit(125);
	}
	if (a->landlock_abi > 0 && (r = landlock_apply(a->landlock_abi)) < 0) {
		safe_fail(err, sizeof(err), "cannot apply landlock", NULL, -r);
		send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	if (chdir(JAIL_WORKDIR) < 0) {
		send_record(status_fd, INIT_ERROR, 0, "cannot enter " JAIL_WORKDIR);
		_exit(125);
	}
	/* Nothing blocked: not what pid 1 blocks, nor what the supervisor
	 * blocked in its own threads before it cloned us. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((r = policy_load(a->policy)) < 0) {
		safe_fail(err, sizeof(err), "cannot load the seccomp filter", NULL, -r);
		send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	execve(a->argv[0], (char *const *)a->argv, (char *const *)a->envp);
	safe_fail(err, sizeof(err), "cannot execute", a->argv[0], errno);
	send_record(status_fd, INIT_ERROR, 0, err);
	_exit(127);
}

/* Reap everything; return when the main process is gone, its status in
 * *wstatus. */
static int reap(pid_t main_pid, int *wstatus)
{
	int st, done = 0;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == main_pid) {
			*wstatus = st;
			done = 1;
		}
	return done;
}

/* pid 1's life after set-up: reap orphans, forward signals, and end the
 * sandbox when the main process ends or the supervisor goes away. */
__attribute__((noreturn)) static void serve_as_init(const struct init_args *a,
						    pid_t main_pid, int sfd)
{
	struct pollfd pfd[2] = {
		{ .fd = sfd, .events = POLLIN },
		{ .fd = a->sync_fd, .events = POLLIN },
	};
	struct signalfd_siginfo si;
	int wstatus = 0;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)	/* supervisor gone: end everything */
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			kill(main_pid, (int)si.ssi_signo);
			continue;
		}
		if (reap(main_pid, &wstatus)) {
			send_record(a->status_fd, INIT_EXIT, wstatus, NULL);
			break;
		}
	}
	/* Whatever the main process left behind goes with it. */
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}

void init_main(const struct init_args *a)
{
	int keep[] = { a->sync_fd, a->status_fd, a->stdout_fd, a->stderr_fd, a->ctl_fd };
	char err[240], go;
	sigset_t mask;
	pid_t main_pid;
	int sfd, r;

	sort_fds(keep, sizeof(keep) / sizeof(keep[0]));
	close_all_but(keep, sizeof(keep) / sizeof(keep[0]));
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	/* The parent writes our uid/gid maps and moves us into the cgroup,
	 * then says go.  EOF means it died first. */
	if (read(a->sync_fd, &go, 1) != 1)
		_exit(125);
	if (setresgid(a->setup_gid, a->setup_gid, a->setup_gid) < 0 ||
	    setresuid(a->setup_uid, a->setup_uid, a->setup_uid) < 0)
		fail(a, "cannot become the namespace's user");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, "cannot set the parent-death signal");
	/* Our cgroup is final now: make it the root of our cgroup view. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(a, "cannot create a cgroup namespace");
	umask(022);
	if (mount_setup_root(a->plan, err, sizeof(err)) < 0)
		fail(a, err);
	if (sethostname(a->hostname, strlen(a->hostname)) < 0)
		fail(a, "cannot set the hostname");
	if ((r = loopback_up()) < 0) {
		safe_fail(err, sizeof(err), "cannot bring up", "lo", -r);
		fail(a, err);
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&mask, forwarded[i]);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		fail(a, "cannot block signals");
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0)
		fail(a, "cannot create a signalfd");

	send_record(a->status_fd, INIT_READY, 0, NULL);
	/* Not fork(): glibc's fork takes allocator locks that another thread
	 * of the original process may have held when we were cloned. */
	main_pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (main_pid < 0)
		fail(a, "cannot fork the main process");
	if (main_pid == 0)
		start_main(a);

	/* pid 1 keeps only what it needs and gives up the rest. */
	close(a->stdout_fd);
	close(a->stderr_fd);
	close(a->ctl_fd);
	if (drop_privileges() < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    policy_load(a->policy) < 0) {
		kill(main_pid, SIGKILL);
		fail(a, "pid 1 cannot drop its privileges");
	}
	serve_as_init(a, main_pid, sfd);
}
