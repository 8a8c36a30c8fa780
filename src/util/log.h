/* Logging for petri.  Three verbs, as in isolate: log_err() when petri itself
 * failed, log_warn() for something an operator should know, log_info() for
 * verbose tracing.  Messages are lowercase, quote their subject and append
 * strerror where an errno is involved (the _errno variants).
 *
 * Every line is one write to stderr: "2026-11-30T03:45:41.755Z petri serve:
 * info: message" (the time in UTC, milliseconds; the prefix; the level).  An
 * informational line is info, never a warning: a warning is something the
 * operator should act on or know is degraded.
 *
 * die() is for main() and for a child before exec only: library code returns
 * an error instead of exiting.  Its line carries no time: it is a command's
 * last word to its user ("petri: error: ...").
 */
#ifndef PETRI_LOG_H
#define PETRI_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Messages above this level are dropped; default LOG_WARN. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Prefix for every line, e.g. "petri" or "petri serve". Not copied. */
void log_set_prefix(const char *prefix);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Like log_msg() with ": strerror(err)" appended; err is a positive errno. */
void log_errno(enum log_level level, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_err(...)  log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Print an error and exit(status).  main() only. */
void die(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
/* A command's last word, as die() says it (no time), without exiting
 * (what it started must be stopped first).  main() only. */
void log_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What die() calls with its status and message before it exits (a command
 * that answers in JSON says why there too); NULL: nothing. */
void die_hook(void (*fn)(int status, const char *message));

#endif
