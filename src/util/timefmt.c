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

/* n decimal digits at *p, advancing it; -1 if they are not there. */
static int digits(const char **p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (**p - '0');
	}
	return v;
}

bool timefmt_parse(const char *s, double *out)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, off = 0;
	double frac = 0;
	struct tm tm = { 0 };
	time_t t;

	if ((y = digits(&p, 4)) < 0 || *p++ != '-' || (mo = digits(&p, 2)) < 1 || mo > 12 ||
	    *p++ != '-' || (d = digits(&p, 2)) < 1 || d > mdays[mo - 1])
		return false;
	if (mo == 2 && d == 29 && (y % 4 || (y % 100 == 0 && y % 400)))
		return false;
	if (*p) {
		if (*p != 'T' && *p != 't' && *p != ' ')
			return false;
		p++;
		if ((h = digits(&p, 2)) < 0 || h > 23 || *p++ != ':' ||
		    (mi = digits(&p, 2)) < 0 || mi > 59)
			return false;
		if (*p == ':') {
			p++;
			/* 60: a leap second, as RFC 3339 allows. */
			if ((sec = digits(&p, 2)) < 0 || sec > 60)
				return false;
			if (*p == '.') {
				double scale = 0.1;

				if (*++p < '0' || *p > '9')
					return false;
				for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
					frac += (*p - '0') * scale;
			}
		}
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			int sign = *p++ == '-' ? -1 : 1, oh, om;

			if ((oh = digits(&p, 2)) < 0 || oh > 23 || *p++ != ':' ||
			    (om = digits(&p, 2)) < 0 || om > 59)
				return false;
			off = sign * (oh * 3600 + om * 60);
		} else {
			return false;
		}
		if (*p)
			return false;
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	*out = (double)t - off + frac;
	return true;
}
