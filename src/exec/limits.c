#include "exec/limits.h"

#include <stddef.h>
#include <string.h>

#include "jail/jail.h"

#define TMP_MAX_BYTES	(256ull << 20)
#define TMP_EXTRA_BYTES	(16ull << 20)
#define INODES		65536
#define NOFILE		1024

/* The minimums are what a sandbox needs to start its runtime at all: the
 * Python driver and its imports (32 MiB), the driver and a child or two
 * (8 processes). */
const struct limit_rule limit_rules[] = {
	{ "memory_mb", NULL, true, 32, 1u << 20, "MiB", offsetof(struct petri_limits, memory_mb) },
	{ "cpu", "cpu_quota", false, 0.01, 1024, "cores", offsetof(struct petri_limits, cpu) },
	{ "pids", NULL, true, 8, 1u << 20, "processes", offsetof(struct petri_limits, pids) },
	{ "disk_mb", NULL, true, 1, 1u << 20, "MiB", offsetof(struct petri_limits, disk_mb) },
	{ "timeout_s", NULL, false, 0.1, 86400, "s", offsetof(struct petri_limits, timeout_s) },
	{ "output_kb", NULL, true, 1, 1u << 20, "KiB", offsetof(struct petri_limits, output_kb) },
};
const size_t limit_rule_count = sizeof(limit_rules) / sizeof(limit_rules[0]);

const struct limit_rule *limit_rule_find(const char *name)
{
	for (size_t i = 0; name && i < limit_rule_count; i++)
		if (!strcmp(limit_rules[i].name, name) ||
		    (limit_rules[i].alias && !strcmp(limit_rules[i].alias, name)))
			return &limit_rules[i];
	return NULL;
}

double limit_get(const struct petri_limits *l, const struct limit_rule *r)
{
	const char *p = (const char *)l + r->offset;

	return r->integer ? *(const uint32_t *)(const void *)p : *(const double *)(const void *)p;
}

void limit_set(struct petri_limits *l, const struct limit_rule *r, double v)
{
	char *p = (char *)l + r->offset;

	if (r->integer)
		*(uint32_t *)(void *)p = (uint32_t)v;
	else
		*(double *)(void *)p = v;
}

const struct limit_rule *limits_above(const struct petri_limits *l,
				      const struct petri_limits *max)
{
	for (size_t i = 0; i < limit_rule_count; i++)
		if (limit_get(l, &limit_rules[i]) > limit_get(max, &limit_rules[i]))
			return &limit_rules[i];
	return NULL;
}

void limits_to_jail(const struct petri_limits *l, struct jail_limits *out)
{
	uint64_t work = (uint64_t)l->disk_mb << 20;
	uint64_t tmp = work / 2 + TMP_EXTRA_BYTES;

	memset(out, 0, sizeof(*out));
	out->memory_bytes = (uint64_t)l->memory_mb << 20;
	out->cpu_millicores = (uint32_t)(l->cpu * 1000.0 + 0.5);
	out->pids = l->pids;
	out->work_bytes = work;
	out->tmp_bytes = tmp < TMP_MAX_BYTES ? tmp : TMP_MAX_BYTES;
	out->inodes = INODES;
	out->nofile = NOFILE;
}
