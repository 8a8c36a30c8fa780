/* events — GET /v1/events, the server's happenings as Server-Sent Events
 * (events.c says what and at what cost).  Internal to src/api. */
#ifndef PETRI_API_EVENTS_H
#define PETRI_API_EVENTS_H

#include "api/http.h"

struct events;

/* Watch sm's record and tick with hub (both must outlive it); share the
 * streams between cfg's keys.  0 or -ENOMEM. */
int events_new(const struct petri_config *cfg, struct smgr *sm, struct stream_hub *hub,
	       struct events **out);
/* End every stream (at their next read) and refuse new ones: at quiesce. */
void events_stop(struct events *ev);
/* After MHD stopped (no stream is left), before the hub is freed. */
void events_free(struct events *ev);

/* GET /v1/events. */
enum MHD_Result handle_events(struct api_req *rq);

#endif
