#include "record/record.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/ids.h"
#include "util/log.h"
#include "util/num.h"
#include "util/timefmt.h"
#include "util/utf8.h"
#include "util/version.h"

struct record {
	sqlite3 *db;
	pthread_mutex_t lock;
	bool file, readonly;
	char *path;
	struct chain_key *key;		/* a file's signing key; NULL in memory */
	/* A listing: one session's; every execution; the one-shot runs'. */
	sqlite3_stmt *insert, *list, *list_all, *list_oneshots;
	/* (seq, bytes, started_at, link) oldest first and a cut, over the
	 * record; (seq, bytes, link), one entry's removal and the gap it
	 * leaves, over one session; a session's usage. */
	sqlite3_stmt *scan_all, *cut_all, *scan_session, *cut_one, *set_gap, *usage_session;
	sqlite3_stmt *get_chain, *set_head, *set_start;
	int64_t keep, budget;
	double keep_days;
	size_t attach_max;
	int64_t entries, bytes;		/* what it holds, as of the last change */
	int64_t last_seq;		/* the entry this daemon added last */
	char node[ID_NODE_MAX + 1];	/* in every entry it adds */
	record_hook on_add;		/* record_on_add(), under lock */
	void *on_add_arg;
};

/* `engine`: the petri that wrote the entry (petri_version()); NULL in
 * entries kept by a petri before it was recorded.  `node`: the node that
 * ran it ([server] node; several nodes may share one file); NULL in
 * entries kept before nodes were named.
 * `bytes`: what the row costs (record_add), summed without reading the
 * rows: the index covers it.  `digest` and `link`: the chain (chain.h).
 * `gap_link` and `gap_sig`: the entry before this one went to make room
 * for its session's newer ones; this is the link it had, signed, so that
 * the chain still verifies across the gap (and only the key can make one).
 *
 * `chain` has one row: where the chain starts (the seq of its first entry
 * and the link before it), its head and the head's signature, and the
 * totals, kept in the same transaction as the rows they count, so that
 * several daemons can share the file. */
static const char schema[] =
	"PRAGMA journal_mode = WAL;"
	"PRAGMA synchronous = NORMAL;"
	"CREATE TABLE IF NOT EXISTS executions ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  session TEXT,"
	"  started_at REAL NOT NULL,"
	"  language TEXT NOT NULL,"
	"  code TEXT NOT NULL,"
	"  code_truncated INTEGER NOT NULL DEFAULT 0,"
	"  status TEXT NOT NULL,"
	"  limits TEXT,"
	"  result TEXT NOT NULL,"
	"  bytes INTEGER NOT NULL DEFAULT 0,"
	"  digest TEXT,"
	"  link TEXT,"
	"  gap_link TEXT,"
	"  gap_sig TEXT,"
	"  engine TEXT,"
	"  node TEXT);"
	"CREATE TABLE IF NOT EXISTS chain ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  start_seq INTEGER NOT NULL,"
	"  start_link TEXT NOT NULL,"
	"  head_seq INTEGER NOT NULL,"
	"  head_link TEXT NOT NULL,"
	"  head_sig TEXT,"
	"  key TEXT,"
	"  entries INTEGER NOT NULL,"
	"  bytes INTEGER NOT NULL);";

/* A file written before rows had a size: give them theirs. */
static const char add_bytes[] =
	"ALTER TABLE executions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
	"UPDATE executions SET bytes = length(CAST(code AS BLOB))"
	" + length(CAST(result AS BLOB)) + ifnull(length(CAST(limits AS BLOB)), 0)"
	" + length(CAST(language AS BLOB)) + ifnull(length(CAST(session AS BLOB)), 0)"
	" + " NUM_TEXT(RECORD_ROW_OVERHEAD) ";";

/* A file written before the chain: its rows are chained when it opens. */
static const char add_chain[] =
	"ALTER TABLE executions ADD COLUMN digest TEXT;"
	"ALTER TABLE executions ADD COLUMN link TEXT;"
	"ALTER TABLE executions ADD COLUMN gap_link TEXT;"
	"ALTER TABLE executions ADD COLUMN gap_sig TEXT;";

/* A file written before entries named their engine. */
static const char add_engine[] = "ALTER TABLE executions ADD COLUMN engine TEXT;";
/* A file written before entries named their node. */
static const char add_node[] = "ALTER TABLE executions ADD COLUMN node TEXT;";

static const char indexes[] =
	"DROP INDEX IF EXISTS executions_session;"
	"CREATE INDEX IF NOT EXISTS executions_session_bytes"
	"  ON executions(session, seq, bytes);";

#define LIST_COLUMNS \
	"seq, started_at, language, code, status, limits, result, code_truncated, session, engine," \
	" node"
/* What an entry's digest covers, in this order (entry_digest()); the
 * columns of a walk (walk()) follow them. */
#define DIGEST_COLUMNS \
	"seq, session, started_at, language, code, code_truncated, status, limits, result, engine," \
	" node"
enum { COL_ENGINE = 9, COL_NODE, COL_DIGEST, COL_LINK, COL_GAP_LINK, COL_GAP_SIG };

static const struct {
	size_t off;
	const char *sql;
	bool writes;		/* not prepared on a read-only open */
} statements[] = {
	{ offsetof(struct record, insert),
	  "INSERT INTO executions (seq, session, started_at, language, code, code_truncated,"
	  " status, limits, result, bytes, digest, link, engine, node)"
	  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)", true },
	/* The same parameters, each listing the columns row_json() reads:
	 * ?1 the session (where it is one), ?2 before, ?3 limit. */
	{ offsetof(struct record, list),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE session = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3", false },
	{ offsetof(struct record, list_all),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE seq < ?2 ORDER BY seq DESC LIMIT ?3", false },
	{ offsetof(struct record, list_oneshots),
	  "SELECT " LIST_COLUMNS " FROM executions"
	  " WHERE session IS NULL AND seq < ?2 ORDER BY seq DESC LIMIT ?3", false },
	{ offsetof(struct record, scan_all),
	  "SELECT seq, bytes, started_at, link FROM executions ORDER BY seq", true },
	{ offsetof(struct record, cut_all), "DELETE FROM executions WHERE seq <= ?1", true },
	/* ?1 the session, ?2 the seq not to scan past (the entry just added). */
	{ offsetof(struct record, scan_session),
	  "SELECT seq, bytes, link FROM executions WHERE session IS ?1 AND seq < ?2"
	  " ORDER BY seq", true },
	{ offsetof(struct record, cut_one), "DELETE FROM executions WHERE seq = ?1", true },
	{ offsetof(struct record, set_gap),
	  "UPDATE executions SET gap_link = ?2, gap_sig = ?3 WHERE seq = ?1", true },
	{ offsetof(struct record, usage_session),
	  "SELECT COUNT(*), TOTAL(bytes) FROM executions WHERE session IS ?1", false },
	{ offsetof(struct record, get_chain),
	  "SELECT start_seq, start_link, head_seq, head_link, head_sig, key, entries, bytes"
	  " FROM chain WHERE id = 1", false },
	{ offsetof(struct record, set_head),
	  "UPDATE chain SET head_seq = ?1, head_link = ?2, head_sig = ?3, key = ?4,"
	  " entries = ?5, bytes = ?6 WHERE id = 1", true },
	{ offsetof(struct record, set_start),
	  "UPDATE chain SET start_seq = ?1, start_link = ?2, entries = ?3, bytes = ?4"
	  " WHERE id = 1", true },
};

#define NSTATEMENTS (sizeof(statements) / sizeof(statements[0]))
#define STMT(rec, i) ((sqlite3_stmt **)((char *)(rec) + statements[i].off))

static const unsigned char genesis[CHAIN_HASH_LEN];

/* The chain's row. */
struct chain_row {
	int64_t start_seq, head_seq, entries, bytes;
	unsigned char start_link[CHAIN_HASH_LEN], head_link[CHAIN_HASH_LEN];
	char sig[CHAIN_SIG_LEN], key[64];
};

static void done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static void copy_col(sqlite3_stmt *st, int col, char *out, size_t len)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	snprintf(out, len, "%s", t ? t : "");
}

/* 0, -ENOENT when the file has no chain row, -EIO. */
static int read_chain(struct record *rec, struct chain_row *c)
{
	sqlite3_stmt *st = rec->get_chain;
	int rc = sqlite3_step(st), r = -EIO;

	if (rc == SQLITE_DONE)
		r = -ENOENT;
	else if (rc == SQLITE_ROW &&
		 chain_unhex((const char *)sqlite3_column_text(st, 1), c->start_link) &&
		 chain_unhex((const char *)sqlite3_column_text(st, 3), c->head_link)) {
		c->start_seq = sqlite3_column_int64(st, 0);
		c->head_seq = sqlite3_column_int64(st, 2);
		copy_col(st, 4, c->sig, sizeof(c->sig));
		copy_col(st, 5, c->key, sizeof(c->key));
		c->entries = sqlite3_column_int64(st, 6);
		c->bytes = sqlite3_column_int64(st, 7);
		r = 0;
	}
	done(st);
	return r;
}

static void bind_hex(sqlite3_stmt *st, int i, const unsigned char h[CHAIN_HASH_LEN])
{
	char hex[CHAIN_HEX_LEN];

	chain_hex(h, hex);
	sqlite3_bind_text(st, i, hex, -1, SQLITE_TRANSIENT);
}

/* Write the head and the totals, the head signed where there is a key. */
static int write_head(struct record *rec, const struct chain_row *c)
{
	sqlite3_stmt *st = rec->set_head;
	char text[CHAIN_TEXT_LEN], sig[CHAIN_SIG_LEN];
	int rc;

	sqlite3_bind_int64(st, 1, c->head_seq);
	bind_hex(st, 2, c->head_link);
	chain_head_text(c->start_seq, c->start_link, c->head_seq, c->head_link, text);
	if (rec->key && chain_sign(rec->key, text, sig)) {
		sqlite3_bind_text(st, 3, sig, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, chain_key_id(rec->key), -1, SQLITE_STATIC);
	}
	sqlite3_bind_int64(st, 5, c->entries);
	sqlite3_bind_int64(st, 6, c->bytes);
	rc = sqlite3_step(st);
	done(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int write_start(struct record *rec, const struct chain_row *c)
{
	sqlite3_stmt *st = rec->set_start;
	int rc;

	sqlite3_bind_int64(st, 1, c->start_seq);
	bind_hex(st, 2, c->start_link);
	sqlite3_bind_int64(st, 3, c->entries);
	sqlite3_bind_int64(st, 4, c->bytes);
	rc = sqlite3_step(st);
	done(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static void add_column(struct chain_hasher *h, sqlite3_stmt *st, int col, bool text)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		chain_add_null(h);
	else if (text)
		chain_add_text(h, sqlite3_column_text(st, col), (size_t)sqlite3_column_bytes(st, col));
	else
		chain_add_int(h, sqlite3_column_int64(st, col));
}

/* The digest of a row of DIGEST_COLUMNS (from column 0 of st), as stored:
 * an entry without a node, or without a node and an engine, was kept by an
 * older petri, whose digest stopped at the engine, or at the result
 * (docs/record.md).  An entry with a node has the current digest, its
 * engine included even when null: no petri wrote such an entry, so a node
 * added to an older one breaks the chain there. */
static bool row_digest(sqlite3_stmt *st, unsigned char out[CHAIN_HASH_LEN])
{
	bool node = sqlite3_column_type(st, COL_NODE) != SQLITE_NULL;
	bool engine = node || sqlite3_column_type(st, COL_ENGINE) != SQLITE_NULL;
	struct chain_hasher *h = chain_begin(node ? CHAIN_DOMAIN : engine ? CHAIN_DOMAIN_V2 :
					     CHAIN_DOMAIN_V1);

	if (!h)
		return false;
	add_column(h, st, 0, false);
	add_column(h, st, 1, true);
	chain_add_real(h, sqlite3_column_double(st, 2));
	add_column(h, st, 3, true);
	add_column(h, st, 4, true);
	add_column(h, st, 5, false);
	add_column(h, st, 6, true);
	add_column(h, st, 7, true);
	add_column(h, st, 8, true);
	if (engine)
		add_column(h, st, COL_ENGINE, true);
	if (node)
		add_column(h, st, COL_NODE, true);
	return chain_finish(h, out);
}

/* What an entry being added is made of, in DIGEST_COLUMNS' order. */
struct row {
	int64_t seq;
	const char *session;
	double started_at;
	const char *language, *code;
	size_t code_len;
	bool code_truncated;
	const char *status, *limits, *result, *engine, *node;
};

static void add_text_or_null(struct chain_hasher *h, const char *s, size_t n)
{
	if (s)
		chain_add_text(h, s, n);
	else
		chain_add_null(h);
}

static bool entry_digest(const struct row *r, unsigned char out[CHAIN_HASH_LEN])
{
	struct chain_hasher *h = chain_begin(CHAIN_DOMAIN);

	if (!h)
		return false;
	chain_add_int(h, r->seq);
	add_text_or_null(h, r->session, r->session ? strlen(r->session) : 0);
	chain_add_real(h, r->started_at);
	chain_add_text(h, r->language, strlen(r->language));
	chain_add_text(h, r->code, r->code_len);
	chain_add_int(h, r->code_truncated);
	chain_add_text(h, r->status, strlen(r->status));
	add_text_or_null(h, r->limits, r->limits ? strlen(r->limits) : 0);
	chain_add_text(h, r->result, strlen(r->result));
	chain_add_text(h, r->engine, strlen(r->engine));
	chain_add_text(h, r->node, strlen(r->node));
	return chain_finish(h, out);
}

/* Chain the rows of a file written before the chain, in seq order, and
 * write the chain's row: they are taken as they are found. */
static int chain_existing(struct record *rec)
{
	sqlite3_stmt *scan = NULL, *put = NULL;
	struct chain_row c = { .start_seq = 1 };
	unsigned char digest[CHAIN_HASH_LEN];
	bool first = true;
	int rc;

	memcpy(c.head_link, genesis, CHAIN_HASH_LEN);
	memcpy(c.start_link, genesis, CHAIN_HASH_LEN);
	rc = sqlite3_prepare_v2(rec->db, "SELECT " DIGEST_COLUMNS ", bytes FROM executions"
				" WHERE link IS NULL ORDER BY seq", -1, &scan, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(rec->db, "UPDATE executions SET digest = ?2, link = ?3"
					" WHERE seq = ?1", -1, &put, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(scan)) == SQLITE_ROW) {
		if (first) {
			c.start_seq = sqlite3_column_int64(scan, 0);
			first = false;
		}
		if (!row_digest(scan, digest) || !chain_link(c.head_link, digest, c.head_link)) {
			rc = SQLITE_ERROR;
			break;
		}
		c.head_seq = sqlite3_column_int64(scan, 0);
		c.entries++;
		c.bytes += sqlite3_column_int64(scan, COL_DIGEST);	/* bytes, after them */
		sqlite3_bind_int64(put, 1, c.head_seq);
		bind_hex(put, 2, digest);
		bind_hex(put, 3, c.head_link);
		rc = sqlite3_step(put) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
		done(put);
	}
	sqlite3_finalize(scan);
	sqlite3_finalize(put);
	if (rc != SQLITE_DONE && rc != SQLITE_OK)
		return -EIO;
	if (!first)
		log_warn("the execution record '%s' was kept by an older petri: its %lld entries "
			 "are chained as found", rec->path, (long long)c.entries);
	else
		c.start_seq = c.head_seq + 1;
	rc = sqlite3_exec(rec->db, "INSERT INTO chain (id, start_seq, start_link, head_seq,"
			  " head_link, entries, bytes) VALUES (1, 0, '', 0, '', 0, 0)",
			  NULL, NULL, NULL);
	if (rc != SQLITE_OK || write_start(rec, &c) < 0 || write_head(rec, &c) < 0)
		return -EIO;
	return 0;
}

static int trim(struct record *rec, struct chain_row *c, double now);

/* The key beside the file: PATH.key. */
static char *key_path(const char *path)
{
	size_t n = strlen(path) + 5;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "%s.key", path);
	return k;
}

static void log_head(struct record *rec, const char *when)
{
	struct chain_row c;
	char hex[CHAIN_HEX_LEN];

	if (!rec->file || rec->readonly || read_chain(rec, &c) < 0)
		return;
	chain_hex(c.head_link, hex);
	/* Informational, at the info level (the default): an operator keeps
	 * these lines to compare a later `petri record verify --head` with
	 * (docs/record.md); nothing is wrong when they appear. */
	log_info("record '%s' %s: %lld entries, head seq %lld sha256 %s, key %s", rec->path, when,
		 (long long)c.entries, (long long)c.head_seq, hex, c.key[0] ? c.key : "none");
}

/* Create the directories of path (0700) that are missing: the state
 * directory, and ~/.local/state before it on a fresh account. */
static int make_parent(const char *path, char *err, size_t errlen)
{
	char dir[512];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if (!(slash = strrchr(dir, '/')) || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; ; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;

			snprintf(err, errlen, "cannot create the state directory '%s': %s", dir,
				 strerror(e));
			return -e;
		}
		if (!(*p = c))
			return 0;
	}
}

/* What a file of an older petri lacks: fix, run when the executions have
 * no such column.  An SQLite result code. */
static bool has_column(sqlite3 *db, const char *column)
{
	sqlite3_stmt *probe = NULL;
	char sql[64];
	bool has;

	snprintf(sql, sizeof(sql), "SELECT %s FROM executions", column);
	has = sqlite3_prepare_v2(db, sql, -1, &probe, NULL) == SQLITE_OK;
	sqlite3_finalize(probe);
	return has;
}

/* For a reader that may not change the file (verify, export): the entries
 * as they would be, engine and node NULL where an older file has no such
 * column, in the connection's own temporary schema, which a name finds
 * before the file's. */
static int view_missing(sqlite3 *db)
{
	bool engine = has_column(db, "engine"), node = has_column(db, "node");
	char sql[160];

	if (engine && node)
		return SQLITE_OK;
	snprintf(sql, sizeof(sql), "CREATE TEMP VIEW executions AS SELECT *%s%s FROM main.executions;",
		 engine ? "" : ", NULL AS engine", node ? "" : ", NULL AS node");
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Run fix, which adds column, when the file has no such column. */
static int add_missing(sqlite3 *db, const char *column, const char *fix)
{
	return has_column(db, column) ? SQLITE_OK : sqlite3_exec(db, fix, NULL, NULL, NULL);
}

static int open_db(struct record *rec, const struct record_options *o, char *err, size_t errlen)
{
	struct chain_row c;
	char *kp;
	int rc, r;

	/* What ran and what came out is the tenants' business: the file and
	 * the journals SQLite makes beside it (which take its mode) are the
	 * daemon's alone. */
	if (rec->file && !rec->readonly) {
		int fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0) {
			snprintf(err, errlen, "the execution record '%s': %s", o->path,
				 strerror(errno));
			return -EIO;
		}
		close(fd);
	}
	rc = sqlite3_open_v2(rec->file ? o->path : ":memory:", &rec->db,
			     (rec->readonly ? SQLITE_OPEN_READONLY :
					      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
			     SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc == SQLITE_OK)
		/* Other daemons may write the same file. */
		rc = sqlite3_busy_timeout(rec->db, 10000);
	if (rc == SQLITE_OK && !rec->readonly) {
		rc = sqlite3_exec(rec->db, schema, NULL, NULL, NULL);
		if (rc == SQLITE_OK)
			rc = add_missing(rec->db, "bytes", add_bytes);
		if (rc == SQLITE_OK)
			rc = add_missing(rec->db, "link", add_chain);
		if (rc == SQLITE_OK)
			rc = add_missing(rec->db, "engine", add_engine);
		if (rc == SQLITE_OK)
			rc = add_missing(rec->db, "node", add_node);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(rec->db, indexes, NULL, NULL, NULL);
	} else if (rc == SQLITE_OK) {
		rc = view_missing(rec->db);
	}
	for (size_t i = 0; rc == SQLITE_OK && i < NSTATEMENTS; i++)
		if (!rec->readonly || !statements[i].writes)
			rc = sqlite3_prepare_v2(rec->db, statements[i].sql, -1, STMT(rec, i), NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "the execution record '%s': %s", rec->path,
			 rec->db ? sqlite3_errmsg(rec->db) : "out of memory");
		return -EIO;
	}
	if (rec->file) {
		kp = key_path(o->path);
		rec->key = kp ? chain_key_open(kp, !rec->readonly, err, errlen) : NULL;
		free(kp);
		/* A reader without the key checks the chain, not the signature. */
		if (!rec->key && !rec->readonly)
			return -EACCES;
		err[0] = '\0';
	}
	if (rec->readonly) {
		if ((r = read_chain(rec, &c)) < 0) {
			snprintf(err, errlen, r == -ENOENT ?
				 "the execution record '%s' has no chain (kept by an older petri): "
				 "start petri serve on it once" :
				 "the execution record '%s' cannot be read", rec->path);
			return r;
		}
		rec->entries = c.entries;
		rec->bytes = c.bytes;
		return 0;
	}
	/* The chain's row, made if the file has none; then trimmed to what
	 * this daemon's bounds keep. */
	if (sqlite3_exec(rec->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		r = -EIO;
	else if ((r = read_chain(rec, &c)) == -ENOENT && (r = chain_existing(rec)) == 0)
		r = read_chain(rec, &c);
	if (r == 0)
		r = trim(rec, &c, clock_wall_s());
	/* Signed by this daemon's key from here on. */
	if (r == 0)
		r = write_head(rec, &c);
	if (r == 0 && sqlite3_exec(rec->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		r = -EIO;
	if (r < 0) {
		sqlite3_exec(rec->db, "ROLLBACK", NULL, NULL, NULL);
		snprintf(err, errlen, "the execution record '%s': %s", rec->path,
			 sqlite3_errmsg(rec->db));
		return r;
	}
	rec->entries = c.entries;
	rec->bytes = c.bytes;
	return 0;
}

int record_open(const struct record_options *o, struct record **out, char *err, size_t errlen)
{
	struct record *rec = calloc(1, sizeof(*rec));
	int r;

	*out = NULL;
	err[0] = '\0';
	if (!rec)
		return -ENOMEM;
	pthread_mutex_init(&rec->lock, NULL);
	rec->file = o->path && *o->path;
	rec->readonly = o->readonly && rec->file;
	rec->path = strdup(rec->file ? o->path : ":memory:");
	rec->keep = o->max_entries > 0 ? o->max_entries :
		    rec->file ? RECORD_KEEP_FILE : RECORD_KEEP_MEMORY;
	rec->budget = o->max_bytes > 0 ? o->max_bytes :
		      rec->file ? (int64_t)RECORD_BUDGET_FILE : (int64_t)RECORD_BUDGET_MEMORY;
	rec->keep_days = o->keep_days;
	rec->attach_max = o->attachment_max;
	snprintf(rec->node, sizeof(rec->node), "%s",
		 o->node && id_node_valid(o->node) ? o->node : ID_NODE_DEFAULT);
	if (!rec->path) {
		record_close(rec);
		return -ENOMEM;
	}
	if ((rec->file && o->make_dir && !rec->readonly &&
	     (r = make_parent(o->path, err, errlen)) < 0) ||
	    (r = open_db(rec, o, err, errlen)) < 0) {
		record_close(rec);
		return r;
	}
	log_head(rec, "opened");
	*out = rec;
	return 0;
}

void record_close(struct record *rec)
{
	if (!rec)
		return;
	if (rec->db)
		log_head(rec, "closed");
	for (size_t i = 0; i < NSTATEMENTS; i++)
		sqlite3_finalize(*STMT(rec, i));
	sqlite3_close(rec->db);
	chain_key_free(rec->key);
	pthread_mutex_destroy(&rec->lock);
	free(rec->path);
	free(rec);
}

/* About the bytes json_dumps() would write for j (strings and keys, not
 * escapes and punctuation): what tells, without writing it, whether it
 * may fit the record.  Cheap: the tree of a result is small, its strings
 * are what is large. */
static size_t text_size(const json_t *j)
{
	const char *k;
	size_t i, n = 0;
	json_t *v;

	if (json_is_string(j))
		return json_string_length(j);
	if (json_is_array(j))
		json_array_foreach(j, i, v)
			n += text_size(v) + 1;
	else if (json_is_object(j))
		json_object_foreach((json_t *)j, k, v)
			n += strlen(k) + text_size(v) + 4;
	else
		n = 24;
	return n;
}

/* Cut every string member of o longer than cap to its first cap bytes (on
 * a character boundary: jansson refuses a split one). */
static void cut_strings(json_t *o, size_t cap)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		if (s && n > cap)
			json_object_set_new(o, k, json_stringn(s, utf8_cut(s, cap)));
	}
}

/* Make j fit RECORD_ENTRY_MAX: drop the results, the files and the test
 * cases (their counts stay), cut the streams, the error's message and
 * traceback to cap, and note it.  What is left besides them is small and
 * made by the daemon. */
static void shrink(json_t *j, size_t cap)
{
	json_t *error = json_object_get(j, "error"), *tests = json_object_get(j, "tests");

	if (json_is_array(json_object_get(j, "results")))
		json_object_set_new(j, "results", json_array());
	if (json_is_array(json_object_get(j, "files")))
		json_object_set_new(j, "files", json_array());
	if (json_is_array(json_object_get(tests, "cases"))) {
		/* A copy: the client's result shares the original. */
		tests = json_copy(tests);
		if (tests) {
			json_object_set_new(tests, "cases", json_array());
			json_object_set_new(tests, "truncated", json_true());
		}
		json_object_set_new(j, "tests", tests ? tests : json_null());
	}
	cut_strings(j, cap);
	if (json_is_object(error))
		cut_strings(error, cap);
	json_object_set_new(j, "record_truncated", json_true());
}

/* A session's (or the one-shots') entries and bytes.  0 or -EIO. */
static int usage_of(struct record *rec, const char *session, struct record_usage *u)
{
	sqlite3_stmt *st = rec->usage_session;
	int rc;

	if (session)
		sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 1);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		u->entries = sqlite3_column_int64(st, 0);
		u->bytes = (int64_t)sqlite3_column_double(st, 1);
	}
	done(st);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

/* Keep the base64 member k of o if it fits what is left of *room (and the
 * cap of one); else a note of its size in its place. */
static void keep_or_note(json_t *o, const char *k, size_t cap, size_t *room)
{
	json_t *v = json_object_get(o, k);
	size_t n = json_string_length(v);
	char note[96];

	if (!json_is_string(v))
		return;
	if (n <= cap && n <= *room) {
		*room -= n;
		return;
	}
	snprintf(note, sizeof(note), "[%zu bytes of base64, not recorded]", n);
	json_object_set_new(o, k, json_string(note));
}

/* The result as the record keeps it: images and files within the
 * attachment bounds (else their size), and at most RECORD_ENTRY_MAX
 * bytes of JSON besides them. */
static char *stored_result(const struct record *rec, const struct result *res)
{
	/* Each pass cuts what is left to cap: the first keeps the head of
	 * each stream; escapes (\u0001 is six bytes for one) may still
	 * overflow it, the second cannot (seven strings of 4 KiB, six times
	 * over, with room to spare); past them, a shape no result has, only
	 * the status is kept. */
	static const size_t caps[] = { RECORD_ENTRY_MAX / 8, RECORD_ENTRY_MAX / 64 };
	size_t total = rec->attach_max > RECORD_ATTACH_TOTAL ? rec->attach_max : RECORD_ATTACH_TOTAL;
	size_t room = total, max;
	json_t *j = result_to_json(res), *results, *files, *item;
	size_t i;
	char *text;

	if (!j)
		return NULL;
	/* result_to_json() shares the bundles and the files with the result,
	 * which the client gets: change copies. */
	results = json_deep_copy(json_object_get(j, "results"));
	json_object_set_new(j, "results", results ? results : json_array());
	json_array_foreach(results, i, item) {
		const char *k;
		json_t *v;

		json_object_foreach(item, k, v)
			if (!strncmp(k, "image/", 6))
				keep_or_note(item, k, rec->attach_max, &room);
	}
	if (json_is_array(json_object_get(j, "files"))) {
		files = json_deep_copy(json_object_get(j, "files"));
		json_object_set_new(j, "files", files ? files : json_array());
		json_array_foreach(files, i, item)
			keep_or_note(item, "content_base64", rec->attach_max, &room);
	}
	/* The error is shared with the result too. */
	if (json_is_object(json_object_get(j, "error")))
		json_object_set_new(j, "error", json_copy(json_object_get(j, "error")));
	max = RECORD_ENTRY_MAX + (total - room);
	/* Writing 32 MiB of results only to find them too large would cost the
	 * daemon as much again as parsing them did. */
	text = text_size(j) <= max ? json_dumps(j, JSON_COMPACT) : NULL;
	for (i = 0; (!text || strlen(text) > max) && i < sizeof(caps) / sizeof(caps[0]); i++) {
		free(text);
		/* Past the bound, the attachments go with the results. */
		shrink(j, caps[i]);
		max = RECORD_ENTRY_MAX;
		text = json_dumps(j, JSON_COMPACT);
	}
	if (text && strlen(text) > RECORD_ENTRY_MAX) {
		free(text);
		text = NULL;
		json_decref(j);
		j = json_pack("{s:s, s:b}", "status", result_status_name(res->status),
			      "record_truncated", 1);
		if (j)
			text = json_dumps(j, JSON_COMPACT);
	}
	json_decref(j);
	return text;
}

/* Drop the oldest entries while the record is over its bounds (entries,
 * bytes, age as of now), in c's totals and in the file; the chain then
 * starts where they ended.  0 or -EIO. */
static int trim(struct record *rec, struct chain_row *c, double now)
{
	sqlite3_stmt *scan = rec->scan_all, *cut = rec->cut_all;
	double cutoff = rec->keep_days > 0 ? now - rec->keep_days * 86400 : 0;
	int64_t last = -1, gone = 0, freed = 0;
	unsigned char link[CHAIN_HASH_LEN];
	int rc = SQLITE_OK;

	while ((rc = sqlite3_step(scan)) == SQLITE_ROW &&
	       (c->entries - gone > rec->keep || c->bytes - freed > rec->budget ||
		sqlite3_column_double(scan, 2) < cutoff)) {
		if (!chain_unhex((const char *)sqlite3_column_text(scan, 3), link)) {
			rc = SQLITE_CORRUPT;
			break;
		}
		last = sqlite3_column_int64(scan, 0);
		freed += sqlite3_column_int64(scan, 1);
		gone++;
	}
	done(scan);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return -EIO;
	if (last < 0)
		return 0;
	sqlite3_bind_int64(cut, 1, last);
	rc = sqlite3_step(cut);
	done(cut);
	if (rc != SQLITE_DONE)
		return -EIO;
	c->entries -= gone;
	c->bytes -= freed;
	c->start_seq = last + 1;
	memcpy(c->start_link, link, CHAIN_HASH_LEN);
	return write_start(rec, c);
}

/* Remove entry seq, whose link was link: the entry after it, if it is
 * there, takes that link as its gap, signed (chain.h).  Removed in seq
 * order, the entry after a run of removed ones ends with the link of the
 * last of them, which is the one it follows.  0 or -EIO. */
static int remove_entry(struct record *rec, int64_t seq, const unsigned char link[CHAIN_HASH_LEN])
{
	sqlite3_stmt *gap = rec->set_gap, *cut = rec->cut_one;
	char text[CHAIN_TEXT_LEN], sig[CHAIN_SIG_LEN];
	int rc;

	sqlite3_bind_int64(gap, 1, seq + 1);
	bind_hex(gap, 2, link);
	chain_gap_text(seq + 1, link, text);
	if (rec->key && chain_sign(rec->key, text, sig))
		sqlite3_bind_text(gap, 3, sig, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(gap);
	done(gap);
	if (rc != SQLITE_DONE)
		return -EIO;
	sqlite3_bind_int64(cut, 1, seq);
	rc = sqlite3_step(cut);
	done(cut);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Remove the oldest entries of session (NULL: the one-shot runs), never
 * the one just added (newest), while it holds more than its share.  0 or
 * -EIO. */
static int trim_session(struct record *rec, struct chain_row *c, const char *session,
			int64_t newest)
{
	int64_t keep = rec->keep / RECORD_SHARE, budget = rec->budget / RECORD_SHARE;
	sqlite3_stmt *scan = rec->scan_session;
	unsigned char link[CHAIN_HASH_LEN], (*links)[CHAIN_HASH_LEN] = NULL;
	int64_t gone = 0, freed = 0, *seqs = NULL;
	size_t n = 0, cap = 0;
	struct record_usage u;
	int rc = 0;

	if (usage_of(rec, session, &u) < 0)
		return -EIO;
	if (u.entries <= keep && u.bytes <= budget)
		return 0;
	/* The seqs first, then the removals: not while stepping over them. */

	if (session)
		sqlite3_bind_text(scan, 1, session, -1, SQLITE_STATIC);
	sqlite3_bind_int64(scan, 2, newest);
	while ((u.entries - gone > keep || u.bytes - freed > budget) &&
	       sqlite3_step(scan) == SQLITE_ROW) {
		if (!chain_unhex((const char *)sqlite3_column_text(scan, 2), link)) {
			rc = -EIO;
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			int64_t *s2 = realloc(seqs, ncap * sizeof(*seqs));
			unsigned char (*l2)[CHAIN_HASH_LEN];

			if (s2)
				seqs = s2;
			l2 = s2 ? realloc(links, ncap * sizeof(*links)) : NULL;
			if (!l2) {
				rc = -ENOMEM;
				break;
			}
			links = l2;
			cap = ncap;
		}
		seqs[n] = sqlite3_column_int64(scan, 0);
		memcpy(links[n++], link, CHAIN_HASH_LEN);
		freed += sqlite3_column_int64(scan, 1);
		gone++;
	}
	done(scan);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = remove_entry(rec, seqs[i], links[i]);
	free(seqs);
	free(links);
	if (rc < 0)
		return rc;
	c->entries -= gone;
	c->bytes -= freed;
	return 0;
}

/* Insert the row at the head of the chain and make room: the session's
 * own oldest first, then the record's.  Under the lock, in a transaction
 * (one commit, and a failure leaves the record as it was). */
static int insert_locked(struct record *rec, const struct record_entry *e, const char *result,
			 const char *limits)
{
	sqlite3_stmt *st = rec->insert;
	size_t n = strlen(e->code), keep = n > RECORD_ENTRY_MAX ? utf8_cut(e->code, RECORD_ENTRY_MAX) : n;
	struct row r = {
		.session = e->session, .started_at = e->started_at, .language = e->language,
		.code = e->code, .code_len = keep, .code_truncated = keep < n,
		.status = result_status_name(e->result->status), .limits = limits,
		.result = result, .engine = petri_version(), .node = rec->node,
	};
	int64_t bytes = (int64_t)(keep + strlen(result) + (limits ? strlen(limits) : 0) +
				  strlen(e->language) + (e->session ? strlen(e->session) : 0) +
				  strlen(r.engine) + strlen(r.node) + RECORD_ROW_OVERHEAD);
	unsigned char digest[CHAIN_HASH_LEN];
	struct chain_row c;
	int rc;

	if (sqlite3_exec(rec->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -EIO;
	rc = read_chain(rec, &c);
	r.seq = c.head_seq + 1;
	if (rc == 0 && (!entry_digest(&r, digest) || !chain_link(c.head_link, digest, c.head_link)))
		rc = -EIO;
	if (rc == 0) {
		sqlite3_bind_int64(st, 1, r.seq);
		if (e->session)
			sqlite3_bind_text(st, 2, e->session, -1, SQLITE_STATIC);
		sqlite3_bind_double(st, 3, r.started_at);
		sqlite3_bind_text(st, 4, r.language, -1, SQLITE_STATIC);
		/* Cut on a character boundary: the column is text. */
		sqlite3_bind_text(st, 5, r.code, (int)keep, SQLITE_STATIC);
		sqlite3_bind_int(st, 6, r.code_truncated);
		sqlite3_bind_text(st, 7, r.status, -1, SQLITE_STATIC);
		if (limits)
			sqlite3_bind_text(st, 8, limits, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, result, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 10, bytes);
		bind_hex(st, 11, digest);
		bind_hex(st, 12, c.head_link);
		sqlite3_bind_text(st, 13, r.engine, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 14, r.node, -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
		done(st);
	}
	if (rc == 0) {
		c.head_seq = r.seq;
		c.entries++;
		c.bytes += bytes;
		rc = trim_session(rec, &c, e->session, r.seq);
	}
	if (rc == 0)
		rc = trim(rec, &c, clock_wall_s());
	if (rc == 0)
		rc = write_head(rec, &c);
	if (rc == 0 && sqlite3_exec(rec->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = -EIO;
	if (rc < 0) {
		sqlite3_exec(rec->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	rec->entries = c.entries;
	rec->bytes = c.bytes;
	rec->last_seq = r.seq;
	return 0;
}

int record_add(struct record *rec, const struct record_entry *e)
{
	char *result, *limits;
	int rc;

	if (rec->readonly)
		return -EROFS;
	result = stored_result(rec, e->result);
	limits = e->limits ? json_dumps(e->limits, JSON_COMPACT) : NULL;
	if (!result) {
		free(limits);
		return -ENOMEM;
	}
	if (limits && strlen(limits) > RECORD_LIMITS_MAX) {
		free(limits);
		limits = NULL;
	}
	pthread_mutex_lock(&rec->lock);
	rc = insert_locked(rec, e, result, limits);
	if (rc == 0 && rec->on_add) {
		struct record_added added = {
			.seq = rec->last_seq, .session = e->session,
			.language = e->language, .status = result_status_name(e->result->status),
		};

		rec->on_add(rec->on_add_arg, &added);
	}
	pthread_mutex_unlock(&rec->lock);
	free(result);
	free(limits);
	return rc;
}

void record_on_add(struct record *rec, record_hook fn, void *arg)
{
	pthread_mutex_lock(&rec->lock);
	rec->on_add = fn;
	rec->on_add_arg = arg;
	pthread_mutex_unlock(&rec->lock);
}

/* ---- listings ------------------------------------------------------------
 *
 * A listing is written as JSON text straight from the rows: the code and
 * the short strings escaped here, the result and the limits copied as
 * stored.  Those two are the daemon's own json_dumps() output (record_add),
 * so parsing them into a tree to write them again would only cost: jansson
 * reads about 35 MB/s here, and a page of 1000 entries of ~7 MiB cost a
 * quarter of a second of the daemon's CPU that way. */

/* s[0, n) as a JSON string, escaped as json_dumps() escapes (JSON_COMPACT)
 * and with what is not UTF-8 as U+FFFD (jansson would refuse it). */
static int put_string(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	int r = buf_append(b, "\"", 1);

	while (r == 0 && p < end) {
		const unsigned char *run = p;
		char esc[8];

		while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
			p++;
		if (p > run && (r = buf_append(b, run, (size_t)(p - run))) < 0)
			break;
		if (p == end)
			break;
		if (*p >= 0x80) {
			size_t k = utf8_seq_len(p, (size_t)(end - p));

			r = k ? buf_append(b, p, k) : buf_append(b, "\xef\xbf\xbd", 3);
			p += k ? k : 1;
			continue;
		}
		switch (*p) {
		case '"': r = buf_append(b, "\\\"", 2); break;
		case '\\': r = buf_append(b, "\\\\", 2); break;
		case '\b': r = buf_append(b, "\\b", 2); break;
		case '\f': r = buf_append(b, "\\f", 2); break;
		case '\n': r = buf_append(b, "\\n", 2); break;
		case '\r': r = buf_append(b, "\\r", 2); break;
		case '\t': r = buf_append(b, "\\t", 2); break;
		default:	/* as jansson writes it: \u00XX, upper-case hex */
			memcpy(esc, "\\u00", 4);
			esc[4] = "0123456789ABCDEF"[*p >> 4];
			esc[5] = "0123456789ABCDEF"[*p & 15];
			r = buf_append(b, esc, 6);
		}
		p++;
	}
	return r ? r : buf_append(b, "\"", 1);
}

/* A text column as a JSON string, or null. */
static int put_column_string(struct buf *b, sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	return t ? put_string(b, t, (size_t)sqlite3_column_bytes(st, col)) :
		   buf_append(b, "null", 4);
}

/* A column that holds an object as record_add() wrote it, copied, or null
 * when it is not one: a text of the daemon's own, checked only for its
 * shape (an object, no raw control character), so that a damaged file
 * still gives valid JSON.  What it says is checked by the chain
 * (record_verify()). */
static int put_column_object(struct buf *b, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	size_t n = (size_t)sqlite3_column_bytes(st, col);

	if (!t || n < 2 || t[0] != '{' || t[n - 1] != '}')
		return buf_append(b, "null", 4);
	for (size_t i = 0; i < n; i++)
		if (t[i] < 0x20)
			return buf_append(b, "null", 4);
	return buf_append(b, t, n);
}

/* One entry as it is listed, from a row of LIST_COLUMNS, appended to b. */
static int put_entry(struct buf *b, sqlite3_stmt *st)
{
	char when[TIMEFMT_LEN];
	int r;

	r = buf_appendf(b, "{\"seq\":%lld,\"session\":", (long long)sqlite3_column_int64(st, 0));
	if (!r)
		r = put_column_string(b, st, 8);
	if (!r)
		r = buf_appendf(b, ",\"started_at\":\"%s\",\"language\":",
				timefmt_rfc3339(sqlite3_column_double(st, 1), when));
	if (!r)
		r = put_column_string(b, st, 2);
	if (!r)
		r = buf_append_str(b, ",\"code\":");
	if (!r)
		r = put_column_string(b, st, 3);
	if (!r)
		r = buf_appendf(b, ",\"code_truncated\":%s,\"status\":",
				sqlite3_column_int(st, 7) ? "true" : "false");
	if (!r)
		r = put_column_string(b, st, 4);
	if (!r)
		r = buf_append_str(b, ",\"limits\":");
	if (!r)
		r = put_column_object(b, st, 5);
	if (!r)
		r = buf_append_str(b, ",\"result\":");
	if (!r)
		r = put_column_object(b, st, 6);
	if (!r)
		r = buf_append_str(b, ",\"engine\":");
	if (!r)
		r = put_column_string(b, st, 9);
	if (!r)
		r = buf_append_str(b, ",\"node\":");
	if (!r)
		r = put_column_string(b, st, 10);
	return r ? r : buf_append(b, "}", 1);
}

/* SQLite's progress handler during a listing: non-zero interrupts it. */
static int listing_gone(void *arg)
{
	const struct record_query *q = arg;

	return q->gone(q->gone_arg);
}

/* How often a listing asks whether its client is still there: every so
 * many rows, and every so many SQLite instructions (a plan that skipped
 * rows without listing them). */
#define GONE_EVERY_ROWS 16
#define GONE_EVERY_OPS 20000

static sqlite3_stmt *listing_statement(struct record *rec, enum record_scope scope)
{
	return scope == RECORD_SESSION ? rec->list :
	       scope == RECORD_ONESHOTS ? rec->list_oneshots : rec->list_all;
}

/* The rows of q, newest first, each entry's text appended to rows and its
 * start to starts[].  Under the record's lock. */
static int read_rows(struct record *rec, const struct record_query *q, struct buf *rows,
		     size_t *starts, size_t *n, bool *truncated)
{
	sqlite3_stmt *st = listing_statement(rec, q->scope);
	int rc, r = 0;

	sqlite3_reset(st);
	if (q->scope == RECORD_SESSION)
		sqlite3_bind_text(st, 1, q->session ? q->session : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, q->before > 0 ? q->before : INT64_MAX);
	sqlite3_bind_int(st, 3, q->limit);
	if (q->gone)
		sqlite3_progress_handler(rec->db, GONE_EVERY_OPS, listing_gone, (void *)q);
	/* Newest first, so that the byte bound keeps the most recent, as
	 * limit does.  The first entry always fits (an entry is far below
	 * the bound). */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t at = rows->len;

		if (q->gone && *n % GONE_EVERY_ROWS == 0 && q->gone(q->gone_arg)) {
			r = -ECANCELED;
			break;
		}
		if ((r = put_entry(rows, st)) < 0)
			break;
		if (*n && rows->len + *n + 2 > RECORD_LIST_MAX) {
			rows->len = at;
			*truncated = true;
			break;
		}
		starts[(*n)++] = at;
	}
	if (r == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE)
		r = rc == SQLITE_INTERRUPT ? -ECANCELED : -EIO;
	if (q->gone)
		sqlite3_progress_handler(rec->db, 0, NULL, NULL);
	done(st);
	return r;
}

int record_list_text(struct record *rec, const struct record_query *q, struct buf *out,
		     bool *truncated)
{
	struct buf rows = BUF_INIT;
	size_t *starts = NULL, n = 0, mark = out->len;
	bool oldest_first = q->scope == RECORD_SESSION;
	int r;

	*truncated = false;
	if (q->limit < 1)
		return buf_append(out, "[]", 2);
	if (q->gone && q->gone(q->gone_arg))
		return -ECANCELED;
	if (!(starts = malloc((size_t)q->limit * sizeof(*starts))))
		return -ENOMEM;
	pthread_mutex_lock(&rec->lock);
	r = read_rows(rec, q, &rows, starts, &n, truncated);
	pthread_mutex_unlock(&rec->lock);
	/* The entries in the scope's order, from the newest-first rows. */
	if (r == 0)
		r = buf_reserve(out, rows.len + n + 2);
	if (r == 0) {
		buf_append(out, "[", 1);
		for (size_t i = 0; i < n; i++) {
			size_t k = oldest_first ? n - 1 - i : i;
			size_t end = k + 1 < n ? starts[k + 1] : rows.len;

			if (i)
				buf_append(out, ",", 1);
			buf_append(out, rows.data + starts[k], end - starts[k]);
		}
		buf_append(out, "]", 1);
	}
	if (r < 0) {
		out->len = mark;
		if (out->data)
			out->data[mark] = '\0';
	}
	buf_release(&rows);
	free(starts);
	return r;
}

int record_explain(struct record *rec, enum record_scope scope, char *out, size_t len)
{
	sqlite3_stmt *st = NULL;
	struct buf sql = BUF_INIT;
	size_t used = 0;
	int rc;

	out[0] = '\0';
	if (buf_appendf(&sql, "EXPLAIN QUERY PLAN %s",
			sqlite3_sql(listing_statement(rec, scope))) < 0)
		return -ENOMEM;
	pthread_mutex_lock(&rec->lock);
	rc = sqlite3_prepare_v2(rec->db, sql.data, -1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *detail = (const char *)sqlite3_column_text(st, 3);

		rc = SQLITE_OK;
		if (detail && used < len)
			used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "; " : "",
						 detail);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&rec->lock);
	buf_release(&sql);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* A listing as a tree: its text, parsed. */
static json_t *list_tree(struct record *rec, const struct record_query *q, bool *truncated)
{
	struct buf text = BUF_INIT;
	json_t *list = NULL;

	if (record_list_text(rec, q, &text, truncated) == 0)
		list = json_loadb(text.data, text.len, 0, NULL);
	buf_release(&text);
	return list;
}

json_t *record_list(struct record *rec, const char *session, int limit, int64_t before,
		    bool *truncated)
{
	struct record_query q = { .scope = RECORD_SESSION, .session = session, .limit = limit,
				  .before = before };

	return list_tree(rec, &q, truncated);
}

json_t *record_list_all(struct record *rec, enum record_scope scope, int limit, int64_t before,
			bool *truncated)
{
	struct record_query q = { .scope = scope == RECORD_ONESHOTS ? RECORD_ONESHOTS : RECORD_ALL,
				  .limit = limit, .before = before };

	return list_tree(rec, &q, truncated);
}

int record_usage(struct record *rec, bool all, const char *session, struct record_usage *out)
{
	int r = 0;

	pthread_mutex_lock(&rec->lock);
	if (all) {
		out->entries = rec->entries;
		out->bytes = rec->bytes;
	} else {
		r = usage_of(rec, session, out);
	}
	pthread_mutex_unlock(&rec->lock);
	return r;
}

/* Note the first break: the entry seq, and why. */
static void broken(struct record_check *out, int64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void broken(struct record_check *out, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	if (out->broken)
		return;
	out->broken = seq > 0 ? seq : 1;
	va_start(ap, fmt);
	vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
}

/* Is the gap before row seq (its gap_link and gap_sig columns) one that
 * the key made?  Then *link is the link it follows. */
static bool gap_ok(const struct chain_key *key, sqlite3_stmt *st, int64_t seq,
		   unsigned char link[CHAIN_HASH_LEN])
{
	char text[CHAIN_TEXT_LEN];

	if (!chain_unhex((const char *)sqlite3_column_text(st, COL_GAP_LINK), link))
		return false;
	chain_gap_text(seq, link, text);
	return key && chain_check(key, text, (const char *)sqlite3_column_text(st, COL_GAP_SIG));
}

/* A record in memory has no key: nothing but the daemon can reach it. */
static bool unsigned_gap_ok(const struct record *rec, sqlite3_stmt *st,
			    unsigned char link[CHAIN_HASH_LEN])
{
	return !rec->file && chain_unhex((const char *)sqlite3_column_text(st, COL_GAP_LINK), link);
}

/* Walk the rows in seq order from the chain's start: each digest from the
 * content, each link from the one before, no seq missing but where a gap
 * signed by key says what came before. */
static int walk(struct record *rec, const struct chain_key *key, const struct chain_row *c,
		int64_t expect_seq, const unsigned char *expect_link, struct record_check *out)
{
	sqlite3_stmt *st = NULL;
	unsigned char link[CHAIN_HASH_LEN], digest[CHAIN_HASH_LEN], stored[CHAIN_HASH_LEN];
	int64_t want = c->start_seq;
	bool passed = expect_seq <= 0 || expect_seq == c->start_seq - 1;
	int rc;

	memcpy(link, c->start_link, CHAIN_HASH_LEN);
	if (expect_seq > 0 && expect_seq == c->start_seq - 1 &&
	    memcmp(expect_link, link, CHAIN_HASH_LEN))
		broken(out, expect_seq, "the chain's start is not the link of the head given");
	if (expect_seq > 0 && expect_seq < c->start_seq - 1)
		broken(out, expect_seq, "entry %lld is older than the record's start (%lld): "
		       "retention removed it", (long long)expect_seq, (long long)c->start_seq);
	rc = sqlite3_prepare_v2(rec->db, "SELECT " DIGEST_COLUMNS ", digest, link, gap_link,"
				" gap_sig FROM executions ORDER BY seq", -1, &st, NULL);
	while (!out->broken && rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t seq = sqlite3_column_int64(st, 0);

		rc = SQLITE_OK;
		out->entries++;
		if (out->first > out->last)
			out->first = seq;
		out->last = seq;
		if (seq < want) {
			broken(out, seq, "entry %lld is before the chain's start (%lld)",
			       (long long)seq, (long long)want);
			break;
		}
		if (seq > want) {
			if (!gap_ok(key, st, seq, link) && !unsigned_gap_ok(rec, st, link)) {
				broken(out, want, "entry %lld is missing (the next one is %lld, and "
				       "no gap signed by the record's key is there)",
				       (long long)want, (long long)seq);
				break;
			}
			out->gaps += seq - want;
			if (expect_seq >= want && expect_seq < seq - 1) {
				broken(out, expect_seq, "entry %lld of the head given was removed "
				       "to make room", (long long)expect_seq);
				break;
			}
			if (expect_seq == seq - 1) {
				passed = true;
				if (memcmp(link, expect_link, CHAIN_HASH_LEN)) {
					broken(out, expect_seq, "entry %lld's link is not the "
					       "head given", (long long)expect_seq);
					break;
				}
			}
		}
		if (!chain_unhex((const char *)sqlite3_column_text(st, COL_DIGEST), stored) ||
		    !row_digest(st, digest) || memcmp(digest, stored, CHAIN_HASH_LEN)) {
			broken(out, seq, "entry %lld's content is not what its digest says: it "
			       "was changed", (long long)seq);
			break;
		}
		if (!chain_link(link, digest, link)) {
			rc = SQLITE_NOMEM;
			break;
		}
		if (!chain_unhex((const char *)sqlite3_column_text(st, COL_LINK), stored) ||
		    memcmp(link, stored, CHAIN_HASH_LEN)) {
			broken(out, seq, "entry %lld does not follow from the one before it: an "
			       "entry was changed, inserted, removed or moved", (long long)seq);
			break;
		}
		if (seq == expect_seq) {
			passed = true;
			if (memcmp(link, expect_link, CHAIN_HASH_LEN))
				broken(out, seq, "entry %lld's link is not the head given",
				       (long long)seq);
		}
		want = seq + 1;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
		snprintf(out->why, sizeof(out->why), "cannot read the record: %s",
			 sqlite3_errmsg(rec->db));
		return -EIO;
	}
	if (!out->broken && want <= c->head_seq)
		broken(out, want, "entries %lld to %lld are missing (the head is %lld)",
		       (long long)want, (long long)c->head_seq, (long long)c->head_seq);
	if (!out->broken && want > c->head_seq + 1)
		broken(out, c->head_seq + 1, "entries from %lld on are past the head (%lld)",
		       (long long)c->head_seq + 1, (long long)c->head_seq);
	if (!out->broken && memcmp(link, c->head_link, CHAIN_HASH_LEN))
		broken(out, c->head_seq, "the head is not the last entry's link");
	if (!out->broken && !passed)
		broken(out, expect_seq, "the record does not hold entry %lld of the head given",
		       (long long)expect_seq);
	return 0;
}

int record_verify(struct record *rec, const struct chain_key *key, int64_t expect_seq,
		  const unsigned char *expect_link, struct record_check *out)
{
	char text[CHAIN_TEXT_LEN];
	struct chain_row c;
	int r;

	memset(out, 0, sizeof(*out));
	out->first = 1;
	if (!key)
		key = rec->key;
	pthread_mutex_lock(&rec->lock);
	/* One read transaction: a daemon writing meanwhile is not seen half
	 * way. */
	sqlite3_exec(rec->db, "BEGIN", NULL, NULL, NULL);
	r = read_chain(rec, &c);
	if (r < 0) {
		snprintf(out->why, sizeof(out->why), r == -ENOENT ? "the record has no chain" :
			 "cannot read the chain: %s", sqlite3_errmsg(rec->db));
	} else {
		out->start = c.start_seq;
		chain_hex(c.head_link, out->head);
		out->head_seq = c.head_seq;
		snprintf(out->key, sizeof(out->key), "%s", c.key);
		r = walk(rec, key, &c, expect_seq, expect_link, out);
	}
	sqlite3_exec(rec->db, "COMMIT", NULL, NULL, NULL);
	pthread_mutex_unlock(&rec->lock);
	if (r < 0 || out->broken || !rec->file)
		return r;
	if (!key) {
		snprintf(out->why, sizeof(out->why), "no key to check the head's signature with: "
			 "the record's key file is missing or unreadable; give its id with --key");
		return -ENOKEY;
	}
	chain_head_text(c.start_seq, c.start_link, c.head_seq, c.head_link, text);
	if (c.key[0] && strcmp(c.key, chain_key_id(key)))
		broken(out, c.head_seq, "the head was signed by %s, not by %s", c.key,
		       chain_key_id(key));
	else if (!chain_check(key, text, c.sig))
		broken(out, c.head_seq, "the head's signature does not match: the chain was "
		       "rewritten, or signed by another key");
	else
		out->signature_checked = true;
	return 0;
}
