/* Rules of a session's network policy from clients (POST /v1/sessions
 * "network", [network] allow/deny): net_rule_parse; and the operator's
 * package index URL ([network] package_index): net_index_parse.
 *
 * Whatever it accepts is written back by net_rule_text into text that
 * parses to the same rule (what a session shows is what applies); a name
 * is lower case, at most 253 bytes, of letters, digits, '-', '_' and
 * dots, never empty between dots; a range is IPv4.  A refusal says why.
 * An index it accepts is the input itself, printable ASCII without quotes,
 * http:// or https://, its host one name (no wildcard) or one address.
 * The input is the rule; a NUL ends it, as in C. */
#include <assert.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), why[200], text[NET_NAME_MAX + 8];
	struct net_rule r, again;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	for (int deny = 0; deny <= 1; deny++) {
		why[0] = '\0';
		if (!net_rule_parse(s, deny, &r, why, sizeof(why))) {
			assert(why[0] && strlen(why) < sizeof(why));
			continue;
		}
		if (r.is_name) {
			size_t n = strlen(r.name);

			assert(n >= 1 && n <= NET_NAME_MAX);
			assert(r.name[0] != '.' && r.name[n - 1] != '.' && !strstr(r.name, ".."));
			for (size_t i = 0; i < n; i++)
				assert(islower((unsigned char)r.name[i]) || isdigit((unsigned char)r.name[i]) ||
				       strchr("-_.", r.name[i]));
		} else {
			assert(r.range.bits >= 96 && r.range.bits <= 128);
			assert(r.range.addr[10] == 0xff && r.range.addr[11] == 0xff);
		}
		net_rule_text(&r, text, sizeof(text));
		assert(net_rule_parse(text, deny, &again, why, sizeof(why)));
		assert(again.is_name == r.is_name && again.wildcard == r.wildcard);
		assert(r.is_name ? !strcmp(again.name, r.name)
				 : !memcmp(&again.range, &r.range, sizeof(r.range)));
	}
	{
		struct net_index ix;

		why[0] = '\0';
		if (!net_index_parse(s, &ix, why, sizeof(why))) {
			assert(why[0] && !ix.url[0]);
		} else {
			assert(!strcmp(ix.url, s) && strlen(s) <= NET_URL_MAX);
			assert(!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8));
			assert(ix.plain == !strncmp(s, "http://", 7));
			for (const char *c = s; *c; c++)
				assert(*c > ' ' && *c < 0x7f && !strchr("\"'\\", *c));
			assert(!ix.host.wildcard && ix.hostport[0]);
			assert(ix.host.is_name || ix.host.range.bits == 128);
		}
	}
	free(s);
	return 0;
}
