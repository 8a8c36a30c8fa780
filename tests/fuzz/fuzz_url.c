/* Request URLs: the percent-decoding that libmicrohttpd calls back into
 * (unescape, static in server.c: the file is included, not copied), then
 * the file path that routing takes out of /v1/sessions/<id>/files/<path>
 * (or a ?path= query value) through files_check_path.
 *
 * Decoding is once only, a decoded NUL becomes 0x01, the result is never
 * longer than the input; no path the checks accept can leave /work. */
#include "api/server.c"

#include "workspace/files.h"

#include <assert.h>
#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Does an accepted path stay under /work, judged by its components? */
static bool stays_inside(const char *p)
{
	size_t n;

	if (p[0] == '/')
		return false;
	for (; *p; p += n + (p[n] == '/')) {
		n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)p[i] < 0x20)
				return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url = malloc(size + 1), *orig = malloc(size + 1), why[160];
	const char *path;
	size_t len, n, escapes = 0;

	if (!url || !orig)
		goto out;
	memcpy(url, data, size);
	url[size] = '\0';
	strcpy(orig, url);
	len = strlen(url);
	for (size_t i = 0; i + 2 < len; i++)
		if (orig[i] == '%' && isxdigit((unsigned char)orig[i + 1]) &&
		    isxdigit((unsigned char)orig[i + 2])) {
			escapes++;
			i += 2;
		}

	n = unescape(NULL, NULL, url);
	assert(n == strlen(url) && n == len - 2 * escapes);
	assert(escapes || !strcmp(url, orig));

	/* As route() and handle_session() split it. */
	path = url;
	if (!strncmp(url, "/v1/sessions/", 13)) {
		const char *slash = strchr(url + 13, '/');

		if (slash && (size_t)(slash - (url + 13)) <= SESSION_ID_LEN &&
		    !strncmp(slash, "/files/", 7))
			path = slash + 7;
	}
	if (files_check_path(path, false, why, sizeof(why)) == 0)
		assert(stays_inside(path));
	if (files_check_path(url, true, why, sizeof(why)) == 0)
		assert(stays_inside(url));
out:
	free(url);
	free(orig);
	return 0;
}
