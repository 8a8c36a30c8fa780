/* /v1/sessions/{id}/files: upload, download, list, delete.  Paths are
 * checked here for a clear 400, then resolved inside the sandbox's /work by
 * src/runtime/files.c (openat2, RESOLVE_IN_ROOT). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/http.h"
#include "runtime/files.h"

static enum MHD_Result file_error(struct api_req *rq, int err, const char *path)
{
	switch (err) {
	case -ENOENT:
		return http_error(rq, 404, "file_not_found", "no such file: '%.300s'", path);
	case -EISDIR:
		if (!strcmp(rq->method, "GET"))
			return http_error(rq, 400, "is_a_directory", "'%.300s' is a directory; "
					  "list it with GET .../files?path=%.300s", path, path);
		return http_error(rq, 400, "is_a_directory", "'%.300s' is a directory", path);
	case -ENOTDIR:
		if (strstr(rq->url, "/files/") == NULL)	/* a listing */
			return http_error(rq, 400, "not_a_directory", "'%.300s' is not a directory",
					  path);
		return http_error(rq, 400, "not_a_directory", "a component of '%.300s' is not a "
				  "directory", path);
	case -ELOOP:
		return http_error(rq, 400, "invalid_path", "'%.300s' is a symbolic link, which "
				  "is not written through", path);
	case -EXDEV:
		return http_error(rq, 400, "invalid_path", "'%.300s' leads outside /work", path);
	case -EINVAL:
	case -ENXIO:
		return http_error(rq, 400, "not_a_regular_file", "'%.300s' is not a regular file "
				  "(FIFOs, sockets and devices are refused)", path);
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		return http_error(rq, 413, "too_large", "the session's workspace is full");
	case -ENOTEMPTY:
		return http_error(rq, 409, "directory_not_empty", "'%.300s' is a directory that "
				  "is not empty", path);
	case -ENAMETOOLONG:
		return http_error(rq, 400, "invalid_path", "the path is too long");
	default:
		return http_error(rq, 500, "internal", "'%.300s': %s", path, strerror(-err));
	}
}

static struct files_user user_of(struct api_req *rq)
{
	struct files_user u;

	session_file_owner(rq->sm, &u.uid, &u.gid);
	return u;
}

static enum MHD_Result download(struct api_req *rq, struct session *s, const char *path)
{
	struct files_user u = user_of(rq);
	struct MHD_Response *resp;
	uint64_t size;
	int fd, r;

	if ((r = files_open(&u, session_work_fd(s), path, &fd, &size)) < 0)
		return file_error(rq, r, path);
	if (size > rq->cfg->max_file_bytes) {
		close(fd);
		return http_error(rq, 413, "too_large", "'%.300s' is larger than the %llu MiB "
				  "download limit", path,
				  (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	}
	/* MHD owns fd from here and closes it. */
	resp = MHD_create_response_from_fd(size, fd);
	if (!resp) {
		close(fd);
		return http_error(rq, 500, "internal", "cannot send the file");
	}
	MHD_add_response_header(resp, "Content-Type", files_content_type(path));
	/* Code wrote it: never let a browser run it in our origin. */
	MHD_add_response_header(resp, "Content-Security-Policy", "sandbox");
	session_touch(s);
	return http_queue(rq, 200, resp);
}

static enum MHD_Result upload(struct api_req *rq, struct session *s, const char *path)
{
	struct files_user u = user_of(rq);
	int r;

	if (rq->body.len > rq->cfg->max_file_bytes)
		return http_error(rq, 413, "too_large", "the file is larger than the %llu MiB "
				  "upload limit", (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	r = files_write(&u, session_work_fd(s), path, rq->body.data ? rq->body.data : "",
			rq->body.len);
	session_note_write(s);
	if (r < 0)
		return file_error(rq, r, path);
	session_touch(s);
	return http_json(rq, 201, json_pack("{s:s, s:I}", "path", path, "size",
					    (json_int_t)rq->body.len));
}

enum MHD_Result handle_files(struct api_req *rq, struct session *s, const char *path,
			     bool is_list)
{
	const char *m = rq->method;
	struct files_user u = user_of(rq);
	char why[160];

	if (is_list) {
		const char *dir = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "path");
		json_t *list;
		bool truncated;
		int r;

		if (strcmp(m, "GET"))
			return http_not_allowed(rq, "GET");
		if (!dir)
			dir = "";
		if (files_check_path(dir, true, why, sizeof(why)) < 0)
			return http_error(rq, 400, "invalid_path", "%s", why);
		if ((r = files_list(&u, session_work_fd(s), dir, &list, &truncated)) < 0)
			return file_error(rq, r, dir);
		session_touch(s);
		return http_json(rq, 200, json_pack("{s:s, s:o, s:b}", "path", dir, "files", list,
						    "truncated", truncated));
	}
	if (files_check_path(path, false, why, sizeof(why)) < 0)
		return http_error(rq, 400, "invalid_path", "%s", why);
	if (!strcmp(m, "GET"))
		return download(rq, s, path);
	if (!strcmp(m, "PUT"))
		return upload(rq, s, path);
	if (!strcmp(m, "DELETE")) {
		int r = files_delete(&u, session_work_fd(s), path);

		if (r < 0)
			return file_error(rq, r, path);
		session_touch(s);
		return http_empty(rq, 204);
	}
	return http_not_allowed(rq, "GET, PUT, DELETE");
}
