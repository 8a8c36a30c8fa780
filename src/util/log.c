#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

__attribute__((format(printf, 3, 0)))
static void vlog(enum log_level level, int err, const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char line[2048], safe[8192];
	int n;

	if (level > max_level)
		return;
	/* Format the whole line first so that concurrent threads do not
	 * interleave halves of their messages on stderr. */
	n = snprintf(line, sizeof(line), "%s: %s: ", prefix, names[level]);
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
	vlog(level, 0, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_errno(enum log_level level, int err, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog(level, err, fmt, ap);
	va_end(ap);
	errno = saved;
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
	vlog(LOG_ERR, 0, fmt, ap);
	va_end(ap);
	exit(status);
}
