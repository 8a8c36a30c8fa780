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
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/reap.h"
#include "jail/safe.h"

__attribute__((noreturn)) static void fail(const struct init_args *a,
					   const char *msg)
{
	init_send_record(a->status_fd, INIT_ERROR, 0, msg);
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

/* Change our ids with the raw system calls.  glibc's setresuid() changes
 * every thread of the process (it signals them all and waits): in a clone
 * of a multi-threaded supervisor those threads do not exist, and it would
 * wait forever.  We are alone here; the system call is all we need. */
static int set_ids(uid_t uid, gid_t gid)
{
	if (syscall(SYS_setresgid, gid, gid, gid) < 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) < 0)
		return -1;
	return 0;
}

/* Become uid/gid with no capability in any set.  The bounding set must go
 * first: dropping from it needs CAP_SETPCAP, which the uid change takes. */
static int drop_privileges(uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	if (set_ids(uid, gid) < 0)
		return -errno;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* The main process, between fork and execve (or the return to its caller,
 * for a sandbox forked from a template).  Returns 0 only then. */
static int start_main(const struct init_args *a)
{
	sigset_t none;
	char err[240];
	int null_fd, out_fd, err_fd, ctl_fd, status_fd, r;
	struct sigaction dfl;

	if (setsid() < 0)
		fail(a, "setsid failed");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, "cannot set the parent-death signal");

	/* fds: 0 /dev/null, 1 stdout, 2 stderr, 3 control, 4 status (closed by
	 * execve; closed here when there is no execve); nothing else survives.
	 * Ours may have any numbers, 0 to 4 included (a template receives
	 * them from the supervisor): move them above 10 first, so that no
	 * dup2() below overwrites one that is still to be placed. */
	out_fd = fcntl(a->stdout_fd, F_DUPFD_CLOEXEC, 10);
	err_fd = fcntl(a->stderr_fd, F_DUPFD_CLOEXEC, 10);
	ctl_fd = fcntl(a->ctl_fd, F_DUPFD_CLOEXEC, 10);
	status_fd = fcntl(a->status_fd, F_DUPFD_CLOEXEC, 10);
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (out_fd < 0 || err_fd < 0 || ctl_fd < 0 || status_fd < 0 || null_fd < 0)
		fail(a, "cannot set up file descriptors");
	if (dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0 ||
	    dup2(ctl_fd, 3) < 0 || dup3(status_fd, 4, O_CLOEXEC) < 0)
		fail(a, "cannot set up file descriptors");
	/* dup2() onto itself keeps close-on-exec (/dev/null may have opened
	 * as fd 0): 0-3 must survive execve. */
	for (int fd = 0; fd < 4; fd++)
		if (fcntl(fd, F_SETFD, 0) < 0)
			fail(a, "cannot set up file descriptors");
	syscall(SYS_close_range, 5, ~0U, 0);
	status_fd = 4;

	/* SIG_IGN survives execve: reset what the supervisor ignored.  A
	 * forked sandbox returns into Python, whose handlers it keeps (the
	 * driver sets its own again). */
	if (a->mode != INIT_FORKED) {
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		for (int sig = 1; sig < 65; sig++)
			sigaction(sig, &dfl, NULL);
	}
	for (int i = 0; i < a->nrlimits; i++)
		if (setrlimit(a->rlimits[i].resource, &a->rlimits[i].lim) < 0) {
			safe_fail(err, sizeof(err), "cannot set rlimit", NULL, errno);
			init_send_record(status_fd, INIT_ERROR, 0, err);
			_exit(125);
		}
	if (chdir(JAIL_WORKDIR) < 0) {
		init_send_record(status_fd, INIT_ERROR, 0, "cannot enter " JAIL_WORKDIR);
		_exit(125);
	}
	/* Nothing blocked: not what pid 1 blocks, nor what the supervisor
	 * blocked in its own threads before it cloned us. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (a->mode == INIT_TEMPLATE)
		goto run;	/* keeps its capabilities: it makes sandboxes */

	if ((r = drop_privileges(a->run_uid, a->run_gid)) < 0) {
		safe_fail(err, sizeof(err), "cannot drop privileges", NULL, -r);
		init_send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	/* The uid change reset it: set it again, then make sure pid 1 is
	 * still there (it could have died in between). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != 1)
		_exit(125);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		init_send_record(status_fd, INIT_ERROR, 0, "cannot set no_new_privs");
		_exit(125);
	}
	if (a->landlock_abi > 0 && (r = landlock_apply(a->landlock_abi)) < 0) {
		safe_fail(err, sizeof(err), "cannot apply landlock", NULL, -r);
		init_send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
	if ((r = policy_load(a->policy)) < 0) {
		safe_fail(err, sizeof(err), "cannot load the seccomp filter", NULL, -r);
		init_send_record(status_fd, INIT_ERROR, 0, err);
		_exit(125);
	}
run:
	if (a->mode == INIT_FORKED) {
		close(status_fd);
		return 0;
	}
	execve(a->argv[0], (char *const *)a->argv, (char *const *)a->envp);
	safe_fail(err, sizeof(err), "cannot execute", a->argv[0], errno);
	init_send_record(status_fd, INIT_ERROR, 0, err);
	_exit(127);
}

void init_epoch_now(struct init_epoch *e)
{
	struct timespec real, mono, boot;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	e->mono = mono.tv_sec;
	e->boot = boot.tv_sec;
	/* As the kernel prints btime (whole seconds of the wall clock less
	 * the boot clock), once boot.tv_sec is taken off the boot clock. */
	e->btime = (long long)real.tv_sec - (real.tv_nsec < boot.tv_nsec ? 1 : 0);
	e->host_btime = e->btime - e->boot;
}

int init_time_namespace(const struct init_epoch *e, char *err, size_t errlen)
{
	char text[96], num[24];
	int dumpable, r;

	if (unshare(CLONE_NEWTIME) < 0) {
		if (errno == EINVAL)
			return 0;	/* no time namespaces in this kernel */
		return safe_fail(err, errlen, "cannot create a time namespace", NULL, errno);
	}
	/* Whole seconds back: the clocks start between 0 and 1 s, never
	 * below 0 (the kernel refuses that), and every process of the
	 * sandbox started after e was taken. */
	text[0] = '\0';
	safe_strlcat(text, "monotonic -", sizeof(text));
	safe_strlcat(text, safe_utoa((unsigned long long)e->mono, num), sizeof(text));
	safe_strlcat(text, " 0\nboottime -", sizeof(text));
	safe_strlcat(text, safe_utoa((unsigned long long)e->boot, num), sizeof(text));
	safe_strlcat(text, " 0\n", sizeof(text));
	/* The file is ours to write only while we are dumpable: otherwise it
	 * belongs to the root of the user namespace our memory was made in
	 * (the host's, for a copy of the daemon), whom our namespace does not
	 * map.  No other process of the sandbox exists yet to use that, and
	 * the main process, forked next, inherits what we restore. */
	if ((dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) < 0 ||
	    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return safe_fail(err, errlen, "cannot set dumpable", NULL, errno);
	r = safe_write_file("/proc/self/timens_offsets", text, strlen(text), 0, 0);
	if (prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) < 0)
		return safe_fail(err, errlen, "cannot set dumpable", NULL, errno);
	if (r < 0)
		return safe_fail(err, errlen, "cannot set the clocks of", "the time namespace", -r);
	return 0;
}

/* pid 1 of a forked sandbox, its mounts made with the template's
 * capabilities: leave the template's user namespace (shared by every
 * sandbox of the template) for one of our own.  Become our leased ids in
 * the template's namespace, which maps the whole range; then a namespace
 * made by that uid may map one id, its maker's, without privilege in the
 * parent (user_namespaces(7)), setgroups denied first.  Code inside is
 * run_uid, owns /work, and counts against its own host uid's quotas. */
static int enter_own_userns(const struct init_args *a, char *err, size_t errlen)
{
	char map[48], num[24];
	int r;

	if (set_ids(a->lease_uid, a->lease_gid) < 0)
		return safe_fail(err, errlen, "cannot become the sandbox's uid", NULL, errno);
	/* The id change made us undumpable: /proc/self would belong to the
	 * template's root, and its maps would not be ours to write. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 || unshare(CLONE_NEWUSER) < 0)
		return safe_fail(err, errlen, "cannot create a user namespace", NULL, errno);
	if ((r = safe_write_file("/proc/self/setgroups", "deny", 4, 0, 0)) < 0)
		return safe_fail(err, errlen, "cannot deny setgroups", NULL, -r);
	for (int which = 0; which < 2; which++) {
		map[0] = '\0';
		safe_strlcat(map, safe_utoa(which ? a->run_gid : a->run_uid, num), sizeof(map));
		safe_strlcat(map, " ", sizeof(map));
		safe_strlcat(map, safe_utoa(which ? a->lease_gid : a->lease_uid, num),
			     sizeof(map));
		safe_strlcat(map, " 1\n", sizeof(map));
		if ((r = safe_write_file(which ? "/proc/self/gid_map" : "/proc/self/uid_map",
					 map, strlen(map), 0, 0)) < 0)
			return safe_fail(err, errlen, "cannot write the id maps", NULL, -r);
	}
	/* As undumpable as before, for the main process forked next. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return safe_fail(err, errlen, "cannot set dumpable", NULL, errno);
	return 0;
}

/* The namespaces' set-up after "go", with the caller's capabilities:
 * the cgroup view, the mounts (a new root, or fresh /proc, /tmp, /work
 * and /dev/shm over a template's), the hostname and loopback.  A forked
 * sandbox then gives up the template's user namespace.  On failure the
 * error goes to the status fd and the process exits. */
static void set_up_namespaces(const struct init_args *a)
{
	char err[240];
	int r;

	/* Our cgroup is final now: make it the root of our cgroup view. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(a, "cannot create a cgroup namespace");
	umask(022);
	r = a->mode == INIT_FORKED ? mount_refresh(a->plan, err, sizeof(err)) :
				     mount_setup_root(a->plan, err, sizeof(err));
	if (r < 0)
		fail(a, err);
	if (sethostname(a->hostname, strlen(a->hostname)) < 0)
		fail(a, "cannot set the hostname");
	/* The main process, forked next, starts the sandbox's own clocks.  A
	 * template keeps the host's: the warm sandboxes it makes take their
	 * epoch from them (template.c). */
	if (a->mode == INIT_COLD && init_time_namespace(&a->epoch, err, sizeof(err)) < 0)
		fail(a, err);
	if ((r = loopback_up()) < 0) {
		safe_fail(err, sizeof(err), "cannot bring up", "lo", -r);
		fail(a, err);
	}
	/* Last: the mounts, hostname and loopback above need the template's
	 * capabilities, which this gives up. */
	if (a->mode == INIT_FORKED && enter_own_userns(a, err, sizeof(err)) < 0)
		fail(a, err);
}

/* After "go": pid 1 of a cold sandbox or a template.  Never returns. */
__attribute__((noreturn)) static void become_pid1(const struct init_args *a)
{
	sigset_t mask;
	pid_t main_pid;
	char go;
	int sfd;

	set_up_namespaces(a);
	/* SIGCHLD must not be ignored, or the kernel reaps our children
	 * itself and never tells us. */
	signal(SIGCHLD, SIG_DFL);
	if ((sfd = reap_signals(&mask)) < 0)
		fail(a, "cannot set up pid 1's signals");

	init_send_record(a->status_fd, INIT_READY, 0, NULL);
	/* The supervisor now opens our root's /work and /proc, then says so.
	 * Without root that works only while we are dumpable (a copy of the
	 * supervisor, our memory belongs to the host's user namespace), so we
	 * wait for it before anything can make us otherwise; EOF: it died. */
	if (read(a->sync_fd, &go, 1) != 1)
		_exit(125);
	/* Not fork(), whose allocator locks another thread of the original
	 * process may have held when we were cloned; the main process execs
	 * anyway. */
	main_pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (main_pid < 0)
		fail(a, "cannot fork the main process");
	if (main_pid == 0) {
		close(sfd);
		start_main(a);
		_exit(127);	/* start_main() execs or exits */
	}

	/* pid 1 keeps only what it needs and gives up the rest.  Undumpable
	 * first: without root the id change keeps the host uid, and so
	 * would leave us dumpable, with no capability, to the main process. */
	close(a->stdout_fd);
	close(a->stderr_fd);
	close(a->ctl_fd);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    drop_privileges(a->run_uid, a->run_gid) < 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
	    policy_load(a->policy) < 0) {
		kill(main_pid, SIGKILL);
		fail(a, "pid 1 cannot drop its privileges");
	}
	reap_serve(sfd, a->sync_fd, a->status_fd, main_pid, a->mode == INIT_TEMPLATE);
}

/* pid 1 of a cold sandbox is a copy of the supervisor that never execs:
 * its command line and environment (the daemon's, with a config path or
 * the code of `petri run -c`) would show in /proc/1/cmdline.  Blank both
 * areas of our copy (fields 48-51 of /proc/self/stat). */
static void blank_command_line(void)
{
	unsigned long long v[4];

	if (safe_stat_fields(48, 4, v) < 0 || v[0] >= v[1] || v[2] >= v[3])
		return;
	memset((void *)(uintptr_t)v[0], 0, (size_t)(v[1] - v[0]));
	memset((void *)(uintptr_t)v[2], 0, (size_t)(v[3] - v[2]));
}

void init_main(const struct init_args *a)
{
	int keep[] = { a->sync_fd, a->status_fd, a->stdout_fd, a->stderr_fd, a->ctl_fd };
	char go;

	sort_fds(keep, sizeof(keep) / sizeof(keep[0]));
	close_all_but(keep, sizeof(keep) / sizeof(keep[0]));
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	blank_command_line();
	/* The parent writes our uid/gid maps and moves us into the cgroup,
	 * then says go.  EOF means it died first. */
	if (read(a->sync_fd, &go, 1) != 1)
		_exit(125);
	if (set_ids(a->setup_uid, a->setup_gid) < 0)
		fail(a, "cannot become the namespace's user");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, "cannot set the parent-death signal");
	become_pid1(a);
}

int init_forked_wait(const struct init_args *a)
{
	char go;

	/* The supervisor moves us into our cgroup, then says go.  EOF means
	 * it died first. */
	return read(a->sync_fd, &go, 1) == 1 ? 0 : -EPIPE;
}

int init_forked_main(const struct init_args *a)
{
	int keep[] = { a->status_fd, a->stdout_fd, a->stderr_fd, a->ctl_fd };

	sort_fds(keep, sizeof(keep) / sizeof(keep[0]));
	close_all_but(keep, sizeof(keep) / sizeof(keep[0]));
	set_up_namespaces(a);
	init_send_record(a->status_fd, INIT_READY, 0, NULL);
	return start_main(a);
}

void init_forked_pid1(const struct init_args *a, pid_t main_pid)
{
	static const char path[] = JAIL_PID1_PATH;
	char sync_num[24], status_num[24], sfd_num[24], main_num[24];
	const char *envp[] = { NULL };
	char err[240];
	sigset_t mask;
	int sfd, r;

	/* The signalfd now, with the mask it serves: the sandbox's seccomp
	 * filter, loaded below, does not allow making one. */
	if ((sfd = reap_signals(&mask)) < 0) {
		errno = -sfd;
		goto fail;
	}
	{
		int keep[] = { a->sync_fd, a->status_fd, sfd };

		sort_fds(keep, sizeof(keep) / sizeof(keep[0]));
		close_all_but(keep, sizeof(keep) / sizeof(keep[0]));
	}
	if (fcntl(a->sync_fd, F_SETFD, 0) < 0 || fcntl(a->status_fd, F_SETFD, 0) < 0 ||
	    fcntl(sfd, F_SETFD, 0) < 0 || chdir("/") < 0)
		goto fail;
	/* As the sandbox's leased uid in the template's namespace (the host
	 * uid of everything inside) with no capability, no_new_privs and the
	 * sandbox's seccomp filter: what pid 1 of every sandbox holds. */
	if ((r = drop_privileges(a->lease_uid, a->lease_gid)) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    policy_load(a->policy) < 0)
		goto fail;
	{
		const char *argv[] = {
			"petri-init", safe_utoa((unsigned)a->sync_fd, sync_num),
			safe_utoa((unsigned)a->status_fd, status_num),
			safe_utoa((unsigned)sfd, sfd_num),
			safe_utoa((unsigned)main_pid, main_num), NULL,
		};

		execve(path, (char *const *)argv, (char *const *)envp);
	}
fail:
	safe_fail(err, sizeof(err), "pid 1 cannot start", path, errno);
	init_send_record(a->status_fd, INIT_ERROR, 0, err);
	kill(main_pid, SIGKILL);
	_exit(125);
}
