/* The languages petri runs: one table that every front end reads (the CLI,
 * the HTTP API, MCP, petri check, the request model) and that the box sends
 * to the driver with each execution.  The built-in entries are here; an
 * operator adds more with [language.NAME] sections (docs/configuration.md),
 * which config.c parses and lang_configure() installs, once, at start.
 *
 * Python runs in the driver's own interpreter (src/runtime/driver.py).  Every
 * other language is a program: the code is written to `file`, compiled with
 * `compile` when there is one, and started with `run`.  In those three,
 * "{tmp}" is a private directory the driver makes for the one execution and
 * removes after, and "{file}" (in the commands) is where the code was
 * written.  compile runs in the directory of the file, run in the
 * execution's working directory, both inside the session's sandbox.
 *
 * A client may say a language by its name or by an alias ("py", "sh");
 * everything past the front end (the request, sessions, the record, the driver)
 * sees the canonical name only. */
#ifndef PETRI_LANGUAGES_H
#define PETRI_LANGUAGES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define LANG_NAME_MAX 32	/* a name or alias, in bytes */
#define LANG_FILE_MAX 64	/* `file`, "{tmp}/" included */
#define LANG_COMMAND_MAX 1024	/* compile, run, version */
#define LANG_ALIASES_MAX 8	/* aliases, and likewise extensions, of one language */
#define LANG_EXTRA_MAX 32	/* languages a configuration may add */

struct language {
	const char *name;		/* canonical: what the record keeps */
	const char *const *aliases;	/* other names clients use; NULL-terminated,
					 * never NULL (empty: { NULL }) */
	const char *const *extensions;	/* for petri run FILE, with the dot; likewise */
	const char *summary;		/* how it runs, one line (MCP tools/list) */
	const char *file;		/* NULL: Python, in the driver's interpreter */
	const char *compile;		/* NULL: none */
	const char *run;
	const char *version;		/* prints the version first; NULL: none */
};

/* The table: the built-in languages, then those lang_configure() added.
 * lang_at(i), for i < lang_count(); lang_at(0) is the default, Python. */
size_t lang_count(void);
const struct language *lang_at(size_t i);
const char *lang_default(void);

/* Check the languages a configuration adds (names, files, commands, and
 * that no name or alias is taken); 0, or -1 with why in err, naming the
 * [language.NAME] section. */
int lang_check(const struct language *extra, size_t n, char *err, size_t errlen);

/* Add them to the table (checked first; NULL, 0: the built-ins alone).  The
 * table points at them: they must outlive every lookup.  Called at start,
 * before any thread looks languages up. */
void lang_configure(const struct language *extra, size_t n);

/* By name or alias (exact, case-sensitive); NULL if unknown or NULL. */
const struct language *lang_find(const char *name);

/* By a file's extension ("x.py"); NULL if it has none petri knows. */
const struct language *lang_by_path(const char *path);

/* "python, bash, c, javascript, typescript or r" into buf (always terminated). */
void lang_names(char *buf, size_t len);

/* The message every front end gives for a language it does not know: got
 * is what the client sent (NULL: not a string).  It is quoted back only when
 * short and printable, so that a hostile value cannot shape the message;
 * every language is named, however many an operator added. */
void lang_unknown_message(char *buf, size_t len, const char *got);

/* A request's "language" value: the language, or NULL with the message of
 * lang_unknown_message() in err (not a string, a NUL inside, unknown).
 * JSON null is not handled here: the caller knows its default. */
const struct language *lang_from_json(const json_t *v, char *err, size_t errlen);

/* What the driver needs to run a program language: {"file", "compile"?,
 * "run"}; NULL for Python (or no memory). */
json_t *lang_program_json(const struct language *l);

#endif
