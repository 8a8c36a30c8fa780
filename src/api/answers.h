/* answers — what the daemon holds for clients that have not read it yet.
 *
 * An execution's answer (its result as JSON: up to the results cap and the
 * output, escaped) is made on a worker and then sent as fast as its client
 * reads.  Until the last byte is sent the daemon holds it, after the
 * execution's slot was given back: without a bound, clients that run
 * executions and read their answers slowly make the daemon hold any number
 * of them (a review's eight sessions took it from 1.2 to 2.8 GiB in 90 s,
 * then the kernel killed it).  So every answer the API queues is charged
 * here from when it is made until MHD frees it (sent, or its client gone):
 *
 * - to the server: at most max_answers_mb held in all.  Past it, requests
 *   that make large answers (executions, one-shots, MCP calls, listings of
 *   the record) are refused with 503 busy before they run, until clients
 *   have read;
 * - to its tenant (the API key the request carried, or its address: see
 *   share.h): each may hold at most its share of max_answers_mb, so that
 *   one key can never take the others' room.  Past its share, its heavy
 *   requests get 429 unread_answers.  A request is refused only when its
 *   tenant is over already: one answer, however large, always fits;
 * - to time: a client has http_timeout_s, then one second per
 *   min_read_kbps KiB of the answer, to read it all; past that it loses the
 *   connection, and the answer is let go.
 *
 * A stream (SSE, E2B's NDJSON) is charged what it holds when its execution
 * ends (at most its pending cap and the final event), until it is freed.
 *
 * Threads: any thread; the counts are atomics.  Internal to src/api. */
#ifndef PETRI_API_ANSWERS_H
#define PETRI_API_ANSWERS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/share.h"
#include "config/config.h"

struct answers;

/* 0 or -ENOMEM.  cfg outlives the answers. */
int answers_new(const struct petri_config *cfg, struct answers **out);
void answers_free(struct answers *a);

enum answers_room { ANSWERS_ROOM, ANSWERS_TENANT_FULL, ANSWERS_SERVER_FULL };
/* May tenant start a request whose answer the daemon will hold? */
enum answers_room answers_room(struct answers *a, const struct share_tenant *t);

/* A response that sends text (len bytes, consumed: freed with the response,
 * also on failure), charged to tenant until MHD frees it and cut short when
 * its client reads too slowly.  NULL when out of memory.  a NULL (code that
 * answers with no server behind it: the fuzzers): neither charged nor cut. */
struct MHD_Response *answers_response(struct answers *a, const struct share_tenant *t,
				      char *text, size_t len);

/* Charge and give back bytes held elsewhere (a finished stream's): give
 * back only what answers_charge() said it charged (false: out of memory,
 * the bytes go uncounted). */
bool answers_charge(struct answers *a, const struct share_tenant *t, size_t n);
void answers_release(struct answers *a, const struct share_tenant *t, size_t n);
/* When a client must have read n bytes held from now on (monotonic
 * seconds). */
double answers_deadline(const struct answers *a, size_t n);

/* Bytes held now by t (NULL: by all). */
size_t answers_held(struct answers *a, const struct share_tenant *t);

#endif
