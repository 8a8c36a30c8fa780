/* petri record — the execution record that petri serve keeps in a file
 * ([server] record = PATH), read from the command line: `petri record
 * export` writes what a session (or the one-shot runs) ran as a Jupyter
 * notebook, an HTML page or JSON Lines (docs/record.md).  One subcommand
 * per row of the table below. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "config/config.h"
#include "record/export.h"
#include "util/timefmt.h"

static int record_export(int argc, char **argv);

/* `petri record verify` (the hash chain) goes here too. */
static const struct cli_command subcommands[] = {
	{ "export", record_export,
	  "write a session's executions (or the one-shot runs) as ipynb, html or jsonl" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: petri record <subcommand> [options]\n\n"
		   "The execution record petri serve keeps in the file [server] record names.\n\n"
		   "subcommands:\n");
	cli_list(f, subcommands);
	fprintf(f, "\n'petri record <subcommand> --help' describes a subcommand.\n");
}

static void export_usage(FILE *f)
{
	fprintf(f,
		"usage: petri record export (--session ID | --oneshots [--since T] [--until T])\n"
		"                           --format ipynb|html|jsonl [--config FILE]\n"
		"\n"
		"Write what the record holds of a session, or of the one-shot runs, oldest\n"
		"first, to stdout (docs/record.md):\n"
		"  ipynb   a Jupyter notebook: a code cell per execution with its outputs\n"
		"  html    a self-contained page, safe to open: no script, no external resource\n"
		"  jsonl   one entry per line, as GET /v1/sessions/{id}/executions lists them\n"
		"\n"
		"  --session ID     the executions of session ID (also after it ended)\n"
		"  --oneshots       the one-shot runs (POST /v1/execute), which no session holds\n"
		"  --since T        only those started at T or later (with --oneshots)\n"
		"  --until T        only those started before T (with --oneshots)\n"
		"                   T: RFC 3339 (2026-11-30T03:45:41Z, ...+01:00) or a date\n"
		"                   (2026-11-30, its midnight UTC)\n"
		"  --format F       ipynb, html or jsonl\n"
		"  --config FILE    the configuration naming the record file ([server] record)\n");
}

static int fail_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "petri record export: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n\n");
	export_usage(stderr);
	return 2;
}

static int record_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "oneshots", no_argument, NULL, 'o' },
		{ "since", required_argument, NULL, 'S' },
		{ "until", required_argument, NULL, 'U' },
		{ "format", required_argument, NULL, 'f' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct export_query q = { 0 };
	const char *config_path = NULL, *format = NULL, *since = NULL, *until = NULL;
	char err[512], dflt[4096];
	struct petri_config cfg;
	enum export_format f;
	struct record *rec = NULL;
	struct export *x = NULL;
	bool oneshots = false;
	struct stat st;
	int c, r, status = 1;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': q.session = optarg; break;
		case 'o': oneshots = true; break;
		case 'S': since = optarg; break;
		case 'U': until = optarg; break;
		case 'f': format = optarg; break;
		case 'c': config_path = optarg; break;
		case 'h':
			export_usage(stdout);
			return 0;
		default:
			return fail_usage("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return fail_usage("unexpected argument '%s'", argv[optind]);
	if (!q.session == !oneshots)
		return fail_usage("give either --session ID or --oneshots%s",
				  q.session ? ", not both" : "");
	if (q.session && !*q.session)
		return fail_usage("--session needs a session id");
	if (q.session && (since || until))
		return fail_usage("--since and --until go with --oneshots");
	if (since && !timefmt_parse(since, &q.since))
		return fail_usage("--since '%s' is not an RFC 3339 time nor a date (YYYY-MM-DD)",
				  since);
	if (until && !timefmt_parse(until, &q.until))
		return fail_usage("--until '%s' is not an RFC 3339 time nor a date (YYYY-MM-DD)",
				  until);
	if (!format)
		return fail_usage("--format is required: ipynb, html or jsonl");
	if (!export_format_from_name(format, &f))
		return fail_usage("unknown format '%s': ipynb, html or jsonl", format);

	if (!config_path)
		config_path = config_default_path(dflt, sizeof(dflt));
	if (config_load(&cfg, config_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "petri record export: %s\n", err);
		return 2;
	}
	if (!cfg.record[0]) {
		fprintf(stderr, "petri record export: %s keeps the record in memory (no [server] "
			"record file): there is nothing to read\n",
			config_path ? config_path : "the default configuration");
		goto out;
	}
	/* record_open() would create a file that is not there. */
	if (stat(cfg.record, &st) < 0) {
		fprintf(stderr, "petri record export: the record file '%s': %s\n", cfg.record,
			strerror(errno));
		goto out;
	}
	if (record_open(cfg.record, &rec, err, sizeof(err)) < 0) {
		fprintf(stderr, "petri record export: %s\n", err);
		goto out;
	}
	if ((r = export_begin(rec, &q, f, &x)) < 0) {
		fprintf(stderr, "petri record export: reading '%s': %s\n", cfg.record,
			strerror(-r));
		goto out;
	}
	if (q.session && export_count(x) == 0) {
		fprintf(stderr, "petri record export: the record '%s' holds no execution of "
			"session '%s'\n", cfg.record, q.session);
		goto out;
	}
	if ((r = export_to_file(x, stdout)) < 0) {
		fprintf(stderr, "petri record export: %s\n",
			r == -EIO ? "cannot write to stdout" : strerror(-r));
		goto out;
	}
	status = 0;
out:
	export_free(x);
	record_close(rec);
	config_release(&cfg);
	return status;
}

int cmd_record(int argc, char **argv)
{
	return cli_dispatch("petri record", subcommands, usage, argc, argv);
}
