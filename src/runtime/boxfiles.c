/* What the host reads of the files an execution wrote, after it stopped
 * running, as the sandbox's user (as a download is): their content inline
 * in the result (box_files_inline() in box.h), and the test reports it
 * left (box_read_tests()). */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime/box.h"
#include "workspace/files.h"
#include "exec/junit.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/utf8.h"

static bool wanted(const char *path, const char *const *patterns, size_t n)
{
	if (!patterns)
		return true;
	for (size_t i = 0; i < n; i++)
		if (fnmatch(patterns[i], path, 0) == 0)
			return true;
	return false;
}

/* Read at most max bytes of path (at most its size, which the sandbox
 * cannot change any more: it has stopped running). */
static int read_capped(const struct files_user *u, int work_fd, const char *path,
		       uint64_t max, char **data, size_t *len, uint64_t *size)
{
	size_t got = 0;
	char *p = NULL;
	int fd, r;

	*data = NULL;
	*len = 0;
	if ((r = files_open(u, work_fd, path, &fd, size)) < 0)
		return r;
	if (*size > max) {
		r = -EFBIG;
		goto out;
	}
	if (!(p = malloc(*size ? *size : 1))) {
		r = -ENOMEM;
		goto out;
	}
	while (got < *size) {
		ssize_t n = read(fd, p + got, *size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*data = p;
	*len = got;
	p = NULL;
	r = 0;
out:
	free(p);
	close(fd);
	return r;
}

static int refuse(json_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(json_t *f, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return json_object_set_new(f, "truncated", json_true()) ||
	       json_object_set_new(f, "reason", json_string(why)) ? -ENOMEM : 0;
}

int box_files_inline(struct box *b, json_t *files, const char *const *patterns,
		     size_t npatterns, uint64_t per_file, uint64_t total)
{
	uint64_t left = total;
	int work_fd = jail_work_fd(box_jail(b));
	struct files_user u;
	json_t *f;
	size_t i;

	jail_owner(box_jail(b), &u.uid, &u.gid);
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		uint64_t size = 0;
		size_t len, n64;
		char *data, *b64;
		int r;

		if (!path || !wanted(path, patterns, npatterns))
			continue;
		r = read_capped(&u, work_fd, path, per_file < left ? per_file : left, &data, &len,
				&size);
		if (r == -ENOMEM)
			return r;
		if (r == -EFBIG && size > per_file)
			r = refuse(f, "the file is larger than max_return_file_kb (%llu KiB)",
				   (unsigned long long)(per_file >> 10));
		else if (r == -EFBIG)
			r = refuse(f, "the files returned would be larger than "
				   "max_return_files_mb (%llu MiB) together",
				   (unsigned long long)(total >> 20));
		else if (r < 0)
			r = refuse(f, "cannot read the file: %s", strerror(-r));
		if (r < 0)
			return r;
		if (!data)
			continue;
		left -= len;
		b64 = base64_encode(data, len, &n64);
		free(data);
		if (!b64 || json_object_set_new(f, "content_base64", json_stringn(b64, n64)) ||
		    json_object_set_new(f, "truncated", json_false())) {
			free(b64);
			return -ENOMEM;
		}
		free(b64);
	}
	return 0;
}

/* ---- test reports ------------------------------------------------------ */

#define SNIFF_BYTES 4096	/* of a file too large to read: is it a report? */

static bool xml_name(const char *path)
{
	size_t n = strlen(path);

	return n >= 4 && !strcasecmp(path + n - 4, ".xml");
}

/* Does the file at path (too large to read whole) start as a report does? */
static bool head_is_report(const struct files_user *u, int work_fd, const char *path)
{
	char head[SNIFF_BYTES];
	uint64_t size;
	size_t got = 0;
	int fd;

	if (files_open(u, work_fd, path, &fd, &size) < 0)
		return false;
	while (got < sizeof(head)) {
		ssize_t n = read(fd, head + got, sizeof(head) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return junit_sniff(head, got);
}

/* err[errlen] = the sentence, valid UTF-8 (a path the sandbox named may
 * not be), cut on a character boundary. */
static void say(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
	struct buf raw = BUF_INIT, clean = BUF_INIT;
	size_t n = 0;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vappendf(&raw, fmt, ap);
	va_end(ap);
	if (r == 0 && utf8_sanitize(&clean, raw.data, raw.len) == 0 && clean.data) {
		n = clean.len < errlen ? clean.len : utf8_cut(clean.data, errlen - 1);
		memcpy(err, clean.data, n);
	}
	err[n] = '\0';
	buf_release(&raw);
	buf_release(&clean);
}

/* Read the report at path into j, at most *left bytes (which it takes
 * from): 0, -ENOMSG when it is not one and was not asked for (nothing to
 * say), -ENOMEM, or another -errno with why in err. */
static int read_report(const struct files_user *u, int work_fd, const char *path,
		       bool asked, uint64_t *left, struct junit *j, char *err, size_t errlen)
{
	uint64_t size = 0, max = *left < JUNIT_FILE_MAX ? *left : JUNIT_FILE_MAX;
	char why[256];
	size_t len;
	char *data;
	int r;

	r = read_capped(u, work_fd, path, max, &data, &len, &size);
	if (r == -EFBIG && !asked && !head_is_report(u, work_fd, path))
		return -ENOMSG;
	if (r == -EFBIG && size > JUNIT_FILE_MAX) {
		say(err, errlen, "'%.300s' is larger than the %u MiB petri reads of a test "
		    "report", path, JUNIT_FILE_MAX >> 20);
		return r;
	}
	if (r == -EFBIG) {
		say(err, errlen, "'%.300s' was not read: the reports of one execution are read "
		    "up to %u MiB together", path, JUNIT_BYTES_MAX >> 20);
		return r;
	}
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (!asked)
			return -ENOMSG;
		say(err, errlen, "cannot read the test report '%.300s': %s", path, strerror(-r));
		return r;
	}
	*left -= len;
	r = junit_parse(j, data, len, why, sizeof(why));
	free(data);
	if (r == -ENOMSG && asked)
		say(err, errlen, "'%.300s' is not a JUnit XML report: %s", path, why);
	else if (r == -EINVAL)
		say(err, errlen, "'%.300s' is not a valid JUnit XML report: %s", path, why);
	return r == -ENOMSG && asked ? -EINVAL : r;
}

int box_read_tests(struct box *b, const char *path, struct result *res)
{
	int work_fd = jail_work_fd(box_jail(b));
	json_t *reports = json_array(), *tests = NULL, *f;
	char err[1024] = "", why[1024];
	uint64_t left = JUNIT_BYTES_MAX;
	struct files_user u;
	struct junit j;
	size_t i, tried = 0;
	int r = -ENOMEM;

	if (!reports || junit_init(&j) < 0) {
		json_decref(reports);
		return -ENOMEM;
	}
	jail_owner(box_jail(b), &u.uid, &u.gid);
	if (path) {
		r = read_report(&u, work_fd, path, true, &left, &j, err, sizeof(err));
		if (r == -ENOMEM || (r == 0 && json_array_append_new(reports, json_string(path))))
			goto out;
	} else {
		json_array_foreach(res->files, i, f) {
			const char *p = json_string_value(json_object_get(f, "path"));

			if (!p || !xml_name(p))
				continue;
			if (tried++ == JUNIT_FILES_MAX)
				break;
			why[0] = '\0';
			r = read_report(&u, work_fd, p, false, &left, &j, why, sizeof(why));
			if (r == -ENOMEM || (r == 0 && json_array_append_new(reports, json_string(p))))
				goto out;
			/* The first broken report is named. */
			if (r < 0 && why[0] && !err[0])
				snprintf(err, sizeof(err), "%s", why);
		}
	}
	r = 0;
	if (!json_array_size(reports) && !err[0])
		goto out;	/* nothing asked for, nothing found */
	tests = json_array_size(reports) ? junit_to_json(&j) : json_object();
	if (!tests || json_object_set(tests, "reports", reports) ||
	    (err[0] && json_object_set_new(tests, "error", json_string(err)))) {
		r = -ENOMEM;
		goto out;
	}
	json_decref(res->tests);
	res->tests = tests;
	tests = NULL;
out:
	json_decref(tests);
	json_decref(reports);
	junit_release(&j);
	return r;
}
