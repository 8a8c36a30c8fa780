/* chain — what makes the execution record evidence (docs/record.md): each
 * entry's digest, the hash chain that links every entry to the one before
 * it, and the signature of the chain's head.
 *
 *   digest  SHA-256 over the entry's fields, each written with its type
 *           and its length, so that no two different entries share an
 *           encoding (a domain text first, for the same reason across
 *           versions of the encoding: CHAIN_DOMAIN for an entry that
 *           names the petri and the node that wrote it, CHAIN_DOMAIN_V2
 *           for one that names only the petri, CHAIN_DOMAIN_V1 for one
 *           kept by a petri before that).
 *   link    SHA-256(the previous link || digest): changing, removing,
 *           inserting or reordering an entry changes every link after it.
 *           The first entry's previous link is CHAIN_GENESIS, 32 zero
 *           bytes; retention that drops the oldest entries keeps the link
 *           they ended on as the chain's new start.
 *   head    where the chain starts and the last entry's seq and link,
 *           signed with an Ed25519 key kept beside the record (path
 *           ".key", mode 0600): whoever rewrites the file and recomputes
 *           the chain cannot sign the new head without that key.
 *   gap     an entry removed from the middle to make room (a session over
 *           its share of the record): the entry after it keeps the link
 *           it followed, signed with the same key.
 *
 * SHA-256 and Ed25519 are OpenSSL's libcrypto. */
#ifndef PETRI_CHAIN_H
#define PETRI_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHAIN_HASH_LEN 32
#define CHAIN_HEX_LEN (2 * CHAIN_HASH_LEN + 1)
#define CHAIN_DOMAIN "petri-record-entry-v3"
#define CHAIN_DOMAIN_V2 "petri-record-entry-v2"
#define CHAIN_DOMAIN_V1 "petri-record-entry-v1"

struct chain_hasher;

/* A digest under way, domain (CHAIN_DOMAIN*) its first field: add each
 * field in order, then finish.  NULL when out of memory. */
struct chain_hasher *chain_begin(const char *domain);
void chain_add_null(struct chain_hasher *h);
void chain_add_int(struct chain_hasher *h, int64_t v);
void chain_add_real(struct chain_hasher *h, double v);	/* its exact bits */
void chain_add_text(struct chain_hasher *h, const void *s, size_t n);
/* Writes the digest and frees h.  false if libcrypto failed. */
bool chain_finish(struct chain_hasher *h, unsigned char out[CHAIN_HASH_LEN]);

/* out = SHA-256(prev || digest). */
bool chain_link(const unsigned char prev[CHAIN_HASH_LEN],
		const unsigned char digest[CHAIN_HASH_LEN], unsigned char out[CHAIN_HASH_LEN]);

void chain_hex(const unsigned char h[CHAIN_HASH_LEN], char out[CHAIN_HEX_LEN]);
/* false unless s is exactly 64 hex digits. */
bool chain_unhex(const char *s, unsigned char out[CHAIN_HASH_LEN]);

/* The signing key. */
struct chain_key;

/* The key at path: loaded, or made (mode 0600, O_EXCL: two daemons that
 * start at once agree on one) when create is true and there is none.
 * NULL and a message when it cannot be had. */
struct chain_key *chain_key_open(const char *path, bool create, char *err, size_t errlen);
/* A public key from its id (chain_key_id()): it verifies, it cannot sign. */
struct chain_key *chain_key_public(const char *id, char *err, size_t errlen);
void chain_key_free(struct chain_key *k);
/* "ed25519:" and the base64 of the 32 bytes of the public key. */
const char *chain_key_id(const struct chain_key *k);

/* The texts that are signed, one line each (CHAIN_TEXT_LEN at most):
 *   the head: where the chain starts (the seq of its first entry and the
 *     link before it) and where it ends (the last seq and its link);
 *   a gap: entry seq follows link, the last of the entries removed before
 *     it to make room (record.h). */
#define CHAIN_TEXT_LEN 256
void chain_head_text(int64_t start, const unsigned char start_link[CHAIN_HASH_LEN], int64_t seq,
		     const unsigned char link[CHAIN_HASH_LEN], char out[CHAIN_TEXT_LEN]);
void chain_gap_text(int64_t seq, const unsigned char link[CHAIN_HASH_LEN],
		    char out[CHAIN_TEXT_LEN]);

/* The base64 signature of text into out (CHAIN_SIG_LEN).  false if k
 * cannot sign. */
#define CHAIN_SIG_LEN 128
bool chain_sign(const struct chain_key *k, const char *text, char out[CHAIN_SIG_LEN]);
bool chain_check(const struct chain_key *k, const char *text, const char *sig);

#endif
