/* ids — the names petri makes for what it holds on a client's behalf, and
 * the node they belong to.
 *
 * Every name a client keeps and brings back (a session's id, an MCP
 * session's id, an E2B sandbox's access token) is
 *
 *	PREFIX "_" NODE "-" HEX		e.g. ses_petri0-9d00f1...
 *
 * PREFIX says what it names ("ses", "mcp", "tok"); NODE is the name of
 * the petri that made it ([a-z0-9]{1,16}, no "_" and no "-"), so that a
 * router in front of several nodes sends a request to the node that holds
 * what it names from the name alone (docs/cluster.md); HEX is random
 * (getrandom), the part that makes the name unguessable.  The layout is
 * documented and stable: routers' configurations read it. */
#ifndef PETRI_IDS_H
#define PETRI_IDS_H

#include <stdbool.h>
#include <stddef.h>

#define ID_NODE_MAX 16		/* characters of a node's name */
#define ID_NODE_DEFAULT "petri"	/* when the host's name has no letter or digit */
/* The longest name of prefix p (a literal) with hex random digits. */
#define ID_LEN(p, hex) (sizeof(p) - 1 + 1 + ID_NODE_MAX + 1 + (hex))

/* Is s a node's name: 1 to ID_NODE_MAX of [a-z0-9]? */
bool id_node_valid(const char *s);

/* The node name a host name gives: the letters and digits of its first
 * label (up to a dot), lowercased, the last ID_NODE_MAX of them (a
 * StatefulSet's "petri-12" is "petri12": the ordinal is kept);
 * ID_NODE_DEFAULT when there is none. */
void id_node_from_host(const char *host, char out[ID_NODE_MAX + 1]);

/* Write PREFIX_NODE-HEX, with hex random digits, into out (size bytes,
 * at least ID_LEN(prefix, hex) + 1); -EINVAL if it does not fit or node is
 * not a node's name, -EIO if the kernel gave no randomness. */
int id_make(char *out, size_t size, const char *prefix, const char *node, size_t hex);

/* hex random lowercase hex digits and a NUL into out: 0, or -EIO. */
int id_random_hex(char *out, size_t hex);

#endif
