#include "util/cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool cidr_addr_parse(const char *s, unsigned char out[16])
{
	struct in_addr a4;

	if (inet_pton(AF_INET, s, &a4) == 1) {
		memcpy(out, v4_prefix, 12);
		memcpy(out + 12, &a4, 4);
		return true;
	}
	return inet_pton(AF_INET6, s, out) == 1;
}

bool cidr_addr_of(const struct sockaddr *sa, unsigned char out[16])
{
	if (sa && sa->sa_family == AF_INET) {
		memcpy(out, v4_prefix, 12);
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return true;
	}
	if (sa && sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

bool cidr_contains(const struct cidr *c, const unsigned char addr[16])
{
	unsigned whole = c->bits / 8, rest = c->bits % 8;

	if (memcmp(c->addr, addr, whole))
		return false;
	return !rest || !((c->addr[whole] ^ addr[whole]) & (unsigned char)(0xff << (8 - rest)));
}

bool cidr_loopback(const unsigned char addr[16])
{
	static const unsigned char one[16] = { [15] = 1 };

	return (!memcmp(addr, v4_prefix, 12) && addr[12] == 127) || !memcmp(addr, one, 16);
}

bool cidr_any(const struct cidr *v, size_t n, const unsigned char addr[16])
{
	for (size_t i = 0; i < n; i++)
		if (cidr_contains(&v[i], addr))
			return true;
	return false;
}

bool cidr_parse(const char *s, struct cidr *out)
{
	char text[64], *slash, *end;
	unsigned long bits;
	bool v4;

	if (strlen(s) >= sizeof(text))
		return false;
	snprintf(text, sizeof(text), "%s", s);
	slash = strchr(text, '/');
	if (slash)
		*slash = '\0';
	if (!cidr_addr_parse(text, out->addr))
		return false;
	v4 = !strchr(text, ':');
	out->bits = 128;
	if (slash) {
		if (!slash[1] || slash[1] == '+' || slash[1] == '-' || slash[1] == ' ')
			return false;
		bits = strtoul(slash + 1, &end, 10);
		if (*end || bits > (v4 ? 32u : 128u))
			return false;
		out->bits = (unsigned)bits + (v4 ? 96u : 0u);
	}
	/* No host bits past the prefix. */
	for (unsigned i = out->bits; i < 128; i++)
		if (out->addr[i / 8] & (0x80 >> (i % 8)))
			return false;
	return true;
}

void cidr_addr_text(const unsigned char addr[16], char *out, size_t len)
{
	char text[INET6_ADDRSTRLEN] = "?";

	if (!memcmp(addr, v4_prefix, 12))
		inet_ntop(AF_INET, addr + 12, text, sizeof(text));
	else
		inet_ntop(AF_INET6, addr, text, sizeof(text));
	snprintf(out, len, "%s", text);
}

bool cidr_is_v4(const struct cidr *c)
{
	return c->bits >= 96 && !memcmp(c->addr, v4_prefix, 12);
}

void cidr_text(const struct cidr *c, char *out, size_t len)
{
	char addr[INET6_ADDRSTRLEN];
	bool v4 = cidr_is_v4(c);

	cidr_addr_text(c->addr, addr, sizeof(addr));
	if (c->bits == 128)
		snprintf(out, len, "%s", addr);
	else
		snprintf(out, len, "%s/%u", addr, v4 ? c->bits - 96 : c->bits);
}
