/* e2b — the E2B-compatible front end: the routes E2B's SDKs call (npm e2b
 * and @e2b/code-interpreter, the Python ones by the same wire), over the
 * same session layer as the native API.  An E2B sandbox is a petri session:
 * one id, one jail, the same limits, expiry, record and metrics; only the
 * words on the wire differ (docs/e2b.md).  Internal to src/api.
 *
 * The SDKs are pointed at petri with E2B_API_URL and E2B_SANDBOX_URL, both
 * the server's base URL (optionally ending in /e2b).  Then:
 *   - the control plane (create, connect, kill, timeout, info, list) comes
 *     by path, /sandboxes... and /v2/sandboxes..., with the API key in
 *     X-API-KEY;
 *   - the data plane comes to any path with the headers E2b-Sandbox-Id and
 *     E2b-Sandbox-Port: 49983 is envd (files, filesystem and process
 *     RPCs: e2b_envd.c), 49999 the code interpreter (execute, contexts:
 *     e2b_code.c).  It carries no API key: each sandbox has two random
 *     tokens, returned by create and connect, and every data-plane call
 *     must bring one (X-Access-Token, or E2B-Traffic-Access-Token, which
 *     is all the code interpreter's context calls send).  A sandbox id
 *     alone never reaches a sandbox, and an unknown id and a wrong token
 *     get the same answer.
 *
 * Threads: any.  The registry of E2B sandboxes (their tokens, template,
 * metadata and code contexts) has one lock, a leaf: nothing else is taken
 * under it. */
#ifndef PETRI_E2B_H
#define PETRI_E2B_H

#include <stdbool.h>

#include "api/http.h"
#include "exec/languages.h"
#include "util/ids.h"

#define E2B_ENVD_PORT		49983
#define E2B_CODE_PORT		49999
#define E2B_ENVD_VERSION	"0.6.4"	/* multipart and octet-stream uploads, metadata, watches with entries (docs/e2b.md) */
#define E2B_HOME		"/home/user"	/* the workspace, as the SDKs name it */
/* Code contexts per sandbox: a default one per language (at most
 * LANG_EXTRA_MAX + the 5 built in), then the client's own. */
#define E2B_CONTEXTS_MAX	80
/* An access token: "tok_" NODE "-" 64 hex digits, at most (util/ids.h). */
#define E2B_TOKEN_LEN		ID_LEN("tok", 64)

struct e2b;

int e2b_new(struct e2b **out);
void e2b_free(struct e2b *e);

/* What an incoming request is, from its headers (server.c, before the
 * body): not E2B's, the control plane, envd, the code interpreter, a
 * server the sandbox runs on another port (E2B_PORT: E2b-Sandbox-Id with
 * E2b-Sandbox-Port, or a Host that getHost() names, "PORT-SANDBOXID.
 * DOMAIN"), or a data-plane call to a port that is no number.  The native
 * API's paths (/v1/..., /healthz, /readyz, /metrics, /mcp) are never E2B's,
 * whatever the headers say, but for a Host of getHost()'s (*by_host
 * true): that names the sandbox's server, whatever the path. */
enum e2b_kind { E2B_NONE, E2B_CONTROL, E2B_ENVD, E2B_CODE, E2B_BAD_PORT, E2B_PORT };
enum e2b_kind e2b_kind_of(struct MHD_Connection *conn, const char *url, bool *by_host);

/* May this request be made (server.c, with the headers, before the body)?
 * The control plane's X-API-KEY against the server's keys; a data-plane
 * call's token against its sandbox's (which it names from then on:
 * rq->e2b_sid); a port petri does not serve, never.  false with the answer
 * queued (and counted). */
bool e2b_authorize(struct api_req *rq, enum MHD_Result *answered);

/* Answer an E2B request (on a worker). */
enum MHD_Result e2b_route(struct api_req *rq);

/* ---- for e2b_*.c ------------------------------------------------------- */

/* An error the SDKs read: {"code": status, "message": ...}. */
enum MHD_Result e2b_error(struct api_req *rq, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The path of a data-plane request without the optional /e2b prefix and
 * without its query: "/execute", "/filesystem.Filesystem/Stat". */
const char *e2b_route_path(const struct api_req *rq, char *buf, size_t len);

/* rel (relative to /work, or absolute on another of the sandbox's
 * filesystems) as the SDKs show it, into out: the way back from ws_path()
 * with E2B_HOME as the root (workspace/ws.h). */
void e2b_sdk_path(const char *rel, char *out, size_t len);
/* Is path E2B_HOME or a path below it ("/home/user/x", not "/home/user2")? */
bool e2b_in_home(const char *path);

/* The code contexts of a sandbox (the code interpreter's): each has an id
 * (what the SDK names it by, and the driver's context name), a language and
 * a cwd (an absolute path inside the sandbox).  The default context of a
 * language is the session's own namespace (ctx->is_default).  fresh is set
 * by a restart and taken by the next execution in the context; executions
 * counts those that started in it (E2B's execution_count). */
struct e2b_context {
	char id[40];
	char language[LANG_NAME_MAX + 1];
	char cwd[256];
	bool is_default;
	bool fresh;
	unsigned executions;
};
/* A new one into *out: 0, -ENOSPC past E2B_CONTEXTS_MAX, -ENOENT when the
 * sandbox is not (or no longer) E2B's. */
int e2b_context_add(struct e2b *e, const char *sid, const char *language, const char *cwd,
		    struct e2b_context *out);
/* Look up id: 0 with a copy in *out; -ENOENT. */
int e2b_context_get(struct e2b *e, const char *sid, const char *id, struct e2b_context *out);
/* An execution started in the context (its session claimed, so none other
 * runs): count it and, when it started fresh, clear fresh.  Taken only
 * once the execution surely starts, so that a refused one (busy) does not
 * lose a restart. */
void e2b_context_ran(struct e2b *e, const char *sid, const char *id, bool was_fresh);
/* remove: 0 or -ENOENT.  restart: mark it fresh; 0 or -ENOENT. */
int e2b_context_remove(struct e2b *e, const char *sid, const char *id);
int e2b_context_restart(struct e2b *e, const char *sid, const char *id);
/* Every context of the sandbox as the SDK lists them: [{id, language,
 * cwd}], NULL when out of memory. */
json_t *e2b_context_list(struct e2b *e, const char *sid);

/* The two halves of the data plane (e2b_envd.c, e2b_code.c): s is the
 * sandbox the request's token opened; path as e2b_route_path() gives it. */
enum MHD_Result e2b_envd(struct api_req *rq, struct session *s, const char *path);
enum MHD_Result e2b_code(struct api_req *rq, struct session *s, const char *path);

#endif
