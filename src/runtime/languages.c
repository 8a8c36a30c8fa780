#include "runtime/languages.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ECHO_MAX 32	/* longest unknown name quoted back in a message */

static const char *const python_aliases[] = { "py", "python3", NULL };
static const char *const python_ext[] = { ".py", NULL };
static const char *const bash_aliases[] = { "sh", NULL };
static const char *const bash_ext[] = { ".sh", ".bash", NULL };
static const char *const none[] = { NULL };
static const char *const c_ext[] = { ".c", NULL };

const struct language lang_table[] = {
	{ "python", python_aliases, python_ext,
	  "Python 3 in the session's long-lived interpreter: variables, imports and "
	  "functions persist between calls; a final expression's value is returned" },
	{ "bash", bash_aliases, bash_ext,
	  "a bash script, run as a child process in /work" },
	{ "c", none, c_ext,
	  "one C file with main(), compiled with gcc, then run in /work" },
};

const size_t lang_count = sizeof(lang_table) / sizeof(lang_table[0]);

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

const struct language *lang_find(const char *name)
{
	for (size_t i = 0; name && i < lang_count; i++)
		if (!strcmp(lang_table[i].name, name) || in_list(lang_table[i].aliases, name))
			return &lang_table[i];
	return NULL;
}

const struct language *lang_by_path(const char *path)
{
	const char *dot = strrchr(path, '.');

	for (size_t i = 0; dot && i < lang_count; i++)
		if (in_list(lang_table[i].extensions, dot))
			return &lang_table[i];
	return NULL;
}

void lang_names(char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < lang_count && used < len; i++) {
		const char *sep = i == 0 ? "" : i + 1 == lang_count ? " or " : ", ";
		int n = snprintf(buf + used, len - used, "%s%s", sep, lang_table[i].name);

		if (n < 0)
			break;
		used += (size_t)n;
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
	char names[128];

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
