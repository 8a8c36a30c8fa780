/* net/policy — rules and policies in text (policy.h). */
#include "net/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = { "none", "allowlist", "open" };

const char *net_mode_name(enum net_mode m)
{
	return (unsigned)m < 3 ? mode_names[m] : "none";
}

bool net_mode_parse(const char *s, enum net_mode *out)
{
	for (unsigned i = 0; i < 3; i++)
		if (!strcmp(s, mode_names[i])) {
			*out = (enum net_mode)i;
			return true;
		}
	return false;
}

bool net_config_enabled(const struct net_config *c)
{
	return c->deflt.mode != NET_NONE || c->clients_may != NET_NONE;
}

/* An address or a range rather than a name: it has a '/' or a ':', or
 * only digits and dots. */
static bool looks_like_address(const char *s)
{
	if (!*s)
		return false;
	if (strchr(s, '/') || strchr(s, ':'))
		return true;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s) && *s != '.')
			return false;
	return true;
}

/* A host name as DNS spells it: labels of letters, digits, '-' and '_'
 * (SRV-style names), 1 to 63 bytes each, neither starting nor ending with
 * '-'; lowered into out. */
static bool name_ok(const char *s, char *out, char *err, size_t errlen)
{
	size_t n = strlen(s), label = 0;

	if (n && s[n - 1] == '.')
		n--;			/* the root's dot: the same name */
	if (n == 0 || n > NET_NAME_MAX) {
		snprintf(err, errlen, "a domain name has 1 to %d characters", NET_NAME_MAX);
		return false;
	}
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)s[i] : '.';

		if (c == '.') {
			if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-') {
				snprintf(err, errlen, "'%.*s' is not a domain name (a label is empty, "
					 "longer than 63 characters, or starts or ends with '-')",
					 (int)n, s);
				return false;
			}
			label = 0;
			out[i] = '.';
			continue;
		}
		if (!isalnum(c) && c != '-' && c != '_') {
			snprintf(err, errlen, "'%.*s' is not a domain name (letters, digits, '-' and "
				 "'_' in labels between dots)", (int)n, s);
			return false;
		}
		out[i] = (char)tolower(c);
		label++;
	}
	out[n] = '\0';
	return true;
}

bool net_rule_parse(const char *s, bool deny, struct net_rule *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!strcmp(s, "*")) {
		snprintf(err, errlen, deny ? "'*' cannot be denied: ask for no network instead"
					   : "'*' is not a rule here");
		return false;
	}
	if (looks_like_address(s)) {
		if (!cidr_parse(s, &out->range)) {
			snprintf(err, errlen, "'%.60s' is not an address or a range (a.b.c.d or "
				 "a.b.c.d/n, no bits set past the prefix)", s);
			return false;
		}
		if (!cidr_is_v4(&out->range)) {
			snprintf(err, errlen, "'%.60s': sandboxes reach IPv4 only; name an IPv4 "
				 "address or range", s);
			return false;
		}
		return true;
	}
	out->is_name = true;
	if (!strncmp(s, "*.", 2)) {
		out->wildcard = true;
		s += 2;
	}
	if (!name_ok(s, out->name, err, errlen))
		return false;
	if (out->wildcard && !strchr(out->name, '.')) {
		snprintf(err, errlen, "'*.%s' would match a whole top-level domain", out->name);
		return false;
	}
	return true;
}

void net_rule_text(const struct net_rule *r, char *out, size_t len)
{
	if (r->is_name)
		snprintf(out, len, "%s%s", r->wildcard ? "*." : "", r->name);
	else
		cidr_text(&r->range, out, len);
}

bool net_policy_add(struct net_policy *p, const char *rule, bool deny, char *err,
		    size_t errlen)
{
	size_t *n = deny ? &p->ndeny : &p->nallow;
	struct net_rule *v = deny ? p->deny : p->allow;

	if (!deny && !strcmp(rule, "*")) {
		p->mode = NET_OPEN;
		return true;
	}
	if (*n == NET_RULES_MAX) {
		snprintf(err, errlen, "at most %d rules in each list", NET_RULES_MAX);
		return false;
	}
	if (!net_rule_parse(rule, deny, &v[*n], err, errlen))
		return false;
	(*n)++;
	if (!deny && p->mode == NET_NONE)
		p->mode = NET_ALLOWLIST;
	return true;
}

bool net_policy_permitted(const struct net_config *c, const struct net_policy *p, char *err,
			  size_t errlen)
{
	enum net_mode m = p->mode;

	/* A range wider than a /8 is most of the internet: it asks for what
	 * '*' asks. */
	for (size_t i = 0; i < p->nallow; i++)
		if (!p->allow[i].is_name && p->allow[i].range.bits < 96 + 8)
			m = NET_OPEN;
	if (m <= c->clients_may)
		return true;
	snprintf(err, errlen, "the network %s asks for is more than this server lets a client "
		 "ask for (%s)", m == NET_OPEN ? "'*' (or a range wider than a /8)" :
		 "an allow-list",
		 c->clients_may == NET_NONE ? "none: sessions get the operator's default" :
		 "an allow-list, not '*'");
	return false;
}

bool net_upstream_parse(const char *s, struct net_config *c)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	struct in_addr a;
	unsigned long port = 53;

	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &a) != 1)
		return false;
	if (colon) {
		char *end;

		port = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || port == 0 || port > 65535)
			return false;
	}
	c->upstream_addr = a.s_addr;
	c->upstream_port = (uint16_t)port;
	return true;
}

bool net_policy_add_operator_denies(const struct net_config *c, struct net_policy *p,
				    char *err, size_t errlen)
{
	if (p->ndeny + c->deflt.ndeny > NET_RULES_MAX) {
		snprintf(err, errlen, "at most %zu deny rules here (the operator's take %zu of %d)",
			 NET_RULES_MAX - c->deflt.ndeny, c->deflt.ndeny, NET_RULES_MAX);
		return false;
	}
	for (size_t i = 0; i < c->deflt.ndeny; i++)
		p->deny[p->ndeny++] = c->deflt.deny[i];
	return true;
}

/* Does rule r cover host (one name or one address)?  An allowed name
 * covers that name, a wildcard the names under it; a denied name covers
 * the names under it too, as the resolver denies them (router.c:
 * covered()); a range covers its addresses. */
bool net_name_under(const char *name, const char *domain)
{
	size_t n = strlen(name), d = strlen(domain);

	return n > d + 1 && name[n - d - 1] == '.' && !strcmp(name + n - d, domain);
}

static bool rule_covers(const struct net_rule *r, bool deny, const struct net_rule *host)
{
	bool under;

	if (r->is_name != host->is_name)
		return false;
	if (!r->is_name)
		return cidr_contains(&r->range, host->range.addr);
	under = net_name_under(host->name, r->name);
	if (r->wildcard)
		return under;
	return !strcmp(r->name, host->name) || (deny && under);
}

bool net_policy_denies(const struct net_policy *p, const struct net_rule *host)
{
	for (size_t i = 0; i < p->ndeny; i++)
		if (rule_covers(&p->deny[i], true, host))
			return true;
	return false;
}

bool net_policy_reaches(const struct net_policy *p, const struct net_rule *host)
{
	bool allowed = p->mode == NET_OPEN;

	if (p->mode == NET_NONE || net_policy_denies(p, host))
		return false;
	for (size_t i = 0; !allowed && i < p->nallow; i++)
		allowed = rule_covers(&p->allow[i], false, host);
	return allowed;
}

/* The part of an index's URL, from libcurl's parser: true with *out (the
 * caller's to curl_free()), or false when it has none. */
static bool url_part(CURLU *u, CURLUPart what, char **out)
{
	*out = NULL;
	return curl_url_get(u, what, out, 0) == CURLUE_OK && *out;
}

bool net_index_parse(const char *url, struct net_index *out, char *err, size_t errlen)
{
	CURLU *u = NULL;
	char *scheme = NULL, *host = NULL, *port = NULL, why[200];
	bool ok = false;

	memset(out, 0, sizeof(*out));
	for (const unsigned char *c = (const unsigned char *)url; *c; c++)
		if (*c <= ' ' || *c >= 0x7f || *c == '"' || *c == '\\' || *c == '\'') {
			snprintf(err, errlen, "a URL here is printable ASCII without spaces or quotes");
			return false;
		}
	if (strlen(url) > NET_URL_MAX) {
		snprintf(err, errlen, "a URL here has at most %d characters", NET_URL_MAX);
		return false;
	}
	/* The host right after the scheme, as every client reads it (libcurl
	 * would also take "http:///name/"). */
	if ((strncmp(url, "http://", 7) || url[7] == '/') &&
	    (strncmp(url, "https://", 8) || url[8] == '/')) {
		snprintf(err, errlen, "'%.80s' is not an http:// or https:// URL", url);
		return false;
	}
	if (!(u = curl_url()) || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    !url_part(u, CURLUPART_SCHEME, &scheme) || !url_part(u, CURLUPART_HOST, &host) ||
	    (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
		snprintf(err, errlen, "'%.80s' is not an http:// or https:// URL", url);
		goto out;
	}
	if (!net_rule_parse(host, true, &out->host, why, sizeof(why)) ||
	    out->host.wildcard || (!out->host.is_name && out->host.range.bits != 128)) {
		snprintf(err, errlen, "the host of '%.80s' is not a domain name or an IPv4 "
			 "address", url);
		goto out;
	}
	url_part(u, CURLUPART_PORT, &port);
	snprintf(out->hostport, sizeof(out->hostport), "%s%s%s", host, port ? ":" : "",
		 port ? port : "");
	snprintf(out->url, sizeof(out->url), "%s", url);
	out->plain = !strcmp(scheme, "http");
	ok = true;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	if (!ok)
		memset(out, 0, sizeof(*out));
	return ok;
}

/* Is addr in one of the ranges of list (NET_NEVER_RANGES' form)? */
static bool in_ranges(const char *list, const unsigned char addr[16])
{
	char copy[256], *save = NULL;
	struct cidr c;

	snprintf(copy, sizeof(copy), "%s", list);
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
		if (cidr_parse(t, &c) && cidr_contains(&c, addr))
			return true;
	return false;
}

const char *net_never_reached(const struct net_config *c, const unsigned char addr[16])
{
	if (in_ranges(NET_NEVER_RANGES, addr))
		return "loopback, link-local, multicast or otherwise never reachable";
	if (in_ranges(NET_PRIVATE_RANGES, addr) && !cidr_any(c->reachable, c->nreachable, addr))
		return "a private address that [network] reachable does not name";
	return NULL;
}
