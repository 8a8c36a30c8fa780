#include "util/jsoncost.h"

bool jsoncost_within(const char *text, size_t len, const struct jsoncost_limits *lim,
		     struct jsoncost *cost)
{
	struct jsoncost c = { 0, 0 };
	unsigned depth = 0;
	bool in_string = false, escaped = false, ok = true;

	/* Every value of a tree is announced by one of: the first byte of the
	 * text, '[', '{', ',' or ':' (a key and its value count as two).  So
	 * 1 + their number, outside strings, bounds the nodes. */
	if (len > 0)
		c.nodes = 1;
	for (size_t i = 0; i < len && ok; i++) {
		char ch = text[i];

		if (in_string) {
			if (escaped)
				escaped = false;
			else if (ch == '\\')
				escaped = true;
			else if (ch == '"')
				in_string = false;
			continue;
		}
		switch (ch) {
		case '"':
			in_string = true;
			break;
		case '{':
		case '[':
			if (++depth > c.depth)
				c.depth = depth;
			c.nodes++;
			break;
		case '}':
		case ']':
			if (depth)
				depth--;
			break;
		case ',':
		case ':':
			c.nodes++;
			break;
		default:
			break;
		}
		ok = c.nodes <= lim->max_nodes && c.depth <= lim->max_depth;
	}
	if (cost)
		*cost = c;
	return ok;
}
