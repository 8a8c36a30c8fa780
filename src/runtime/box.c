#include "runtime/box.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "runtime/cache.h"
#include "util/embed.h"
#include "runtime/frame.h"
#include "exec/languages.h"
#include "workspace/changes.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/num.h"
#include "util/utf8.h"

#define READY_TIMEOUT_S 30.0
/* Code that did not stop when interrupted: how long the keeper may take to
 * replace its interpreter before the sandbox is killed instead. */
#define REPLACE_TIMEOUT_S 5.0
#define TICK_MS 100
#define DRAIN_TIMEOUT_S 1.0
/* The control channel closed while the driver lives: how long its exit may
 * take to show (code that ends the runtime closes fd 3 first) before that
 * counts as a protocol violation. */
#define CTL_EOF_GRACE_S 1.0
#define CHUNK 65536		/* one read of a pipe or the control socket */
/* Output past the cap costs its writer, not the daemon.  A stream is read
 * for at most this much past its cap (counted and dropped, so that code
 * that overshoots it, a verbose log, still ends by itself: about 2 ms of the
 * daemon's CPU per stream at a writer's full speed), then not at all: its
 * writer blocks on the full pipe.  A stream left so, whose pipe stays full
 * for OUTPUT_STALL_S, has a writer blocked for good: the code is
 * interrupted as at a timeout, and the reason names the output limit.
 * While the interrupt's grace runs, such a stream is read a chunk a tick
 * (OUTPUT_GRACE_READS per second at most), so that what the runtime writes
 * as it stops (a flush, a diagnostic) does not block it; at the end of the
 * execution at most one pipe's worth is dropped, so that the next one does
 * not start with the tail of the flood. */
#define OUTPUT_OVER_MAX (4u << 20)
#define OUTPUT_STALL_S 1.0
/* The daemon's CPU for one execution's frames (reading, parsing, keeping
 * them): a burst, then a rate.  Past it the control channel is not read
 * until the rate catches up, so the sandbox waits on a full socket instead
 * of the daemon parsing for it: a flood costs the daemon at most the rate,
 * and honest results (a few charts: milliseconds) never meet it. */
#define FRAME_CPU_BURST_S 0.25
#define FRAME_CPU_RATE 0.1	/* CPU seconds per second of the execution */
/* What a frame costs the daemon after it is parsed, per byte: its results
 * are written again as JSON for the client (jansson's dump: about 20 ns a
 * byte here, twice the parse) once the execution is over, so it is counted
 * when the frame comes, as if spent then. */
#define FRAME_CPU_LATER_S_PER_BYTE 20e-9
#define NAME_MAX_LEN 256
#define MESSAGE_MAX_LEN (64u << 10)
#define TRACEBACK_MAX_LEN (256u << 10)
#define RESULTS_MAX 1000		/* rich results kept per execution */
#define RESULT_OVERHEAD 64		/* bytes each result and MIME type count for */

struct box {
	struct jail *jail;
	struct frame_reader fr;
	long long next_id;
	bool dead;
	char dead_reason[256];
	/* Why box_stop() was called, if it was: set once, from any thread,
	 * read by the executing one; under stop_lock, as is quiet_after (an
	 * upload's thread writes it while an execution may read it). */
	pthread_mutex_t stop_lock;
	char stop_reason[128];
	/* Whole frames to the driver, from the executing thread and from
	 * box_spawn()'s (any thread); one spawn at a time, its answer read. */
	pthread_mutex_t ctl_lock, spawn_lock;
	/* Streams that reached end of file are not polled again: a sandbox
	 * that closes its fd 1, 2 or 3 must not make the daemon spin. */
	bool out_eof, err_eof, ctl_eof;
	struct timespec quiet_after;	/* last write we know of: by the host, or
					 * by an execution before its "done" */
	/* box_interrupt(): asked from any thread, seen by the executing one
	 * at its next tick, withdrawn when an execution ends. */
	atomic_bool interrupt;
	char python[32];
};

/* Commands that code written for other sandboxes (E2B's, a desktop's)
 * expects and Debian's python3 in a one-user sandbox lacks: `python` is
 * python3; `sudo` runs its command as it is, there being no other user to
 * become.  Last on PATH: a real one installed comes first. */
#define BOX_SHIMS "/opt/petri/bin"
static const char python_shim[] = "#!/bin/sh\nexec python3 \"$@\"\n";
static const char sudo_shim[] =
	"#!/bin/sh\n"
	"# petri: the sandbox has one user, so the command runs as it.\n"
	"while [ $# -gt 0 ]; do\n"
	"\tcase \"$1\" in\n"
	"\t--) shift; break ;;\n"
	"\t-u|-g|-C|-D|-h|-p|-r|-t|-U) shift; [ $# -gt 0 ] && shift ;;\n"
	"\t-*) shift ;;\n"
	"\t*) break ;;\n"
	"\tesac\n"
	"done\n"
	"if [ $# -eq 0 ]; then\n"
	"\techo 'usage: sudo COMMAND [ARGUMENT...] (one user here: it runs as you)' >&2\n"
	"\texit 1\n"
	"fi\n"
	"exec \"$@\"\n";

/* The sandbox's environment: a fixed base plus the caller's extras. */
static const char *const base_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin:" BOX_USER_BASE "/bin:" BOX_SHIMS,
	"HOME=" JAIL_WORKDIR,
	"USER=" JAIL_USER,
	"LOGNAME=" JAIL_USER,
	"SHELL=/bin/bash",
	"LANG=C.UTF-8",
	"TERM=dumb",
	"TMPDIR=/tmp",
	"MPLBACKEND=Agg",
	"MPLCONFIGDIR=/tmp/.matplotlib",
	"PYTHONUNBUFFERED=1",
	"PYTHONDONTWRITEBYTECODE=1",
	"XDG_CACHE_HOME=/tmp/.cache",	/* caches (fontconfig...) out of /work */
	/* The host's fontconfig configuration, and petri's caches of its
	 * fonts (src/runtime/cache.h): fc-list does not scan every font. */
	"FONTCONFIG_FILE=" CACHE_FONTS_CONF_PATH,
	/* pip, offline (docs/configuration.md, [python] wheelhouse): from the
	 * wheelhouse (PIP_FIND_LINKS, when there is one) or the session's own
	 * files, never an index; into BOX_USER_BASE (pip's own fallback to
	 * --user, as Debian's site-packages are read-only), without a cache,
	 * a version check or bytecode.  PEP 668 guards Debian's packages,
	 * which the read-only /usr guards here already. */
	"PYTHONUSERBASE=" BOX_USER_BASE,
	"PIP_NO_INDEX=1",
	"PIP_BREAK_SYSTEM_PACKAGES=1",
	"PIP_NO_CACHE_DIR=1",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
	"PIP_COMPILE=0",		/* (PIP_NO_COMPILE=1 would mean compile: pip's quirk) */
	"PIP_NO_INPUT=1",
	"PIP_PROGRESS_BAR=off",
	NULL
};

/* Front ends turn aliases into names: the driver knows names only. */
static bool canonical_language(const char *language)
{
	const struct language *l = lang_find(language);

	return l && !strcmp(l->name, language);
}

static void mark_dead(struct box *b, const char *why)
{
	if (!b->dead)
		snprintf(b->dead_reason, sizeof(b->dead_reason), "%s", why);
	b->dead = true;
}

/* From now on only a "ready" (or a "died") may come. */
static void expect_ready(struct frame_reader *fr)
{
	frame_reader_expect(fr, &(struct frame_expect){
		.id = 0, .bytes = 4 + FRAME_READY_MAX, .frames = 1 });
}

/* What the kernel weighs when the sandbox's memory is full: the
 * interpreter and what it starts (who inherit its value) first, the
 * keeper last (it then starts a fresh interpreter).  The kernel counts in
 * a process's size the template's pages it shares (~120 MiB), so without
 * these the keeper would often be the largest.  Set from here: the
 * processes are not dumpable, so they cannot write their own /proc files.
 * Lowering the keeper's takes CAP_SYS_RESOURCE, which a daemon may lack;
 * then only the interpreter's 1000 (its size plus the whole limit) tips
 * the scale, which holds unless the limit is below the keeper's size. */
#define KEEPER_OOM_SCORE_ADJ -999
#define INTERPRETER_OOM_SCORE_ADJ 1000

/* A "ready" frame: note the interpreter's Python version (digits and dots
 * only: it is shown to clients), weigh the keeper and the interpreter
 * (whose pid the keeper names; any other of the sandbox's processes it
 * may name is only made the likelier victim). */
static void note_ready(struct box *b, json_t *f)
{
	const char *py = json_string_value(json_object_get(f, "python"));
	json_t *pid = json_object_get(f, "pid");

	if (py && strlen(py) < sizeof(b->python) && strspn(py, "0123456789.") == strlen(py))
		snprintf(b->python, sizeof(b->python), "%s", py);
	if (!b->jail)
		return;		/* tests/fuzz/fuzz_frame.c's box */
	(void)jail_oom_score_adj(b->jail, JAIL_MAIN_PID, KEEPER_OOM_SCORE_ADJ);
	if (json_is_integer(pid) && json_integer_value(pid) > JAIL_MAIN_PID &&
	    json_integer_value(pid) <= (1 << 22)) {
		jail_protect(b->jail, (pid_t)json_integer_value(pid));
		(void)jail_oom_score_adj(b->jail, (pid_t)json_integer_value(pid),
					 INTERPRETER_OOM_SCORE_ADJ);
	}
}

/* The violation a "died" frame names, as a reason; NULL if none, "" if
 * the frame is malformed. */
static const char *died_violation(json_t *f)
{
	json_t *v = json_object_get(f, "violation");
	const char *word = json_string_value(v);

	if (!json_is_integer(json_object_get(f, "id")) ||
	    !json_is_integer(json_object_get(f, "status")) || (v && !word))
		return "";
	if (!v)
		return NULL;
	if (!strcmp(word, "frame_max"))
		return "the interpreter sent a frame over 16 MiB";
	if (!strcmp(word, "forged"))
		return "the interpreter sent a frame only its keeper sends";
	return "";
}

/* Frames wait_ready() takes before it gives up: a few interpreters that
 * ended (each a "died" and the "ready" of the next) and the one wanted. */
#define READY_FRAMES_MAX 8

/* Wait for the keeper's "ready" whose "cause" is cause (NULL: any).  A
 * "died" and the "ready" after it, of an interpreter that ended while
 * nobody asked (between executions), are passed over. */
static int wait_ready(struct box *b, const char *cause, char *err, size_t errlen)
{
	struct pollfd pfd = { .fd = jail_ctl_fd(b->jail), .events = POLLIN };
	double deadline = clock_mono_s() + READY_TIMEOUT_S;
	char chunk[4096];
	int frames = 0;

	expect_ready(&b->fr);
	for (;;) {
		json_t *f = NULL;
		int r = frame_reader_next(&b->fr, &f);
		double left = deadline - clock_mono_s();
		ssize_t n;

		if (r < 0) {
			snprintf(err, errlen, "runtime start-up: %s", b->fr.error);
			return r;
		}
		if (r > 0) {
			const char *type = json_string_value(json_object_get(f, "type"));
			const char *why = NULL, *came;

			expect_ready(&b->fr);
			if (++frames > READY_FRAMES_MAX)
				why = "too many frames before \"ready\"";
			else if (!strcmp(type, "died"))
				why = died_violation(f);
			else if (strcmp(type, "ready") != 0)
				why = "unexpected frame";
			if (why) {
				snprintf(err, errlen, "runtime start-up: %s",
					 *why ? why : "malformed \"died\" frame");
				json_decref(f);
				return -EPROTO;
			}
			if (!strcmp(type, "ready")) {
				came = json_string_value(json_object_get(f, "cause"));
				note_ready(b, f);
				if (!cause || (came && !strcmp(came, cause))) {
					json_decref(f);
					return 0;
				}
			}
			json_decref(f);
			continue;
		}
		if (left <= 0) {
			snprintf(err, errlen, "runtime did not start within %.0f s",
				 READY_TIMEOUT_S);
			return -ETIMEDOUT;
		}
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return -errno;
		n = read(pfd.fd, chunk, sizeof(chunk));
		if (n == 0) {
			snprintf(err, errlen, "runtime exited during start-up");
			return -EPIPE;
		}
		if (n > 0 && frame_reader_feed(&b->fr, chunk, (size_t)n) < 0)
			return -ENOMEM;
	}
}

int box_start(struct jail_host *host, const struct box_config *cfg,
	      struct box **out, char *err, size_t errlen)
{
	struct box_jail_parts *parts = malloc(sizeof(*parts));
	struct jail_config jc;
	struct jail *j;
	int r;

	*out = NULL;
	if (!parts)
		return -ENOMEM;
	if ((r = box_jail_config(cfg, &jc, parts, false)) < 0) {
		snprintf(err, errlen, "too many environment variables or binds");
		goto out;
	}
	if ((r = jail_spawn(host, &jc, &j, err, errlen)) < 0)
		goto out;
	r = box_adopt(j, out, err, errlen);
out:
	free(parts);
	return r;
}

int box_adopt(struct jail *j, struct box **out, char *err, size_t errlen)
{
	struct box *b = calloc(1, sizeof(*b));
	int r;

	*out = NULL;
	if (!b) {
		jail_free(j);
		return -ENOMEM;
	}
	frame_reader_init(&b->fr);
	pthread_mutex_init(&b->stop_lock, NULL);
	pthread_mutex_init(&b->ctl_lock, NULL);
	pthread_mutex_init(&b->spawn_lock, NULL);
	b->jail = j;
	if ((r = wait_ready(b, NULL, err, errlen)) < 0) {
		box_free(b);
		return r;
	}
	*out = b;
	return 0;
}

/* "NAME=" and the items joined by sep, into buf; -E2BIG if it does not fit. */
static int join_env(char *buf, size_t len, const char *name, const char *const *items,
		    const char *sep)
{
	int n = snprintf(buf, len, "%s=", name);
	size_t used;

	if (n < 0 || (size_t)n >= len)
		return -E2BIG;
	used = (size_t)n;
	for (size_t i = 0; items[i]; i++) {
		n = snprintf(buf + used, len - used, "%s%s", i ? sep : "", items[i]);
		if (n < 0 || (size_t)n >= len - used)
			return -E2BIG;
		used += (size_t)n;
	}
	return 0;
}

/* Append the NULL-terminated list (NULL: none) to binds[*n]. */
static int add_binds(const char **binds, size_t *n, const char *const *list)
{
	for (size_t i = 0; list && list[i]; i++) {
		if (*n >= BOX_BINDS_MAX)
			return -E2BIG;
		binds[(*n)++] = list[i];
	}
	return 0;
}

int box_jail_config(const struct box_config *cfg, struct jail_config *jc,
		    struct box_jail_parts *parts, bool with_extension)
{
	static const char *const argv[] = {
		"/usr/bin/python3", "-I", "-u", "/opt/petri/driver.py", NULL
	};
	static const char *const template_argv[] = {
		"/usr/bin/python3", "-I", "-u", "/opt/petri/driver.py", "--zygote", NULL
	};
	const char *const wheelhouse[] = { cfg->wheelhouse, NULL };
	const char **env = parts->env, **binds = parts->binds;
	size_t n = 0, nb = 0, nf;

	for (size_t i = 0; base_env[i]; i++)
		env[n++] = base_env[i];
	/* Before cfg->env: the first of two variables of one name wins. */
	if (cfg->python_path && cfg->python_path[0]) {
		if (join_env(parts->python_path, sizeof(parts->python_path),
			     "PETRI_PYTHON_PATH", cfg->python_path, ":") < 0)
			return -E2BIG;
		env[n++] = parts->python_path;
	}
	if (cfg->wheelhouse) {
		if (join_env(parts->find_links, sizeof(parts->find_links), "PIP_FIND_LINKS",
			     wheelhouse, " ") < 0)
			return -E2BIG;
		env[n++] = parts->find_links;
	}
	for (size_t i = 0; cfg->env && cfg->env[i]; i++) {
		if (n + 1 >= BOX_ENV_MAX)
			return -E2BIG;
		env[n++] = cfg->env[i];
	}
	env[n] = NULL;
	if (add_binds(binds, &nb, cfg->ro_binds) < 0 ||
	    add_binds(binds, &nb, cfg->python_path) < 0 ||
	    add_binds(binds, &nb, cfg->wheelhouse ? wheelhouse : NULL) < 0)
		return -E2BIG;
	binds[nb] = NULL;
	if (cfg->ncache_files > CACHE_FILES_MAX)
		return -E2BIG;
	snprintf(parts->fonts_conf, sizeof(parts->fonts_conf), CACHE_FONTS_CONF_FMT,
		 CACHE_SANDBOX_DIR "/fontconfig");
	nf = 0;
	parts->files[nf++] = (struct jail_file){
		.path = "/opt/petri/driver.py", .data = petri_driver_py,
		.len = (size_t)(petri_driver_py_end - petri_driver_py), .mode = 0644,
	};
	parts->files[nf++] = (struct jail_file){
		.path = "/opt/petri/run.js", .data = petri_run_js,
		.len = (size_t)(petri_run_js_end - petri_run_js), .mode = 0644,
	};
	parts->files[nf++] = (struct jail_file){
		.path = "/opt/petri/profile.R", .data = petri_profile_r,
		.len = (size_t)(petri_profile_r_end - petri_profile_r), .mode = 0644,
	};
	parts->files[nf++] = (struct jail_file){
		.path = "/opt/petri/Run.java", .data = petri_run_java,
		.len = (size_t)(petri_run_java_end - petri_run_java), .mode = 0644,
	};
	parts->files[nf++] = (struct jail_file){
		.path = BOX_SHIMS "/python", .data = python_shim, .len = sizeof(python_shim) - 1,
		.mode = 0755,
	};
	parts->files[nf++] = (struct jail_file){
		.path = BOX_SHIMS "/sudo", .data = sudo_shim, .len = sizeof(sudo_shim) - 1,
		.mode = 0755,
	};
	parts->files[nf++] = (struct jail_file){
		.path = CACHE_FONTS_CONF_PATH, .data = parts->fonts_conf,
		.len = strlen(parts->fonts_conf), .mode = 0644,
	};
	for (size_t i = 0; i < cfg->ncache_files; i++)
		parts->files[nf++] = cfg->cache_files[i];
	if (with_extension) {
		parts->files[nf++] = (struct jail_file){
			.path = "/opt/petri/_petri.so", .data = petri_pyext_so,
			.len = (size_t)(petri_pyext_so_end - petri_pyext_so), .mode = 0755,
		};
		parts->files[nf++] = (struct jail_file){
			.path = JAIL_PID1_PATH, .data = petri_pid1,
			.len = (size_t)(petri_pid1_end - petri_pid1), .mode = 0711,
		};
	}
	memset(jc, 0, sizeof(*jc));
	jc->argv = with_extension ? template_argv : argv;
	jc->envp = env;
	jc->limits = cfg->limits;
	jc->files = parts->files;
	jc->nfiles = nf;
	jc->ro_binds = binds;
	return 0;
}

void box_note_host_write(struct box *b)
{
	pthread_mutex_lock(&b->stop_lock);
	clock_gettime(CLOCK_REALTIME, &b->quiet_after);
	pthread_mutex_unlock(&b->stop_lock);
}

static bool later(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* The start of an execution, for "files".  tmpfs stamps a change with a
 * time between the coarse clock and the precise clock at that moment
 * (multigrain timestamps), so a precise start would miss files written in
 * the first milliseconds, and a coarse start could count a file written just
 * before.  Start at a coarse tick later than the host's last write into
 * /work (an upload): wait for it when it has not come yet (at most one tick,
 * and only right after an upload). */
static void execution_start(struct box *b, struct timespec *start)
{
	for (;;) {
		struct timespec pause = { 0, 250000 };

		bool quiet;

		clock_gettime(CLOCK_REALTIME_COARSE, start);
		pthread_mutex_lock(&b->stop_lock);
		quiet = later(start, &b->quiet_after);
		pthread_mutex_unlock(&b->stop_lock);
		if (quiet)
			return;
		nanosleep(&pause, NULL);
	}
}

void box_interrupt(struct box *b)
{
	atomic_store(&b->interrupt, true);
}

void box_interrupt_withdraw(struct box *b)
{
	atomic_store(&b->interrupt, false);
}

void box_stop(struct box *b, const char *reason)
{
	pthread_mutex_lock(&b->stop_lock);
	if (!b->stop_reason[0])
		snprintf(b->stop_reason, sizeof(b->stop_reason), "%s", reason);
	pthread_mutex_unlock(&b->stop_lock);
	jail_stop(b->jail);
}

/* Why box_stop() was called, into out; false if it was not. */
static bool stop_reason(struct box *b, char *out, size_t len)
{
	pthread_mutex_lock(&b->stop_lock);
	snprintf(out, len, "%s", b->stop_reason);
	pthread_mutex_unlock(&b->stop_lock);
	return out[0] != '\0';
}

/* Write out (a whole frame) to the driver, waiting at most timeout_s, the
 * first bytes with fds (n of them) when there are any; b->ctl_lock held. */
static int send_locked(struct box *b, const struct buf *out, const int *fds, size_t n,
		       double timeout_s)
{
	int fd = jail_ctl_fd(b->jail);
	double deadline = clock_mono_s() + timeout_s;
	size_t off = 0;

	while (off < out->len) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t w;

		if (n && off == 0) {
			union {
				struct cmsghdr h;
				char space[CMSG_SPACE(sizeof(int) * BOX_SPAWN_FDS)];
			} c;
			struct iovec iov = { .iov_base = out->data, .iov_len = out->len };
			struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
					      .msg_control = c.space,
					      .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

			memset(&c, 0, sizeof(c));
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
			memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
			w = sendmsg(fd, &msg, MSG_NOSIGNAL);
		} else {
			w = send(fd, out->data + off, out->len - off, MSG_NOSIGNAL);
		}
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (clock_mono_s() > deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, TICK_MS);
	}
	return 0;
}

/* Write a whole frame to the driver, waiting at most timeout_s. */
static int send_frame(struct box *b, const json_t *frame, double timeout_s)
{
	struct buf out = BUF_INIT;
	int r = frame_encode(frame, &out);

	if (r == 0) {
		pthread_mutex_lock(&b->ctl_lock);
		r = send_locked(b, &out, NULL, 0, timeout_s);
		pthread_mutex_unlock(&b->ctl_lock);
	}
	buf_release(&out);
	return r;
}

/* "NAME=value" strings as the JSON array the driver reads; NULL when out
 * of memory or a string is not UTF-8. */
static json_t *env_json(const char *const *env)
{
	json_t *list = json_array();

	for (size_t i = 0; list && env && env[i]; i++)
		if (json_array_append_new(list, json_string(env[i]))) {
			json_decref(list);
			return NULL;
		}
	return list;
}

int box_send_env(struct box *b, const char *const *env)
{
	json_t *list = env_json(env), *frame;
	int r;

	frame = list ? json_pack("{s:s, s:o}", "type", "env", "env", list) : NULL;
	if (!frame)
		return -ENOMEM;
	r = send_frame(b, frame, READY_TIMEOUT_S);
	json_decref(frame);
	return r;
}

/* The first line the keeper says on a process's status pipe: "pid N" or
 * "fail ERRNO" (driver.py: spawn_process): the pid, or -errno.  Read a
 * byte at a time, never past the line: what follows is the pump's. */
static int spawn_answer(int fd, double timeout_s)
{
	double deadline = clock_mono_s() + timeout_s;
	char line[32], *end;
	const char *num;
	size_t n = 0;
	long v;

	while (n < sizeof(line) - 1) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r = read(fd, line + n, 1);

		if (r == 1 && line[n] == '\n')
			break;
		if (r == 1) {
			n++;
			continue;
		}
		if (r == 0)
			return -EPIPE;	/* the keeper is gone */
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if (clock_mono_s() > deadline)
			return -ETIMEDOUT;
		poll(&pfd, 1, TICK_MS);
	}
	line[n] = '\0';
	if (strncmp(line, "pid ", 4) && strncmp(line, "fail ", 5))
		return -EPROTO;
	num = line + (line[0] == 'p' ? 4 : 5);
	errno = 0;
	v = strtol(num, &end, 10);
	if (errno || *end || end == num || v <= 0 || v > 1 << 22)
		return -EPROTO;
	return line[0] == 'p' ? (int)v : -(int)v;
}

/* What a start of a process may take: the frame (its command, arguments
 * and variables: E2B's envd takes far less), the keeper's time. */
#define SPAWN_FRAME_MAX (256u << 10)
#define SPAWN_TIMEOUT_S 5

int box_spawn(struct box *b, const struct box_spawn *sp, struct box_proc *out)
{
	int p[4][2], mine[BOX_SPAWN_FDS], theirs[BOX_SPAWN_FDS];
	json_t *argv = env_json(sp->argv), *env = env_json(sp->env), *frame;
	struct buf enc = BUF_INIT;
	int r = 0;

	out->pid = -1;
	out->in = out->out = out->err = out->status = -1;
	for (int i = 0; i < 4; i++)
		p[i][0] = p[i][1] = -1;
	frame = argv && env ? json_pack("{s:s, s:O, s:O, s:s, s:b}", "type", "spawn", "argv",
					argv, "env", env, "cwd", sp->cwd, "pty", sp->tty >= 0) :
			      NULL;
	if (!frame) {
		r = -EINVAL;	/* not UTF-8, or out of memory */
		goto out;
	}
	/* With a terminal, only the status pipe: the slave is all three. */
	for (int i = sp->tty >= 0 ? 3 : 0; i < 4 && r == 0; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0)
			r = -errno;
	if (r < 0 || (r = frame_encode(frame, &enc)) < 0)
		goto out;
	if (enc.len > SPAWN_FRAME_MAX) {
		r = -E2BIG;
		goto out;
	}
	/* stdin: they read, we write; stdout, stderr, status: the reverse */
	theirs[0] = p[0][0], mine[0] = p[0][1];
	for (int i = 1; i < 4; i++)
		theirs[i] = p[i][1], mine[i] = p[i][0];
	if (sp->tty >= 0)
		theirs[0] = theirs[1] = theirs[2] = sp->tty;
	/* A keeper that takes no frame or gives no answer within the time is
	 * stuck or hostile: the sandbox ends, rather than holding the
	 * daemon's worker (a torn frame would break the channel anyway). */
	pthread_mutex_lock(&b->spawn_lock);
	pthread_mutex_lock(&b->ctl_lock);
	r = send_locked(b, &enc, theirs, BOX_SPAWN_FDS, SPAWN_TIMEOUT_S);
	pthread_mutex_unlock(&b->ctl_lock);
	for (int i = sp->tty >= 0 ? 3 : 0; i < BOX_SPAWN_FDS; i++) {
		close(theirs[i]);
		fcntl(mine[i], F_SETFL, O_NONBLOCK);
	}
	p[0][0] = p[1][1] = p[2][1] = p[3][1] = -1;
	if (r == 0)
		r = spawn_answer(mine[3], SPAWN_TIMEOUT_S);
	pthread_mutex_unlock(&b->spawn_lock);
	if (r == -ETIMEDOUT || r == -EPROTO)
		box_stop(b, r == -EPROTO ? "the sandbox's keeper answered a process's start with "
			 "nonsense" : "the sandbox's keeper did not start a process within "
			 NUM_TEXT(SPAWN_TIMEOUT_S) " s");
	if (r < 0)
		goto out;
	/* The memory limit's first victim, as the interpreter: not the keeper. */
	(void)jail_oom_score_adj(b->jail, r, INTERPRETER_OOM_SCORE_ADJ);
	out->pid = r;
	out->in = mine[0];
	out->out = mine[1];
	out->err = mine[2];
	out->status = mine[3];
	r = 0;
	for (int i = 0; i < 4; i++)
		p[i][0] = p[i][1] = -1;
out:
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 2; k++)
			if (p[i][k] >= 0)
				close(p[i][k]);
	buf_release(&enc);
	json_decref(frame);
	json_decref(argv);
	json_decref(env);
	return r;
}

/* What the old interpreter's processes left in a pipe: at most a pipe's
 * worth, dropped, so that the first execution after a restart starts with
 * its own output. */
static void drop_pipe(int fd, bool *eof)
{
	int size = fcntl(fd, F_GETPIPE_SZ);
	size_t left = size > 0 ? (size_t)size : CHUNK;
	char chunk[CHUNK];
	ssize_t n = 1;

	while (left > 0 && !*eof &&
	       (n = read(fd, chunk, left < sizeof(chunk) ? left : sizeof(chunk))) > 0)
		left -= (size_t)n;
	if (n == 0)
		*eof = true;
}

int box_restart(struct box *b, char *err, size_t errlen)
{
	json_t *frame = json_pack("{s:s}", "type", "restart");
	char why[192] = "";
	int r;

	if (b->dead) {
		snprintf(err, errlen, "%s", b->dead_reason);
		json_decref(frame);
		return -EPIPE;
	}
	r = frame ? send_frame(b, frame, READY_TIMEOUT_S) : -ENOMEM;
	json_decref(frame);
	if (r == -ENOMEM)
		return r;
	/* The keeper kills the interpreter and starts another, whose "ready"
	 * says "restart". */
	if (r < 0 || (r = wait_ready(b, "restart", why, sizeof(why))) < 0) {
		snprintf(err, errlen, "the runtime did not restart: %s",
			 *why ? why : strerror(-r));
		mark_dead(b, err);
		jail_stop(b->jail);
		return r == -ENOMEM ? r : -EPIPE;
	}
	drop_pipe(jail_stdout_fd(b->jail), &b->out_eof);
	drop_pipe(jail_stderr_fd(b->jail), &b->err_eof);
	return 0;
}

bool box_alive(const struct box *b) { return !b->dead; }
const char *box_dead_reason(const struct box *b) { return b->dead_reason; }
struct jail *box_jail(struct box *b) { return b->jail; }
const char *box_python_version(const struct box *b) { return b->python; }

void box_free(struct box *b)
{
	if (!b)
		return;
	jail_free(b->jail);
	frame_reader_release(&b->fr);
	pthread_mutex_destroy(&b->stop_lock);
	pthread_mutex_destroy(&b->ctl_lock);
	pthread_mutex_destroy(&b->spawn_lock);
	free(b);
}

/* ---- one execution ---------------------------------------------------- */

struct run {
	struct box *b;
	const struct exec_request *ex;
	const struct exec_events *ev;
	struct result *res;
	long long id;
	size_t output_cap, results_cap;
	bool done;			/* "done" frame read, or the interpreter's end */
	bool main_exited;		/* the keeper is gone: the sandbox ends */
	/* The keeper said "died": a "ready" must come next.  The interpreter
	 * that ran this execution ended (died), or one that ended before it
	 * was sent (earlier: the execution runs in the next one). */
	bool awaiting_ready;
	long long died_id;
	int died_status;
	bool died_closed;		/* it had closed its control socket */
	bool died;
	int died_earlier;		/* interpreters that ended between executions */
	struct jail_exit exit;
	bool violated;
	char violation[200];
	bool results_dropped;
	double ctl_eof_at;		/* when the control channel closed, or 0 */
	double started;			/* CLOCK_MONOTONIC */
	double frame_cpu_s;		/* the daemon's CPU on its frames so far */
	/* Per stream (indexed by enum exec_stream): past the cap and
	 * OUTPUT_OVER_MAX, no longer read; since when its pipe is seen full,
	 * or 0; when the interrupt's grace last read a chunk of it. */
	bool stopped[3];
	double full_since[3];
	double grace_read_at[3];
	enum exec_stream stalled;	/* the stream that stopped the code, or 0 */
};

/* Seconds until the frames of this execution may cost the daemon more CPU
 * (0: now). */
static double frame_cpu_wait(const struct run *run, double now)
{
	double allowed = FRAME_CPU_BURST_S + FRAME_CPU_RATE * (now - run->started);

	return run->frame_cpu_s <= allowed ? 0 :
	       (run->frame_cpu_s - allowed) / FRAME_CPU_RATE;
}

/* What an execution may send: its results (the driver, told the caps in
 * the exec frame, keeps their frames within results_cap bytes and
 * RESULTS_MAX of them), the note that it dropped some, one error, "done".
 * Beyond that, frames are a flood: a protocol violation. */
static void expect_frames(struct run *run)
{
	struct frame_expect ex = {
		.id = run->id,
		.bytes = run->results_cap + FRAME_NOTE_MAX + 4 + FRAME_ERROR_MAX +
			 4 + FRAME_DONE_MAX,
		.frames = RESULTS_MAX + 3,
	};

	frame_reader_expect(&run->b->fr, &ex);
}

static int send_exec(struct run *run, double deadline)
{
	const struct language *lang = lang_find(run->ex->language);
	json_t *req = json_pack("{s:s, s:I, s:s, s:s, s:I, s:i}", "type", "exec", "id",
				(json_int_t)run->id, "language", run->ex->language,
				"code", run->ex->code, "results_cap",
				(json_int_t)run->results_cap, "results_max", RESULTS_MAX);
	int r;

	if (!req)
		return -EINVAL;	/* code that is not UTF-8 */
	if (run->ex->env && run->ex->env[0] &&
	    json_object_set_new(req, "env", env_json(run->ex->env)) < 0) {
		json_decref(req);
		return -EINVAL;	/* a variable that is not UTF-8 */
	}
	if (run->ex->unpack) {
		const struct exec_unpack *u = run->ex->unpack;

		r = json_object_set_new(req, "unpack", json_pack(
			"{s:s, s:s, s:I, s:I, s:I}", "archive", u->archive, "dest", u->dest,
			"max_entries", (json_int_t)u->max_entries, "max_bytes",
			(json_int_t)u->max_bytes, "max_ratio", (json_int_t)u->max_ratio));
		if (r < 0) {
			json_decref(req);
			return -EINVAL;	/* a destination that is not UTF-8 */
		}
	} else if (lang->file &&
		   json_object_set_new(req, "program", lang_program_json(lang)) < 0) {
		json_decref(req);
		return -ENOMEM;
	}
	if ((run->ex->context && json_object_set_new(req, "context",
						     json_string(run->ex->context)) < 0) ||
	    (run->ex->cwd && json_object_set_new(req, "cwd", json_string(run->ex->cwd)) < 0) ||
	    (run->ex->fresh && json_object_set_new(req, "fresh", json_true()) < 0) ||
	    (run->ex->input && json_object_set_new(req, "stdin", json_stringn(
			run->ex->input, run->ex->input_len)) < 0)) {
		json_decref(req);
		return -EINVAL;	/* not UTF-8 */
	}
	r = send_frame(run->b, req, deadline - clock_mono_s());
	json_decref(req);
	return r;
}

static void violate(struct run *run, const char *why)
{
	if (!run->violated)
		snprintf(run->violation, sizeof(run->violation), "%s", why);
	run->violated = true;
}

static bool mime_type_ok(const char *k)
{
	size_t n = strlen(k), slash = 0;

	if (n < 3 || n > 100)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];

		if (c == '/') {
			if (slash++ || i == 0 || i == n - 1)
				return false;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			     c == '.' || c == '+' || c == '-')) {
			return false;
		}
	}
	return slash == 1;
}

static bool mime_is_binary(const char *k)
{
	return strncmp(k, "image/", 6) == 0 && strcmp(k, "image/svg+xml") != 0;
}

/* A MIME bundle from the sandbox: keep the well-formed entries. */
static void take_result(struct run *run, json_t *frame)
{
	json_t *data = json_object_get(frame, "data"), *clean, *v;
	const char *k;
	size_t bytes = 0;
	bool main;

	if (!json_is_object(data)) {
		violate(run, "result frame without a \"data\" object");
		return;
	}
	clean = json_object();
	if (!clean)
		return;
	/* Every result costs its overhead too, or a million empty ones would
	 * cost nothing against the cap (and grow the daemon without bound). */
	bytes = RESULT_OVERHEAD;
	json_object_foreach(data, k, v) {
		size_t len;

		if (!mime_type_ok(k) || !json_is_string(v))
			continue;
		len = json_string_length(v);
		if (mime_is_binary(k) && !base64_valid(json_string_value(v), len))
			continue;
		bytes += len + strlen(k) + RESULT_OVERHEAD;
		json_object_set(clean, k, v);
	}
	if (json_object_size(clean) == 0) {
		json_decref(clean);
		return;
	}
	if (run->res->results_bytes + bytes > run->results_cap ||
	    json_array_size(run->res->results) >= RESULTS_MAX) {
		json_decref(clean);
		if (!run->results_dropped) {
			char note[128];

			snprintf(note, sizeof(note),
				 "[further results dropped: over the limit of %zu MiB or %d results]",
				 run->results_cap >> 20, RESULTS_MAX);
			clean = json_pack("{s:s}", "text/plain", note);
			if (clean && json_array_append_new(run->res->results, clean) == 0 &&
			    run->ev && run->ev->rich)
				run->ev->rich(run->ev->ctx, clean, false);
		}
		run->results_dropped = true;
		return;
	}
	run->res->results_bytes += bytes;
	/* The driver marks the last expression's value; one per execution. */
	main = json_is_true(json_object_get(frame, "main")) && run->res->main_result < 0;
	if (json_array_append_new(run->res->results, clean) < 0)
		return;
	if (main)
		run->res->main_result = (int)json_array_size(run->res->results) - 1;
	if (run->ev && run->ev->rich)
		run->ev->rich(run->ev->ctx, clean, main);
}

static json_t *bounded_string(json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	if (!s)
		return json_string("");
	/* Cut on a character boundary, or jansson refuses the string. */
	return json_stringn(s, n > max ? utf8_cut(s, max) : n);
}

static void take_error(struct run *run, json_t *frame)
{
	json_t *name = json_object_get(frame, "name");
	json_t *msg = json_object_get(frame, "message");
	json_t *tb = json_object_get(frame, "traceback");
	json_t *e;

	if (!json_is_string(name) || !json_is_string(msg) ||
	    (tb && !json_is_string(tb) && !json_is_null(tb))) {
		violate(run, "malformed error frame");
		return;
	}
	e = json_pack("{s:o, s:o, s:o}", "name", bounded_string(name, NAME_MAX_LEN),
		      "message", bounded_string(msg, MESSAGE_MAX_LEN),
		      "traceback", bounded_string(tb, TRACEBACK_MAX_LEN));
	if (!e)
		return;
	result_set_error(run->res, e);
	if (run->ev && run->ev->error)
		run->ev->error(run->ev->ctx, e);
}

/* Interpreters that may end between two executions (each fresh one of
 * the memory left full by /tmp, say) before the execution is taken as a
 * protocol violation. */
#define DIED_EARLIER_MAX 4

/* "died": the keeper's word that the interpreter ended (its status, the
 * last execution it was given) and that another is starting. */
static void take_died(struct run *run, json_t *f)
{
	const char *why = died_violation(f);
	long long id;

	if (why) {
		violate(run, *why ? why : "malformed \"died\" frame");
		return;
	}
	id = json_integer_value(json_object_get(f, "id"));
	if (run->awaiting_ready || id > run->id ||
	    (id < run->id && run->died_earlier >= DIED_EARLIER_MAX)) {
		violate(run, "\"died\" frame out of turn");
		return;
	}
	run->awaiting_ready = true;
	run->died_id = id;
	run->died_status = (int)json_integer_value(json_object_get(f, "status"));
	run->died_closed = json_is_true(json_object_get(f, "closed"));
	expect_ready(&run->b->fr);
}

/* The "ready" after a "died". */
static void take_ready(struct run *run, json_t *f)
{
	if (!run->awaiting_ready) {
		violate(run, "a second \"ready\" frame");
		return;
	}
	run->awaiting_ready = false;
	note_ready(run->b, f);
	if (run->died_id == run->id) {
		run->died = true;
		run->done = true;
	} else {
		/* The execution went to the fresh interpreter: its frames
		 * come now, within a budget of their own. */
		run->died_earlier++;
		expect_frames(run);
	}
}

static void take_frame(struct run *run, json_t *f)
{
	const char *type = json_string_value(json_object_get(f, "type"));
	json_t *id = json_object_get(f, "id");

	if (!strcmp(type, "died")) {
		take_died(run, f);
		return;
	}
	if (!strcmp(type, "ready")) {
		take_ready(run, f);
		return;
	}
	if (!json_is_integer(id) || json_integer_value(id) != run->id) {
		violate(run, "frame for another execution");
		return;
	}
	if (strcmp(type, "result") == 0) {
		take_result(run, f);
	} else if (strcmp(type, "error") == 0) {
		take_error(run, f);
	} else if (strcmp(type, "done") == 0) {
		json_t *code = json_object_get(f, "exit_code");

		if (!json_is_integer(code)) {
			violate(run, "done frame without an integer exit_code");
			return;
		}
		run->res->has_exit_code = true;
		run->res->exit_code = (int)(json_integer_value(code) & 0xffff);
		run->done = true;
	} else {
		violate(run, "unknown frame type");
	}
}

/* Read and take the frames that are there now, as far as the execution's
 * frame CPU allows (frame_cpu_wait). */
static void read_ctl(struct run *run)
{
	char chunk[CHUNK];
	double cpu0 = clock_thread_cpu_s();
	ssize_t n;

	while (!run->b->ctl_eof && !run->done && !run->violated &&
	       frame_cpu_wait(run, clock_mono_s()) == 0) {
		json_t *f;
		int r = 0;

		n = read(jail_ctl_fd(run->b->jail), chunk, sizeof(chunk));
		if (n == 0) {
			run->b->ctl_eof = true;
			run->ctl_eof_at = clock_mono_s();
		}
		if (n <= 0 || frame_reader_feed(&run->b->fr, chunk, (size_t)n) < 0)
			break;
		/* Frames after "done" are the next execution's to take (a
		 * "died" and "ready" of an interpreter that ended after it). */
		while (!run->done && !run->violated &&
		       (r = frame_reader_next(&run->b->fr, &f)) > 0) {
			take_frame(run, f);
			json_decref(f);
		}
		run->frame_cpu_s += clock_thread_cpu_s() - cpu0 +
				    (double)n * FRAME_CPU_LATER_S_PER_BYTE;
		cpu0 = clock_thread_cpu_s();
		if (r < 0) {
			violate(run, run->b->fr.error);
			return;
		}
	}
	run->frame_cpu_s += clock_thread_cpu_s() - cpu0;
}

static int stream_fd(const struct run *run, enum exec_stream s)
{
	return s == EXEC_STDOUT ? jail_stdout_fd(run->b->jail) : jail_stderr_fd(run->b->jail);
}

static bool *stream_eof(struct run *run, enum exec_stream s)
{
	return s == EXEC_STDOUT ? &run->b->out_eof : &run->b->err_eof;
}

static const char *stream_name(enum exec_stream s)
{
	return s == EXEC_STDOUT ? "stdout" : "stderr";
}

/* Whether a stream is still read in this execution: not at its end of
 * file, not past its cap (OUTPUT_OVER_MAX). */
static bool stream_read(struct run *run, enum exec_stream s)
{
	return !*stream_eof(run, s) && !run->stopped[s];
}

/* Read and drop at most max bytes of a stream that is no longer kept,
 * counting them as written. */
static void drop_stream(struct run *run, enum exec_stream s, size_t max)
{
	struct result_stream *rs = s == EXEC_STDOUT ? &run->res->out : &run->res->err;
	char chunk[CHUNK];
	ssize_t n = 1;

	while (max > 0 && !*stream_eof(run, s) &&
	       (n = read(stream_fd(run, s), chunk, max < sizeof(chunk) ? max : sizeof(chunk))) > 0) {
		rs->total += (uint64_t)n;
		max -= (size_t)n;
	}
	if (n == 0)
		*stream_eof(run, s) = true;
}

/* Read what is in a pipe now, up to where the stream stops being read.
 * Returns false at EOF. */
static bool read_stream(struct run *run, enum exec_stream s)
{
	struct result_stream *rs = s == EXEC_STDOUT ? &run->res->out : &run->res->err;
	uint64_t stop_at = (uint64_t)run->output_cap + OUTPUT_OVER_MAX;
	char chunk[CHUNK];
	ssize_t n = -1;

	if (*stream_eof(run, s))
		return false;
	/* Bounded by the cap, not by the writer: a writer on another core
	 * refills the pipe as fast as it is read, so "until EAGAIN" could
	 * last as long as the flood. */
	while (!run->stopped[s] && (n = read(stream_fd(run, s), chunk, sizeof(chunk))) > 0) {
		size_t kept = result_stream_add(rs, chunk, (size_t)n, run->output_cap);

		if (kept && run->ev && run->ev->output)
			run->ev->output(run->ev->ctx, s, chunk, kept);
		if (rs->total >= stop_at)
			run->stopped[s] = rs->stopped = true;
	}
	if (n == 0)
		*stream_eof(run, s) = true;
	return n != 0;
}

/* Whether a stream no longer read has a pipe that is full: its writer
 * (whichever process of the sandbox it is) is blocked.  Within a page of
 * full, as a writer blocks when no page is left for its bytes; a pipe the
 * sandbox filled by pages of a few bytes (vmsplice) is not seen so, and
 * its writer stays blocked until the time limit. */
static bool pipe_full(int fd)
{
	int queued = 0, size = fcntl(fd, F_GETPIPE_SZ);

	return size > 0 && ioctl(fd, FIONREAD, &queued) == 0 && queued + PIPE_BUF > size;
}

/* Whether a stream past its cap has kept its writer blocked for
 * OUTPUT_STALL_S: then run->stalled says which. */
static bool output_stalled(struct run *run, double now)
{
	for (enum exec_stream s = EXEC_STDOUT; s <= EXEC_STDERR; s++) {
		if (!run->stopped[s] || *stream_eof(run, s) || !pipe_full(stream_fd(run, s))) {
			run->full_since[s] = 0;
			continue;
		}
		if (run->full_since[s] == 0)
			run->full_since[s] = now;
		if (now - run->full_since[s] >= OUTPUT_STALL_S) {
			run->stalled = s;
			return true;
		}
	}
	return false;
}

/* During an interrupt's grace: a chunk a tick of each stream no longer
 * read, so that the runtime's last words do not block it. */
static void grace_read(struct run *run, double now)
{
	for (enum exec_stream s = EXEC_STDOUT; s <= EXEC_STDERR; s++)
		if (run->stopped[s] && now - run->grace_read_at[s] >= TICK_MS / 1000.0) {
			run->grace_read_at[s] = now;
			drop_stream(run, s, CHUNK);
		}
}

/* The execution is over and the sandbox lives: drop at most a pipe's worth
 * of each stream no longer read (the tail of a flood, not the next
 * execution's output).  A writer that lives on writes its next pipe's
 * worth into the next execution, which reads it up to its own cap. */
static void drop_leftover(struct run *run)
{
	for (enum exec_stream s = EXEC_STDOUT; s <= EXEC_STDERR; s++) {
		int size = fcntl(stream_fd(run, s), F_GETPIPE_SZ);

		if (run->stopped[s])
			drop_stream(run, s, size > 0 ? (size_t)size : CHUNK);
	}
}

/* After the driver is gone or done: take what the pipes still hold, of
 * the streams still read.  When the sandbox is gone, read to EOF (bounded
 * in time); else just what is there now. */
static void drain(struct run *run, bool to_eof)
{
	double deadline = clock_mono_s() + DRAIN_TIMEOUT_S;
	bool out_open = stream_read(run, EXEC_STDOUT), err_open = stream_read(run, EXEC_STDERR);

	do {
		struct pollfd pfd[2] = {
			{ .fd = out_open ? jail_stdout_fd(run->b->jail) : -1, .events = POLLIN },
			{ .fd = err_open ? jail_stderr_fd(run->b->jail) : -1, .events = POLLIN },
		};

		if (out_open)
			out_open = read_stream(run, EXEC_STDOUT) && !run->stopped[EXEC_STDOUT];
		if (err_open)
			err_open = read_stream(run, EXEC_STDERR) && !run->stopped[EXEC_STDERR];
		if (!to_eof || (!out_open && !err_open))
			break;
		poll(pfd, 2, 20);
	} while (clock_mono_s() < deadline);
}

static uint64_t cpu_ns_now(struct box *b)
{
	struct jail_usage u;

	return jail_usage(b->jail, &u) == 0 ? u.cpu_ns : 0;
}

enum stop { STOP_NONE, STOP_TIMEOUT, STOP_CPU, STOP_CANCEL, STOP_OUTPUT, STOP_INTERRUPT };

/* Pump until done, death, or a limit.  Returns why it stopped early.
 * watch_cancel: whether the cancel fd and the limits other than the clock
 * count (not during the interrupt's grace, which must run its course: the
 * cancel fd stays readable, the CPU and output stay past their limits). */
static enum stop pump(struct run *run, double deadline, uint64_t cpu_start,
		      bool watch_cancel)
{
	struct jail *j = run->b->jail;
	const struct exec_request *ex = run->ex;
	uint64_t cpu_limit_ns = ex->cpu_s > 0 ? (uint64_t)(ex->cpu_s * 1e9) : 0;
	int cancel_fd = watch_cancel ? ex->cancel_fd : -1;

	while (!run->done && !run->main_exited && !run->violated) {
		/* A negative fd is not polled: nothing more comes from a stream
		 * at its end of file, and its POLLHUP would never stop. */
		struct pollfd pfd[6] = {
			{ .fd = stream_read(run, EXEC_STDOUT) ? jail_stdout_fd(j) : -1, .events = POLLIN },
			{ .fd = stream_read(run, EXEC_STDERR) ? jail_stderr_fd(j) : -1, .events = POLLIN },
			{ .fd = run->b->ctl_eof ? -1 : jail_ctl_fd(j), .events = POLLIN },
			{ .fd = jail_status_fd(j), .events = POLLIN },
			{ .fd = jail_pidfd(j), .events = POLLIN },
			{ .fd = cancel_fd, .events = POLLIN },
		};
		double now = clock_mono_s(), left = deadline - now;
		double throttled = frame_cpu_wait(run, now);
		int timeout = left <= 0 ? 0 : left * 1000 < TICK_MS ? (int)(left * 1000) + 1 : TICK_MS;
		int r;

		if (left <= 0)
			return STOP_TIMEOUT;
		if (throttled > 0) {
			/* Over its frame CPU: the channel waits, the rest not. */
			pfd[2].fd = -1;
			if (throttled * 1000 < timeout)
				timeout = (int)(throttled * 1000) + 1;
		}
		if (run->b->ctl_eof) {
			/* Closed by the code while the driver lives: nothing can
			 * end this execution as it should; end it now. */
			if (run->ctl_eof_at == 0)
				run->ctl_eof_at = clock_mono_s();
			if (clock_mono_s() - run->ctl_eof_at > CTL_EOF_GRACE_S) {
				violate(run, "the control channel (fd 3) was closed");
				break;
			}
		}
		r = poll(pfd, cancel_fd >= 0 ? 6 : 5, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			read_stream(run, EXEC_STDOUT);
		if (pfd[1].revents)
			read_stream(run, EXEC_STDERR);
		if (pfd[2].revents || (pfd[2].fd < 0 && throttled > 0 && !run->b->ctl_eof &&
					frame_cpu_wait(run, clock_mono_s()) == 0))
			read_ctl(run);
		if (pfd[3].revents || pfd[4].revents) {
			int st = jail_read_status(j, &run->exit);

			if (st != 0 || pfd[4].revents)
				run->main_exited = true;
		}
		if (cancel_fd >= 0 && pfd[5].revents)
			return STOP_CANCEL;
		/* Not in the exec's first tick, as no timeout is (0.1 s at
		 * least): the driver ignores SIGINT until it has read the exec. */
		if (watch_cancel && !run->done && atomic_load(&run->b->interrupt) &&
		    clock_mono_s() - run->started >= TICK_MS / 1000.0)
			return STOP_INTERRUPT;
		if (cpu_limit_ns && watch_cancel &&
		    cpu_ns_now(run->b) - cpu_start >= cpu_limit_ns)
			return STOP_CPU;
		if (watch_cancel && !run->done && output_stalled(run, clock_mono_s()))
			return STOP_OUTPUT;
		if (!watch_cancel)
			grace_read(run, clock_mono_s());
	}
	return STOP_NONE;
}

static void describe_stop(struct run *run, enum stop why, double secs, const char *what)
{
	const char *limit = why == STOP_CPU ? "CPU time limit" :
			    why == STOP_CANCEL ? "cancellation" : "time limit";
	/* A writer blocked past the cap in a way not seen as a full pipe
	 * waits for the clock: say so beside it. */
	const char *blocked = run->stopped[EXEC_STDOUT] ? " (stdout was past its output limit "
			      "and no longer read)" : run->stopped[EXEC_STDERR] ?
			      " (stderr was past its output limit and no longer read)" : "";

	if (why == STOP_OUTPUT)
		snprintf(run->res->reason, sizeof(run->res->reason),
			 "output limit of %zu KiB exceeded on %s (further output blocks "
			 "its writer); %s", run->output_cap >> 10, stream_name(run->stalled),
			 what);
	else if (why == STOP_CANCEL)
		snprintf(run->res->reason, sizeof(run->res->reason),
			 "execution cancelled; %s", what);
	else if (why == STOP_INTERRUPT)
		snprintf(run->res->reason, sizeof(run->res->reason), "interrupted; %s", what);
	else
		snprintf(run->res->reason, sizeof(run->res->reason),
			 "%s of %g s exceeded%s; %s", limit, secs, blocked, what);
}

/* The driver is gone: say how, in the result and the box. */
static void classify_death(struct run *run, uint64_t oom_before)
{
	struct jail_usage u;
	struct result *res = run->res;
	int st = run->exit.wstatus;
	char stopped[sizeof(run->b->stop_reason)];

	if (stop_reason(run->b, stopped, sizeof(stopped))) {
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "%s", stopped);
	} else if (jail_usage(run->b->jail, &u) == 0 && u.oom_kills > oom_before) {
		res->status = RESULT_OOM;
		snprintf(res->reason, sizeof(res->reason),
			 "the memory limit was reached and the runtime was killed");
	} else if (run->exit.exited && WIFSIGNALED(st)) {
		res->status = RESULT_KILLED;
		res->signal = WTERMSIG(st);
		snprintf(res->reason, sizeof(res->reason),
			 "the runtime was killed by signal %d (%s)", res->signal,
			 strsignal(res->signal));
	} else if (run->exit.exited && WIFEXITED(st)) {
		/* The code ended the runtime itself (os._exit, exec...). */
		res->has_exit_code = true;
		res->exit_code = WEXITSTATUS(st);
		res->status = res->exit_code == 0 ? RESULT_OK : RESULT_ERROR;
		snprintf(res->reason, sizeof(res->reason),
			 "the runtime exited with status %d", res->exit_code);
	} else {
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "the sandbox ended unexpectedly");
	}
	mark_dead(run->b, res->reason);
}

#define FRESH_INTERPRETER "a fresh interpreter took its place: variables are lost, " \
	"files in /work are kept"

/* How the interpreter ended, after "the interpreter ": "was killed by
 * signal 9 (Killed)", "exited with status 3". */
static void describe_status(const struct run *run, char *out, size_t len)
{
	int st = run->died_status;

	if (run->died_closed)
		snprintf(out, len, "closed its control socket and was killed");
	else if (WIFSIGNALED(st))
		snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(out, len, "exited with status %d", WEXITSTATUS(st));
}

/* The interpreter that ran this execution ended (the keeper said "died")
 * and a fresh one has said "ready": the session goes on.  stopped: why
 * the execution was being stopped when it ended (STOP_NONE: it was not). */
static void interpreter_ended(struct run *run, uint64_t oom_before, enum stop why,
			      double secs)
{
	struct result *res = run->res;
	struct jail_usage u;
	int st = run->died_status;
	/* A one-shot ends with its execution: nothing takes the place. */
	const char *then = run->ex->one_shot ? "" : "; " FRESH_INTERPRETER;
	char how[96], what[sizeof(how) + 160];

	res->restarted = !run->ex->one_shot;
	describe_status(run, how, sizeof(how));
	if (jail_usage(run->b->jail, &u) == 0 && u.oom_kills > oom_before) {
		res->status = RESULT_OOM;
		snprintf(res->reason, sizeof(res->reason),
			 "the memory limit was reached and the interpreter was killed%s", then);
	} else if (why != STOP_NONE) {
		res->status = why == STOP_INTERRUPT ? RESULT_KILLED : RESULT_TIMEOUT;
		if (WIFEXITED(st)) {
			res->has_exit_code = true;
			res->exit_code = WEXITSTATUS(st);
		}
		snprintf(what, sizeof(what), "the interpreter %s when interrupted%s", how, then);
		describe_stop(run, why, secs, what);
	} else if (WIFSIGNALED(st)) {
		res->status = RESULT_KILLED;
		res->signal = WTERMSIG(st);
		snprintf(res->reason, sizeof(res->reason), "the interpreter %s%s", how, then);
	} else {
		/* The code ended the interpreter itself (os._exit, exec...). */
		res->has_exit_code = true;
		res->exit_code = WEXITSTATUS(st);
		res->status = res->exit_code == 0 ? RESULT_OK : RESULT_ERROR;
		snprintf(res->reason, sizeof(res->reason), "the interpreter %s%s", how, then);
	}
}

/* The code did not stop when interrupted: ask the keeper to kill the
 * interpreter and everything it started and to start a fresh one, and wait
 * for its "ready" (REPLACE_TIMEOUT_S).  What this execution still sends
 * meanwhile is taken as before (its budget is left as it is); a "died"
 * (the interpreter ended by itself meanwhile) is passed over.  0 when the
 * fresh one is ready, else -errno (the caller kills the sandbox). */
static int replace_interpreter(struct run *run)
{
	struct box *b = run->b;
	json_t *frame = json_pack("{s:s}", "type", "restart");
	double deadline = clock_mono_s() + REPLACE_TIMEOUT_S;
	struct frame_expect ex = b->fr.expect;
	int r;

	r = frame ? send_frame(b, frame, REPLACE_TIMEOUT_S) : -ENOMEM;
	json_decref(frame);
	if (r < 0)
		return r;
	ex.ready = true;
	frame_reader_expect(&b->fr, &ex);
	run->done = false;
	while (!run->violated && clock_mono_s() < deadline) {
		struct pollfd pfd = { .fd = jail_ctl_fd(b->jail), .events = POLLIN };
		char chunk[CHUNK];
		json_t *f;
		ssize_t n;

		while ((r = frame_reader_next(&b->fr, &f)) > 0) {
			const char *type = json_string_value(json_object_get(f, "type"));
			const char *cause = json_string_value(json_object_get(f, "cause"));
			const char *why = !strcmp(type, "died") ? died_violation(f) : NULL;

			if (why)
				violate(run, *why ? why : "malformed \"died\" frame");
			else if (!strcmp(type, "ready") && cause && !strcmp(cause, "restart")) {
				note_ready(b, f);
				json_decref(f);
				return 0;
			} else if (strcmp(type, "ready") && strcmp(type, "died") && !run->done)
				take_frame(run, f);	/* its last results, maybe its "done" */
			json_decref(f);
			/* A "died" or "ready" uses up none of what is left. */
			ex = b->fr.expect;
			ex.ready = true;
			frame_reader_expect(&b->fr, &ex);
		}
		if (r < 0) {
			violate(run, b->fr.error);
			break;
		}
		if (poll(&pfd, 1, TICK_MS) < 0 && errno != EINTR)
			return -errno;
		n = read(pfd.fd, chunk, sizeof(chunk));
		if (n == 0)
			return -EPIPE;
		if (n > 0 && frame_reader_feed(&b->fr, chunk, (size_t)n) < 0)
			return -ENOMEM;
	}
	return run->violated ? -EPROTO : -ETIMEDOUT;
}

int box_exec(struct box *b, const struct exec_request *ex,
	     const struct exec_events *ev, struct result *res)
{
	struct run run = { .b = b, .ex = ex, .ev = ev, .res = res };
	struct jail_usage u0 = { 0 }, u1 = { 0 };
	struct timespec wall_start;
	double t0, deadline, grace;
	bool interrupted = false;
	enum stop why;
	int r;

	if (b->dead)
		return -EPIPE;
	if (!canonical_language(ex->language) || !ex->code ||
	    strlen(ex->code) > EXEC_CODE_MAX || !(ex->timeout_s > 0) ||
	    (ex->input && (ex->input_len > EXEC_STDIN_MAX ||
			   memchr(ex->input, '\0', ex->input_len))))
		return -EINVAL;
	run.id = ++b->next_id;
	run.output_cap = ex->output_cap ? ex->output_cap : EXEC_OUTPUT_CAP_DEFAULT;
	run.results_cap = ex->results_cap ? ex->results_cap : EXEC_RESULTS_CAP_DEFAULT;
	grace = ex->grace_s > 0 ? ex->grace_s : EXEC_GRACE_DEFAULT;
	expect_frames(&run);

	jail_reset_peak(b->jail);
	jail_usage(b->jail, &u0);
	execution_start(b, &wall_start);
	t0 = clock_mono_s();
	run.started = t0;
	deadline = t0 + ex->timeout_s;

	if ((r = send_exec(&run, deadline)) < 0) {
		if (r == -EINVAL)
			return r;
		mark_dead(b, "the runtime stopped reading requests");
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "%s", b->dead_reason);
		jail_kill(b->jail);
		goto finish;
	}

	why = pump(&run, deadline, u0.cpu_ns, true);
	if (why != STOP_NONE && !ex->one_shot) {
		/* Interrupt first, so that a session keeps its state. */
		jail_signal(b->jail, SIGINT);
		pump(&run, clock_mono_s() + grace, u0.cpu_ns, false);
		if (run.died && !run.violated) {
			drain(&run, false);
			interpreter_ended(&run, u0.oom_kills, why,
					  why == STOP_CPU ? ex->cpu_s : ex->timeout_s);
			goto finish;
		}
		if (why == STOP_INTERRUPT && run.done && !run.violated) {
			/* Asked for: the code's own ending (KeyboardInterrupt,
			 * or what it made of it) is the result. */
			interrupted = true;
			why = STOP_NONE;
		} else if (run.done && !run.violated) {
			res->status = RESULT_TIMEOUT;
			describe_stop(&run, why, why == STOP_CPU ? ex->cpu_s : ex->timeout_s,
				      "the code was interrupted and the session kept");
			drain(&run, false);
			goto finish;
		}
	}
	if (why != STOP_NONE && !ex->one_shot && !run.main_exited && !run.violated &&
	    replace_interpreter(&run) == 0) {
		/* The session is kept, with a fresh interpreter. */
		drain(&run, false);
		res->status = why == STOP_INTERRUPT ? RESULT_KILLED : RESULT_TIMEOUT;
		res->restarted = true;
		res->has_exit_code = false;
		res->exit_code = 0;
		describe_stop(&run, why, why == STOP_CPU ? ex->cpu_s : ex->timeout_s,
			      "the code did not stop when interrupted; " FRESH_INTERPRETER);
		goto finish;
	}
	if (why != STOP_NONE) {
		bool died = run.main_exited;	/* during the interrupt's grace */
		struct jail_usage u;

		jail_kill(b->jail);
		drain(&run, true);
		if (died && jail_usage(b->jail, &u) == 0 && u.oom_kills > u0.oom_kills) {
			/* The interrupted code ran into the memory limit: that is
			 * what killed it, whatever the clock said before. */
			classify_death(&run, u0.oom_kills);
			goto finish;
		}
		res->status = why == STOP_INTERRUPT ? RESULT_KILLED : RESULT_TIMEOUT;
		if (died && run.exit.exited && WIFEXITED(run.exit.wstatus)) {
			res->has_exit_code = true;
			res->exit_code = WEXITSTATUS(run.exit.wstatus);
		}
		describe_stop(&run, why, why == STOP_CPU ? ex->cpu_s : ex->timeout_s,
			      ex->one_shot ? "the sandbox was killed" :
			      died ? "the runtime ended while it was interrupted; the session "
				     "was ended" :
			      "the code did not stop when interrupted; the session was ended");
		mark_dead(b, res->reason);
		goto finish;
	}
	if (run.violated) {
		jail_kill(b->jail);
		drain(&run, true);
		res->status = RESULT_KILLED;
		snprintf(res->reason, sizeof(res->reason), "protocol violation: %s",
			 run.violation);
		mark_dead(b, res->reason);
		goto finish;
	}
	if (run.died) {
		drain(&run, false);
		interpreter_ended(&run, u0.oom_kills, STOP_NONE, 0);
		goto finish;
	}
	if (run.main_exited && !run.done)
		read_ctl(&run);	/* frames written just before the exit */
	if (run.main_exited && !run.done) {
		drain(&run, true);
		classify_death(&run, u0.oom_kills);
		goto finish;
	}
	/* "done": everything printed before it is in the pipes already. */
	drain(&run, false);
	res->status = res->error || (res->has_exit_code && res->exit_code != 0) ?
		      RESULT_ERROR : RESULT_OK;
	if (interrupted)
		snprintf(res->reason, sizeof(res->reason),
			 "interrupted; the code stopped and the session was kept");
	if (jail_usage(b->jail, &u1) == 0 && u1.oom_kills > u0.oom_kills) {
		/* The kernel killed a process the code started (the
		 * interpreter, the likelier victim, would have said "died"). */
		res->status = RESULT_OOM;
		snprintf(res->reason, sizeof(res->reason),
			 "the memory limit was reached and a process the code started was "
			 "killed; the session was kept");
	} else if (run.died_earlier && !res->reason[0]) {
		char how[96];

		describe_status(&run, how, sizeof(how));
		snprintf(res->reason, sizeof(res->reason),
			 "the interpreter %s after the last execution; a fresh one ran this "
			 "code: variables are lost, files in /work are kept", how);
	}
	if (run.died_earlier)
		res->restarted = true;

finish:
	atomic_store(&b->interrupt, false);	/* asked of this execution, or of none */
	if (!b->dead)
		drop_leftover(&run);
	res->duration_ms = (uint64_t)((clock_mono_s() - t0) * 1000.0);
	if (jail_usage(b->jail, &u1) == 0) {
		res->cpu_ms = (u1.cpu_ns - u0.cpu_ns) / 1000000;
		res->memory_peak_bytes = u1.memory_peak;
	}
	/* The workspace fd keeps /work readable even after the sandbox died:
	 * what a killed program wrote is still reported. */
	/* A file this execution writes just before its end, in the same clock
	 * tick as the next one's start, would be listed by both: rare and
	 * harmless, and cheaper than making every next execution wait for a
	 * tick.  Only uploads (box_note_host_write) make it wait. */
	if (ex->unpack)
		return 0;	/* what an archive put there is no execution's doing */
	ws_changed_files(jail_work_fd(b->jail), &wall_start, res->files);
	if (box_read_tests(b, ex->junit, res) < 0)
		log_warn("out of memory reading the test reports of an execution");
	return 0;
}
