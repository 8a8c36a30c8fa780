/* GET /v1/executions: the whole execution record, across sessions and
 * one-shot runs (which no session's listing shows), newest first: what a
 * person checking the server reads from the top.  One session's listing,
 * oldest first, is GET /v1/sessions/{id}/executions (handlers.c); both
 * take the same `limit` and `before`. */
#include <string.h>

#include "api/http.h"
#include "util/num.h"

bool http_list_args(struct api_req *rq, uint32_t *limit, uint32_t *before,
		    enum MHD_Result *answered)
{
	const char *limit_arg = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							      "limit");
	const char *before_arg = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							       "before");

	*limit = 100;
	*before = 0;
	if (limit_arg && !num_u32(limit_arg, 1, 1000, limit)) {
		*answered = http_error(rq, 400, "invalid_request",
				       "'limit' must be an integer from 1 to 1000");
		return false;
	}
	if (before_arg && !num_u32(before_arg, 1, UINT32_MAX, before)) {
		*answered = http_error(rq, 400, "invalid_request", "'before' must be the seq of "
				       "an execution (an integer from 1)");
		return false;
	}
	return true;
}

enum MHD_Result handle_executions(struct api_req *rq)
{
	const char *which = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
							 "session");
	enum record_scope scope = RECORD_ALL;
	enum MHD_Result answered = MHD_NO;
	uint32_t limit, before;
	bool truncated;
	json_t *list;

	if (strcmp(rq->method, "GET"))
		return http_not_allowed(rq, "GET");
	if (!http_list_args(rq, &limit, &before, &answered))
		return answered;
	if (which) {
		/* One session's executions have their own listing: a second
		 * way to ask for them would be a second set of answers (404,
		 * 410) to keep alike. */
		if (strcmp(which, "none"))
			return http_error(rq, 400, "invalid_request",
					  "'session' must be 'none' (only the one-shot runs); one "
					  "session's executions are at GET /v1/sessions/{id}/executions");
		scope = RECORD_ONESHOTS;
	}
	list = smgr_all_executions(rq->sm, scope, (int)limit, before, &truncated);
	if (!list)
		return http_error(rq, 500, "internal", "out of memory");
	return http_json(rq, 200, json_pack("{s:o, s:b}", "executions", list, "truncated",
					    truncated));
}
