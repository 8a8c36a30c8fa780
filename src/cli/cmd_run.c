/* petri run — run code once in a fresh sandbox.
 *
 * Without --json it behaves like running the program in a terminal: output
 * streams to stdout and stderr as it is produced, rich results are printed
 * as text, an exception's traceback goes to stderr, and the exit status is
 * the program's (124 timeout, 137 out of memory, 128+N signal, 125 petri's
 * own failure).  With --json it prints one result object (docs/api.md). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cli/commands.h"
#include "jail/jail.h"
#include "runtime/box.h"
#include "runtime/defaults.h"
#include "runtime/languages.h"
#include "runtime/result.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/num.h"

#define CODE_FILE_MAX BOX_CODE_MAX

static void usage(FILE *f)
{
	char names[128];

	lang_names(names, sizeof(names));
	fprintf(f,
		"usage: petri run [options] (-c CODE | FILE | -)\n"
		"\n"
		"  -l, --lang LANG      %s (default: from FILE's extension, else %s)\n"
		"  -t, --timeout SEC    wall-clock limit (default %.0f)\n"
		"  -m, --memory MB      memory limit, swap included (default %d)\n"
		"      --cpu-time SEC   CPU time limit of the whole sandbox\n"
		"      --cpus N         CPU quota in cores, e.g. 0.5 (default %.1f)\n"
		"      --pids N         process limit (default %d)\n"
		"      --disk MB        size of /work (default %d)\n"
		"      --json           print one JSON result object\n"
		"  -c CODE              the code to run\n"
		"  FILE | -             read the code from FILE or standard input\n",
		names, lang_table[0].name, DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB,
		DEFAULT_CPU_MILLICORES / 1000.0, DEFAULT_PIDS, DEFAULT_DISK_MB);
}

static int read_all(FILE *f, struct buf *out)
{
	char chunk[65536];
	size_t n;

	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (out->len + n > CODE_FILE_MAX)
			return -EFBIG;
		if (buf_append(out, chunk, n) < 0)
			return -ENOMEM;
	}
	return ferror(f) ? -EIO : 0;
}

/* ---- stopping early ------------------------------------------------------ */

/* Ctrl-C, kill, or a reader that went away (petri run ... | head): the run
 * is cancelled through box_exec()'s cancel fd, so the sandbox and its
 * cgroup are torn down before petri exits, never left to a later sweep. */
static int cancel_fd = -1;
static volatile sig_atomic_t stop_signal;

static void cancel(int sig)
{
	uint64_t one = 1;
	int saved = errno;

	if (!stop_signal)
		stop_signal = sig;
	if (write(cancel_fd, &one, sizeof(one)) < 0)
		(void)0;	/* the counter cannot overflow from here */
	errno = saved;
}

static void catch_stop_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cancel;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);	/* EPIPE from write() instead */
}

/* ---- live output for the terminal -------------------------------------- */

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EPIPE) {
			cancel(SIGPIPE);
			return;
		}
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void on_output(void *ctx, enum box_stream s, const char *data, size_t len)
{
	(void)ctx;
	write_all(s == BOX_STDOUT ? 1 : 2, data, len);
}

/* A rich result, as a terminal can show it. */
static void on_rich(void *ctx, const json_t *bundle)
{
	const char *text = json_string_value(json_object_get(bundle, "text/plain"));
	const char *k;
	json_t *v;

	(void)ctx;
	json_object_foreach((json_t *)bundle, k, v) {
		if (strncmp(k, "image/", 6) == 0)
			printf("[%s result, %zu bytes of base64; petri run --json returns it]\n",
			       k, json_string_length(v));
	}
	if (text)
		printf("%s\n", text);
	fflush(stdout);
}

static void on_error(void *ctx, const json_t *error)
{
	const char *tb = json_string_value(json_object_get(error, "traceback"));
	const char *name = json_string_value(json_object_get(error, "name"));
	const char *msg = json_string_value(json_object_get(error, "message"));

	(void)ctx;
	if (tb && *tb)
		write_all(2, tb, strlen(tb));
	else if (name && msg && strcmp(name, "NonZeroExit") != 0)
		fprintf(stderr, "%s: %s\n", name, msg);
}

int cmd_run(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_CPU_TIME, OPT_CPUS, OPT_PIDS, OPT_DISK };
	static const struct option opts[] = {
		{ "lang", required_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "memory", required_argument, NULL, 'm' },
		{ "cpu-time", required_argument, NULL, OPT_CPU_TIME },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "pids", required_argument, NULL, OPT_PIDS },
		{ "disk", required_argument, NULL, OPT_DISK },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct box_config cfg = { 0 };
	struct box_exec ex = { .timeout_s = DEFAULT_TIMEOUT_S, .one_shot = true,
			       .cancel_fd = -1 };
	struct box_events ev = { .output = on_output, .rich = on_rich, .error = on_error };
	struct buf code = BUF_INIT;
	const char *lang_arg = NULL, *inline_code = NULL;
	const struct language *lang = NULL;
	bool json_out = false;
	struct jail_host *host;
	struct box *box = NULL;
	struct result res;
	char err[512];
	double v;
	int c, r, status = 125;

	default_jail_limits(&cfg.limits);
	while ((c = getopt_long(argc, argv, "+l:t:m:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			lang_arg = optarg;
			break;
		case 't':
			if (!num_double(optarg, 0.001, 86400, &ex.timeout_s))
				die(2, "--timeout: expected seconds between 0.001 and 86400, got '%s'", optarg);
			break;
		case 'm':
			if (!num_double(optarg, 16, 1 << 20, &v))
				die(2, "--memory: expected MB between 16 and 1048576, got '%s'", optarg);
			cfg.limits.memory_bytes = (uint64_t)v << 20;
			break;
		case OPT_CPU_TIME:
			if (!num_double(optarg, 0.001, 86400, &ex.cpu_s))
				die(2, "--cpu-time: expected seconds, got '%s'", optarg);
			cfg.limits.cpu_seconds = (uint32_t)ceil(ex.cpu_s) + 1;
			break;
		case OPT_CPUS:
			if (!num_double(optarg, 0.01, 1024, &v))
				die(2, "--cpus: expected a number of cores, got '%s'", optarg);
			cfg.limits.cpu_millicores = (uint32_t)(v * 1000);
			break;
		case OPT_PIDS:
			if (!num_double(optarg, 4, 1 << 20, &v))
				die(2, "--pids: expected at least 4, got '%s'", optarg);
			cfg.limits.pids = (uint32_t)v;
			break;
		case OPT_DISK:
			if (!num_double(optarg, 1, 1 << 20, &v))
				die(2, "--disk: expected MB, got '%s'", optarg);
			cfg.limits.work_bytes = (uint64_t)v << 20;
			break;
		case OPT_JSON:
			json_out = true;
			break;
		case 'c':
			inline_code = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (inline_code && optind < argc)
		die(2, "give the code with -c or as a FILE, not both");
	if (inline_code) {
		if (buf_append_str(&code, inline_code) < 0)
			die(125, "out of memory");
	} else if (optind == argc - 1) {
		const char *path = argv[optind];
		FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;

		if (!f)
			die(2, "cannot open '%s': %s", path, strerror(errno));
		r = read_all(f, &code);
		if (f != stdin)
			fclose(f);
		if (r == -EFBIG)
			die(2, "'%s' is larger than %u bytes", path, CODE_FILE_MAX);
		if (r < 0)
			die(2, "cannot read '%s': %s", path, strerror(-r));
		if (!lang_arg)
			lang = lang_by_path(path);
	} else {
		usage(stderr);
		return 2;
	}
	if (lang_arg && !(lang = lang_find(lang_arg))) {
		char msg[256];

		lang_unknown_message(msg, sizeof(msg), lang_arg);
		die(2, "%s", msg);
	}
	if (!lang)
		lang = &lang_table[0];
	if (memchr(code.data ? code.data : "", '\0', code.len))
		die(2, "the code contains a NUL byte");
	ex.language = lang->name;
	ex.code = code.data ? code.data : "";

	cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cancel_fd < 0)
		die(125, "cannot create an eventfd: %s", strerror(errno));
	ex.cancel_fd = cancel_fd;
	catch_stop_signals();
	host = cli_jail_host();
	if (result_init(&res) < 0)
		die(125, "out of memory");
	if ((r = box_start(host, &cfg, &box, err, sizeof(err))) < 0) {
		log_err("%s", err);
		goto out;
	}
	r = box_exec(box, &ex, json_out ? NULL : &ev, &res);
	if (r == -EINVAL) {
		log_err("the code is not valid UTF-8 or is too long");
		status = 2;
		goto out;
	}
	if (r < 0) {
		log_err("execution failed: %s", strerror(-r));
		goto out;
	}
	if (stop_signal) {
		/* Like a program killed by the signal, after cleaning up. */
		status = 128 + stop_signal;
		goto out;
	}
	if (json_out) {
		json_t *j = result_to_json(&res);

		if (!j || json_dumpf(j, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) < 0)
			die(125, "cannot write the result");
		putchar('\n');
		json_decref(j);
	} else if (res.status == RESULT_TIMEOUT || res.status == RESULT_OOM ||
		   res.status == RESULT_KILLED) {
		fflush(stdout);
		fprintf(stderr, "petri: %s: %s\n", result_status_name(res.status),
			res.reason[0] ? res.reason : "the sandbox was stopped");
	}
	status = result_cli_exit_code(&res);
out:
	fflush(stdout);
	box_free(box);
	result_release(&res);
	buf_release(&code);
	jail_host_free(host);
	close(cancel_fd);
	return status;
}
