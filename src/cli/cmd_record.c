/* petri record — the execution record as evidence (docs/record.md):
 *
 *   petri record verify [--config FILE] [--key ID] [--head SEQ:SHA256] [--json]
 *       check the whole hash chain and the head's signature; exit 0 and a
 *       count when it is intact, 1 and the first broken entry when not, 2
 *       when it cannot be checked.
 *
 * The record is the file [server] record names (by default in the state
 * directory), opened read-only: a running daemon may go on writing it. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "record/record.h"

/* The record file the configuration names, or NULL after saying why. */
static const char *record_file(struct petri_config *cfg, const char *config_path)
{
	char buf[4096], err[512];
	const char *path = config_path ? config_path : config_default_path(buf, sizeof(buf));

	if (config_load(cfg, path, err, sizeof(err)) < 0) {
		fprintf(stderr, "petri record: %s\n", err);
		return NULL;
	}
	if (!cfg->record[0]) {
		fprintf(stderr, "petri record: the configuration keeps the record in memory "
			"([server] record = \"\"): there is no file to read\n");
		config_release(cfg);
		return NULL;
	}
	return cfg->record;
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
	const char *config_path = NULL, *key_id = NULL, *path;
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
			printf("usage: petri record verify [--config FILE] [--key ID] "
			       "[--head SEQ:SHA256] [--json]\n"
			       "Check the execution record's hash chain and the signature of its "
			       "head.\n"
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
	if (optind < argc) {
		fprintf(stderr, "petri record verify: unexpected '%s'\n", argv[optind]);
		return 2;
	}
	if (key_id && !(key = chain_key_public(key_id, err, sizeof(err)))) {
		fprintf(stderr, "petri record verify: %s\n", err);
		return 2;
	}
	if (!(path = record_file(&cfg, config_path))) {
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

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} subcommands[] = {
	{ "verify", record_verify_cmd, "check the hash chain and the signature of its head" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: petri record COMMAND [options]\n"
		   "The execution record petri serve keeps (docs/record.md).\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "'petri record COMMAND --help' says more.\n");
}

int cmd_record(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "petri record: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
