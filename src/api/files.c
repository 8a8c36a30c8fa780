/* /v1/sessions/{id}/files: upload, download, list, delete.  Paths are
 * checked here for a clear 400, then resolved inside the sandbox's /work by
 * src/runtime/files.c (openat2, RESOLVE_IN_ROOT). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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
	case -ECHILD:
	case -EPIPE:
		return http_error(rq, 500, "internal", "the upload's writer failed");
	case -ENOTEMPTY:
		return http_error(rq, 409, "directory_not_empty", "'%.300s' is a directory that "
				  "is not empty", path);
	case -ENAMETOOLONG:
		return http_error(rq, 400, "invalid_path", "the path is too long");
	default:
		return http_error(rq, 500, "internal", "'%.300s': %s", path, strerror(-err));
	}
}

static struct files_user user_of(struct session *s)
{
	struct files_user u;

	session_file_owner(s, &u.uid, &u.gid);
	return u;
}

static enum MHD_Result download(struct api_req *rq, struct session *s, const char *path)
{
	struct files_user u = user_of(s);
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
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	r = MHD_queue_response(rq->conn, 200, resp);
	MHD_destroy_response(resp);
	session_touch(s);
	return (enum MHD_Result)r;
}

/* ---- streamed uploads ---------------------------------------------------
 *
 * The body of PUT /v1/sessions/{id}/files/{path} is never held whole: on
 * the request's first call (server.c) files_upload_start() begins a session
 * upload, and each chunk libmicrohttpd delivers goes straight to the
 * session's writer (session_upload_write(), which blocks while the sandbox
 * is behind).  What the daemon holds per upload is a constant: MHD's read
 * buffer and one socket buffer.  When the upload cannot start (no such
 * session, a bad path) the body is read and dropped, and the route answers
 * as for any other request; when it fails half-way, the rest is dropped and
 * the answer says why.  The old file is replaced only by a complete body. */

struct api_upload {
	struct session_upload *up;	/* NULL: the body is dropped */
	struct petri_limits limits;	/* the session's, for the messages */
	int err;			/* why the upload failed; 0 */
	uint64_t size;
	bool too_large;
};

/* "/v1/sessions/<id>/files/<path>": the id and the path, else NULL. */
static const char *upload_target(const char *url, char id[SESSION_ID_LEN + 1])
{
	const char *p = url + 13, *slash;

	if (strncmp(url, "/v1/sessions/", 13) || !(slash = strchr(p, '/')) ||
	    slash == p || (size_t)(slash - p) > SESSION_ID_LEN || strncmp(slash, "/files/", 7) ||
	    !slash[7])
		return NULL;
	memcpy(id, p, (size_t)(slash - p));
	id[slash - p] = '\0';
	return slash + 7;
}

bool files_upload_wanted(const struct api_req *rq)
{
	char id[SESSION_ID_LEN + 1];

	return !strcmp(rq->method, "PUT") && upload_target(rq->url, id);
}

static void upload_stop(struct api_upload *up)
{
	if (up->up)
		session_upload_finish(up->up, false);
	up->up = NULL;
}

enum MHD_Result files_upload_start(struct api_req *rq)
{
	const char *cl = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Content-Length");
	char id[SESSION_ID_LEN + 1], why[160];
	const char *path = upload_target(rq->url, id);
	struct api_upload *up;
	struct session *s;

	if (cl && strtoull(cl, NULL, 10) > rq->cfg->max_file_bytes)
		return http_error(rq, 413, "too_large", "the file is larger than the %llu MiB "
				  "upload limit", (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	up = calloc(1, sizeof(*up));
	if (!up)
		return MHD_NO;
	rq->upload = up;
	if (!path || files_check_path(path, false, why, sizeof(why)) < 0 ||
	    smgr_lookup(rq->sm, id, &s, why, sizeof(why)) < 0)
		return MHD_YES;
	up->limits = *session_limits(s);
	up->err = session_upload_begin(rq->sm, s, path, &up->up);
	session_put(s);
	return MHD_YES;
}

enum MHD_Result files_upload_chunk(struct api_req *rq, const char *data, size_t *size)
{
	struct api_upload *up = rq->upload;

	up->size += *size;
	if (up->size > rq->cfg->max_file_bytes) {
		up->too_large = true;
		upload_stop(up);
	}
	if (up->up && (up->err = session_upload_write(up->up, data, *size)) < 0)
		upload_stop(up);
	*size = 0;
	return MHD_YES;
}

void files_upload_end(struct api_req *rq)
{
	if (!rq->upload)
		return;
	upload_stop(rq->upload);
	free(rq->upload);
	rq->upload = NULL;
}

static enum MHD_Result upload(struct api_req *rq, const char *path)
{
	struct api_upload *up = rq->upload;
	int r;

	if (!up)
		return http_error(rq, 500, "internal", "the upload was not started");
	if (up->too_large)
		return http_error(rq, 413, "too_large", "the file is larger than the %llu MiB "
				  "upload limit", (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	r = up->err;
	if (!r && !up->up)	/* the session appeared between start and route */
		r = -EAGAIN;
	if (!r) {
		r = session_upload_finish(up->up, true);
		up->up = NULL;
	}
	switch (r) {
	case 0:
		return http_json(rq, 201, json_pack("{s:s, s:I}", "path", path, "size",
						    (json_int_t)up->size));
	case -ENOMEM:
	case SM_EGONE:
		return http_error(rq, 413, "out_of_memory", "the file does not fit in the "
				  "session's memory limit (%u MiB, which /work counts against): %s",
				  up->limits.memory_mb, r == SM_EGONE ? "the session ran out of "
				  "memory and was ended" : "the upload was refused");
	case -EAGAIN:
		return http_error(rq, 409, "too_many_processes", "the session is at its process "
				  "limit (%u): an upload needs one process of it", up->limits.pids);
	default:
		return file_error(rq, r, path);
	}
}

enum MHD_Result handle_files(struct api_req *rq, struct session *s, const char *path,
			     bool is_list)
{
	const char *m = rq->method;
	struct files_user u = user_of(s);
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
		return upload(rq, path);
	if (!strcmp(m, "DELETE")) {
		int r = files_delete(&u, session_work_fd(s), path);

		if (r < 0)
			return file_error(rq, r, path);
		session_touch(s);
		return http_empty(rq, 204);
	}
	return http_not_allowed(rq, "GET, PUT, DELETE");
}
