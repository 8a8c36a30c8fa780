/* E2B's envd (port 49983) over a petri session: files (REST), the
 * filesystem RPCs and Process.Start (Connect, JSON), as the SDKs call
 * them (docs/e2b.md; the wire is in e2b.h's terms).
 *
 *   GET  /health                         204
 *   GET  /files?path=                    the file's bytes, streamed
 *   POST /files[?path=]                  multipart/form-data, parts "file"
 *   POST /filesystem.Filesystem/<M>      Stat, ListDir, MakeDir, Remove, Move
 *   POST /process.Process/Start          a command, streamed as Connect events
 *
 * Paths are /home/user/... or relative to it: the workspace, /work inside
 * the sandbox; anything else is refused (403, permission_denied), and every
 * path goes through the session's workspace (session/workspace.h), which
 * resolves it as the sandbox's user inside /work whatever symlinks the code
 * planted.  Uploads are written by
 * a writer charged to the sandbox (files_put).  A command is a bash
 * execution of the session: one at a time, like every execution (a second
 * is refused in the stream, resource_exhausted "busy: ..."). */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b.h"
#include "session/workspace.h"
#include "util/base64.h"
#include "util/jsoncost.h"
#include "util/num.h"
#include "util/timefmt.h"
#include "util/multipart.h"

#define PARTS_MAX	100		/* files in one upload */
#define LIST_DEPTH_MAX	32		/* ListDir's depth */
#define REMOVE_MAX	100000		/* entries Remove takes in one tree */
#define ARGS_MAX	256		/* a command's arguments */
#define CWD_MAX		1024		/* bytes of a command's cwd */
#define ENVELOPE_HDR	5		/* Connect: a flag byte, a 32-bit BE length */
#define END_STREAM	0x02		/* the flag of a stream's last envelope */
/* A command ends this much before the client's deadline (a tenth of it,
 * within these; at most half of it): stopping one takes a few hundred ms. */
#define MARGIN_MIN_S	0.5
#define MARGIN_MAX_S	1.0

/* A Process.Start request is a command, its arguments and variables:
 * REQUEST_ENV_MAX and ARGS_MAX of them fit in well under this. */
static const struct jsoncost_limits start_cost = { .max_nodes = 2000, .max_depth = 8 };

static const char *header(struct api_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

static const char *query(struct api_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

static bool content_type_is(struct api_req *rq, const char *type)
{
	const char *ct = header(rq, "Content-Type");
	size_t n = strlen(type);

	return ct && !strncasecmp(ct, type, n) && (ct[n] == '\0' || ct[n] == ';');
}

/* ---- errors ------------------------------------------------------------- */

/* A failure in each of the wire's words: an HTTP status for the REST
 * routes, a Connect code (and its status) for the RPCs, and a sentence. */
struct fail {
	unsigned status;	/* REST */
	unsigned rpc_status;	/* Connect unary */
	const char *code;	/* Connect */
	char message[512];
};

static void fail_vset(struct fail *f, unsigned status, const char *code, unsigned rpc_status,
		      const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static void fail_vset(struct fail *f, unsigned status, const char *code, unsigned rpc_status,
		      const char *fmt, va_list ap)
{
	f->status = status;
	f->code = code;
	f->rpc_status = rpc_status;
	vsnprintf(f->message, sizeof(f->message), fmt, ap);
}

static void fail_set(struct fail *f, unsigned status, const char *code, unsigned rpc_status,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void fail_set(struct fail *f, unsigned status, const char *code, unsigned rpc_status,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fail_vset(f, status, code, rpc_status, fmt, ap);
	va_end(ap);
}

/* envd's words for a workspace result (workspace/ws.h): the REST status, the
 * Connect code and status, the sentence; the rest are 500, internal. */
static const struct http_ws_words words[WS_RESULTS] = {
	[WS_NOT_FOUND] = { 404, 404, "not_found", .after = " does not exist" },
	[WS_EXISTS] = { 409, 409, "already_exists", .after = " exists already" },
	[WS_IS_DIR] = { 400, 400, "invalid_argument", .after = " is a directory" },
	[WS_NOT_DIR] = { 400, 400, "invalid_argument", .after = " or one of its parents is not "
			 "a directory" },
	[WS_NOT_REGULAR] = { 400, 400, "invalid_argument", .after = " is not a regular file, or "
			     "the operation makes no sense for it (FIFOs, sockets and devices "
			     "are refused; a directory cannot move into itself)" },
	[WS_SYMLINK] = { 400, 400, "invalid_argument", .after = " goes through too many "
			 "symbolic links, or a link where none is followed" },
	[WS_LEAVES] = { 400, 400, "invalid_argument", .after = " leads out of the filesystem it "
			"is on" },
	[WS_SYSTEM] = { 403, 403, "permission_denied", .after = " is not on a filesystem of the "
			"sandbox's own (" E2B_HOME ", /tmp, /dev/shm), the only ones the file API "
			"reaches: the rest are the system's, read-only (a command can read them)" },
	[WS_TOO_LONG] = { 400, 400, "invalid_argument", .before = "the path is too long",
			  .about = HTTP_ABOUT_NOTHING },
	[WS_NOT_EMPTY] = { 400, 400, "invalid_argument", .after = " is a directory that is not "
			   "empty" },
	[WS_DENIED] = { 403, 403, "permission_denied", .after = ": permission denied (the "
			"sandbox's user may not do this)" },
	[WS_TOO_MANY] = { 400, 400, "failed_precondition", .after = " holds more than petri "
			  "takes in one call (" NUM_TEXT(FILES_LIST_MAX) " entries listed, "
			  NUM_TEXT(REMOVE_MAX) " removed, " NUM_TEXT(FILES_TREE_DEPTH)
			  " levels deep)" },
	[WS_FULL] = { 507, 429, "resource_exhausted", .before = "the sandbox's filesystem is "
		      "full (" E2B_HOME " holds ", .after = " MiB; /tmp its own limit)",
		      .about = HTTP_ABOUT_DISK },
	[WS_NO_MEMORY] = { 507, 429, "resource_exhausted", .before = "the file does not fit in "
			   "the sandbox's memory limit (", .after = " MiB, which " E2B_HOME
			   " counts against)", .about = HTTP_ABOUT_MEMORY },
	[WS_NO_PROCESS] = { 429, 429, "resource_exhausted", .before = "the sandbox is at its "
			    "process limit (", .after = "): writing a file needs one process of "
			    "it", .about = HTTP_ABOUT_PIDS },
	[WS_STALLED] = { 503, 503, "unavailable", .before = "the sandbox took no byte of the "
			 "file for too long: it is stopped or starved", .about = HTTP_ABOUT_NOTHING },
	[WS_CHANGING] = { 503, 409, "aborted", .before = "the workspace is changing too fast to "
			  "look up ", .after = " safely; retry" },
};

/* What a workspace error (-errno, session/workspace.h) means for path (as
 * the SDK named it). */
static void fail_errno(struct fail *f, struct session *s, int err, const char *path)
{
	const struct http_ws_words *w = &words[ws_result_of(err)];

	f->status = http_ws_sentence(w, err, path, session_limits(s), f->message,
				     sizeof(f->message));
	f->code = w->code ? w->code : "internal";
	f->rpc_status = w->status ? w->rpc_status : 500;
}

static enum MHD_Result rest_fail(struct api_req *rq, const struct fail *f)
{
	return e2b_error(rq, f->status, "%s", f->message);
}

/* A unary RPC's error: non-200, JSON, {"code", "message"}. */
static enum MHD_Result rpc_fail(struct api_req *rq, const struct fail *f)
{
	return http_json(rq, f->rpc_status, json_pack("{s:s, s:o}", "code", f->code, "message",
						      http_string(f->message)));
}

static enum MHD_Result rpc_error(struct api_req *rq, unsigned status, const char *code,
				 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result rpc_error(struct api_req *rq, unsigned status, const char *code,
				 const char *fmt, ...)
{
	struct fail f;
	va_list ap;

	va_start(ap, fmt);
	fail_vset(&f, 0, code, status, fmt, ap);
	va_end(ap);
	return rpc_fail(rq, &f);
}

/* A path the SDK sent into rel (relative to /work, or absolute on another
 * of the sandbox's filesystems: session/workspace.h); false with f set,
 * before anything is done, for a path on none of them too. */
static bool sdk_to_rel(struct session *s, const char *in, bool allow_empty,
		       char rel[FILES_PATH_MAX + 1], struct fail *f)
{
	const char *below;
	enum ws_result r;
	char why[160];

	if (!in) {
		fail_set(f, 400, "invalid_argument", 400, "a path is required");
		return false;
	}
	r = ws_path(in, E2B_HOME, (allow_empty ? WS_PATH_ROOT : 0) | WS_PATH_SLASH |
		    WS_PATH_ANYWHERE, rel, why, sizeof(why));
	if (r != WS_OK) {
		fail_set(f, 400, "invalid_argument", 400, "'%.300s': %s", in, why);
		return false;
	}
	if (session_file_at(s, rel, &below) < 0) {
		fail_errno(f, s, -EROFS, in);
		return false;
	}
	return true;
}

/* ---- files (REST) ------------------------------------------------------- */

static enum MHD_Result download(struct api_req *rq, struct session *s)
{
	const char *path = query(rq, "path");
	char rel[FILES_PATH_MAX + 1];
	enum MHD_Result queued;
	struct fail f;
	int r;

	if (!sdk_to_rel(s, path, false, rel, &f))
		return rest_fail(rq, &f);
	if ((r = files_send(rq, s, rel, &queued)) == 0)
		return queued;
	if (r == -EFBIG)
		return e2b_error(rq, 413, "'%.300s' is larger than the %llu MiB download limit",
				 path, (unsigned long long)(rq->cfg->max_file_bytes >> 20));
	fail_errno(&f, s, r, path);
	return rest_fail(rq, &f);
}

struct upload {
	struct api_req *rq;
	struct session *s;
	const char *path;	/* the query's, or NULL: each part's filename */
	bool write;		/* false: only check every part's path */
	json_t *written;
	struct fail f;
};

static int upload_part(void *ctx, const struct multipart_part *p)
{
	struct upload *up = ctx;
	const char *target = up->path ? up->path : p->has_filename ? p->filename : NULL;
	char rel[FILES_PATH_MAX + 1], shown[FILES_PATH_MAX + 16];
	const char *base;
	bool ended;
	int r;

	if (strcmp(p->name, "file"))
		return 0;	/* envd reads only "file" */
	if (!target || !*target) {
		fail_set(&up->f, 400, NULL, 0, "a part has no filename, and the request no "
			 "'path' to write it to");
		return -EINVAL;
	}
	if (!sdk_to_rel(up->s, target, false, rel, &up->f))
		return -EINVAL;
	if (!up->write)
		return 0;
	if ((r = files_put(up->rq, up->s, rel, p->data, p->len, &ended)) < 0) {
		fail_errno(&up->f, up->s, r, target);
		if (ended)
			snprintf(up->f.message, sizeof(up->f.message), "the sandbox ran out of "
				 "memory writing '%.300s' (%u MiB, which " E2B_HOME " counts "
				 "against) and was ended", target, session_limits(up->s)->memory_mb);
		return r;
	}
	e2b_sdk_path(rel, shown, sizeof(shown));
	base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	if (json_array_append_new(up->written, json_pack("{s:s, s:s, s:s}", "name", base, "type",
							 "file", "path", shown)) < 0) {
		fail_set(&up->f, 500, NULL, 0, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static enum MHD_Result upload(struct api_req *rq, struct session *s)
{
	struct upload up = { .rq = rq, .s = s, .path = query(rq, "path") };
	char boundary[MULTIPART_BOUNDARY_MAX + 1], why[160] = "";
	enum MHD_Result answered;
	int r;

	if (multipart_boundary(header(rq, "Content-Type"), boundary) < 0)
		return e2b_error(rq, 400, "an upload is multipart/form-data with a boundary, "
				 "its files in parts named 'file' (petri's envd is %s: no "
				 "octet-stream uploads)", E2B_ENVD_VERSION);
	if (!(up.written = json_array()))
		return e2b_error(rq, 500, "out of memory");
	/* Every part's path is checked before the first is written: a bad
	 * one writes nothing. */
	r = multipart_parse(rq->body.data ? rq->body.data : "", rq->body.len, boundary,
			    PARTS_MAX, upload_part, &up, why, sizeof(why));
	if (r == 0) {
		up.write = true;
		r = multipart_parse(rq->body.data, rq->body.len, boundary, PARTS_MAX,
				    upload_part, &up, why, sizeof(why));
	}
	if (r < 0 && up.f.status)
		answered = rest_fail(rq, &up.f);
	else if (r < 0)
		answered = e2b_error(rq, 400, "the multipart body is malformed: %s", why);
	else if (json_array_size(up.written) == 0)
		answered = e2b_error(rq, 400, "the upload has no part named 'file'");
	else
		answered = http_json(rq, 200, json_incref(up.written));
	json_decref(up.written);
	return answered;
}

/* ---- the filesystem (Connect, unary) ------------------------------------ */

/* "drwxr-xr-x", with Go's type letters (envd is Go: L for a link). */
static void permissions(mode_t m, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'L' : S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 'S' :
		 S_ISBLK(m) ? 'D' : S_ISCHR(m) ? 'c' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (m & (0400 >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

/* A link's target as envd gives it: absolute, a relative one taken from the
 * link's own directory (shown: the link as the SDK names it) with "." and
 * ".." resolved by name.  Nothing is followed: the target may not exist, and
 * may name a place the file calls cannot reach. */
static void absolute_target(const char *shown, const char *target, char *out, size_t len)
{
	const char *slash = strrchr(shown, '/'), *p, *end;
	size_t n = 0, dirlen = slash ? (size_t)(slash - shown) : 0;

	if (*target == '/') {
		snprintf(out, len, "%s", target);
		return;
	}
	for (int part = 0; part < 2; part++) {
		for (p = part ? target : shown, end = part ? p + strlen(p) : p + dirlen; p < end;) {
			const char *next = memchr(p, '/', (size_t)(end - p));
			size_t clen = (size_t)((next ? next : end) - p);

			if (clen == 2 && p[0] == '.' && p[1] == '.') {
				while (n > 0 && out[n - 1] != '/')
					n--;
				n -= n > 0;
			} else if (clen && !(clen == 1 && *p == '.') && n + 1 + clen < len) {
				out[n++] = '/';
				memcpy(out + n, p, clen);
				n += clen;
			}
			p += clen + (next != NULL);
		}
	}
	if (n == 0 && len > 1)
		out[n++] = '/';
	out[n] = '\0';
}

/* An EntryInfo, proto3 JSON (int64 size as a string). */
static json_t *entry_json(const struct session_entry *en)
{
	const char *rel = en->path, *target = en->target;
	const struct stat *st = en->st;
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : *rel ? rel : "user";
	char shown[FILES_PATH_MAX + 16], perms[11], size[24], when[TIMEFMT_LEN], id[16];
	char link[2 * FILES_PATH_MAX + 32];
	const char *type = S_ISREG(st->st_mode) ? "FILE_TYPE_FILE" :
			   S_ISDIR(st->st_mode) ? "FILE_TYPE_DIRECTORY" :
			   S_ISLNK(st->st_mode) ? "FILE_TYPE_SYMLINK" : NULL;
	json_t *e;

	/* Names come from the sandbox: not always UTF-8. */
	e2b_sdk_path(rel, shown, sizeof(shown));
	permissions(st->st_mode, perms);
	snprintf(size, sizeof(size), "%lld", (long long)st->st_size);
	timefmt_rfc3339((double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9, when);
	e = json_pack("{s:o, s:o, s:s, s:i, s:s, s:s}", "name", http_string(base), "path",
		      http_string(shown), "size", size, "mode", (int)(st->st_mode & 07777),
		      "permissions", perms, "modifiedTime", when);
	if (!e)
		return NULL;
	/* Files in /work belong to the sandbox's user, "user" to the SDK. */
	snprintf(id, sizeof(id), "%u", (unsigned)st->st_uid);
	json_object_set_new(e, "owner", json_string(en->user_uid ? "user" : id));
	snprintf(id, sizeof(id), "%u", (unsigned)st->st_gid);
	json_object_set_new(e, "group", json_string(en->user_gid ? "user" : id));
	if (type)	/* unspecified: proto3 leaves it out, list() skips it */
		json_object_set_new(e, "type", json_string(type));
	if (S_ISLNK(st->st_mode)) {
		absolute_target(shown, target, link, sizeof(link));
		json_object_set_new(e, "symlinkTarget", http_string(link));
	}
	return e;
}

static int stat_one(void *ctx, const struct session_entry *en)
{
	json_t **e = ctx;

	return (*e = entry_json(en)) ? 0 : -ENOMEM;
}

static json_t *stat_json(struct session *s, const char *rel, int *err)
{
	json_t *e = NULL;

	*err = session_file_stat(s, rel, stat_one, &e);
	return e;
}

static int list_one(void *ctx, const struct session_entry *en)
{
	return json_array_append_new(ctx, entry_json(en)) < 0 ? -ENOMEM : 0;
}

/* The request's string field key as a work path; false with f set. */
static bool path_arg(struct session *s, json_t *req, const char *key, bool allow_empty,
		     char rel[FILES_PATH_MAX + 1], struct fail *f)
{
	json_t *v = json_object_get(req, key);

	if (v && !json_is_string(v)) {
		fail_set(f, 400, "invalid_argument", 400, "'%s' must be a string", key);
		return false;
	}
	/* proto3 leaves out an empty string: absent is "". */
	return sdk_to_rel(s, v ? json_string_value(v) : "", allow_empty, rel, f);
}

static enum MHD_Result filesystem(struct api_req *rq, struct session *s, const char *method,
				  json_t *req)
{
	char rel[FILES_PATH_MAX + 1], to[FILES_PATH_MAX + 1];
	int r = 0;
	const char *shown = json_string_value(json_object_get(req, "path"));
	json_t *entry = NULL, *answer = NULL;
	struct fail f;

	if (!shown)
		shown = E2B_HOME;
	if (!strcmp(method, "Stat")) {
		if (!path_arg(s, req, "path", true, rel, &f))
			return rpc_fail(rq, &f);
		if ((entry = stat_json(s, rel, &r)))
			answer = json_pack("{s:o}", "entry", entry);
	} else if (!strcmp(method, "ListDir")) {
		json_t *d = json_object_get(req, "depth");
		json_t *entries = json_array();
		json_int_t depth = d ? json_integer_value(d) : 1;

		uint32_t v;

		if (d && !json_is_integer(d))	/* uint32: a number (or a string of one) */
			depth = json_is_string(d) && num_u32(json_string_value(d), 0,
							     LIST_DEPTH_MAX, &v) ? (json_int_t)v : -1;
		if (depth == 0)
			depth = 1;
		if (depth < 1 || depth > LIST_DEPTH_MAX) {
			json_decref(entries);
			return rpc_error(rq, 400, "invalid_argument", "'depth' must be from 1 to %d",
					 LIST_DEPTH_MAX);
		}
		if (!path_arg(s, req, "path", true, rel, &f)) {
			json_decref(entries);
			return rpc_fail(rq, &f);
		}
		r = entries ? session_file_walk(s, rel, (unsigned)depth, FILES_LIST_MAX, list_one,
						entries) : -ENOMEM;
		if (r == 0)
			answer = json_pack("{s:o}", "entries", entries);
		else
			json_decref(entries);
	} else if (!strcmp(method, "MakeDir")) {
		if (!path_arg(s, req, "path", false, rel, &f))
			return rpc_fail(rq, &f);
		if ((r = session_file_mkdir(s, rel)) == 0 && (entry = stat_json(s, rel, &r)))
			answer = json_pack("{s:o}", "entry", entry);
	} else if (!strcmp(method, "Remove")) {
		if (!path_arg(s, req, "path", false, rel, &f))
			return rpc_fail(rq, &f);
		/* As envd: what is not there is removed already. */
		if ((r = session_file_remove_tree(s, rel, REMOVE_MAX)) == 0 || r == -ENOENT) {
			r = 0;
			answer = json_object();
		}
	} else if (!strcmp(method, "Move")) {
		if (!path_arg(s, req, "source", false, rel, &f) ||
		    !path_arg(s, req, "destination", false, to, &f))
			return rpc_fail(rq, &f);
		shown = json_string_value(json_object_get(req, "source"));
		if ((r = session_file_rename(s, rel, to)) == 0 && (entry = stat_json(s, to, &r)))
			answer = json_pack("{s:o}", "entry", entry);
	} else if (!strcmp(method, "WatchDir") || !strcmp(method, "CreateWatcher") ||
		   !strcmp(method, "GetWatcherEvents") || !strcmp(method, "RemoveWatcher")) {
		return rpc_error(rq, 501, "unimplemented", "petri does not watch directories "
				 "(%s): list them instead", method);
	} else {
		return rpc_error(rq, 404, "unimplemented", "no method filesystem.Filesystem/%.64s",
				 method);
	}
	if (r < 0) {
		fail_errno(&f, s, r, shown);
		return rpc_fail(rq, &f);
	}
	if (!answer)
		return rpc_error(rq, 500, "internal", "out of memory");
	return http_json(rq, 200, answer);
}

/* ---- Process.Start (Connect, server streaming) -------------------------- */

/* One envelope: flags, the JSON's length (big-endian), the JSON (j is
 * consumed). */
static int envelope(struct buf *out, unsigned char flags, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t len = text ? strlen(text) : 0;
	unsigned char hdr[ENVELOPE_HDR] = { flags, (unsigned char)(len >> 24),
					    (unsigned char)(len >> 16), (unsigned char)(len >> 8),
					    (unsigned char)len };
	int r = -ENOMEM;

	if (text && buf_append(out, hdr, sizeof(hdr)) == 0)
		r = buf_append(out, text, len);
	json_decref(j);
	free(text);
	return r;
}

static json_t *event(const char *kind, json_t *body)
{
	return json_pack("{s:{s:o}}", "event", kind, body);
}

/* The stream's end: {} or {"error": {code, message}}. */
static int end_stream(struct buf *out, const char *code, const char *message)
{
	return envelope(out, END_STREAM, code ? json_pack("{s:{s:s, s:o}}", "error", "code",
							  code, "message", http_string(message)) :
						json_object());
}

/* A stream refused before it began: 200, only the end with its error (the
 * SDK reads a streaming call's errors there). */
static enum MHD_Result stream_fail(struct api_req *rq, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum MHD_Result stream_fail(struct api_req *rq, const char *code, const char *fmt, ...)
{
	struct buf out = BUF_INIT;
	enum MHD_Result r;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (end_stream(&out, code, msg) < 0) {
		buf_release(&out);
		return rpc_error(rq, 500, "internal", "out of memory");
	}
	r = http_text(rq, 200, "application/connect+json", out.data, out.len);
	buf_release(&out);
	return r;
}

struct process_state {
	unsigned pid;
	bool client_deadline;	/* the timeout is the client's (Connect-Timeout-Ms) */
};

static atomic_uint next_pid = 1000;

static int process_begin(void *state, struct buf *out)
{
	struct process_state *ps = state;

	/* A number for the SDK to name the command by; petri's commands have
	 * no pid the client could signal (SendSignal is unimplemented). */
	ps->pid = 1000 + atomic_fetch_add(&next_pid, 1) % 4000000000u;
	return envelope(out, 0, event("start", json_pack("{s:I}", "pid", (json_int_t)ps->pid)));
}

static int process_output(void *state, struct buf *out, enum exec_stream s, const char *data,
			  size_t len)
{
	char *b64 = base64_encode(data, len, NULL);
	int r;

	(void)state;
	if (!b64)
		return -ENOMEM;
	r = envelope(out, 0, event("data", json_pack("{s:s}", s == EXEC_STDOUT ? "stdout" :
						     "stderr", b64)));
	free(b64);
	return r;
}

static int process_stderr(struct buf *out, const char *text)
{
	return process_output(NULL, out, EXEC_STDERR, text, strlen(text));
}

static int process_rich(void *state, struct buf *out, const json_t *bundle, bool main)
{
	(void)state;
	(void)out;
	(void)bundle;
	(void)main;
	return -ENOTSUP;	/* bash has no rich results */
}

/* What the driver says went wrong; a non-zero exit and a signal are in the
 * end event already. */
static int process_error(void *state, struct buf *out, const json_t *error)
{
	const char *name = json_string_value(json_object_get(error, "name"));
	const char *msg = json_string_value(json_object_get(error, "message"));
	char line[600];

	(void)state;
	if (name && (!strcmp(name, "NonZeroExit") || !strcmp(name, "Signal")))
		return -ENOTSUP;
	snprintf(line, sizeof(line), "petri: %.64s: %.500s\n", name ? name : "error",
		 msg ? msg : "");
	return process_stderr(out, line);
}

static int process_dropped(void *state, struct buf *out, unsigned long long n)
{
	char line[200];

	(void)state;
	snprintf(line, sizeof(line), "\n[petri: %llu chunks of output were dropped here: the "
		 "client read too slowly]\n", n);
	return process_stderr(out, line);
}

static const char *signal_word(int sig)
{
	switch (sig) {	/* Go's words, as envd's status says them */
	case 1: return "hangup";
	case 2: return "interrupt";
	case 3: return "quit";
	case 4: return "illegal instruction";
	case 6: return "aborted";
	case 7: return "bus error";
	case 8: return "floating point exception";
	case 9: return "killed";
	case 11: return "segmentation fault";
	case 13: return "broken pipe";
	case 15: return "terminated";
	default: return NULL;
	}
}

/* A session's refusal in Connect's words: the code the SDK turns into the
 * right error (busy and full: RateLimitError, "try again later"; an ended
 * sandbox: TimeoutError) and the message. */
static void sm_connect_error(enum sm_result r, const char *reason, const char **code,
			     char *msg, size_t len)
{
	*code = r == SM_BUSY || r == SM_CAPACITY || r == SM_HOST_FULL || r == SM_KEY_SHARE ? "resource_exhausted" :
		r == SM_GONE || r == SM_NOT_FOUND || r == SM_STOPPING || r == SM_DRAINING ? "unavailable" :
		r == SM_INVALID ? "invalid_argument" : "internal";
	snprintf(msg, len, "%s%s", r == SM_BUSY ? "busy: " : "", http_sm_message(r, reason));
}

/* A command that cannot start (busy, ended): 200, and the stream's end
 * with the error, where the SDK reads it. */
static enum MHD_Result process_refuse(struct api_req *rq, enum sm_result r, const char *reason)
{
	const char *code;
	char msg[512];

	sm_connect_error(r, reason, &code, msg, sizeof(msg));
	return stream_fail(rq, code, "%s", msg);
}

/* The end event, then the end of the stream. */
static int process_done(void *state, struct buf *out, enum sm_result r, const char *reason,
			const struct result *res)
{
	const char *code;
	bool exited;
	char status[64], error[512];
	json_t *end;
	int rc;

	if (!res) {
		sm_connect_error(r, reason, &code, error, sizeof(error));
		return end_stream(out, code, error);
	}
	/* Stopped at the client's own deadline: what envd says then (the
	 * SDK's TimeoutError); a limit of petri's is the end event below. */
	if (res->status == RESULT_TIMEOUT && ((struct process_state *)state)->client_deadline)
		return end_stream(out, "deadline_exceeded", "the command ran past the request's "
				  "timeout (timeoutMs) and was killed");
	exited = res->has_exit_code && !res->signal &&
		 (res->status == RESULT_OK || res->status == RESULT_ERROR);
	if (exited) {
		snprintf(status, sizeof(status), "exit status %d", res->exit_code);
		snprintf(error, sizeof(error), "%s", status);
	} else {
		const char *w = signal_word(res->signal ? res->signal : 9);

		if (w)
			snprintf(status, sizeof(status), "signal: %s", w);
		else
			snprintf(status, sizeof(status), "signal: %d", res->signal);
		snprintf(error, sizeof(error), "%s%s%s%s", status, res->reason[0] ? " (" : "",
			 res->reason, res->reason[0] ? ")" : "");
	}
	end = json_pack("{s:i, s:b, s:s}", "exitCode", exited ? res->exit_code : -1, "exited",
			exited, "status", status);
	if (end && (!exited || res->exit_code != 0))
		json_object_set_new(end, "error", json_string(error));
	if ((rc = envelope(out, 0, event("end", end))) < 0)
		return rc;
	return end_stream(out, NULL, NULL);
}

#define KEEPALIVE_JSON "{\"event\":{\"keepalive\":{}}}"
_Static_assert(sizeof(KEEPALIVE_JSON) - 1 == 0x1a, "the keepalive envelope's length");

static const struct stream_wire process_wire = {
	.content_type = "application/connect+json",
	.state_size = sizeof(struct process_state),
	.begin = process_begin,
	.output = process_output,
	.rich = process_rich,
	.error = process_error,
	.dropped = process_dropped,
	.done = process_done,
	.keepalive = "\0\0\0\0\x1a" KEEPALIVE_JSON,
	.keepalive_len = ENVELOPE_HDR + sizeof(KEEPALIVE_JSON) - 1,
	.refuse = process_refuse,
	.cut_when_deleted = true,
};

/* arg in single quotes, for bash: nothing in them is special but the
 * quote, which is closed, escaped and reopened. */
static int shell_quote(struct buf *out, const char *arg)
{
	int r = buf_append_str(out, "'");

	for (const char *p = arg; r == 0 && *p; p++)
		r = *p == '\'' ? buf_append_str(out, "'\\''") : buf_append(out, p, 1);
	return r ? r : buf_append_str(out, "'");
}

static bool is_shell(const char *cmd)
{
	return !strcmp(cmd, "/bin/bash") || !strcmp(cmd, "bash") || !strcmp(cmd, "/usr/bin/bash") ||
	       !strcmp(cmd, "/bin/sh") || !strcmp(cmd, "sh");
}

/* The bash code of cmd and args: the script itself for the SDK's
 * "/bin/bash -l -c <script>" (a login shell's profile is not read: the
 * sandbox's environment is the driver's), else every word quoted and
 * exec'd. */
static int command_code(const char *cmd, json_t *args, struct buf *code)
{
	size_t n = json_array_size(args), i = 0;
	json_t *a;
	int r;

	if (is_shell(cmd)) {
		while (i < n && (!strcmp(json_string_value(json_array_get(args, i)), "-l") ||
				 !strcmp(json_string_value(json_array_get(args, i)), "--login")))
			i++;
		if (i + 2 == n && !strcmp(json_string_value(json_array_get(args, i)), "-c"))
			return buf_append_str(code, json_string_value(json_array_get(args, i + 1)));
	}
	r = buf_append_str(code, "exec ");
	if (r == 0)
		r = shell_quote(code, cmd);
	json_array_foreach(args, i, a)
		if (r == 0 && (r = buf_append_str(code, " ")) == 0)
			r = shell_quote(code, json_string_value(a));
	return r;
}

/* Connect-Timeout-Ms: at most 10 digits (the protocol's bound). */
static bool timeout_header(struct api_req *rq, double *out)
{
	const char *v = header(rq, "Connect-Timeout-Ms");
	unsigned long long ms = 0;
	size_t n;

	if (!v)
		return true;
	n = strlen(v);
	if (n == 0 || n > 10 || strspn(v, "0123456789") != n)
		return false;
	for (size_t i = 0; i < n; i++)
		ms = ms * 10 + (unsigned)(v[i] - '0');
	*out = ms / 1000.0;
	return true;
}

static enum MHD_Result process_start(struct api_req *rq, struct session *s)
{
	const struct petri_limits *lim = session_limits(s);
	const unsigned char *b = (const unsigned char *)rq->body.data;
	struct exec_request ex = { .env = NULL };
	struct process_state ps = { .pid = 0 };
	char cwd[CWD_MAX + sizeof(E2B_HOME) + 2];
	struct buf code = BUF_INIT;
	json_t *req = NULL, *proc, *args, *envs, *jcwd, *a, *exec = NULL, *env = NULL;
	const char *cmd, *c;
	enum MHD_Result answered;
	struct request_error e;
	double timeout;
	size_t len = rq->body.len, i, n;

	if (!content_type_is(rq, "application/connect+json"))
		return stream_fail(rq, "invalid_argument", "Process.Start is a Connect stream: "
				   "Content-Type application/connect+json");
	if (len < ENVELOPE_HDR)
		return stream_fail(rq, "invalid_argument", "the request is not a Connect envelope "
				   "(%zu bytes)", len);
	n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (b[0] & 0x01)
		return stream_fail(rq, "unimplemented", "petri takes uncompressed envelopes only");
	if (b[0] != 0)
		return stream_fail(rq, "invalid_argument", "the request's envelope has flags 0x%02x",
				   b[0]);
	if (n != len - ENVELOPE_HDR)
		return stream_fail(rq, "invalid_argument", "the request's envelope says %zu bytes "
				   "and has %zu: one envelope is expected", n, len - ENVELOPE_HDR);
	if (!jsoncost_within(rq->body.data + ENVELOPE_HDR, n, &start_cost, NULL))
		return stream_fail(rq, "invalid_argument", "the request is nested too deep or has "
				   "too many values");
	req = json_loadb(rq->body.data + ENVELOPE_HDR, n, JSON_REJECT_DUPLICATES, NULL);
	proc = json_object_get(req, "process");
	cmd = json_string_value(json_object_get(proc, "cmd"));
	args = json_object_get(proc, "args");
	envs = json_object_get(proc, "envs");
	jcwd = json_object_get(proc, "cwd");
	if (!json_is_object(req) || !json_is_object(proc) || !cmd || !*cmd) {
		answered = stream_fail(rq, "invalid_argument", "the request needs a 'process' "
				       "with a 'cmd'");
		goto out;
	}
	if (json_object_get(req, "pty") && !json_is_null(json_object_get(req, "pty"))) {
		answered = stream_fail(rq, "unimplemented", "petri runs commands without a "
				       "terminal (pty)");
		goto out;
	}
	if (args && !json_is_null(args) && (!json_is_array(args) ||
					     json_array_size(args) > ARGS_MAX)) {
		answered = stream_fail(rq, "invalid_argument", "'args' must be an array of at "
				       "most %d strings", ARGS_MAX);
		goto out;
	}
	json_array_foreach(args, i, a)
		if (!json_is_string(a)) {
			answered = stream_fail(rq, "invalid_argument", "'args' must be strings");
			goto out;
		}
	if (jcwd && !json_is_null(jcwd) && !json_is_string(jcwd)) {
		answered = stream_fail(rq, "invalid_argument", "'cwd' must be a string");
		goto out;
	}
	c = json_string_value(jcwd);
	if (!c || !*c)
		c = E2B_HOME;
	if (strlen(c) > CWD_MAX || strcspn(c, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"
				       "\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18"
				       "\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") != strlen(c)) {
		answered = stream_fail(rq, "invalid_argument", "'cwd' must be a path of at most "
				       "%d bytes without control characters", CWD_MAX);
		goto out;
	}
	/* A relative cwd is under the user's home, as envd has it. */
	snprintf(cwd, sizeof(cwd), "%s%s%s", c[0] == '/' ? "" : E2B_HOME, c[0] == '/' ? "" : "/",
		 c);
	timeout = 0;	/* none: the sandbox's timeout_s */
	if (!timeout_header(rq, &timeout)) {
		answered = stream_fail(rq, "invalid_argument", "Connect-Timeout-Ms must be at "
				       "most 10 digits");
		goto out;
	}
	/* The command ends a little before the client's deadline: then the
	 * client reads its end (killed) from a session already free for its
	 * next call, instead of giving up itself while the command is still
	 * being stopped (its next call would find the session busy). */
	if (timeout > 0) {
		double margin = timeout / 10;

		margin = margin < MARGIN_MIN_S ? MARGIN_MIN_S : margin > MARGIN_MAX_S ?
			 MARGIN_MAX_S : margin;
		timeout -= margin < timeout / 2 ? margin : timeout / 2;
	}
	/* The SDK asks for 60 s unless told otherwise: a command runs at most
	 * the sandbox's timeout_s, and the end says so when it is cut. */
	ps.client_deadline = timeout > 0 && timeout < lim->timeout_s;
	if (timeout <= 0 || timeout >= lim->timeout_s)
		timeout = lim->timeout_s;
	if (timeout < 0.1)
		timeout = 0.1;
	if (envs && !json_is_null(envs) && !json_is_object(envs)) {
		answered = stream_fail(rq, "invalid_argument", "'envs' must be an object of "
				       "strings");
		goto out;
	}
	env = envs && json_is_object(envs) ? json_incref(envs) : json_object();
	if (!env || command_code(cmd, args, &code) < 0 ||
	    !(exec = json_pack("{s:s%, s:s, s:f, s:o}", "code", code.data ? code.data : "",
			       code.len, "language", "bash", "timeout_s", timeout, "env",
			       json_incref(env)))) {
		answered = stream_fail(rq, "internal", "out of memory");
		goto out;
	}
	if (!request_exec(rq->cfg, exec, "bash", lim, &ex, &e)) {
		answered = stream_fail(rq, strcmp(e.code, "internal") ? "invalid_argument" :
				       "internal", "%s", e.message);
		goto out;
	}
	ex.cwd = cwd;
	answered = stream_execute_with(rq, s, &ex, &process_wire, &ps);
out:
	request_exec_release(&ex);
	json_decref(exec);
	json_decref(env);
	json_decref(req);
	buf_release(&code);
	return answered;
}

static enum MHD_Result process(struct api_req *rq, struct session *s, const char *method)
{
	bool stream = content_type_is(rq, "application/connect+json");

	if (!strcmp(method, "Start"))
		return process_start(rq, s);
	if (stream)	/* Connect, StreamInput */
		return stream_fail(rq, "unimplemented", "petri does not offer process.Process/%.64s:"
				   " a command's output comes with the Start that ran it", method);
	if (!strcmp(method, "SendSignal") || !strcmp(method, "SendInput") ||
	    !strcmp(method, "CloseStdin") || !strcmp(method, "List") ||
	    !strcmp(method, "Update"))
		return rpc_error(rq, 501, "unimplemented", "petri does not offer "
				 "process.Process/%s: its commands take no input or signals and "
				 "are not listed; a command ends with its timeout", method);
	return rpc_error(rq, 404, "unimplemented", "no method process.Process/%.64s", method);
}

/* ---- routing ------------------------------------------------------------ */

static enum MHD_Result rpc(struct api_req *rq, struct session *s, const char *path)
{
	static const char fs[] = "/filesystem.Filesystem/", pr[] = "/process.Process/";
	enum MHD_Result answered;
	json_error_t jerr;
	json_t *req;

	if (strcmp(rq->method, "POST"))
		return rpc_error(rq, 405, "unimplemented", "Connect calls are POST");
	if (!strncmp(path, pr, sizeof(pr) - 1))
		return process(rq, s, path + sizeof(pr) - 1);
	if (content_type_is(rq, "application/connect+json"))
		return stream_fail(rq, "unimplemented", "petri does not watch directories (%.64s)",
				   path + sizeof(fs) - 1);
	if (rq->opaque_body)	/* not JSON: server.c did not check its cost */
		return rpc_error(rq, 415, "invalid_argument", "petri's envd speaks Connect with "
				 "JSON only (Content-Type application/json)");
	req = rq->body.len ? json_loadb(rq->body.data, rq->body.len, JSON_REJECT_DUPLICATES, &jerr) :
			     json_object();
	if (!json_is_object(req)) {
		json_decref(req);
		return rpc_error(rq, 400, "invalid_argument", "the request is not a JSON object");
	}
	answered = filesystem(rq, s, path + sizeof(fs) - 1, req);
	json_decref(req);
	return answered;
}

enum MHD_Result e2b_envd(struct api_req *rq, struct session *s, const char *path)
{
	const char *m = rq->method;

	if (!strcmp(path, "/health"))
		return strcmp(m, "GET") ? e2b_error(rq, 405, "use GET") : http_empty(rq, 204);
	if (!strcmp(path, "/files")) {
		if (!strcmp(m, "GET"))
			return download(rq, s);
		if (!strcmp(m, "POST"))
			return upload(rq, s);
		return e2b_error(rq, 405, "use GET or POST");
	}
	if (!strncmp(path, "/filesystem.Filesystem/", 23) || !strncmp(path, "/process.Process/", 17))
		return rpc(rq, s, path);
	return e2b_error(rq, 404, "envd has no route %.10s %.200s", m, path);
}
