#include "exec/languages.h"

#include <stdio.h>
#include <string.h>

#include "util/utf8.h"

#define ECHO_MAX 32	/* longest unknown name quoted back in a message */

static const char *const none[] = { NULL };
static const char *const python_aliases[] = { "py", "python3", NULL };
static const char *const python_ext[] = { ".py", NULL };
static const char *const bash_aliases[] = { "sh", NULL };
static const char *const bash_ext[] = { ".sh", ".bash", NULL };
static const char *const c_ext[] = { ".c", NULL };
static const char *const js_aliases[] = { "js", "node", "nodejs", NULL };
static const char *const js_ext[] = { ".js", ".cjs", NULL };
static const char *const ts_aliases[] = { "ts", NULL };
static const char *const ts_ext[] = { ".ts", ".cts", NULL };
static const char *const r_aliases[] = { "R", NULL };
static const char *const r_ext[] = { ".R", ".r", NULL };
static const char *const java_aliases[] = { "jshell", NULL };
static const char *const java_ext[] = { ".jsh", ".java", NULL };

/* The programs' helpers, /opt/petri/run.js (JavaScript and TypeScript) and
 * /opt/petri/profile.R, leave the values and the plots in $PETRI_RESULTS
 * (docs/languages.md). */
static const struct language builtin[] = {
	{ "python", python_aliases, python_ext,
	  "Python 3 in the session's long-lived interpreter: variables, imports and "
	  "functions persist between calls; a final expression's value is returned",
	  NULL, NULL, NULL, NULL },
	{ "bash", bash_aliases, bash_ext,
	  "a bash script, run as a child process in /work",
	  "{tmp}/main.sh", NULL, "/bin/bash {file}", "/bin/bash --version" },
	{ "c", none, c_ext,
	  "one C file with main(), compiled with gcc, then run in /work",
	  "{tmp}/main.c", "gcc -O2 -std=gnu17 -o prog main.c -lm", "{tmp}/prog",
	  "gcc --version" },
	{ "javascript", js_aliases, js_ext,
	  "a Node.js script, run in /work (require works); the value of its last "
	  "expression is returned",
	  "{tmp}/main.js", NULL, "node /opt/petri/run.js {file}", "node --version" },
	/* run.js again: the code transpiled first, with the typescript module
	 * (the working directory's own, else Debian's node-typescript). */
	{ "typescript", ts_aliases, ts_ext,
	  "a TypeScript script: its types stripped (no type checking), then run as "
	  "javascript is; the value of its last expression is returned",
	  "{tmp}/main.ts", NULL, "node /opt/petri/run.js --typescript {file}",
	  "node /opt/petri/run.js --typescript-version" },
	{ "r", r_aliases, r_ext,
	  "an R script run with Rscript in /work: each value R's prompt would print "
	  "comes back as a result instead, and every plot as a PNG image",
	  "{tmp}/main.R", NULL, "env R_PROFILE_USER=/opt/petri/profile.R Rscript {file}",
	  "Rscript --version" },
	/* Run.java: the snippets through JShell in its own JVM (one JVM, no
	 * second one to execute in); a client JIT only and the serial
	 * collector, for a short run's start. */
	{ "java", java_aliases, java_ext,
	  "Java snippets as jshell runs them (statements, declarations, methods and "
	  "classes, no main needed), in /work; the value of the last expression is "
	  "returned; the environment's variables are also system properties",
	  "{tmp}/main.jsh", NULL, "java -XX:-UsePerfData -XX:TieredStopAtLevel=1 "
	  "-XX:+UseSerialGC -Xshare:auto /opt/petri/Run.java {file}", "java -version" },
};

#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

static const struct language *extra;
static size_t nextra;

size_t lang_count(void)
{
	return NBUILTIN + nextra;
}

const struct language *lang_at(size_t i)
{
	return i < NBUILTIN ? &builtin[i] : &extra[i - NBUILTIN];
}

const char *lang_default(void)
{
	return builtin[0].name;
}

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list && list[i]; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static const struct language *find_in(const struct language *t, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (!strcmp(t[i].name, name) || in_list(t[i].aliases, name))
			return &t[i];
	return NULL;
}

const struct language *lang_find(const char *name)
{
	const struct language *l = find_in(builtin, NBUILTIN, name);

	return l ? l : find_in(extra, nextra, name);
}

const struct language *lang_by_path(const char *path)
{
	const char *dot = strrchr(path, '.');

	for (size_t i = 0; dot && i < lang_count(); i++)
		if (in_list(lang_at(i)->extensions, dot))
			return lang_at(i);
	return NULL;
}

/* ---- what a configuration may add -------------------------------------- */

static bool letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Letters, digits and + - _ . only: the alphabet of names and files. */
static bool plain(const char *s)
{
	for (; *s; s++)
		if (!(letter(*s) || (*s >= '0' && *s <= '9') || strchr("+-_.", *s)))
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= LANG_NAME_MAX && letter(*s) && plain(s);
}

/* A plain file name, optionally in the private directory: no path of the
 * workspace's may be climbed out of, and the driver can put it in a
 * command line without quoting. */
static bool file_ok(const char *f)
{
	size_t n = strlen(f);

	if (n == 0 || n > LANG_FILE_MAX)
		return false;
	if (!strncmp(f, "{tmp}/", 6))
		f += 6;
	return *f && *f != '.' && *f != '-' && plain(f);
}

/* One line of printable ASCII: what the driver takes as a command (it
 * refuses the frame otherwise, and the session with it). */
static bool command_ok(const char *c)
{
	size_t n = strnlen(c, LANG_COMMAND_MAX + 1);

	if (n == 0 || n > LANG_COMMAND_MAX)
		return false;
	for (; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			return false;
	return true;
}

/* A summary: valid UTF-8 (it goes into JSON), no control characters. */
static bool text_ok(const char *s)
{
	size_t n = strnlen(s, LANG_COMMAND_MAX + 1);

	if (n > LANG_COMMAND_MAX || !utf8_valid(s, n))
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static size_t list_len(const char *const *list)
{
	size_t n = 0;

	while (list && list[n])
		n++;
	return n;
}

/* One added language, l = &extra[i]: its names are taken by no built-in
 * and no earlier added language. */
static int check_one(const struct language *extra_, size_t i, char *err, size_t errlen)
{
	const struct language *l = &extra_[i];
	const char *taken = NULL;

	if (!name_ok(l->name)) {
		snprintf(err, errlen, "[language.%.40s]: the name must be a letter, then letters, "
			 "digits or + - _ . (at most %d)", l->name, LANG_NAME_MAX);
		return -1;
	}
	if (list_len(l->aliases) > LANG_ALIASES_MAX || list_len(l->extensions) > LANG_ALIASES_MAX) {
		snprintf(err, errlen, "[language.%s]: at most %d aliases and %d extensions",
			 l->name, LANG_ALIASES_MAX, LANG_ALIASES_MAX);
		return -1;
	}
	for (size_t k = 0; l->aliases && l->aliases[k]; k++)
		if (!name_ok(l->aliases[k])) {
			snprintf(err, errlen, "[language.%s]: alias '%.40s' must be a letter, then "
				 "letters, digits or + - _ .", l->name, l->aliases[k]);
			return -1;
		}
	for (size_t k = 0; l->extensions && l->extensions[k]; k++) {
		const char *e = l->extensions[k];

		if (e[0] != '.' || !name_ok(e + 1)) {
			snprintf(err, errlen, "[language.%s]: extension '%.40s' must be a dot and a "
				 "name, e.g. .pl", l->name, e);
			return -1;
		}
	}
	if (!l->file || !file_ok(l->file)) {
		snprintf(err, errlen, "[language.%s]: 'file' must be a file name (letters, digits, "
			 "+ - _ .; not starting with . or -), optionally after {tmp}/, at most %d "
			 "bytes", l->name, LANG_FILE_MAX);
		return -1;
	}
	if (!l->run || !command_ok(l->run) || (l->compile && !command_ok(l->compile)) ||
	    (l->version && !command_ok(l->version))) {
		snprintf(err, errlen, "[language.%s]: 'run' is required; 'run', 'compile' and "
			 "'version' are one line of printable ASCII each, at most %d bytes",
			 l->name, LANG_COMMAND_MAX);
		return -1;
	}
	if (l->summary && !text_ok(l->summary)) {
		snprintf(err, errlen, "[language.%s]: 'summary' must be one line of UTF-8 text",
			 l->name);
		return -1;
	}
	if (find_in(builtin, NBUILTIN, l->name) || find_in(extra_, i, l->name))
		taken = l->name;
	for (size_t k = 0; !taken && l->aliases && l->aliases[k]; k++)
		if (find_in(builtin, NBUILTIN, l->aliases[k]) || find_in(extra_, i, l->aliases[k]) ||
		    !strcmp(l->aliases[k], l->name) || in_list(l->aliases + k + 1, l->aliases[k]))
			taken = l->aliases[k];
	if (taken) {
		snprintf(err, errlen, "[language.%s]: the name '%s' is already a language's",
			 l->name, taken);
		return -1;
	}
	return 0;
}

int lang_check(const struct language *extra_, size_t n, char *err, size_t errlen)
{
	if (n > LANG_EXTRA_MAX) {
		snprintf(err, errlen, "at most %d [language.NAME] sections", LANG_EXTRA_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (check_one(extra_, i, err, errlen) < 0)
			return -1;
	return 0;
}

void lang_configure(const struct language *extra_, size_t n)
{
	extra = n ? extra_ : NULL;
	nextra = n;
}

/* ---- messages ------------------------------------------------------------ */

void lang_names(char *buf, size_t len)
{
	size_t used = 0, n = lang_count();

	if (!len)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int k = snprintf(buf + used, len - used, "%s%s", sep, lang_at(i)->name);

		if (k < 0)
			break;
		used += (size_t)k;
	}
}

/* Printable ASCII other than the quote, and short: safe to show anyone. */
static bool echoable(const char *s)
{
	size_t n = strnlen(s, ECHO_MAX + 1);

	if (n == 0 || n > ECHO_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '\'')
			return false;
	return true;
}

void lang_unknown_message(char *buf, size_t len, const char *got)
{
	/* Every name: at most LANG_EXTRA_MAX + the built-ins, each short. */
	char names[(LANG_EXTRA_MAX + NBUILTIN) * (LANG_NAME_MAX + 4)];

	lang_names(names, sizeof(names));
	if (!got)
		snprintf(buf, len, "'language' must be a string: %s", names);
	else if (echoable(got))
		snprintf(buf, len, "unknown language '%s': must be %s", got, names);
	else
		snprintf(buf, len, "unknown language: must be %s", names);
}

const struct language *lang_from_json(const json_t *v, char *err, size_t errlen)
{
	const char *s = json_string_value(v);
	const struct language *l;

	/* "py\0x" is not "py" (a C string stops at the NUL), nor is it shown. */
	if (s && strlen(s) != json_string_length(v))
		s = "";
	if (!(l = lang_find(s)))
		lang_unknown_message(err, errlen, s);
	return l;
}

json_t *lang_program_json(const struct language *l)
{
	json_t *p;

	if (!l->file)
		return NULL;
	p = json_pack("{s:s, s:s}", "file", l->file, "run", l->run);
	if (p && l->compile && json_object_set_new(p, "compile", json_string(l->compile)) < 0) {
		json_decref(p);
		return NULL;
	}
	return p;
}
