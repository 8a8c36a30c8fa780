/* E2B's envd (port 49983) over a petri session: files (REST), the
 * filesystem RPCs and the process RPCs (Connect, JSON), as the SDKs call
 * them (docs/e2b.md; the wire is in e2b.h's terms).
 *
 *   GET  /health                         204
 *   GET  /files?path=                    the file's bytes, streamed
 *   POST /files[?path=]                  multipart/form-data, parts "file"
 *   POST /filesystem.Filesystem/<M>      Stat, ListDir, MakeDir, Remove, Move
 *   POST /process.Process/Start          a command, its events streamed
 *   POST /process.Process/Connect        a running command's events, from now
 *   POST /process.Process/<M>            List, SendInput, CloseStdin, SendSignal
 *
 * Paths are /home/user/... or relative to it (the workspace, /work inside
 * the sandbox), or absolute on the sandbox's other filesystems of its own
 * (/tmp, /dev/shm); anything else is refused (403, permission_denied).
 * Every path goes through the session's workspace (session/workspace.h),
 * which resolves it as the sandbox's user inside the filesystem that holds
 * it whatever symlinks the code planted.  Uploads are written by a writer
 * charged to the sandbox (files_put).  A command is a process of the
 * session beside its interpreter (session/procs.h): it runs while code and
 * other commands run, with its own stdin, and any number of clients follow
 * its output. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b.h"
#include "session/procs.h"
#include "session/watch.h"
#include "session/workspace.h"
#include "util/base64.h"
#include "util/jsoncost.h"
#include "util/num.h"
#include "util/timefmt.h"
#include "util/multipart.h"
#include "util/utf8.h"

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
#define STDIN_WAIT_S	0.5		/* SendInput waits this long for a process to read */
#define PTY_SIZE_MAX	4096		/* a terminal's rows and columns */

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
	/* Outside the workspace: on another of the sandbox's filesystems, or
	 * refused as such whatever else is wrong with its spelling; not the
	 * filesystem itself where a file is named ("/tmp", as HOME). */
	if (in[0] == '/' && !e2b_in_home(in)) {
		if (session_file_at(s, in, &below) < 0) {
			fail_errno(f, s, -EROFS, in);
			return false;
		}
		if (!allow_empty && !*below) {
			fail_set(f, 400, "invalid_argument", 400, "'%.300s' is a filesystem of "
				 "the sandbox's own: name a file or directory in it", in);
			return false;
		}
	}
	r = ws_path(in, E2B_HOME, (allow_empty ? WS_PATH_ROOT : 0) | WS_PATH_SLASH |
		    WS_PATH_ANYWHERE, rel, why, sizeof(why));
	if (r != WS_OK) {
		fail_set(f, 400, "invalid_argument", 400, "'%.300s': %s", in, why);
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

/* ---- metadata (X-Metadata-<key>: <value>) -------------------------------
 *
 * envd 0.6.2's: an upload's X-Metadata-<key> headers are its files'
 * metadata, their user.e2b.<key> attributes (workspace/files.h), which
 * Stat, ListDir, Move and the upload's answer give back as "metadata".
 * Uploads also take the file as the body (application/octet-stream, envd
 * 0.5.7's), gzip too (Content-Encoding). */

#define META_HEADER "X-Metadata-"
#define META_HEADER_LEN (sizeof(META_HEADER) - 1)

struct meta_scan {
	struct files_meta *m;
	struct fail *f;
	bool refused;
};

/* RFC 9110's token characters, in ASCII whatever the locale: what a
 * header's name is made of. */
static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static enum MHD_Result meta_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   size_t key_size, const char *value, size_t value_size)
{
	struct meta_scan *ms = cls;
	char lower[FILES_META_KEY_MAX + 1];
	size_t klen, i;
	int r;

	if (key_size < META_HEADER_LEN || strncasecmp(key, META_HEADER, META_HEADER_LEN))
		return MHD_YES;
	key += META_HEADER_LEN;
	klen = key_size - META_HEADER_LEN;
	for (i = 0; i < klen && i < FILES_META_KEY_MAX && is_tchar((unsigned char)key[i]); i++)
		lower[i] = key[i] >= 'A' && key[i] <= 'Z' ? (char)(key[i] - 'A' + 'a') : key[i];
	if (klen == 0 || i < klen) {
		fail_set(ms->f, 400, NULL, 0, klen > FILES_META_KEY_MAX ? "a metadata key "
			 "(X-Metadata-<key>) is at most %d bytes" : "a metadata key (X-Metadata-"
			 "<key>) is one or more of letters, digits and !#$%%&'*+-.^_`|~",
			 (int)FILES_META_KEY_MAX);
		ms->refused = true;
		return MHD_NO;
	}
	for (i = 0; value && i < value_size; i++)
		if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e) {
			fail_set(ms->f, 400, NULL, 0, "the value of metadata key '%.*s' is not "
				 "printable US-ASCII", (int)klen, lower);
			ms->refused = true;
			return MHD_NO;
		}
	/* Header names are not case-sensitive: keys are lowercase, and of one
	 * sent twice the first counts, as envd has it. */
	r = files_meta_add(ms->m, lower, klen, value ? value : "", value ? value_size : 0);
	if (r == -E2BIG) {
		fail_set(ms->f, 400, NULL, 0, "a file's metadata is at most %d keys and %d bytes "
			 "(each key with its '" FILES_META_PREFIX "' prefix, and its value)",
			 FILES_META_KEYS, FILES_META_BYTES);
		ms->refused = true;
		return MHD_NO;
	}
	return MHD_YES;
}

/* The request's metadata into m, checked whole before anything is written:
 * false with f set (400) when a key or a value is not what envd takes. */
static bool request_meta(struct api_req *rq, struct files_meta *m, struct fail *f)
{
	struct meta_scan ms = { m, f, false };

	m->n = 0;
	m->used = 0;
	MHD_get_connection_values_n(rq->conn, MHD_HEADER_KIND, meta_header, &ms);
	return !ms.refused;
}

/* Metadata as proto3 JSON's map<string, string>: a file's own code may have
 * set any bytes, made valid UTF-8 here. */
static json_t *meta_json(const struct files_meta *m)
{
	json_t *o = json_object();

	for (unsigned i = 0; o && i < m->n; i++) {
		const struct files_meta_kv *kv = &m->kv[i];
		json_t *k = utf8_json_string(m->data + kv->key, kv->klen);
		json_t *v = utf8_json_string(m->data + kv->value, kv->vlen);

		if (!k || !v || json_object_set_new(o, json_string_value(k), v) < 0) {
			json_decref(o);
			o = NULL;
		} else {
			v = NULL;
		}
		json_decref(k);
		json_decref(v);
	}
	return o;
}

/* "metadata" in e, when m has any (proto3 leaves an empty map out; the SDK
 * reads none as undefined); false when out of memory. */
static bool add_meta(json_t *e, const struct files_meta *m)
{
	return !m || m->n == 0 || json_object_set_new(e, "metadata", meta_json(m)) == 0;
}

/* ---- uploads ------------------------------------------------------------- */

struct upload {
	struct api_req *rq;
	struct session *s;
	const char *path;	/* the query's, or NULL: each part's filename */
	bool write;		/* false: only check every part's path */
	json_t *written;
	struct fail f;
	struct files_put_how how;
	struct files_meta meta;	/* every file's */
};

/* Write data to rel (target: as the SDK named it) and add what envd
 * answers for it to up->written; -errno with up->f set. */
static int put_one(struct upload *up, const char *target, const char *rel, const void *data,
		   size_t len)
{
	char shown[FILES_PATH_MAX + 16];
	const char *base;
	bool ended;
	json_t *e;
	int r;

	if ((r = files_put(up->rq, up->s, rel, data, len, &up->how, &ended)) < 0) {
		if (r == -EFBIG)
			fail_set(&up->f, 413, NULL, 0, "'%.300s' inflates past the %llu MiB upload "
				 "limit (max_file_mb), or past 16 MiB and %u times the gzip body "
				 "(archive_max_ratio)", target,
				 (unsigned long long)(up->rq->cfg->max_file_bytes >> 20),
				 up->rq->cfg->archive_max_ratio);
		else if (r == -EBADMSG)
			fail_set(&up->f, 400, NULL, 0, "the body is not one whole gzip stream "
				 "(Content-Encoding: gzip)");
		else
			fail_errno(&up->f, up->s, r, target);
		if (ended)
			snprintf(up->f.message, sizeof(up->f.message), "the sandbox ran out of "
				 "memory writing '%.300s' (%u MiB, which " E2B_HOME " counts "
				 "against) and was ended", target, session_limits(up->s)->memory_mb);
		return r;
	}
	e2b_sdk_path(rel, shown, sizeof(shown));
	base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	e = json_pack("{s:s, s:s, s:s}", "name", base, "type", "file", "path", shown);
	if (!e || !add_meta(e, &up->meta) || json_array_append_new(up->written, e) < 0) {
		fail_set(&up->f, 500, NULL, 0, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int upload_part(void *ctx, const struct multipart_part *p)
{
	struct upload *up = ctx;
	const char *target = up->path ? up->path : p->has_filename ? p->filename : NULL;
	char rel[FILES_PATH_MAX + 1];

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
	return put_one(up, target, rel, p->data, p->len);
}

/* Content-Encoding: none (or identity), or gzip; false for any other. */
static bool body_encoding(struct api_req *rq, bool *gzip)
{
	const char *ce = header(rq, "Content-Encoding");

	*gzip = ce && (!strcasecmp(ce, "gzip") || !strcasecmp(ce, "x-gzip"));
	return !ce || !*ce || *gzip || !strcasecmp(ce, "identity");
}

static enum MHD_Result upload(struct api_req *rq, struct session *s)
{
	struct upload up = { .rq = rq, .s = s, .path = query(rq, "path") };
	char boundary[MULTIPART_BOUNDARY_MAX + 1], why[160] = "", rel[FILES_PATH_MAX + 1];
	bool octet = content_type_is(rq, "application/octet-stream");
	enum MHD_Result answered;
	int r;

	if (!body_encoding(rq, &up.how.gzip))
		return e2b_error(rq, 415, "petri takes an upload plain or with Content-Encoding: "
				 "gzip, not '%.40s'", header(rq, "Content-Encoding"));
	if (up.how.gzip && !octet)
		return e2b_error(rq, 415, "a gzip body (Content-Encoding: gzip) is an "
				 "application/octet-stream upload, not multipart");
	if (!octet && multipart_boundary(header(rq, "Content-Type"), boundary) < 0)
		return e2b_error(rq, 400, "an upload is multipart/form-data with a boundary, "
				 "its files in parts named 'file', or application/octet-stream "
				 "with the file as the body and its 'path' in the query");
	if (octet && (!up.path || !*up.path))
		return e2b_error(rq, 400, "an application/octet-stream upload names its file "
				 "in the 'path' query");
	/* A bad key or value, or a bad path, writes nothing. */
	if (!request_meta(rq, &up.meta, &up.f) ||
	    (octet && !sdk_to_rel(s, up.path, false, rel, &up.f)))
		return rest_fail(rq, &up.f);
	up.how.meta = &up.meta;
	if (!(up.written = json_array()))
		return e2b_error(rq, 500, "out of memory");
	if (octet) {
		r = put_one(&up, up.path, rel, rq->body.data ? rq->body.data : "", rq->body.len);
		answered = r < 0 ? rest_fail(rq, &up.f) : http_json(rq, 200, json_incref(up.written));
		json_decref(up.written);
		return answered;
	}
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
	if (!add_meta(e, en->meta)) {
		json_decref(e);
		return NULL;
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

/* A listing's entries and the metadata they carry, at most LIST_META_MAX
 * bytes of it in one answer (E2B's count): each file's is bounded, but
 * 10 000 of them at 4 KiB would be 40 MiB, and a value of control bytes is
 * six times its size in JSON. */
#define LIST_META_MAX	(4u << 20)
struct listing {
	json_t *entries;
	size_t meta;
};

static int list_one(void *ctx, const struct session_entry *en)
{
	struct listing *l = ctx;

	if (en->meta && (l->meta += en->meta->used + en->meta->n * FILES_META_PREFIX_LEN) >
			LIST_META_MAX)
		return -EMSGSIZE;
	return json_array_append_new(l->entries, entry_json(en)) < 0 ? -ENOMEM : 0;
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
						&(struct listing){ entries, 0 }) : -ENOMEM;
		if (r == 0)
			answer = json_pack("{s:o}", "entries", entries);
		else
			json_decref(entries);
		if (r == -EMSGSIZE)
			return rpc_error(rq, 400, "failed_precondition", "the entries of '%.300s' "
					 "carry more metadata than petri gives in one listing (%u "
					 "MiB): list a smaller directory, or fewer levels", shown,
					 LIST_META_MAX >> 20);
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

/* A process's stream: the wire's state, the feeder's (procs.h's sink). */
struct proc_stream {
	struct stream *st;
	struct session *s;	/* the stream holds it */
	struct proc *p;		/* a reference, from its start or Connect's find */
	bool client_deadline;	/* its deadline is the client's (Connect-Timeout-Ms) */
	bool pty;		/* its output is a terminal's: "pty" data */
};

/* Output as a data event: "stdout", "stderr", or a terminal's "pty". */
static int data_event(struct buf *out, const char *key, const char *data, size_t len)
{
	char *b64 = base64_encode(data, len, NULL);
	int r;

	if (!b64)
		return -ENOMEM;
	r = envelope(out, 0, event("data", json_pack("{s:s}", key, b64)));
	free(b64);
	return r;
}

static int process_dropped(void *state, struct buf *out, unsigned long long n)
{
	char line[200];

	(void)state;
	snprintf(line, sizeof(line), "\n[petri: %llu chunks of output were dropped here: the "
		 "client read too slowly]\n", n);
	return data_event(out, ((struct proc_stream *)state)->pty ? "pty" : "stderr", line,
			  strlen(line));
}

static void process_release(void *state)
{
	struct proc_stream *ps = state;

	proc_put(ps->p);
}

#define KEEPALIVE_JSON "{\"event\":{\"keepalive\":{}}}"
_Static_assert(sizeof(KEEPALIVE_JSON) - 1 == 0x1a, "the keepalive envelope's length");

static const struct stream_wire process_wire = {
	.content_type = "application/connect+json",
	.state_size = sizeof(struct proc_stream),
	.dropped = process_dropped,
	.keepalive = "\0\0\0\0\x1a" KEEPALIVE_JSON,
	.keepalive_len = ENVELOPE_HDR + sizeof(KEEPALIVE_JSON) - 1,
	.release = process_release,
};

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
 * right error (full: RateLimitError, "try again later"; an ended sandbox:
 * TimeoutError) and the message. */
static void sm_connect_error(enum sm_result r, const char *reason, const char **code,
			     char *msg, size_t len)
{
	*code = r == SM_BUSY || r == SM_CAPACITY || r == SM_HOST_FULL || r == SM_KEY_SHARE ? "resource_exhausted" :
		r == SM_GONE || r == SM_NOT_FOUND || r == SM_STOPPING || r == SM_DRAINING ? "unavailable" :
		r == SM_INVALID ? "invalid_argument" : "internal";
	snprintf(msg, len, "%s", reason && *reason ? reason : http_sm_message(r, reason));
}

static void sink_start(void *ctx, struct proc *p)
{
	struct proc_stream *ps = ctx;
	struct buf ev = BUF_INIT;

	ps->p = proc_ref(p);
	if (envelope(&ev, 0, event("start", json_pack("{s:i}", "pid", proc_pid(p)))) == 0)
		stream_feed(ps->st, &ev, false);
	buf_release(&ev);
}

static void sink_output(void *ctx, enum exec_stream s, const char *data, size_t len)
{
	struct proc_stream *ps = ctx;
	struct buf ev = BUF_INIT;

	if (!stream_takes(ps->st, len))	/* spare the base64 of what is dropped */
		return;
	if (data_event(&ev, ps->pty ? "pty" : s == EXEC_STDOUT ? "stdout" : "stderr", data,
		       len) == 0)
		stream_feed(ps->st, &ev, true);
	buf_release(&ev);
}

/* The end event as envd says it, then the stream's end; or, past the
 * client's own deadline, deadline_exceeded (the SDK's TimeoutError); or,
 * the sandbox deleted under it, a cut connection (http.h). */
static void sink_end(void *ctx, const struct proc_end *e)
{
	struct proc_stream *ps = ctx;
	struct buf out = BUF_INIT;
	char status[64], error[128];
	bool cut = false;
	json_t *end;

	if (e->timed_out && ps->client_deadline) {
		end_stream(&out, "deadline_exceeded", "the command ran past the request's timeout "
			   "(timeoutMs) and was killed");
	} else if (e->lost && session_deleted(ps->s)) {
		cut = true;
	} else {
		if (e->exited) {
			snprintf(status, sizeof(status), "exit status %d", e->code);
		} else {
			const char *w = signal_word(e->signal);

			if (w)
				snprintf(status, sizeof(status), "signal: %s", w);
			else
				snprintf(status, sizeof(status), "signal: %d", e->signal);
		}
		snprintf(error, sizeof(error), "%s%s", status, e->lost ? " (the sandbox ended)" :
			 e->timed_out ? " (past its timeout)" : "");
		end = json_pack("{s:i, s:b, s:s}", "exitCode", e->exited ? e->code : -1, "exited",
				e->exited, "status", status);
		if (end && (!e->exited || e->code != 0))
			json_object_set_new(end, "error", json_string(error));
		if (envelope(&out, 0, event("end", end)) == 0)
			end_stream(&out, NULL, NULL);
	}
	stream_feed_end(ps->st, &out, cut);
	stream_feed_put(ps->st);	/* the feeder's: it feeds no more */
}

/* The client went before the end: follow no more (unless the end is being
 * said now, which puts the feeder's reference itself). */
static void process_closed(void *state)
{
	struct proc_stream *ps = state;

	if (ps->p && proc_unfollow(ps->p, ps))
		stream_feed_put(ps->st);
}

static bool is_shell(const char *cmd)
{
	return !strcmp(cmd, "/bin/bash") || !strcmp(cmd, "bash") || !strcmp(cmd, "/usr/bin/bash") ||
	       !strcmp(cmd, "/bin/sh") || !strcmp(cmd, "sh");
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

/* The one envelope of a server-streaming call's request, as JSON: NULL
 * with the stream's refusal answered in *answered. */
static json_t *stream_request(struct api_req *rq, enum MHD_Result *answered)
{
	const unsigned char *b = (const unsigned char *)rq->body.data;
	size_t len = rq->body.len, n;
	json_t *req;

	if (!content_type_is(rq, "application/connect+json")) {
		*answered = stream_fail(rq, "invalid_argument", "a streaming call is Connect: "
					"Content-Type application/connect+json");
		return NULL;
	}
	if (len < ENVELOPE_HDR) {
		*answered = stream_fail(rq, "invalid_argument", "the request is not a Connect "
					"envelope (%zu bytes)", len);
		return NULL;
	}
	n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
	if (b[0] & 0x01) {
		*answered = stream_fail(rq, "unimplemented", "petri takes uncompressed envelopes "
					"only");
		return NULL;
	}
	if (b[0] != 0) {
		*answered = stream_fail(rq, "invalid_argument", "the request's envelope has flags "
					"0x%02x", b[0]);
		return NULL;
	}
	if (n != len - ENVELOPE_HDR) {
		*answered = stream_fail(rq, "invalid_argument", "the request's envelope says %zu "
					"bytes and has %zu: one envelope is expected", n,
					len - ENVELOPE_HDR);
		return NULL;
	}
	if (!jsoncost_within(rq->body.data + ENVELOPE_HDR, n, &start_cost, NULL)) {
		*answered = stream_fail(rq, "invalid_argument", "the request is nested too deep or "
					"has too many values");
		return NULL;
	}
	req = json_loadb(rq->body.data + ENVELOPE_HDR, n, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(req)) {
		json_decref(req);
		*answered = stream_fail(rq, "invalid_argument", "the request is not a JSON object");
		return NULL;
	}
	return req;
}

/* The client's deadline, less the margin to stop the command and say so
 * before the client gives up itself: 0 for none. */
static double command_timeout(double timeout)
{
	double margin = timeout / 10;

	if (timeout <= 0)
		return 0;
	margin = margin < MARGIN_MIN_S ? MARGIN_MIN_S : margin > MARGIN_MAX_S ?
		 MARGIN_MAX_S : margin;
	timeout -= margin < timeout / 2 ? margin : timeout / 2;
	return timeout < 0.1 ? 0.1 : timeout;
}

/* A stream for p's events (start already said, or said by the sink), fed
 * from now on; started: a Start's, whose sink session_proc_start() takes. */
static enum MHD_Result open_process_stream(struct api_req *rq, struct session *s,
					   bool client_deadline, struct stream **st,
					   struct proc_stream **ps)
{
	enum MHD_Result answered = stream_open(rq, s, &process_wire, NULL, process_closed, st);

	if (!*st)
		return answered;
	*ps = stream_state(*st);
	(*ps)->st = *st;
	(*ps)->s = s;
	(*ps)->client_deadline = client_deadline;
	return answered;
}

/* The stream's end with an error, for a stream opened already. */
static void close_with(struct stream *st, const char *code, const char *message)
{
	struct buf out = BUF_INIT;

	end_stream(&out, code, message);
	stream_feed_end(st, &out, false);
	stream_feed_put(st);
}

/* A Start's or an Update's "pty": {"size": {"rows", "cols"}} into spec
 * (absent or null: no terminal); false when malformed. */
static bool pty_size(json_t *pty, struct proc_spec *spec)
{
	json_t *size = json_object_get(pty, "size");
	json_t *rows = json_object_get(size, "rows"), *cols = json_object_get(size, "cols");

	if (!pty || json_is_null(pty))
		return true;
	spec->pty = true;
	spec->rows = spec->cols = 0;
	if (!json_is_object(pty) || (size && !json_is_object(size)) ||
	    (rows && !json_is_integer(rows)) || (cols && !json_is_integer(cols)) ||
	    json_integer_value(rows) < 0 || json_integer_value(rows) > PTY_SIZE_MAX ||
	    json_integer_value(cols) < 0 || json_integer_value(cols) > PTY_SIZE_MAX)
		return false;
	spec->rows = (unsigned short)json_integer_value(rows);	/* 0: the default */
	spec->cols = (unsigned short)json_integer_value(cols);
	return true;
}

static enum MHD_Result process_start(struct api_req *rq, struct session *s)
{
	json_t *req, *proc, *args, *envs, *jcwd, *a, *jstdin, *jtag, *config = NULL;
	const char *argv[ARGS_MAX + 2], *cmd, *c;
	struct proc_spec spec = { .argv = argv };
	struct proc_stream *ps = NULL;
	struct stream *st = NULL;
	struct request_error e;
	struct proc *p = NULL;
	enum MHD_Result answered;
	char cwd[CWD_MAX + sizeof(E2B_HOME) + 2], reason[512];
	char **env = NULL;
	double timeout = 0;
	size_t i, n = 0;
	enum sm_result r;

	if (!(req = stream_request(rq, &answered)))
		return answered;
	proc = json_object_get(req, "process");
	cmd = json_string_value(json_object_get(proc, "cmd"));
	args = json_object_get(proc, "args");
	envs = json_object_get(proc, "envs");
	jcwd = json_object_get(proc, "cwd");
	jstdin = json_object_get(req, "stdin");
	jtag = json_object_get(req, "tag");
	if (!json_is_object(proc) || !cmd || !*cmd) {
		answered = stream_fail(rq, "invalid_argument", "the request needs a 'process' "
				       "with a 'cmd'");
		goto out;
	}
	if (!pty_size(json_object_get(req, "pty"), &spec)) {
		answered = stream_fail(rq, "invalid_argument", "'pty' is {\"size\": {\"rows\", "
				       "\"cols\"}}, each from 1 to %d", PTY_SIZE_MAX);
		goto out;
	}
	if (args && !json_is_null(args) && (!json_is_array(args) ||
					     json_array_size(args) > ARGS_MAX)) {
		answered = stream_fail(rq, "invalid_argument", "'args' must be an array of at "
				       "most %d strings", ARGS_MAX);
		goto out;
	}
	if ((jstdin && !json_is_null(jstdin) && !json_is_boolean(jstdin)) ||
	    (jtag && !json_is_null(jtag) && (!json_is_string(jtag) ||
					     json_string_length(jtag) > PROC_TAG_MAX))) {
		answered = stream_fail(rq, "invalid_argument", "'stdin' must be a boolean and 'tag' "
				       "a string of at most %d bytes", PROC_TAG_MAX);
		goto out;
	}
	/* A login shell's "-l" is dropped: the sandbox's environment is the
	 * keeper's, and a profile would reset its PATH. */
	argv[n++] = cmd;
	json_array_foreach(args, i, a) {
		const char *v = json_string_value(a);

		if (!v) {
			answered = stream_fail(rq, "invalid_argument", "'args' must be strings");
			goto out;
		}
		if (is_shell(cmd) && n == 1 && (!strcmp(v, "-l") || !strcmp(v, "--login")))
			continue;
		argv[n++] = v;
	}
	argv[n] = NULL;
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
	if (!timeout_header(rq, &timeout)) {
		answered = stream_fail(rq, "invalid_argument", "Connect-Timeout-Ms must be at "
				       "most 10 digits");
		goto out;
	}
	if (envs && !json_is_null(envs) && !json_is_object(envs)) {
		answered = stream_fail(rq, "invalid_argument", "'envs' must be an object of "
				       "strings");
		goto out;
	}
	if (!(env = request_env(rq->cfg, envs, &e))) {
		answered = stream_fail(rq, strcmp(e.code, "internal") ? "invalid_argument" :
				       "internal", "%s", e.message);
		goto out;
	}
	config = json_pack("{s:s, s:o, s:o, s:s}", "cmd", cmd, "args",
			   json_is_array(args) ? json_incref(args) : json_array(), "envs",
			   json_is_object(envs) ? json_incref(envs) : json_object(), "cwd", cwd);
	spec.env = (const char *const *)env;
	spec.cwd = cwd;
	/* Absent: kept open, as envd before the field had it; a terminal's
	 * is its keyboard, always open. */
	spec.stdin = spec.pty || !jstdin || json_is_null(jstdin) || json_is_true(jstdin);
	spec.tag = json_string_value(jtag);
	spec.timeout_s = command_timeout(timeout);
	spec.config = config;
	answered = open_process_stream(rq, s, spec.timeout_s > 0, &st, &ps);
	if (!st)
		goto out;
	ps->pty = spec.pty;
	r = session_proc_start(s, &spec, &(struct proc_sink){ sink_start, sink_output, sink_end,
							       ps, false }, &p, reason, sizeof(reason));
	if (r != SM_OK) {
		const char *code;
		char msg[512];

		sm_connect_error(r, reason, &code, msg, sizeof(msg));
		close_with(st, code, msg);
	}
	proc_put(p);	/* the stream holds its own */
out:
	json_decref(config);
	exec_env_free(env);
	json_decref(req);
	return answered;
}

/* The process a request names: {"process": {"pid": N} or {"tag": "..."}}. */
static struct proc *selected(struct session *s, json_t *req, char *what, size_t len)
{
	json_t *sel = json_object_get(req, "process");
	json_t *pid = json_object_get(sel, "pid"), *tag = json_object_get(sel, "tag");

	if (json_is_string(tag)) {
		snprintf(what, len, "no process tagged '%.200s' runs in the sandbox",
			 json_string_value(tag));
		return session_proc_find(s, 0, json_string_value(tag));
	}
	snprintf(what, len, "no process %lld runs in the sandbox (petri knows the processes "
		 "its commands started)", json_is_integer(pid) ? json_integer_value(pid) : 0LL);
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
	    json_integer_value(pid) > INT32_MAX)
		return NULL;
	return session_proc_find(s, (int)json_integer_value(pid), NULL);
}

static enum MHD_Result process_connect(struct api_req *rq, struct session *s)
{
	struct proc_stream *ps = NULL;
	struct stream *st = NULL;
	enum MHD_Result answered;
	struct buf ev = BUF_INIT;
	char what[300];
	struct proc *p;
	json_t *req;
	int r;

	if (!(req = stream_request(rq, &answered)))
		return answered;
	p = selected(s, req, what, sizeof(what));
	json_decref(req);
	if (!p)
		return stream_fail(rq, "not_found", "%s", what);
	answered = open_process_stream(rq, s, false, &st, &ps);
	if (!st) {
		proc_put(p);
		return answered;
	}
	ps->p = p;
	ps->pty = proc_is_pty(p);
	if (envelope(&ev, 0, event("start", json_pack("{s:i}", "pid", proc_pid(p)))) == 0)
		stream_feed(st, &ev, false);
	buf_release(&ev);
	r = proc_follow(p, &(struct proc_sink){ NULL, sink_output, sink_end, ps, false });
	if (r == -ESRCH)
		close_with(st, "not_found", what);
	else if (r < 0)
		close_with(st, "resource_exhausted", "the process has as many clients following "
			   "it as petri takes (" NUM_TEXT(PROC_SINKS_MAX) ")");
	return answered;
}

/* SendInput, CloseStdin, SendSignal, List: unary, JSON. */
static enum MHD_Result process_unary(struct api_req *rq, struct session *s, const char *method,
				     json_t *req)
{
	json_t *input = json_object_get(req, "input"), *sig = json_object_get(req, "signal");
	const char *b64 = json_string_value(json_object_get(input, "stdin"));
	const char *keys = json_string_value(json_object_get(input, "pty"));
	struct proc_spec size = { .pty = false };
	unsigned char *data = NULL;
	char what[300];
	struct proc *p;
	size_t len = 0, written = 0;
	int r = 0, signo = 0;

	if (!strcmp(method, "List")) {
		json_t *list = session_proc_list(s);

		return list ? http_json(rq, 200, json_pack("{s:o}", "processes", list)) :
			      rpc_error(rq, 500, "internal", "out of memory");
	}
	if (!strcmp(method, "SendSignal")) {
		const char *name = json_string_value(sig);

		signo = json_is_integer(sig) ? (int)json_integer_value(sig) :
			!name ? 0 : !strcmp(name, "SIGNAL_SIGKILL") ? 9 :
			!strcmp(name, "SIGNAL_SIGTERM") ? 15 : 0;
		if (signo != 9 && signo != 15)
			return rpc_error(rq, 400, "invalid_argument", "'signal' must be SIGNAL_SIGKILL "
					 "or SIGNAL_SIGTERM");
	}
	if (!strcmp(method, "Update") && (!pty_size(json_object_get(req, "pty"), &size) ||
					    !size.pty || !size.rows || !size.cols))
		return rpc_error(rq, 400, "invalid_argument", "'pty' is {\"size\": {\"rows\", "
				 "\"cols\"}}, each from 1 to %d", PTY_SIZE_MAX);
	if (!strcmp(method, "SendInput")) {
		if (keys)	/* a terminal's keys, or a pipe's bytes: both are input */
			b64 = keys;
		if (!b64 && !json_is_object(input))
			return rpc_error(rq, 400, "invalid_argument", "'input' must hold 'stdin' "
					 "(base64)");
		data = base64_decode(b64 ? b64 : "", b64 ? strlen(b64) : 0, &len);
		if (!data)
			return rpc_error(rq, 400, "invalid_argument", "'stdin' is not valid base64");
	}
	if (!(p = selected(s, req, what, sizeof(what)))) {
		free(data);
		return rpc_error(rq, 404, "not_found", "%s", what);
	}
	if (!strcmp(method, "SendInput") && keys && !proc_is_pty(p))
		r = -ENOTTY;
	else if (!strcmp(method, "Update"))
		r = proc_resize(p, size.rows, size.cols);
	else if (!strcmp(method, "SendSignal"))
		r = proc_signal(p, signo);
	else if (!strcmp(method, "CloseStdin"))
		r = proc_close_input(p);
	else
		r = proc_input(p, data, len, STDIN_WAIT_S, &written);
	proc_put(p);
	free(data);
	if (r == -ESRCH)
		return rpc_error(rq, 404, "not_found", "%s", what);
	if (r == -ENOTTY)
		return rpc_error(rq, 400, "failed_precondition", "the process has no terminal "
				 "(pty): send 'stdin'");
	if (r == -EPIPE)
		return rpc_error(rq, 400, "failed_precondition", "the process's stdin is closed, or "
				 "it was started without 'stdin'");
	if (r == -E2BIG)
		return rpc_error(rq, 400, "invalid_argument", "at most %u bytes of input per call",
				 PROC_INPUT_MAX);
	if (r == -ETIMEDOUT)
		return rpc_error(rq, 503, "unavailable", "the process took %zu of the %zu bytes "
				 "within %g s (its stdin holds what it has not read): send the "
				 "rest later", written, len, STDIN_WAIT_S);
	if (r < 0)
		return rpc_error(rq, 500, "internal", "%s", strerror(-r));
	return http_json(rq, 200, json_object());
}

static enum MHD_Result process(struct api_req *rq, struct session *s, const char *method)
{
	enum MHD_Result answered;
	json_t *req;

	if (!strcmp(method, "Start"))
		return process_start(rq, s);
	if (!strcmp(method, "Connect"))
		return process_connect(rq, s);
	if (content_type_is(rq, "application/connect+json"))	/* StreamInput */
		return stream_fail(rq, "unimplemented", "petri does not offer process.Process/%.64s:"
				   " send input with SendInput", method);
	if (strcmp(method, "SendSignal") && strcmp(method, "SendInput") &&
	    strcmp(method, "CloseStdin") && strcmp(method, "List") && strcmp(method, "Update"))
		return rpc_error(rq, 404, "unimplemented", "no method process.Process/%.64s",
				 method);
	if (rq->opaque_body)
		return rpc_error(rq, 415, "invalid_argument", "petri's envd speaks Connect with "
				 "JSON only (Content-Type application/json)");
	req = rq->body.len ? json_loadb(rq->body.data, rq->body.len, JSON_REJECT_DUPLICATES, NULL) :
			     json_object();
	if (!json_is_object(req)) {
		json_decref(req);
		return rpc_error(rq, 400, "invalid_argument", "the request is not a JSON object");
	}
	answered = process_unary(rq, s, method, req);
	json_decref(req);
	return answered;
}

/* ---- WatchDir (Connect, server streaming) --------------------------------- */

/* A watch's stream: the wire's state, the feeder's (watch.h's sink). */
struct watch_stream {
	struct stream *st;
	struct session *s;	/* the stream holds it */
	struct watch *w;	/* NULL once stopped */
	bool entry;		/* includeEntry: each event with the entry's info */
	char dir[FILES_PATH_MAX + 1];	/* the watched directory, as the session names it */
};

static const char *const event_types[] = {
	[WATCH_CREATE] = "EVENT_TYPE_CREATE", [WATCH_WRITE] = "EVENT_TYPE_WRITE",
	[WATCH_REMOVE] = "EVENT_TYPE_REMOVE", [WATCH_RENAME] = "EVENT_TYPE_RENAME",
	[WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
};

static void watch_event(void *ctx, enum watch_kind kind, const char *name)
{
	struct watch_stream *ws = ctx;
	char full[2 * FILES_PATH_MAX + 2];
	struct buf ev = BUF_INIT;
	json_t *fse;
	int err;

	fse = json_pack("{s:o, s:s}", "name", http_string(name), "type", event_types[kind]);
	/* Best effort, as envd: the entry as it is now, when it still is. */
	if (fse && ws->entry && kind != WATCH_REMOVE && kind != WATCH_RENAME) {
		json_t *entry;

		snprintf(full, sizeof(full), "%s%s%s", ws->dir, *ws->dir ? "/" : "", name);
		if (strlen(full) <= FILES_PATH_MAX && (entry = stat_json(ws->s, full, &err)))
			json_object_set_new(fse, "entry", entry);
	}
	/* WatchDirResponse's oneof is its own: no "event" around it. */
	if (fse && envelope(&ev, 0, json_pack("{s:o}", "filesystem", fse)) == 0)
		stream_feed(ws->st, &ev, true);
	buf_release(&ev);
}

static void watch_end(void *ctx, const char *why)
{
	struct watch_stream *ws = ctx;
	struct buf out = BUF_INIT;

	(void)why;	/* the directory went, or petri stops: the stream ends */
	end_stream(&out, NULL, NULL);
	stream_feed_end(ws->st, &out, false);
	stream_feed_put(ws->st);
}

/* The client went: the watch stops (unless it ended by itself). */
static void watch_closed(void *state)
{
	struct watch_stream *ws = state;
	struct watch *w = ws->w;

	ws->w = NULL;
	if (w && watch_stop(w))
		stream_feed_put(ws->st);
}

static void watch_release(void *state)
{
	struct watch_stream *ws = state;

	if (ws->w)	/* ended by itself: its end put the feeder's reference */
		watch_stop(ws->w);
}

#define WATCH_KEEPALIVE_JSON "{\"keepalive\":{}}"
_Static_assert(sizeof(WATCH_KEEPALIVE_JSON) - 1 == 0x10, "the keepalive envelope's length");

static const struct stream_wire watch_wire = {
	.content_type = "application/connect+json",
	.state_size = sizeof(struct watch_stream),
	.keepalive = "\0\0\0\0\x10" WATCH_KEEPALIVE_JSON,
	.keepalive_len = ENVELOPE_HDR + sizeof(WATCH_KEEPALIVE_JSON) - 1,
	.release = watch_release,
};

static int is_dir_entry(void *ctx, const struct session_entry *en)
{
	*(bool *)ctx = S_ISDIR(en->st->st_mode);
	return 0;
}

static enum MHD_Result watch_dir(struct api_req *rq, struct session *s)
{
	char rel[FILES_PATH_MAX + 1], reason[512];
	struct watch_stream *ws;
	struct stream *st = NULL;
	enum MHD_Result answered;
	json_t *req, *path, *recursive, *entry;
	struct buf ev = BUF_INIT;
	struct watch *w = NULL;
	bool dir = false;
	struct fail f;
	enum sm_result r;
	int err;

	if (!(req = stream_request(rq, &answered)))
		return answered;
	path = json_object_get(req, "path");
	recursive = json_object_get(req, "recursive");
	entry = json_object_get(req, "includeEntry");
	if ((path && !json_is_string(path)) || (recursive && !json_is_boolean(recursive)) ||
	    (entry && !json_is_boolean(entry))) {
		json_decref(req);
		return stream_fail(rq, "invalid_argument", "'path' is a string, 'recursive' and "
				   "'includeEntry' booleans");
	}
	if (!sdk_to_rel(s, path ? json_string_value(path) : "", true, rel, &f)) {
		json_decref(req);
		return stream_fail(rq, f.code ? f.code : "invalid_argument", "%s", f.message);
	}
	if ((err = session_file_stat(s, rel, is_dir_entry, &dir)) < 0 || !dir) {
		json_decref(req);
		if (err == 0)
			err = -ENOTDIR;
		fail_errno(&f, s, err, json_string_value(path));
		return stream_fail(rq, f.code, "%s", f.message);
	}
	answered = stream_open(rq, s, &watch_wire, NULL, watch_closed, &st);
	if (!st) {
		json_decref(req);
		return answered;
	}
	ws = stream_state(st);
	ws->st = st;
	ws->s = s;
	ws->entry = json_is_true(entry);
	memcpy(ws->dir, rel, strlen(rel) + 1);
	if (envelope(&ev, 0, json_pack("{s:{}}", "start")) == 0)
		stream_feed(st, &ev, false);
	buf_release(&ev);
	r = session_watch_start(s, rel, json_is_true(recursive),
				&(struct watch_sink){ watch_event, watch_end, ws }, &w, reason,
				sizeof(reason));
	if (r != SM_OK) {
		const char *code;
		char msg[512];

		sm_connect_error(r, reason, &code, msg, sizeof(msg));
		close_with(st, code, msg);
	} else {
		ws->w = w;
	}
	json_decref(req);
	return answered;
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
	if (content_type_is(rq, "application/connect+json")) {
		if (!strcmp(path + sizeof(fs) - 1, "WatchDir"))
			return watch_dir(rq, s);
		return stream_fail(rq, "unimplemented", "petri offers no filesystem.Filesystem/%.64s"
				   " stream (WatchDir is the one)", path + sizeof(fs) - 1);
	}
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
