/* RFC 3339 timestamps in UTC with milliseconds, as the API writes them. */
#ifndef PETRI_TIMEFMT_H
#define PETRI_TIMEFMT_H

#include <stdbool.h>

#define TIMEFMT_LEN 32

/* "2026-11-30T03:45:41.755Z" for t seconds since the epoch, into out. */
char *timefmt_rfc3339(double t, char out[TIMEFMT_LEN]);

/* The time s names, in seconds since the epoch: RFC 3339
 * ("2026-11-30T03:45:41.755Z", "2026-11-30T04:45:41+01:00"; seconds and
 * their fraction optional, 't' or ' ' for 'T', 'z' for 'Z') or a date
 * ("2026-11-30": its midnight, UTC).  false for anything else, trailing
 * bytes and impossible dates (February 30) included. */
bool timefmt_parse(const char *s, double *out);

#endif
