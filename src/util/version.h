/* version — what petri is: the one version string every front end reports
 * (petri --version, /healthz, MCP's serverInfo, petri ask's User-Agent, the
 * execution record's `engine`).  It is made at build time by
 * scripts/version (git describe in a checkout, the VERSION file of a
 * release tarball) and compiled into version.c alone, so that a new commit
 * rebuilds one object. */
#ifndef PETRI_VERSION_H
#define PETRI_VERSION_H

/* "0.1.0-270-gc1688c5", "1.2.0", ...: static, never NULL. */
const char *petri_version(void);

#endif
