/* jsoncost — what a JSON text would cost to parse, found before parsing it.
 *
 * jansson builds a tree of ~100-byte nodes: "[{},{},...]" costs the daemon
 * about 50 times its size, and nesting costs stack.  Callers that parse
 * untrusted JSON (frames from a sandbox, request bodies) scan it here first
 * and refuse a text whose tree would be too deep or too large.  The scan
 * reads each byte once, allocates nothing, and does not validate: jansson
 * still does that, on what passed. */
#ifndef PETRI_JSONCOST_H
#define PETRI_JSONCOST_H

#include <stdbool.h>
#include <stddef.h>

struct jsoncost {
	size_t nodes;		/* an upper bound of the values in the tree */
	unsigned depth;		/* the deepest nesting of objects and arrays */
};

struct jsoncost_limits {
	size_t max_nodes;
	unsigned max_depth;
};

/* Scan text[0, len).  Returns true when the tree stays within lim; *cost
 * (may be NULL) says how far the scan got, which is the whole text when it
 * returns true.  Stops at the first limit passed. */
bool jsoncost_within(const char *text, size_t len, const struct jsoncost_limits *lim,
		     struct jsoncost *cost);

#endif
