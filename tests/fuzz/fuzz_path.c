/* Paths from HTTP clients (file upload, download, listing and the "files"
 * of POST /v1/execute): files_check_path, with an independent oracle.
 *
 * Whatever files_check_path accepts must be relative, free of "." and ".."
 * and empty components (a trailing '/' only for listings), of control
 * characters and of invalid UTF-8 (jansson's check), and within the length
 * limits.  The input is the path; a NUL ends it, as in C. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "workspace/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool oracle(const char *p, bool allow_empty)
{
	size_t len = strlen(p), start = 0;
	json_t *j;

	if (len == 0)
		return allow_empty;
	if (len > FILES_PATH_MAX || p[0] == '/')
		return false;
	if (!(j = json_stringn(p, len)))
		return false;
	json_decref(j);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return false;
	for (size_t i = 0; i <= len; i++) {
		size_t n = i - start;

		if (i < len && p[i] != '/')
			continue;
		if (n > FILES_NAME_MAX)
			return false;
		if (n == 0 && !(allow_empty && i == len))
			return false;
		if ((n == 1 && !memcmp(p + start, ".", 1)) || (n == 2 && !memcmp(p + start, "..", 2)))
			return false;
		start = i + 1;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = malloc(size + 1), why[160];

	if (!path)
		return 0;
	memcpy(path, data, size);
	path[size] = '\0';
	for (int allow_empty = 0; allow_empty <= 1; allow_empty++) {
		int r;

		why[0] = '\0';
		r = files_check_path(path, allow_empty, why, sizeof(why));
		assert(r == 0 || r == -EINVAL);
		assert((r == 0) == oracle(path, allow_empty));
		assert(r == 0 || (why[0] && strlen(why) < sizeof(why)));
		if (r == 0)
			(void)files_content_type(path);
	}
	free(path);
	return 0;
}
