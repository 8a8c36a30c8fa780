#include "record/chain.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/base64.h"

struct chain_hasher {
	EVP_MD_CTX *ctx;
	bool failed;
};

struct chain_key {
	EVP_PKEY *pkey;
	bool can_sign;
	char id[64];
};

/* A field's tag: what it is, so that a NULL, an integer and a text of the
 * same bytes never hash alike. */
enum { TAG_NULL = 0, TAG_INT = 1, TAG_REAL = 2, TAG_TEXT = 3 };

static void put(struct chain_hasher *h, const void *p, size_t n)
{
	if (!h->failed && EVP_DigestUpdate(h->ctx, p, n) != 1)
		h->failed = true;
}

static void put_u64(struct chain_hasher *h, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (56 - 8 * i));
	put(h, b, sizeof(b));
}

static void field(struct chain_hasher *h, unsigned char tag, const void *p, size_t n)
{
	put(h, &tag, 1);
	put_u64(h, n);
	put(h, p, n);
}

struct chain_hasher *chain_begin(const char *domain)
{
	struct chain_hasher *h = calloc(1, sizeof(*h));

	if (!h || !(h->ctx = EVP_MD_CTX_new()) ||
	    EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		if (h)
			EVP_MD_CTX_free(h->ctx);
		free(h);
		return NULL;
	}
	field(h, TAG_TEXT, domain, strlen(domain));
	return h;
}

void chain_add_null(struct chain_hasher *h)
{
	field(h, TAG_NULL, "", 0);
}

void chain_add_int(struct chain_hasher *h, int64_t v)
{
	unsigned char tag = TAG_INT;

	put(h, &tag, 1);
	put_u64(h, (uint64_t)v);
}

void chain_add_real(struct chain_hasher *h, double v)
{
	unsigned char tag = TAG_REAL;
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	put(h, &tag, 1);
	put_u64(h, bits);
}

void chain_add_text(struct chain_hasher *h, const void *s, size_t n)
{
	field(h, TAG_TEXT, s ? s : "", s ? n : 0);
}

bool chain_finish(struct chain_hasher *h, unsigned char out[CHAIN_HASH_LEN])
{
	unsigned int n = 0;
	bool ok = !h->failed && EVP_DigestFinal_ex(h->ctx, out, &n) == 1 && n == CHAIN_HASH_LEN;

	EVP_MD_CTX_free(h->ctx);
	free(h);
	return ok;
}

bool chain_link(const unsigned char prev[CHAIN_HASH_LEN],
		const unsigned char digest[CHAIN_HASH_LEN], unsigned char out[CHAIN_HASH_LEN])
{
	unsigned char both[2 * CHAIN_HASH_LEN];
	unsigned int n = 0;

	memcpy(both, prev, CHAIN_HASH_LEN);
	memcpy(both + CHAIN_HASH_LEN, digest, CHAIN_HASH_LEN);
	return EVP_Digest(both, sizeof(both), out, &n, EVP_sha256(), NULL) == 1 &&
	       n == CHAIN_HASH_LEN;
}

void chain_hex(const unsigned char h[CHAIN_HASH_LEN], char out[CHAIN_HEX_LEN])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < CHAIN_HASH_LEN; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 15];
	}
	out[2 * CHAIN_HASH_LEN] = '\0';
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

bool chain_unhex(const char *s, unsigned char out[CHAIN_HASH_LEN])
{
	if (!s || strlen(s) != 2 * CHAIN_HASH_LEN)
		return false;
	for (int i = 0; i < CHAIN_HASH_LEN; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return true;
}

/* The key's id, from its raw public bytes. */
static bool name_key(struct chain_key *k)
{
	unsigned char raw[32];
	size_t n = sizeof(raw);
	char *b64;

	if (EVP_PKEY_get_raw_public_key(k->pkey, raw, &n) != 1 || n != sizeof(raw) ||
	    !(b64 = base64_encode(raw, n, NULL)))
		return false;
	snprintf(k->id, sizeof(k->id), "ed25519:%s", b64);
	free(b64);
	return true;
}

static struct chain_key *wrap(EVP_PKEY *pkey, bool can_sign, char *err, size_t errlen)
{
	struct chain_key *k = calloc(1, sizeof(*k));

	if (!k || !pkey || EVP_PKEY_id(pkey) != EVP_PKEY_ED25519 ||
	    (k->pkey = pkey, k->can_sign = can_sign, !name_key(k))) {
		snprintf(err, errlen, "not an Ed25519 key");
		EVP_PKEY_free(pkey);
		free(k);
		return NULL;
	}
	return k;
}

/* Make a key and write it to path, which must not exist. */
static EVP_PKEY *make_key(const char *path, char *err, size_t errlen)
{
	EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
	EVP_PKEY *pkey = NULL;
	FILE *f = NULL;
	int fd;

	if (!pc || EVP_PKEY_keygen_init(pc) != 1 || EVP_PKEY_keygen(pc, &pkey) != 1) {
		snprintf(err, errlen, "cannot make a signing key");
		EVP_PKEY_CTX_free(pc);
		return NULL;
	}
	EVP_PKEY_CTX_free(pc);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "cannot create '%s': %s", path, strerror(e));
		EVP_PKEY_free(pkey);
		errno = e;
		return NULL;
	}
	if (PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL) != 1 || fflush(f) ||
	    fsync(fileno(f))) {
		snprintf(err, errlen, "cannot write '%s'", path);
		fclose(f);
		unlink(path);
		EVP_PKEY_free(pkey);
		return NULL;
	}
	fclose(f);
	return pkey;
}

/* Open path for reading, through no symlink; *missing when it is not there. */
static FILE *open_key_file(const char *path, bool *missing, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	FILE *f;

	*missing = fd < 0 && errno == ENOENT;
	if (fd < 0) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (!(f = fdopen(fd, "r")))
		close(fd);
	return f;
}

struct chain_key *chain_key_open(const char *path, bool create, char *err, size_t errlen)
{
	bool missing;
	FILE *f = open_key_file(path, &missing, err, errlen);
	EVP_PKEY *pkey;
	struct stat st;

	if (!f && missing && create) {
		pkey = make_key(path, err, errlen);
		/* Another daemon made it first: take its key. */
		if (!pkey && errno == EEXIST)
			f = open_key_file(path, &missing, err, errlen);
		else
			return pkey ? wrap(pkey, true, err, errlen) : NULL;
	}
	if (!f)
		return NULL;
	/* A key others can read signs for them too. */
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077)) {
		snprintf(err, errlen, "'%s' is readable by others (mode %03o): make it 0600",
			 path, st.st_mode & 0777);
		fclose(f);
		return NULL;
	}
	pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!pkey) {
		snprintf(err, errlen, "'%s' holds no private key", path);
		return NULL;
	}
	return wrap(pkey, true, err, errlen);
}

struct chain_key *chain_key_public(const char *id, char *err, size_t errlen)
{
	unsigned char *raw = NULL;
	size_t n = 0;
	EVP_PKEY *pkey = NULL;

	if (!strncmp(id, "ed25519:", 8))
		raw = base64_decode(id + 8, strlen(id + 8), &n);
	if (raw && n == 32)
		pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, n);
	free(raw);
	if (!pkey) {
		snprintf(err, errlen, "'%s' is not a key id (ed25519: and the base64 of "
			 "32 bytes, as the log and petri record verify print it)", id);
		return NULL;
	}
	return wrap(pkey, false, err, errlen);
}

void chain_key_free(struct chain_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

const char *chain_key_id(const struct chain_key *k)
{
	return k->id;
}

void chain_head_text(int64_t start, const unsigned char start_link[CHAIN_HASH_LEN], int64_t seq,
		     const unsigned char link[CHAIN_HASH_LEN], char out[CHAIN_TEXT_LEN])
{
	char from[CHAIN_HEX_LEN], to[CHAIN_HEX_LEN];

	chain_hex(start_link, from);
	chain_hex(link, to);
	snprintf(out, CHAIN_TEXT_LEN, "petri-record-head-v1 start=%lld after=%s seq=%lld sha256=%s",
		 (long long)start, from, (long long)seq, to);
}

void chain_gap_text(int64_t seq, const unsigned char link[CHAIN_HASH_LEN],
		    char out[CHAIN_TEXT_LEN])
{
	char hex[CHAIN_HEX_LEN];

	chain_hex(link, hex);
	snprintf(out, CHAIN_TEXT_LEN, "petri-record-gap-v1 seq=%lld after=%s", (long long)seq, hex);
}

bool chain_sign(const struct chain_key *k, const char *text, char out[CHAIN_SIG_LEN])
{
	unsigned char sig[64];
	size_t n = sizeof(sig);
	EVP_MD_CTX *ctx;
	char *b64;
	bool ok;

	if (!k->can_sign || !(ctx = EVP_MD_CTX_new()))
		return false;
	ok = EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	     EVP_DigestSign(ctx, sig, &n, (const unsigned char *)text, strlen(text)) == 1;
	EVP_MD_CTX_free(ctx);
	if (!ok || !(b64 = base64_encode(sig, n, NULL)))
		return false;
	ok = strlen(b64) < CHAIN_SIG_LEN;
	if (ok)
		memcpy(out, b64, strlen(b64) + 1);
	free(b64);
	return ok;
}

bool chain_check(const struct chain_key *k, const char *text, const char *sig)
{
	unsigned char *raw;
	size_t n = 0;
	EVP_MD_CTX *ctx;
	bool ok;

	if (!sig || !(raw = base64_decode(sig, strlen(sig), &n)))
		return false;
	ctx = EVP_MD_CTX_new();
	ok = ctx && n == 64 && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	     EVP_DigestVerify(ctx, raw, n, (const unsigned char *)text, strlen(text)) == 1;
	EVP_MD_CTX_free(ctx);
	free(raw);
	return ok;
}
