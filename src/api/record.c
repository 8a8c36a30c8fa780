/* GET /v1/executions: the whole execution record, across sessions and
 * one-shot runs (which no session's listing shows), newest first: what a
 * person checking the server reads from the top.  One session's listing,
 * oldest first, is GET /v1/sessions/{id}/executions (handlers.c); both
 * take the same `limit` and `before`.
 *
 * What a listing costs is bounded (record.h): at most `limit` rows and
 * RECORD_LIST_MAX bytes, read through an index, written as text without
 * parsing what the record stores; it stops when its client hangs up; and
 * the listings and exports running at once are few (server.c), so that
 * they never hold the workers that executions need. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "util/num.h"

bool http_list_args(struct api_req *rq, struct record_query *q, enum MHD_Result *answered)
{
	const char *limit_arg = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							      "limit");
	const char *before_arg = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							       "before");
	uint32_t limit = 100, before = 0;

	if (limit_arg && !num_u32(limit_arg, 1, 1000, &limit)) {
		*answered = http_error(rq, 400, "invalid_request",
				       "'limit' must be an integer from 1 to 1000");
		return false;
	}
	if (before_arg && !num_u32(before_arg, 1, UINT32_MAX, &before)) {
		*answered = http_error(rq, 400, "invalid_request", "'before' must be the seq of "
				       "an execution (an integer from 1)");
		return false;
	}
	q->limit = (int)limit;
	q->before = before;
	return true;
}

bool http_list(struct api_req *rq, struct record_query *q, struct buf *out, bool *truncated,
	       enum MHD_Result *answered)
{
	int r;

	q->gone = http_gone;
	q->gone_arg = rq;
	r = smgr_list_executions(rq->sm, q, out, truncated);
	if (r == 0)
		return true;
	/* Nobody to answer: close. */
	*answered = r == -ECANCELED ? MHD_NO :
		    r == -ENOMEM ? http_error(rq, 500, "internal", "out of memory") :
		    http_error(rq, 500, "internal", "the record cannot be read");
	return false;
}

enum MHD_Result http_json_buf(struct api_req *rq, unsigned status, struct buf *b)
{
	size_t len;
	char *text = buf_detach(b, &len);

	if (!text)
		return http_error(rq, 500, "internal", "out of memory");
	return http_answer(rq, status, "application/json", text, len);
}

enum MHD_Result handle_executions(struct api_req *rq)
{
	const char *which = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							 "session");
	struct record_query q = { .scope = RECORD_ALL };
	enum MHD_Result answered = MHD_NO;
	struct buf b = BUF_INIT;
	bool truncated;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!http_list_args(rq, &q, &answered))
		return answered;
	if (which) {
		/* One session's executions have their own listing: a second
		 * way to ask for them would be a second set of answers (404,
		 * 410) to keep alike. */
		if (strcmp(which, "none"))
			return http_error(rq, 400, "invalid_request",
					  "'session' must be 'none' (only the one-shot runs); one "
					  "session's executions are at GET /v1/sessions/{id}/executions");
		q.scope = RECORD_ONESHOTS;
	}
	if (buf_append_str(&b, "{\"executions\":") < 0) {
		buf_release(&b);
		return http_error(rq, 500, "internal", "out of memory");
	}
	if (!http_list(rq, &q, &b, &truncated, &answered)) {
		buf_release(&b);
		return answered;
	}
	if (buf_appendf(&b, ",\"truncated\":%s}", truncated ? "true" : "false") < 0) {
		buf_release(&b);
		return http_error(rq, 500, "internal", "out of memory");
	}
	return http_json_buf(rq, 200, &b);
}
