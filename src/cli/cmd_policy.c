/* petri policy — the seccomp allow-list, for review. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "jail/jail.h"

int cmd_policy(int argc, char **argv)
{
	size_t n;
	const char *const *names = jail_seccomp_allowed(&n);
	bool count_only = argc > 1 && !strcmp(argv[1], "--count");

	if (argc > 1 && !count_only) {
		fprintf(stderr, "usage: petri policy [--count]\n");
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	if (count_only) {
		printf("%zu\n", n);
		return 0;
	}
	printf("# %zu system calls allowed (x86_64); all others fail with ENOSYS,\n"
	       "# dangerous ones with EPERM; clone, socket, socketpair, ioctl,\n"
	       "# personality, fcntl and fadvise64 are checked by argument\n"
	       "# (see docs/security.md)\n", n);
	for (size_t i = 0; i < n; i++)
		printf("%s\n", names[i]);
	return 0;
}
