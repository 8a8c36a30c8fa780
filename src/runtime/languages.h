/* The languages petri runs: one table that every front end reads (the CLI,
 * the HTTP API, MCP, petri check) and that docs/openapi.json must match
 * (tests/unit/test_languages.c compares them, and the table with the
 * driver's own list).  How each language runs is the driver's business
 * (src/runtime/driver.py); this table only names and describes it.
 *
 * A client may say a language by its name or by an alias ("py", "sh");
 * everything past the front end (box_exec, sessions, the record, the driver)
 * sees the canonical name only. */
#ifndef PETRI_LANGUAGES_H
#define PETRI_LANGUAGES_H

#include <jansson.h>
#include <stddef.h>

struct language {
	const char *name;		/* canonical: what the driver is sent */
	const char *const *aliases;	/* other names clients use; NULL-terminated */
	const char *const *extensions;	/* for petri run FILE, with the dot */
	const char *summary;		/* how it runs, one line (MCP tools/list) */
};

/* The table, lang_count entries; the first is the default language. */
extern const struct language lang_table[];
extern const size_t lang_count;

/* By name or alias (exact, case-sensitive); NULL if unknown or NULL. */
const struct language *lang_find(const char *name);

/* By a file's extension ("x.py"); NULL if it has none petri knows. */
const struct language *lang_by_path(const char *path);

/* "python, bash or c" into buf (always terminated). */
void lang_names(char *buf, size_t len);

/* The message every front end gives for a language it does not know: got
 * is what the client sent (NULL: not a string).  It is quoted back only when
 * short and printable, so that a hostile value cannot shape the message. */
void lang_unknown_message(char *buf, size_t len, const char *got);

/* A request's "language" value: the language, or NULL with the message of
 * lang_unknown_message() in err (not a string, a NUL inside, unknown).
 * JSON null is not handled here: the caller knows its default. */
const struct language *lang_from_json(const json_t *v, char *err, size_t errlen);

#endif
