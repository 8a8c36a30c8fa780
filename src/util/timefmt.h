/* RFC 3339 timestamps in UTC with milliseconds, as the API writes them. */
#ifndef PETRI_TIMEFMT_H
#define PETRI_TIMEFMT_H

#define TIMEFMT_LEN 32

/* "2026-11-30T03:45:41.755Z" for t seconds since the epoch, into out. */
char *timefmt_rfc3339(double t, char out[TIMEFMT_LEN]);

#endif
