/* zygote — the warm path: a template sandbox with Python and the data
 * stack already imported (driver.py --zygote), forked into a new sandbox
 * per session in milliseconds instead of a cold start's hundreds.
 *
 * The template runs no user code.  It keeps its capabilities inside its
 * user namespace (it creates namespaces for its sandboxes) and has no
 * seccomp filter; each sandbox it makes drops every privilege and loads the
 * same filter as a cold sandbox before any user code runs (see
 * src/jail/template.h and docs/security.md).
 *
 * Thread-safe: zygote_fork() may be called from any thread (a forked
 * sandbox does not depend on the calling thread's life). */
#ifndef PETRI_ZYGOTE_H
#define PETRI_ZYGOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "jail/jail.h"
#include "runtime/box.h"

struct zygote;

/* Start a template and wait until it has imported the modules of preload
 * (NULL-terminated dotted names, as config_preload() gives them; one that
 * fails to import is logged, not fatal), or until cancel_fd (-1: none) is
 * readable.  Its mounts and its Python are cfg's ro_binds, python_path and
 * wheelhouse, which every sandbox it makes shares (cfg's limits and env are
 * not used).  -EINVAL for a name that is not a module name, or too many.
 * Call from a thread that outlives the template (PDEATHSIG). */
int zygote_start(struct jail_host *host, const struct box_config *cfg,
		 const char *const *preload, int cancel_fd,
		 struct zygote **out, char *err, size_t errlen);

/* A new sandbox with the driver ready in it, limits and environment from
 * cfg (cfg's ro_binds, python_path and wheelhouse are the template's, not
 * per sandbox). */
int zygote_fork(struct zygote *z, const struct box_config *cfg, struct box **out,
		char *err, size_t errlen);

/* Is the template process still running? */
bool zygote_alive(struct zygote *z);

/* Stop the template.  Sandboxes it made keep running; the last one to be
 * freed frees what is left of the template. */
void zygote_free(struct zygote *z);

#endif
