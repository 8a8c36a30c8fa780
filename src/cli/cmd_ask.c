/* petri ask — from a question to an answer a person can check: a model
 * behind an OpenAI-compatible Chat Completions API writes code, petri runs
 * it in a sandbox of its own, the model reads the result and corrects
 * itself until it answers (src/agent, docs/ask.md).
 *
 * As it goes it prints every piece of code the model ran and what came out
 * (charts saved to files and named), then the answer; --json prints a
 * transcript object instead.  Exit status: 0 answered, 1 no answer within
 * the round limit, 2 usage, 3 the model's API failed, 125 petri failed. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/chat.h"
#include "cli/commands.h"
#include "cli/userfiles.h"
#include "mcp/tools.h"
#include "workspace/files.h"
#include "session/session.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/num.h"
#include "util/savefile.h"
#include "util/utf8.h"

#define PREVIEW_LINES 5
#define PREVIEW_BYTES 800
#define DEFAULT_API_BASE "https://api.openai.com/v1"

enum { EXIT_NO_ANSWER = 1, EXIT_USAGE = 2, EXIT_API = 3, EXIT_PETRI = 125 };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: petri ask [options] QUESTION...\n"
		"\n"
		"A model writes code, petri runs it in a sandbox, the model reads what came\n"
		"out and corrects itself until it answers.  Every piece of code and its\n"
		"output is printed as it runs, then the answer.\n"
		"\n"
		"  -m, --model NAME     the model (default: $PETRI_MODEL)\n"
		"      --api-base URL   an OpenAI-compatible API with its version path, e.g.\n"
		"                       http://127.0.0.1:8000/v1 (default: $PETRI_API_BASE,\n"
		"                       else " DEFAULT_API_BASE ")\n"
		"  -f, --file PATH      put PATH into the sandbox's /work (repeatable)\n"
		"  -d, --dir PROJECT    PROJECT's tree as /work (copied in); with --save-dir,\n"
		"                       /work as it ends in DIR/workspace.tar.gz\n"
		"      --max-rounds N   at most N requests to the model (default 10)\n"
		"      --json           print a transcript object instead\n"
		"      --save-dir DIR   keep charts and the files the code wrote in DIR\n"
		"      --timeout SEC    the longest one request to the model may take (default 300)\n"
		"      --max-retries N  retries of a request that failed with 429, 5xx or a\n"
		"                       network error (default 4)\n"
		"      --config FILE    sandbox limits (docs/configuration.md)\n"
		"  -v, --verbose        log more (to stderr)\n"
		"\n"
		"The API key comes from $PETRI_API_KEY, else $OPENAI_API_KEY (none: no\n"
		"Authorization header, as for a local server).  QUESTION '-' reads stdin.\n");
}

/* ---- a project: --dir in, DIR/workspace.tar.gz out ---------------------- */

/* PROJECT's tree into /work, as petri run --dir puts it (an archive the
 * sandbox's driver extracts), and a word of it for the model. */
static int put_project(struct tools *t, const struct petri_config *cfg, const char *project,
		       struct buf *intro, char *err, size_t errlen)
{
	struct buf tar = BUF_INIT;
	json_t *sum;
	int r;

	userfiles_archive(project, cfg->archive_max_entries,
			  (uint64_t)cfg->defaults.disk_mb << 20, &tar);
	r = tools_unpack(t, tar.data ? tar.data : "", tar.len, "", &sum, err, errlen);
	buf_release(&tar);
	if (r < 0)
		return r;
	buf_appendf(intro, "A project is in /work (the working directory): %lld files, "
		    "%lld directories, %lld links, %lld bytes. Run its tests with execute "
		    "(language bash); a run that writes JUnit XML (pytest --junitxml=FILE) comes "
		    "back with the failures as data.\n",
		    json_integer_value(json_object_get(sum, "files")),
		    json_integer_value(json_object_get(sum, "directories")),
		    json_integer_value(json_object_get(sum, "links")),
		    json_integer_value(json_object_get(sum, "bytes")));
	json_decref(sum);
	return 0;
}

/* /work as it ended, as a tar.gz in DIR (what the code changed included). */
static void save_workspace(struct tools *t, const struct petri_config *cfg, const char *dir,
			   json_t *transcript, bool quiet)
{
	struct buf b = BUF_INIT;
	char err[512], path[4096 + 32];
	int r;

	r = tools_archive(t, "", &b, (size_t)cfg->defaults.disk_mb << 20, err, sizeof(err));
	if (r == 0 && (r = savefile_write(dir, "workspace.tar.gz", b.data ? b.data : "",
					  b.len)) < 0)
		snprintf(err, sizeof(err), "%s", strerror(-r));
	buf_release(&b);
	if (r < 0) {
		log_err("--save-dir: the workspace was not saved: %s", err);
		return;
	}
	snprintf(path, sizeof(path), "%s/workspace.tar.gz", dir);
	if (transcript)
		json_object_set_new(transcript, "workspace_archive", json_string(path));
	if (!quiet)
		printf("## saved %s\n", path);
}

/* ---- printing for a terminal ------------------------------------------- */

/* Text from a model or a sandbox, printed without control characters a
 * terminal would act on (escape sequences, C1 controls). */
static void print_safe(FILE *f, const char *s)
{
	struct buf clean = BUF_INIT;
	size_t n = strlen(s);

	if (utf8_sanitize(&clean, s, n) < 0 || !clean.data) {
		buf_release(&clean);
		return;
	}
	for (size_t i = 0; i < clean.len; i++) {
		unsigned char c = (unsigned char)clean.data[i];

		if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
			fputc('?', f);
		} else if (c == 0xc2 && i + 1 < clean.len &&
			   (unsigned char)clean.data[i + 1] >= 0x80 &&
			   (unsigned char)clean.data[i + 1] <= 0x9f) {
			fputc('?', f);
			i++;
		} else {
			fputc(c, f);
		}
	}
	if (clean.len && clean.data[clean.len - 1] != '\n')
		fputc('\n', f);
	buf_release(&clean);
}

static void on_code(void *ctx, unsigned round, const char *language, const char *code)
{
	(void)ctx;
	printf("## round %u: the model runs %s\n", round, language);
	print_safe(stdout, code);
	fflush(stdout);
}

static void on_output(void *ctx, const char *text, bool is_error)
{
	(void)ctx;
	printf("## %s\n", is_error ? "result (error)" : "result");
	print_safe(stdout, text);
	fflush(stdout);
}

static void on_image(void *ctx, const char *path)
{
	(void)ctx;
	printf("## chart saved: ");
	print_safe(stdout, path);
	fflush(stdout);
}

static void on_note(void *ctx, const char *text)
{
	(void)ctx;
	printf("## the model says\n");
	print_safe(stdout, text);
	fflush(stdout);
}

static void on_retry(void *ctx, unsigned attempt, double wait_s, const char *why)
{
	(void)ctx;
	fprintf(stderr, "petri ask: ");
	print_safe(stderr, why);
	fprintf(stderr, "petri ask: retrying in %.1f s (retry %u)\n", wait_s, attempt);
}

/* ---- files ------------------------------------------------------------- */

/* What the model is told about a file: its size and a preview. */
static void describe_file(struct buf *intro, const char *name, const struct buf *data)
{
	const char *s = data->data ? data->data : "";
	size_t n = data->len < PREVIEW_BYTES ? data->len : PREVIEW_BYTES, lines = 0, end = 0;

	n = utf8_cut(s, n);
	if (memchr(s, '\0', n) || !utf8_valid(s, n)) {
		buf_appendf(intro, "- %s: %zu bytes, binary (%s)\n", name, data->len,
			    files_content_type(name));
		return;
	}
	while (end < n && lines < PREVIEW_LINES) {
		const char *nl = memchr(s + end, '\n', n - end);

		end = nl ? (size_t)(nl - s) + 1 : n;
		lines++;
	}
	buf_appendf(intro, "- %s: %zu bytes, text; it begins:\n```\n%.*s%s```\n", name, data->len,
		    (int)end, s, end && s[end - 1] == '\n' ? "" : "\n");
}

/* ---- the command ------------------------------------------------------- */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int cmd_ask(int argc, char **argv)
{
	enum { OPT_API_BASE = 256, OPT_MAX_ROUNDS, OPT_JSON, OPT_SAVE_DIR, OPT_TIMEOUT,
	       OPT_RETRIES, OPT_CONFIG };
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "api-base", required_argument, NULL, OPT_API_BASE },
		{ "file", required_argument, NULL, 'f' },
		{ "dir", required_argument, NULL, 'd' },
		{ "max-rounds", required_argument, NULL, OPT_MAX_ROUNDS },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "save-dir", required_argument, NULL, OPT_SAVE_DIR },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "max-retries", required_argument, NULL, OPT_RETRIES },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *model = env("PETRI_MODEL"), *api_base = env("PETRI_API_BASE");
	const char *api_key = env("PETRI_API_KEY"), *save_dir = NULL, *config_path = NULL;
	const char *project = NULL;
	struct userfile files[USERFILES_MAX] = { 0 };
	size_t nfiles = 0;
	unsigned max_rounds = 10, retries = 4, timeout = 300;
	bool json_out = false, verbose = false;
	struct buf question = BUF_INIT, intro = BUF_INIT;
	char tmpdir[] = "/tmp/petri-ask-XXXXXX", err[1024] = "";
	struct chat_config cc = { 0 };
	struct chat_client *chat = NULL;
	struct tools *tools = NULL;
	struct cli_local l;
	json_t *transcript = NULL, *file_list = NULL;
	enum agent_status st;
	int c, status = EXIT_PETRI;

	if (!api_key)
		api_key = env("OPENAI_API_KEY");
	while ((c = getopt_long(argc, argv, "+m:f:d:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			model = optarg;
			break;
		case OPT_API_BASE:
			api_base = optarg;
			break;
		case 'f':
			if (nfiles == USERFILES_MAX)
				die(EXIT_USAGE, "--file: at most %d files", USERFILES_MAX);
			files[nfiles++].host_path = optarg;
			break;
		case 'd':
			project = optarg;
			break;
		case OPT_MAX_ROUNDS:
			if (!num_u32(optarg, 1, 1000, &max_rounds))
				die(EXIT_USAGE, "--max-rounds: expected 1 to 1000, got '%s'", optarg);
			break;
		case OPT_JSON:
			json_out = true;
			break;
		case OPT_SAVE_DIR:
			save_dir = optarg;
			break;
		case OPT_TIMEOUT:
			if (!num_u32(optarg, 1, 86400, &timeout))
				die(EXIT_USAGE, "--timeout: expected seconds, got '%s'", optarg);
			break;
		case OPT_RETRIES:
			if (!num_u32(optarg, 0, 100, &retries))
				die(EXIT_USAGE, "--max-retries: expected 0 to 100, got '%s'", optarg);
			break;
		case OPT_CONFIG:
			config_path = optarg;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind == argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (argc - optind == 1 && !strcmp(argv[optind], "-")) {
		char chunk[4096];
		size_t n;

		while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
			if (question.len + n > CHAT_CONTENT_MAX || buf_append(&question, chunk, n) < 0)
				die(EXIT_USAGE, "the question is longer than %u bytes", CHAT_CONTENT_MAX);
	} else {
		for (int i = optind; i < argc; i++)
			if (buf_appendf(&question, "%s%s", i > optind ? " " : "", argv[i]) < 0)
				die(EXIT_PETRI, "out of memory");
	}
	if (!question.len || !utf8_valid(question.data, question.len) ||
	    memchr(question.data, '\0', question.len))
		die(EXIT_USAGE, "the question must be non-empty UTF-8 text");
	if (!model)
		die(EXIT_USAGE, "no model: give --model NAME or set PETRI_MODEL");
	if (!api_base)
		api_base = DEFAULT_API_BASE;
	if (strncmp(api_base, "http://", 7) && strncmp(api_base, "https://", 8))
		die(EXIT_USAGE, "--api-base: expected an http:// or https:// URL, got '%s'", api_base);
	if (save_dir && mkdir(save_dir, 0755) < 0 && errno != EEXIST)
		die(EXIT_USAGE, "--save-dir: cannot create '%s': %s", save_dir, strerror(errno));
	/* The files, read before any sandbox exists: a bad path is a usage
	 * error with nothing to clean up. */
	userfiles_load(files, nfiles);

	log_set_prefix("petri ask");
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		die(EXIT_PETRI, "cannot initialize libcurl");
	cli_local_config(&l, config_path);
	log_set_level(verbose ? LOG_DEBUG : LOG_WARN);	/* before any thread logs */
	/* The warm template starts once the question is on its way to the
	 * model (tools_warm below), not before the set-up. */
	l.warm_later = true;
	cli_local_start(&l);
	file_list = json_array();
	if (!file_list || tools_new(l.sm, &l.cfg, &tools) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	if (nfiles)
		buf_appendf(&intro, "Files in /work (the working directory):\n");
	for (size_t i = 0; i < nfiles; i++) {
		const struct buf *data = &files[i].data;

		if (data->len > l.cfg.max_file_bytes) {
			snprintf(err, sizeof(err), "--file: '%s' is larger than the %llu MiB limit",
				 files[i].host_path, (unsigned long long)(l.cfg.max_file_bytes >> 20));
			status = EXIT_USAGE;
			goto out;
		}
		if (tools_upload(tools, files[i].name, data->data ? data->data : "", data->len,
				 err, sizeof(err)) < 0) {
			status = EXIT_PETRI;
			goto out;
		}
		describe_file(&intro, files[i].name, data);
		json_array_append_new(file_list, json_pack("{s:s, s:I}", "name", files[i].name,
							   "size", (json_int_t)data->len));
	}

	if (project && put_project(tools, &l.cfg, project, &intro, err, sizeof(err)) < 0) {
		status = EXIT_PETRI;
		goto out;
	}
	/* After the project: a --dir that cannot be archived ends the
	 * command (userfiles_archive() dies) with nothing made to remove. */
	if (!save_dir && !(save_dir = mkdtemp(tmpdir))) {
		snprintf(err, sizeof(err), "cannot create a directory for charts: %s",
			 strerror(errno));
		goto out;
	}

	cc.api_base = api_base;
	cc.api_key = api_key;
	cc.timeout_s = timeout;
	cc.max_retries = retries;
	cc.backoff_s = 1.0;
	cc.max_wait_s = 120;
	cc.on_retry = on_retry;
	if (chat_new(&cc, &chat) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	{
		struct agent_events ev = { .code = on_code, .output = on_output, .image = on_image,
					   .note = on_note };
		struct agent_config ac = {
			.chat = chat, .tools = tools, .sm = l.sm, .model = model,
			.max_rounds = max_rounds,
			.save_dir = save_dir, .keep_files = save_dir != tmpdir,
			.file_max = l.cfg.max_file_bytes, .ev = json_out ? NULL : &ev,
		};

		if (!json_out) {
			printf("## petri ask: %s at %s, %zu file%s in /work\n", model, api_base, nfiles,
			       nfiles == 1 ? "" : "s");
			fflush(stdout);
		}
		/* While the model reads the question: the template (when no
		 * sandbox was started for --file or --dir) and the probe, in
		 * the background. */
		tools_warm(tools);
		st = agent_run(&ac, question.data, intro.data ? intro.data : "", &transcript,
			       err, sizeof(err));
	}
	if (project && save_dir != tmpdir && st != AGENT_FAILED)
		save_workspace(tools, &l.cfg, save_dir, transcript, json_out);
	if (transcript) {
		json_object_set_new(transcript, "api_base", json_string(api_base));
		json_object_set(transcript, "files", file_list);
		json_object_set_new(transcript, "save_dir", json_string(save_dir));
	}
	if (json_out) {
		if (!transcript || json_dumpf(transcript, stdout, JSON_INDENT(2)) < 0)
			die(EXIT_PETRI, "cannot print the transcript");
		putchar('\n');
	} else if (st == AGENT_ANSWERED) {
		printf("## answer\n");
		print_safe(stdout, json_string_value(json_object_get(transcript, "answer")));
	}
	status = st == AGENT_ANSWERED ? 0 : st == AGENT_MAX_ROUNDS ? EXIT_NO_ANSWER :
		 st == AGENT_API_ERROR ? EXIT_API : EXIT_PETRI;
out:
	if (status != 0) {
		fflush(stdout);
		fprintf(stderr, "petri ask: ");
		print_safe(stderr, err);
	}
	fflush(stdout);
	json_decref(transcript);
	json_decref(file_list);
	chat_free(chat);
	tools_free(tools);
	cli_local_stop(&l);
	curl_global_cleanup();
	if (save_dir == tmpdir)
		rmdir(tmpdir);		/* only if no chart went there */
	userfiles_release(files, nfiles);
	buf_release(&question);
	buf_release(&intro);
	return status;
}
