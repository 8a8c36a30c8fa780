#include "exec/exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int exec_archive_name(char out[EXEC_ARCHIVE_NAME_LEN])
{
	uint64_t rnd;

	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	snprintf(out, EXEC_ARCHIVE_NAME_LEN, "%s%016llx", EXEC_ARCHIVE_PREFIX,
		 (unsigned long long)rnd);
	return 0;
}

char **exec_env_dup(const char *const *env)
{
	size_t n = 0;
	char **out;

	while (env && env[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(env[i]))) {
			exec_env_free(out);
			return NULL;
		}
	return out;
}

void exec_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}
