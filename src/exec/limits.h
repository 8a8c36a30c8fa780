/* limits — what one sandbox may use, as operators and clients say it.
 *
 * One table of rules (limit_rules) names every limit, its type and the
 * range any configuration or request may give it; the configuration file
 * ([limits], [max_limits]), the request model (src/exec/request.h: HTTP,
 * MCP, petri run, petri ask) and the documentation's table all follow it,
 * so that a limit means the same wherever it is set.  limits_to_jail() is
 * the one mapping to what the jail enforces. */
#ifndef PETRI_LIMITS_H
#define PETRI_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct petri_limits {
	uint32_t memory_mb;
	double cpu;		/* cores */
	uint32_t pids;
	uint32_t disk_mb;
	double timeout_s;	/* per execution */
	uint32_t output_kb;	/* per stream, per execution */
};

struct limit_rule {
	const char *name;	/* the key everywhere: "memory_mb" */
	const char *alias;	/* another name requests may use, or NULL */
	bool integer;
	/* What any configuration may say.  A request is bounded by min and
	 * by the configuration's [max_limits]. */
	double min, max;
	const char *unit;	/* "MiB", "cores": for messages */
	size_t offset;		/* in struct petri_limits */
};

extern const struct limit_rule limit_rules[];
extern const size_t limit_rule_count;

/* By name or alias; NULL if none. */
const struct limit_rule *limit_rule_find(const char *name);
double limit_get(const struct petri_limits *l, const struct limit_rule *r);
/* v is within the rule's range and an integer where it must be. */
void limit_set(struct petri_limits *l, const struct limit_rule *r, double v);

/* The first limit of l above the same limit of max, or NULL. */
const struct limit_rule *limits_above(const struct petri_limits *l,
				      const struct petri_limits *max);

/* What the jail enforces for l (jail.h's struct jail_limits): memory, CPU
 * quota, pids and the size of /work as given; /tmp sized from /work (half
 * of it plus 16 MiB, at most 256 MiB); fixed inode and open-file caps. */
struct jail_limits;
void limits_to_jail(const struct petri_limits *l, struct jail_limits *out);

#endif
