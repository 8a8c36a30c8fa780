/* petri run — run code once in a fresh sandbox.
 *
 * Without --json it behaves like running the program in a terminal: output
 * streams to stdout and stderr as it is produced, rich results are printed
 * as text, an exception's traceback goes to stderr, and the exit status is
 * the program's (124 timeout, 137 out of memory, 128+N signal, 125 petri's
 * own failure).  With --json it prints one result object (docs/api.md).
 * --file puts the user's files into /work first, --dir a whole project
 * (as an archive the sandbox's driver extracts, as POST .../archive does);
 * --save-dir keeps the files the code wrote and its images afterwards. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/userfiles.h"
#include "exec/request.h"
#include "runtime/box.h"
#include "workspace/files.h"
#include "exec/languages.h"
#include "exec/result.h"
#include "session/session.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/num.h"

#define CODE_FILE_MAX EXEC_CODE_MAX
_Static_assert(EXEC_STDIN_MAX == CODE_FILE_MAX, "--stdin is read as the code is");

static void usage(FILE *f)
{
	struct petri_config d;
	char names[128];

	config_defaults(&d);
	lang_names(names, sizeof(names));
	fprintf(f,
		"usage: petri run [options] (-c CODE | FILE | -)\n"
		"\n"
		"  -l, --lang LANG      %s, or one the configuration adds\n"
		"                       (default: from FILE's extension, else %s)\n"
		"  -t, --timeout SEC    wall-clock limit (default %g)\n"
		"  -m, --memory MB      memory limit, swap included (default %u)\n"
		"      --cpu-time SEC   CPU time limit of the whole sandbox\n"
		"      --cpus N         CPU quota in cores, e.g. 0.5 (default %g)\n"
		"      --pids N         process limit (default %u)\n"
		"      --disk MB        size of /work (default %u)\n"
		"  -f, --file PATH      put PATH into /work under its name (repeatable)\n"
		"  -d, --dir PROJECT    PROJECT's tree as /work (copied in: PROJECT is\n"
		"                       left as it is unless --save-dir names it)\n"
		"      --save-dir DIR   save the files the code wrote (DIR/files/...) and\n"
		"                       its images (DIR/result-N.png) in DIR; with --dir,\n"
		"                       the files it wrote or changed at their paths\n"
		"                       under DIR (--save-dir PROJECT: back in place)\n"
		"      --tests junit:PATH  read test results from the JUnit XML report the\n"
		"                       code writes at PATH in /work (--json: \"tests\")\n"
		"      --stdin FILE     what the code reads from its standard input\n"
		"                       (FILE, or - for petri's own; at most 1 MiB)\n"
		"      --config FILE    defaults and maximums of the limits, and the sandbox\n"
		"                       settings (default: $PETRI_CONFIG, else %s if it\n"
		"                       exists; docs/configuration.md)\n"
		"      --json           print one JSON result object\n"
		"  -c CODE              the code to run\n"
		"  FILE | -             read the code from FILE or standard input\n"
		"\n"
		"The defaults above are the built-in ones; a configuration file changes\n"
		"them, and limits above its [max_limits] are refused, as petri serve does.\n",
		names, lang_default(), d.defaults.timeout_s, d.defaults.memory_mb,
		d.defaults.cpu, d.defaults.pids, d.defaults.disk_mb,
		geteuid() == 0 ? "/etc/petri/petri.ini" : "~/.config/petri/petri.ini");
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

/* The code's file or its stdin's (path "-": petri's own standard input),
 * whole; a refusal ends petri run, its message after prefix. */
static void read_named(const char *path, const char *prefix, struct buf *out)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	int r;

	if (!f)
		die(2, "%scannot open '%s': %s", prefix, path, strerror(errno));
	r = read_all(f, out);
	if (f != stdin)
		fclose(f);
	if (r == -EFBIG)
		die(2, "%s'%s' is larger than %u bytes", prefix, path, CODE_FILE_MAX);
	if (r < 0)
		die(2, "%scannot read '%s': %s", prefix, path, strerror(-r));
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

static void on_output(void *ctx, enum exec_stream s, const char *data, size_t len)
{
	(void)ctx;
	write_all(s == EXEC_STDOUT ? 1 : 2, data, len);
}

/* A rich result, as a terminal can show it. */
static void on_rich(void *ctx, const json_t *bundle, bool main)
{
	const char *text = json_string_value(json_object_get(bundle, "text/plain"));
	const char *k;
	json_t *v;

	(void)ctx;
	(void)main;
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
	/* A compile error's traceback is the end of the compiler's output,
	 * which went to stderr as it came: once is enough. */
	if (tb && *tb && !(name && !strcmp(name, "CompileError")))
		write_all(2, tb, strlen(tb));
	else if (name && msg && strcmp(name, "NonZeroExit") != 0)
		fprintf(stderr, "%s: %s\n", name, msg);
}

/* ---- the request --------------------------------------------------- */

/* A flag's number as the request's JSON: an integer where it is one, so
 * that the request model's rules (and messages) are the same as for an
 * HTTP body. */
static void set_number(json_t *obj, const char *key, const char *flag, const char *text)
{
	double v;

	if (!num_double(text, -1e300, 1e300, &v))
		die(2, "%s: expected a number, got '%s'", flag, text);
	json_object_set_new(obj, key, v == (double)(json_int_t)v ? json_integer((json_int_t)v) :
						       json_real(v));
}

/* --file: the user's files, as the request's files in. */
static void put_files(struct oneshot *o, struct userfile *v, size_t n)
{
	if (!n)
		return;
	if (!(o->files = calloc(n, sizeof(*o->files))))
		die(125, "out of memory");
	for (size_t i = 0; i < n; i++) {
		o->files[i].path = strdup(v[i].name);
		o->files[i].data = (unsigned char *)v[i].data.data;
		o->files[i].len = v[i].data.len;
		v[i].data = (struct buf)BUF_INIT;	/* now the request's */
		if (!o->files[i].path)
			die(125, "out of memory");
		o->nfiles = i + 1;
	}
}

/* ---- what came out ------------------------------------------------------ */

static void save_one(const char *dir, const char *rel, const char *b64, size_t n)
{
	unsigned char *data;
	size_t len;
	int r = -EINVAL;

	if ((data = base64_decode(b64, n, &len)))
		r = userfiles_save(dir, rel, data, len);
	free(data);
	if (r == -EPERM)
		log_err("--save-dir: %s/%s not saved: git runs what a .git directory holds, "
			"so the sandbox does not write it", dir, rel);
	else if (r < 0)
		log_err("--save-dir: cannot save %s/%s: %s", dir, rel, strerror(-r));
	else
		fprintf(stderr, "petri run: saved %s/%s\n", dir, rel);
}

/* Every file the code wrote into DIR/files/ (with --dir: DIR/), every
 * image result into DIR (not with --dir): the one-shot returned them
 * inline. */
static void save_outputs(struct result *res, const char *dir, bool project)
{
	unsigned images = 0;
	json_t *v;
	size_t i;

	json_array_foreach(project ? NULL : res->results, i, v) {
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
	json_array_foreach(res->files, i, v) {
		json_t *b64 = json_object_get(v, "content_base64");
		const char *path = json_string_value(json_object_get(v, "path"));
		char rel[4096];

		if (!json_is_string(b64)) {
			log_err("--save-dir: cannot save /work/%s: %s", path,
				json_string_value(json_object_get(v, "reason")));
			continue;
		}
		snprintf(rel, sizeof(rel), "%s%s", project ? "" : "files/", path);
		save_one(dir, rel, json_string_value(b64), json_string_length(b64));
		json_object_del(v, "content_base64");	/* --json lists, as before */
		json_object_del(v, "truncated");
	}
}

/* The exit status of a one-shot that did not run. */
/* With --json, a refusal is one JSON object on stdout as well, the code
 * and message an HTTP client would read: what a script parses is never
 * empty.  refusal_code names the code of the next die(); else the status
 * says (2: a request petri refuses, else petri's own failure). */
static const char *refusal_code;
static bool json_refusals;

static void refuse_in_json(int status, const char *message)
{
	json_t *j = json_pack("{s:s, s:{s:s, s:s}}", "status", "error", "error", "code",
			      refusal_code ? refusal_code : status == 2 ? "invalid_request" :
			      "internal", "message", message);

	if (j && json_dumpf(j, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) == 0)
		putchar('\n');
	fflush(stdout);
	json_decref(j);
}

/* The session layer said no: say why (and in JSON with --json); the exit
 * status. */
static int failed(enum sm_result r, const char *err)
{
	const char *why = *err ? err : sm_result_message(r);
	int status = r == SM_INVALID || r == SM_TOO_LARGE ? 2 : 125;

	if (json_refusals) {
		refusal_code = sm_result_code(r);
		refuse_in_json(status, why);
	}
	log_fail("%s", why);
	return status;
}

int cmd_run(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_CPU_TIME, OPT_CPUS, OPT_PIDS, OPT_DISK, OPT_SAVE_DIR,
	       OPT_CONFIG, OPT_TESTS, OPT_STDIN };
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
		{ "dir", required_argument, NULL, 'd' },
		{ "save-dir", required_argument, NULL, OPT_SAVE_DIR },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "tests", required_argument, NULL, OPT_TESTS },
		{ "stdin", required_argument, NULL, OPT_STDIN },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct exec_events ev = { .output = on_output, .rich = on_rich, .error = on_error };
	struct buf code = BUF_INIT, input = BUF_INIT;
	const char *input_path = NULL;
	const char *lang_arg = NULL, *inline_code = NULL, *save_dir = NULL, *config = NULL;
	const char *project = NULL;
	const struct language *lang = NULL;
	struct userfile files[USERFILES_MAX] = { 0 };
	json_t *req = json_object(), *lim = json_object();
	size_t nfiles = 0;
	bool json_out = false;
	double cpu_s = 0;
	struct request_error e;
	struct cli_local l;
	struct oneshot o;
	struct result res;
	enum sm_result sr;
	char err[512] = "";
	int c, status = 125;

	if (!req || !lim || json_object_set(req, "limits", lim) < 0)
		die(125, "out of memory");
	while ((c = getopt_long(argc, argv, "+l:t:m:c:f:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			lang_arg = optarg;
			break;
		case 't':
			set_number(lim, "timeout_s", "--timeout", optarg);
			break;
		case 'm':
			set_number(lim, "memory_mb", "--memory", optarg);
			break;
		case OPT_CPU_TIME:
			if (!num_double(optarg, 0.001, 86400, &cpu_s))
				die(2, "--cpu-time: expected seconds, got '%s'", optarg);
			break;
		case OPT_CPUS:
			set_number(lim, "cpu", "--cpus", optarg);
			break;
		case OPT_PIDS:
			set_number(lim, "pids", "--pids", optarg);
			break;
		case OPT_DISK:
			set_number(lim, "disk_mb", "--disk", optarg);
			break;
		case OPT_JSON:
			json_out = true;
			break;
		case 'f':
			if (nfiles == USERFILES_MAX)
				die(2, "--file: at most %d files", USERFILES_MAX);
			files[nfiles++].host_path = optarg;
			break;
		case 'd':
			project = optarg;
			break;
		case OPT_SAVE_DIR:
			save_dir = optarg;
			break;
		case OPT_CONFIG:
			config = optarg;
			break;
		case OPT_TESTS:
			json_object_set_new(req, "tests", json_string_nocheck(optarg));
			break;
		case OPT_STDIN:
			input_path = optarg;
			break;
		case 'c':
			inline_code = optarg;
			break;
		case 'h':
			usage(stdout);
			status = 0;
			goto free_request;
		default:
			usage(stderr);
			status = 2;
			goto free_request;
		}
	}
	if (json_out) {
		json_refusals = true;
		die_hook(refuse_in_json);
	}
	if (inline_code && optind < argc)
		die(2, "give the code with -c or as a FILE, not both");
	if (input_path && !strcmp(input_path, "-") && !inline_code && optind == argc - 1 &&
	    !strcmp(argv[optind], "-"))
		die(2, "--stdin - and the code from - cannot both read standard input");
	/* First: the configuration's languages are known by their names and
	 * extensions too. */
	cli_local_config(&l, config);
	if (inline_code) {
		if (buf_append_str(&code, inline_code) < 0)
			die(125, "out of memory");
	} else if (optind == argc - 1) {
		const char *path = argv[optind];

		read_named(path, "", &code);
		if (!lang_arg)
			lang = lang_by_path(path);
	} else {
		usage(stderr);
		cli_local_stop(&l);
		status = 2;
		goto free_request;
	}
	if (input_path) {
		read_named(input_path, "--stdin: ", &input);
		json_object_set_new(req, "stdin", json_stringn_nocheck(
					    input.data ? input.data : "", input.len));
	}
	/* The code as it is: the runtime refuses what is not UTF-8. */
	json_object_set_new(req, "code", json_stringn_nocheck(code.data ? code.data : "",
							      code.len));
	if (lang_arg)
		json_object_set_new(req, "language", json_string_nocheck(lang_arg));
	else if (lang)
		json_object_set_new(req, "language", json_string(lang->name));

	/* The limits of the configuration, checked as petri serve checks a
	 * request.  One sandbox, started cold: no pool, no template. */
	l.cfg.warm = false;
	l.cfg.pool_min = l.cfg.pool_max = 0;
	l.cfg.record[0] = '\0';
	l.cfg.max_sessions = 1;
	if (!request_oneshot(&l.cfg, req, &o, &e)) {
		refusal_code = e.code;
		die(!strcmp(e.code, "internal") ? 125 : 2, "%s", e.message);
	}
	o.ex.cpu_s = cpu_s;
	if (save_dir) {
		/* Everything the workspace can hold comes back. */
		o.return_files = true;
		o.return_file_max = o.return_total_max = (uint64_t)o.limits.disk_mb << 20;
		if (mkdir(save_dir, 0755) < 0 && errno != EEXIST)
			die(2, "--save-dir: cannot create '%s': %s", save_dir, strerror(errno));
	}
	if (project) {
		struct buf tar = BUF_INIT;

		userfiles_archive(project, l.cfg.archive_max_entries,
				  (uint64_t)o.limits.disk_mb << 20, &tar);
		o.archive = (unsigned char *)tar.data;	/* now the request's */
		o.archive_len = tar.len;
	}
	userfiles_load(files, nfiles);
	put_files(&o, files, nfiles);

	cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cancel_fd < 0)
		die(125, "cannot create an eventfd: %s", strerror(errno));
	o.ex.cancel_fd = cancel_fd;
	catch_stop_signals();
	if (result_init(&res) < 0)
		die(125, "out of memory");
	cli_local_start(&l);
	sr = smgr_oneshot(l.sm, &o, json_out ? NULL : &ev, &res, err, sizeof(err));
	if (sr != SM_OK) {
		status = failed(sr, err);
		goto out;
	}
	if (stop_signal) {
		/* Like a program killed by the signal, after cleaning up. */
		status = 128 + stop_signal;
		goto out;
	}
	if (save_dir)
		save_outputs(&res, save_dir, project != NULL);
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
	cli_local_stop(&l);
	oneshot_release(&o);
	result_release(&res);
	buf_release(&code);
	buf_release(&input);
	userfiles_release(files, nfiles);
	close(cancel_fd);
free_request:
	json_decref(lim);
	json_decref(req);
	return status;
}
