/* spawner — long-lived threads that start sandboxes for everyone else.
 *
 * PR_SET_PDEATHSIG, which makes a sandbox die with the daemon, fires when
 * the *thread* that spawned it exits.  The threads that ask for sandboxes
 * (the API's workers, `petri mcp`'s tool thread) are stopped before the
 * sessions they made, so they must not spawn: they hand the work to these
 * threads, which live as long as the session manager. */
#ifndef PETRI_SPAWNER_H
#define PETRI_SPAWNER_H

#include <stddef.h>

#include "jail/jail.h"
#include "runtime/box.h"

struct spawner;

int spawner_new(struct jail_host *host, unsigned threads, struct spawner **out);
/* Stop the threads once they have started every sandbox asked for; later
 * requests fail.  NULL allowed. */
void spawner_free(struct spawner *sp);

/* box_start() on a spawner thread; blocks the caller until it is done.
 * box_start()'s result, or -ESHUTDOWN once spawner_free() has begun. */
int spawner_box_start(struct spawner *sp, const struct box_config *cfg,
		      struct box **out, char *err, size_t errlen);

#endif
