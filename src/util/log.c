#include "util/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static enum log_level max_level = LOG_WARN;
static const char *prefix = "petri";

void log_set_level(enum log_level level) { max_level = level; }
enum log_level log_get_level(void) { return max_level; }
void log_set_prefix(const char *p) { prefix = p; }

/* Messages quote what clients and sandboxes sent (URLs, names): a newline
 * or an escape sequence in them must not forge a log line or reach the
 * operator's terminal.  Control bytes become \xNN. */
static const char *escape_controls(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (; *in && o + 5 < outlen; in++) {
		unsigned char c = (unsigned char)*in;

		if (c < 0x20 || c == 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	return out;
}

/* "2026-11-30T03:45:41.755Z " (UTC, as the API and the record write
 * times), or "" when the clock cannot be read. */
static void stamp(char *out, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char day[32];

	out[0] = '\0';
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0 || !gmtime_r(&ts.tv_sec, &tm) ||
	    !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm))
		return;
	snprintf(out, len, "%.32s.%03dZ ", day, (int)(ts.tv_nsec / 1000000));
}

/* stamped: a log line (time first, for whoever reads the daemon's log);
 * die()'s last word to a command's user is not. */
__attribute__((format(printf, 4, 0)))
static void vlog(enum log_level level, int err, bool stamped, const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char line[2048], safe[8192], when[48] = "";
	int n;

	if (level > max_level)
		return;
	if (stamped)
		stamp(when, sizeof(when));
	/* Format the whole line first so that concurrent threads do not
	 * interleave halves of their messages on stderr. */
	n = snprintf(line, sizeof(line), "%s%s: %s: ", when, prefix, names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (err) {
		size_t len = strlen(line);
		snprintf(line + len, sizeof(line) - len, ": %s", strerror(err));
	}
	fprintf(stderr, "%s\n", escape_controls(line, safe, sizeof(safe)));
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog(level, 0, true, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_errno(enum log_level level, int err, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog(level, err, true, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, 0, false, fmt, ap);
	va_end(ap);
}

static void (*on_die)(int status, const char *message);

void die_hook(void (*fn)(int status, const char *message))
{
	on_die = fn;
}

void die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (on_die) {
		char msg[2048];
		va_list copy;

		va_copy(copy, ap);
		vsnprintf(msg, sizeof(msg), fmt, copy);
		va_end(copy);
		on_die(status, msg);
	}
	vlog(LOG_ERR, 0, false, fmt, ap);
	va_end(ap);
	exit(status);
}
