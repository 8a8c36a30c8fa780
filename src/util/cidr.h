/* cidr — address ranges an operator names: "10.0.0.0/8", "192.0.2.7"
 * (one address), "2001:db8::/32", "::1".  IPv4 ranges also match the
 * same addresses as a dual-stack socket reports them (::ffff:a.b.c.d).
 * The routers petri trusts ([server] trusted_proxies) are ranges. */
#ifndef PETRI_CIDR_H
#define PETRI_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct cidr {
	unsigned char addr[16];	/* IPv4 as ::ffff:a.b.c.d */
	unsigned bits;		/* of the 128 (an IPv4 /n is 96 + n) */
};

/* Parse s: true, or false when it is not an address with an optional
 * /prefix (host bits set beyond the prefix are refused: "10.0.0.1/8" is
 * a mistake, not a range). */
bool cidr_parse(const char *s, struct cidr *out);
/* The address in text (IPv4 or IPv6 literal, no brackets, no port):
 * true and its 16 bytes (IPv4 mapped), else false. */
bool cidr_addr_parse(const char *s, unsigned char out[16]);
/* The 16 bytes of a socket address (IPv4 mapped); false if it is neither
 * IPv4 nor IPv6. */
bool cidr_addr_of(const struct sockaddr *sa, unsigned char out[16]);
bool cidr_contains(const struct cidr *c, const unsigned char addr[16]);
/* Is addr a loopback address (127.0.0.0/8, ::1)? */
bool cidr_loopback(const unsigned char addr[16]);
/* Is addr in any of the n ranges? */
bool cidr_any(const struct cidr *v, size_t n, const unsigned char addr[16]);
/* addr as text (IPv4 dotted when mapped) into out (at least 46 bytes). */
void cidr_addr_text(const unsigned char addr[16], char *out, size_t len);
/* Is c an IPv4 range (its address mapped, its prefix within the last 32
 * bits)? */
bool cidr_is_v4(const struct cidr *c);
/* c as cidr_parse() takes it: "a.b.c.d/n" (IPv4's own prefix), "x::/n", or
 * the address alone for a single one; into out (at least 50 bytes). */
void cidr_text(const struct cidr *c, char *out, size_t len);

#endif
