/* petri run — run code once in a fresh sandbox.
 *
 * Without --json it behaves like running the program in a terminal: output
 * streams to stdout and stderr as it is produced, rich results are printed
 * as text, an exception's traceback goes to stderr, and the exit status is
 * the program's (124 timeout, 137 out of memory, 128+N signal, 125 petri's
 * own failure).  With --json it prints one result object (docs/api.md).
 * --file puts the user's files into /work first; --save-dir keeps the
 * files the code wrote and its images afterwards. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/userfiles.h"
#include "jail/jail.h"
#include "runtime/box.h"
#include "runtime/defaults.h"
#include "runtime/files.h"
#include "runtime/languages.h"
#include "runtime/result.h"
#include "session/session.h"
#include "util/base64.h"
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
		"  -f, --file PATH      put PATH into /work under its name (repeatable)\n"
		"      --save-dir DIR   save the files the code wrote (DIR/files/...) and\n"
		"                       its images (DIR/result-N.png) in DIR\n"
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

/* ---- the user's files -------------------------------------------------- */

static int put_files(struct box *box, const struct userfile *v, size_t n)
{
	struct files_user u;
	int r;

	jail_owner(box_jail(box), &u.uid, &u.gid);
	for (size_t i = 0; i < n; i++) {
		r = files_write(&u, jail_work_fd(box_jail(box)), v[i].name,
				v[i].data.data ? v[i].data.data : "", v[i].data.len);
		box_note_host_write(box);
		if (r < 0) {
			log_err("--file: cannot put '%s' into /work: %s", v[i].host_path,
				strerror(-r));
			return r;
		}
	}
	return 0;
}

static void save_one(const char *dir, const char *rel, const char *b64, size_t n)
{
	unsigned char *data;
	size_t len;
	int r = -EINVAL;

	if ((data = base64_decode(b64, n, &len)))
		r = userfiles_save(dir, rel, data, len);
	free(data);
	if (r < 0)
		log_err("--save-dir: cannot save %s/%s: %s", dir, rel, strerror(-r));
	else
		fprintf(stderr, "petri run: saved %s/%s\n", dir, rel);
}

/* Every file the code wrote into DIR/files/, every image result into DIR:
 * read before the sandbox goes, as a one-shot returns them. */
static void save_outputs(struct box *box, struct result *res, const char *dir,
			 uint64_t work_bytes)
{
	unsigned images = 0;
	json_t *v;
	size_t i;

	json_array_foreach(res->results, i, v) {
		const char *k;
		json_t *data;

		json_object_foreach(v, k, data) {
			char name[64];

			if (strcmp(k, "image/png") && strcmp(k, "image/jpeg"))
				continue;
			snprintf(name, sizeof(name), "result-%u.%s", ++images,
				 strcmp(k, "image/png") ? "jpg" : "png");
			save_one(dir, name, json_string_value(data), json_string_length(data));
		}
	}
	if (session_box_files(box, res->files, NULL, 0, work_bytes, work_bytes) < 0)
		log_err("--save-dir: out of memory");
	json_array_foreach(res->files, i, v) {
		json_t *b64 = json_object_get(v, "content_base64");
		const char *path = json_string_value(json_object_get(v, "path"));
		char rel[4096];

		if (!json_is_string(b64)) {
			log_err("--save-dir: cannot save /work/%s: %s", path,
				json_string_value(json_object_get(v, "reason")));
			continue;
		}
		snprintf(rel, sizeof(rel), "files/%s", path);
		save_one(dir, rel, json_string_value(b64), json_string_length(b64));
		json_object_del(v, "content_base64");	/* --json lists, as before */
		json_object_del(v, "truncated");
	}
}

int cmd_run(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_CPU_TIME, OPT_CPUS, OPT_PIDS, OPT_DISK, OPT_SAVE_DIR };
	static const struct option opts[] = {
		{ "lang", required_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "memory", required_argument, NULL, 'm' },
		{ "cpu-time", required_argument, NULL, OPT_CPU_TIME },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "pids", required_argument, NULL, OPT_PIDS },
		{ "disk", required_argument, NULL, OPT_DISK },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "file", required_argument, NULL, 'f' },
		{ "save-dir", required_argument, NULL, OPT_SAVE_DIR },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct box_config cfg = { 0 };
	struct box_exec ex = { .timeout_s = DEFAULT_TIMEOUT_S, .one_shot = true,
			       .cancel_fd = -1 };
	struct box_events ev = { .output = on_output, .rich = on_rich, .error = on_error };
	struct buf code = BUF_INIT;
	const char *lang_arg = NULL, *inline_code = NULL, *save_dir = NULL;
	const struct language *lang = NULL;
	struct userfile files[USERFILES_MAX] = { 0 };
	size_t nfiles = 0;
	bool json_out = false;
	struct jail_host *host;
	struct box *box = NULL;
	struct result res;
	char err[512];
	double v;
	int c, r, status = 125;

	default_jail_limits(&cfg.limits);
	while ((c = getopt_long(argc, argv, "+l:t:m:c:f:h", opts, NULL)) != -1) {
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
		case 'f':
			if (nfiles == USERFILES_MAX)
				die(2, "--file: at most %d files", USERFILES_MAX);
			files[nfiles++].host_path = optarg;
			break;
		case OPT_SAVE_DIR:
			save_dir = optarg;
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
	if (save_dir && mkdir(save_dir, 0755) < 0 && errno != EEXIST)
		die(2, "--save-dir: cannot create '%s': %s", save_dir, strerror(errno));
	userfiles_load(files, nfiles);

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
	if (put_files(box, files, nfiles) < 0)
		goto out;
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
	if (save_dir)
		save_outputs(box, &res, save_dir, cfg.limits.work_bytes);
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
	userfiles_release(files, nfiles);
	jail_host_free(host);
	close(cancel_fd);
	return status;
}
