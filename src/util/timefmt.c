#include "util/timefmt.h"

#include <stdio.h>
#include <time.h>

char *timefmt_rfc3339(double t, char out[TIMEFMT_LEN])
{
	time_t secs = (time_t)t;
	int ms = (int)((t - (double)secs) * 1000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	snprintf(out, TIMEFMT_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100, tm.tm_mday % 100,
		 tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100,
		 ms < 0 ? 0 : ms > 999 ? 999 : ms);
	return out;
}
