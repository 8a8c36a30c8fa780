#include "util/ids.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

static bool node_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool id_node_valid(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!node_char(s[n]) || n >= ID_NODE_MAX)
			return false;
	return n > 0;
}

void id_node_from_host(const char *host, char out[ID_NODE_MAX + 1])
{
	char all[256];
	size_t n = 0;

	for (const char *p = host; *p && *p != '.' && n < sizeof(all) - 1; p++) {
		char c = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;

		if (node_char(c))
			all[n++] = c;
	}
	all[n] = '\0';
	if (!n)
		snprintf(out, ID_NODE_MAX + 1, "%s", ID_NODE_DEFAULT);
	else
		snprintf(out, ID_NODE_MAX + 1, "%s", all + (n > ID_NODE_MAX ? n - ID_NODE_MAX : 0));
}

int id_random_hex(char *out, size_t hex)
{
	unsigned char raw[64];
	size_t n = (hex + 1) / 2;

	if (n > sizeof(raw) || getrandom(raw, n, 0) != (ssize_t)n)
		return -EIO;
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	out[hex] = '\0';
	return 0;
}

int id_make(char *out, size_t size, const char *prefix, const char *node, size_t hex)
{
	int n;

	if (!id_node_valid(node))
		return -EINVAL;
	n = snprintf(out, size, "%s_%s-", prefix, node);
	if (n < 0 || (size_t)n + hex >= size)
		return -EINVAL;
	return id_random_hex(out + n, hex);
}
