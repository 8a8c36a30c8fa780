/* What a sandbox writes to stdout and stderr, through the code that caps it
 * and turns it into the result object: result_stream_add (a cut never splits
 * a character), utf8_*, base64_* and result_to_json.
 *
 * Input: one byte for the cap, then the stream, cut into writes at every
 * 0xff byte (the bytes stay in the stream).  jansson's own UTF-8 check is
 * the oracle for utf8_valid. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/result.h"
#include "util/base64.h"
#include "util/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool jansson_utf8(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);

	json_decref(j);
	return j != NULL;
}

static void check_base64(const char *s, size_t n)
{
	size_t elen, dlen;
	char *enc = base64_encode(s, n, &elen);
	unsigned char *dec;

	assert(enc && elen == strlen(enc) && base64_valid(enc, elen));
	dec = base64_decode(enc, elen, &dlen);
	assert(dec && dlen == n && (n == 0 || !memcmp(dec, s, n)));
	free(dec);
	free(enc);
	/* Arbitrary bytes as base64: valid exactly when decodable. */
	dec = base64_decode(s, n, &dlen);
	assert((dec != NULL) == base64_valid(s, n));
	assert(!dec || dlen <= n / 4 * 3);
	free(dec);
}

/* Every cut of a valid string lands on a character boundary (where a
 * valid string's prefix is valid), at most three bytes back, and a cut at
 * a boundary takes nothing. */
static void check_cuts(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i <= n; i++) {
		size_t cut = utf8_cut(s, i);

		assert(cut <= i && i - cut <= 3);
		assert(cut == n || (p[cut] & 0xc0) != 0x80);
		assert(i == n || (p[i] & 0xc0) == 0x80 || cut == i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	struct result res;
	struct buf clean = BUF_INIT;
	size_t n, cap, kept = 0, start = 0;
	json_t *j, *out, *out64;

	if (size < 1 || result_init(&res) < 0)
		return 0;
	cap = data[0];
	n = size - 1;

	assert(utf8_valid(s, n) == jansson_utf8(s, n));
	(void)utf8_cut(s, n);
	assert(utf8_sanitize(&clean, s, n) == 0);
	assert(utf8_valid(clean.data, clean.len));
	assert(!utf8_valid(s, n) || (clean.len == n && !memcmp(clean.data, s, n)));
	check_cuts(clean.data, clean.len);
	check_base64(s, n);

	/* The stream, written in pieces, capped at cap bytes. */
	for (size_t i = 0; i <= n; i++) {
		if (i < n && data[1 + i] != 0xff)
			continue;
		kept += result_stream_add(&res.out, s + start, i - start, cap);
		start = i;
	}
	/* kept counts what went out as it came (streaming); a later cut may
	 * take back the end of an earlier piece, never more. */
	assert(res.out.total == n && res.out.data.len <= kept && kept <= cap);
	assert(res.out.truncated == (res.out.data.len < n));
	assert(!res.out.data.len || !memcmp(res.out.data.data, s, res.out.data.len));
	/* A cut never splits a character, even across pieces. */
	assert(!utf8_valid(s, n) || utf8_valid(res.out.data.data, res.out.data.len));
	/* stderr gets the whole input: the exact bytes come back from JSON. */
	result_stream_add(&res.err, s, n, SIZE_MAX);
	res.status = RESULT_ERROR;

	j = result_to_json(&res);
	assert(j);
	out = json_object_get(j, "stderr");
	out64 = json_object_get(j, "stderr_base64");
	assert(json_is_string(out));
	if (utf8_valid(s, n)) {
		assert(!out64 && json_string_length(out) == n);
	} else {
		size_t dlen;
		unsigned char *dec = base64_decode(json_string_value(out64),
						   json_string_length(out64), &dlen);

		assert(dec && dlen == n && !memcmp(dec, s, n));
		free(dec);
	}
	json_decref(j);
	buf_release(&clean);
	result_release(&res);
	return 0;
}
