/* What the sandboxes have, found by running one: Python's version and the
 * packages it can import (with their versions), the version of each
 * language's runtime and of each command-line tool of a fixed table.  A
 * probe is an ordinary Python execution in a fresh sandbox, as a
 * one-shot's, so it sees exactly what a session sees: the
 * host's packages, the operator's binds and [python] path, the table of
 * languages (exec/languages.h).  GET /v1/languages, MCP's tool
 * description and petri check say what it found (docs/languages.md). */
#ifndef PETRI_PROBE_H
#define PETRI_PROBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "exec/limits.h"
#include "exec/exec.h"

struct smgr;

#define PROBE_OUTPUT_MAX (1u << 20)	/* the probe's stdout, at most */
#define PROBE_TIMEOUT_S 60.0

/* The probe's code, for the table of languages as it is now; free() it. */
char *probe_code(void);

/* Its execution: code (from probe_code()) in Python, with the probe's
 * timeout and output cap; no cancel descriptor. */
struct exec_request probe_exec(const char *code);

/* What the probe printed, checked: {"python": "3.11.2", "packages":
 * {NAME: VERSION}, "languages": {NAME: "first line of its version" or
 * null}, "tools": {NAME: likewise}}; NULL when the output is not that.
 * Bounded: a sandbox wrote it. */
json_t *probe_parse(const char *out, size_t len);

/* The answer of GET /v1/languages: every language of the table with its
 * version as found, the packages sorted by name, and the command-line
 * tools a project's tests need (git, make, gcc... in a fixed table) with
 * theirs, null for one not found.  found NULL: not known (error says why:
 * still probing, or the probe failed). */
json_t *probe_describe(const json_t *found, const char *error);

/* Where what a probe found is kept between starts (probe.c says when it
 * is still true): path ("" : nowhere), and what the sandboxes see besides
 * the host's packages: context (the binds, [python] path and wheelhouse,
 * as text) and dirs (those directories, NULL-terminated), whose changes
 * make the cache stale.  Must outlive the probe. */
struct probe_cache {
	char path[4096];
	char *context;
	const char *const *dirs;
};

/* What the sandboxes have: from the cache when it is still true (nothing
 * runs), else, when run, found by a probe running in the background in a
 * one-shot sandbox of m with these limits, kept out of the record, and
 * kept in the cache (started by smgr_found(), session.h); NULL when not
 * cached and !run (or out of memory).  cache may be NULL. */
struct probe;
struct probe *probe_start(struct smgr *m, const struct petri_limits *limits,
			  const struct probe_cache *cache, bool run);
/* probe_describe() of what it found, waiting at most wait_s for it. */
json_t *probe_wait(struct probe *p, double wait_s);
void probe_free(struct probe *p);

#endif
