#include "workspace/ws.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum ws_result ws_result_of(int err)
{
	switch (err) {
	case 0:			return WS_OK;
	case -ENOENT:		return WS_NOT_FOUND;
	case -EEXIST:		return WS_EXISTS;
	case -EISDIR:		return WS_IS_DIR;
	case -ENOTDIR:		return WS_NOT_DIR;
	case -ELOOP:		return WS_SYMLINK;
	case -EXDEV:		return WS_LEAVES;
	case -EROFS:		return WS_SYSTEM;
	case -EINVAL:
	case -ENXIO:		return WS_NOT_REGULAR;
	case -ENOTEMPTY:	return WS_NOT_EMPTY;
	case -ENAMETOOLONG:	return WS_TOO_LONG;
	case -EACCES:
	case -EPERM:		return WS_DENIED;
	case -E2BIG:		return WS_TOO_MANY;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:		return WS_FULL;
	case -ENOMEM:		return WS_NO_MEMORY;
	case -EAGAIN:		return WS_NO_PROCESS;
	case -ETIMEDOUT:	return WS_STALLED;
	case FILES_ECHANGING:	return WS_CHANGING;
	case -ECHILD:
	case -EPIPE:		return WS_WRITER_FAILED;
	default:		return WS_FAILED;
	}
}

/* Each result's clause (ws_result_message) and the HTTP API's code for it. */
static const struct {
	const char *message, *code;
} results[WS_RESULTS] = {
	[WS_OK] = { "done", "internal" },
	[WS_BAD_PATH] = { "the path is not acceptable", "invalid_path" },
	[WS_ELSEWHERE] = { "it is outside the workspace", "invalid_path" },
	[WS_NOT_FOUND] = { "no such file or directory", "file_not_found" },
	[WS_EXISTS] = { "it exists already", "internal" },
	[WS_IS_DIR] = { "it is a directory", "is_a_directory" },
	[WS_NOT_DIR] = { "a component of the path is not a directory", "not_a_directory" },
	[WS_SYMLINK] = { "it is a symbolic link, which is not followed", "invalid_path" },
	[WS_LEAVES] = { "it leads outside the filesystem it is on", "invalid_path" },
	[WS_SYSTEM] = { "it is not on a filesystem of the sandbox's own (/work, /tmp, /dev/shm): "
			"the rest are the system's, read-only, for commands to read",
			"invalid_path" },
	[WS_NOT_REGULAR] = { "it is not a regular file", "not_a_regular_file" },
	[WS_NOT_EMPTY] = { "it is a directory that is not empty", "directory_not_empty" },
	[WS_TOO_LONG] = { "the path is too long", "invalid_path" },
	[WS_DENIED] = { "permission denied (the sandbox's user may not do this)",
			"permission_denied" },
	[WS_TOO_MANY] = { "it holds more entries than one call takes", "internal" },
	[WS_FULL] = { "the sandbox's filesystem (/work, /tmp or /dev/shm) is full", "too_large" },
	[WS_NO_MEMORY] = { "it does not fit in the sandbox's memory limit, which /work counts "
			   "against", "internal" },
	[WS_NO_PROCESS] = { "the sandbox is at its process limit: writing a file needs one "
			    "process of it", "internal" },
	[WS_STALLED] = { "the sandbox took no byte of the file for too long: it is stopped or "
			 "starved", "internal" },
	[WS_CHANGING] = { "the workspace is changing too fast (renames or mounts in the "
			  "sandbox raced every lookup of the path); retry", "workspace_changing" },
	[WS_WRITER_FAILED] = { "the upload's writer failed", "internal" },
	[WS_FAILED] = { "the operation failed", "internal" },
};

const char *ws_result_message(enum ws_result r)
{
	return (unsigned)r < WS_RESULTS ? results[r].message : "unknown";
}

const char *ws_result_code(enum ws_result r)
{
	return (unsigned)r < WS_RESULTS ? results[r].code : "internal";
}

/* in names root itself ("/work"), or a path under it ("/work/x"): in's
 * part below root, else NULL. */
static const char *under(const char *in, const char *root)
{
	size_t n = strlen(root);

	if (strncmp(in, root, n) || (in[n] && in[n] != '/'))
		return NULL;
	return in[n] ? in + n + 1 : in + n;
}

/* ws_path() of an absolute path in, outside the front end's root: in as it
 * is, less a trailing slash, when its part below "/" is a path
 * files_check_path() takes ("/" alone too: no file of the session's). */
static enum ws_result anywhere(const char *in, unsigned flags, char rel[FILES_PATH_MAX + 1],
			       char *why, size_t whylen)
{
	size_t len = strlen(in);

	if ((flags & WS_PATH_SLASH) && len > 1 && in[len - 1] == '/')
		len--;
	if (len > FILES_PATH_MAX) {
		snprintf(why, whylen, "the path is longer than %d bytes", FILES_PATH_MAX);
		return WS_BAD_PATH;
	}
	if (len > 1 && in[1] == '/') {
		snprintf(why, whylen, "the path has an empty component");
		return WS_BAD_PATH;
	}
	memcpy(rel, in, len);
	rel[len] = '\0';
	if (len > 1 && files_check_path(rel + 1, false, why, whylen) < 0) {
		rel[0] = '\0';
		return WS_BAD_PATH;
	}
	return WS_OK;
}

enum ws_result ws_path(const char *in, const char *root, unsigned flags,
		       char rel[FILES_PATH_MAX + 1], char *why, size_t whylen)
{
	const char *p = in;
	size_t len;

	rel[0] = '\0';
	if (root && (p = under(in, root)) == NULL) {
		p = in;
		if (!strcmp(p, "."))
			p = "";
		else if (!strncmp(p, "./", 2))
			p += 2;
		else if (p[0] == '/' && (flags & WS_PATH_ANYWHERE))
			return anywhere(in, flags, rel, why, whylen);
		else if (p[0] == '/') {
			snprintf(why, whylen, "only files under %s can be reached: give a path "
				 "relative to %s or starting with %s/", root, root, root);
			return WS_ELSEWHERE;
		}
	}
	len = strlen(p);
	/* "dir/" names dir; "/" alone stays absolute, as the check says. */
	if ((flags & WS_PATH_SLASH) && len > 1 && p[len - 1] == '/')
		len--;
	if (len > FILES_PATH_MAX) {
		files_check_path(p, false, why, whylen);	/* it says how long */
		return WS_BAD_PATH;
	}
	memcpy(rel, p, len);
	rel[len] = '\0';
	if (files_check_path(rel, flags & WS_PATH_ROOT, why, whylen) < 0) {
		rel[0] = '\0';
		return WS_BAD_PATH;
	}
	return WS_OK;
}
