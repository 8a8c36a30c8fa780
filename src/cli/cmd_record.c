/* petri record — the execution record that petri serve keeps in a file
 * (by default in the state directory; [server] record = PATH), read from
 * the command line, read-only (a running daemon may go on writing it):
 *
 *   petri record verify   checks the hash chain and the signature of its
 *                         head: exit 0 and a count when it is intact, 1 and
 *                         the first broken entry when not, 2 when it
 *                         cannot be checked;
 *   petri record export   writes what a session (or the one-shot runs) ran
 *                         as a Jupyter notebook, an HTML page or JSON Lines.
 *
 * docs/record.md.  One subcommand per row of the table below. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "config/config.h"
#include "record/export.h"
#include "util/timefmt.h"

static int record_export(int argc, char **argv);
static int record_verify_cmd(int argc, char **argv);

static const struct cli_command subcommands[] = {
	{ "verify", record_verify_cmd, "check the hash chain and the signature of its head" },
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
		"                           --format ipynb|html|jsonl [--config FILE | RECORD]\n"
		"\n"
		"Write what the record holds of a session, or of the one-shot runs, oldest\n"
		"first, to stdout (docs/record.md); the record is the file RECORD, or the one\n"
		"the configuration names:\n"
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

/* The record file to read: file when the command line names one, else the
 * one the configuration (config_path, or the default one) names; it must
 * exist (this command reads a record, never makes one).  0: *path is set,
 * and cfg is to be released with config_release() later; otherwise cfg is
 * released after saying why, prefixed with cmd: 2 when the configuration
 * cannot be read or both a file and a configuration are named, 1 when it
 * names no record file or the file cannot be found. */
static int record_file(struct petri_config *cfg, const char *file, const char *config_path,
		       const char *cmd, const char **path)
{
	char buf[4096], err[512];
	struct stat st;

	if (file) {
		config_defaults(cfg);
		if (config_path) {
			fprintf(stderr, "%s: give a record FILE or --config, not both\n", cmd);
			return 2;
		}
		if (stat(file, &st) < 0) {
			fprintf(stderr, "%s: the record file '%s': %s\n", cmd, file,
				strerror(errno));
			return 1;
		}
		*path = file;
		return 0;
	}
	if (!config_path)
		config_path = config_default_path(buf, sizeof(buf));
	if (config_load(cfg, config_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", cmd, err);
		return 2;
	}
	if (!cfg->record[0]) {
		fprintf(stderr, "%s: %s keeps the record in memory ([server] record = \"\"): "
			"there is no file to read\n", cmd,
			config_path ? config_path : "the default configuration");
		config_release(cfg);
		return 1;
	}
	if (stat(cfg->record, &st) < 0) {
		fprintf(stderr, "%s: the record file '%s': %s\n", cmd, cfg->record,
			strerror(errno));
		config_release(cfg);
		return 1;
	}
	*path = cfg->record;
	return 0;
}

/* Open the record read-only, or NULL after saying why. */
static struct record *open_record(const char *path)
{
	struct record *rec;
	char err[512];

	if (record_open(&(struct record_options){ .path = path, .readonly = true }, &rec, err,
			sizeof(err)) < 0) {
		fprintf(stderr, "petri record: %s\n", err[0] ? err : "cannot open the record");
		return NULL;
	}
	return rec;
}

/* "SEQ:SHA256", as the daemon logs a head. */
static bool parse_head(const char *s, int64_t *seq, unsigned char link[CHAIN_HASH_LEN])
{
	char *end;
	long long n = strtoll(s, &end, 10);

	if (end == s || *end != ':' || n < 1)
		return false;
	*seq = n;
	return chain_unhex(end + 1, link);
}

static void print_check(const char *path, const struct record_check *c, int r, bool json)
{
	if (json) {
		json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:b}",
				      "record", path, "intact", r == 0 && !c->broken,
				      "entries", (json_int_t)c->entries, "gaps", (json_int_t)c->gaps,
				      "start", (json_int_t)c->start, "head_seq",
				      (json_int_t)c->head_seq, "broken", (json_int_t)c->broken,
				      "head", c->head, "key", c->key, "signature_checked",
				      c->signature_checked);

		if (o && (c->broken || r < 0))
			json_object_set_new(o, "why", json_string(c->why));
		if (o)
			json_dumpf(o, stdout, JSON_COMPACT);
		printf("\n");
		json_decref(o);
		return;
	}
	if (r < 0) {
		fprintf(stderr, "petri record: %s: cannot be checked: %s\n", path, c->why);
		return;
	}
	if (c->broken) {
		printf("%s: BROKEN at entry %" PRId64 ": %s\n", path, c->broken, c->why);
		return;
	}
	printf("%s: intact: %" PRId64 " entries", path, c->entries);
	if (c->entries)
		printf(" (seq %" PRId64 " to %" PRId64 ")", c->first, c->last);
	printf(", %" PRId64 " removed between them to make room; the chain starts at seq %"
	       PRId64 "\nhead: seq %" PRId64 " sha256 %s\nsigned by %s\n", c->gaps, c->start,
	       c->head_seq, c->head, c->key[0] ? c->key : "(memory: no key)");
}

static int record_verify_cmd(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "head", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *config_path = NULL, *key_id = NULL, *file = NULL, *path;
	unsigned char link[CHAIN_HASH_LEN];
	struct chain_key *key = NULL;
	struct petri_config cfg;
	struct record_check check;
	struct record *rec;
	int64_t head_seq = 0;
	bool json = false;
	char err[512];
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case 'k':
			key_id = optarg;
			break;
		case 'H':
			if (!parse_head(optarg, &head_seq, link)) {
				fprintf(stderr, "petri record verify: --head takes SEQ:SHA256 (a "
					"head as the daemon logs it), not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			printf("usage: petri record verify [--config FILE | RECORD] [--key ID] "
			       "[--head SEQ:SHA256] [--json]\n"
			       "Check the execution record's hash chain and the signature of its "
			       "head:\n"
			       "the file RECORD, or the one the configuration names.\n"
			       "  --key ID     the public key (ed25519:..., as logged) to check the "
			       "head with,\n"
			       "               instead of the key file beside the record\n"
			       "  --head S:H   also check that the chain passes through entry S with "
			       "link H\n"
			       "               (a head the daemon logged at a start or a stop)\n"
			       "Exit 0 when intact, 1 when broken (the first broken entry is named), "
			       "2 when it cannot be checked.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind < argc)
		file = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "petri record verify: unexpected '%s'\n", argv[optind]);
		return 2;
	}
	if (key_id && !(key = chain_key_public(key_id, err, sizeof(err)))) {
		fprintf(stderr, "petri record verify: %s\n", err);
		return 2;
	}
	if (record_file(&cfg, file, config_path, "petri record verify", &path) != 0) {
		chain_key_free(key);
		return 2;
	}
	if (!(rec = open_record(path))) {
		chain_key_free(key);
		config_release(&cfg);
		return 2;
	}
	r = record_verify(rec, key, head_seq, head_seq ? link : NULL, &check);
	print_check(path, &check, r, json);
	record_close(rec);
	chain_key_free(key);
	config_release(&cfg);
	return r < 0 ? 2 : check.broken ? 1 : 0;
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
	const char *config_path = NULL, *format = NULL, *since = NULL, *until = NULL, *path;
	const char *file = NULL;
	struct petri_config cfg;
	enum export_format f;
	struct record *rec = NULL;
	struct export *x = NULL;
	bool oneshots = false;
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
	if (optind < argc)
		file = argv[optind++];
	if (optind != argc)
		return fail_usage("unexpected argument '%s'", argv[optind]);
	if (file && config_path)
		return fail_usage("give a record file or --config, not both");
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

	if ((r = record_file(&cfg, file, config_path, "petri record export", &path)) != 0)
		return r;
	if (!(rec = open_record(path)))
		goto out;
	if ((r = export_begin(rec, &q, f, &x)) < 0) {
		fprintf(stderr, "petri record export: reading '%s': %s\n", path,
			strerror(-r));
		goto out;
	}
	if (q.session && export_count(x) == 0) {
		fprintf(stderr, "petri record export: the record '%s' holds no execution of "
			"session '%s'\n", path, q.session);
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
