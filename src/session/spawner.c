/* spawner — box_start() on long-lived threads (spawner.h). */
#include "session/spawner.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/workq.h"

/* One box_start() asked for, on the stack of the thread that waits for it. */
struct request {
	const struct box_config *cfg;
	struct box **out;
	char *err;
	size_t errlen;
};

struct spawner {
	struct jail_host *host;
	struct workq *q;		/* of workq_call()s */
};

static int start_box(void *arg, void *ctx)
{
	struct spawner *sp = ctx;
	struct request *rq = arg;

	return box_start(sp->host, rq->cfg, rq->out, rq->err, rq->errlen);
}

int spawner_new(struct jail_host *host, unsigned threads, struct spawner **out)
{
	struct spawner *sp = calloc(1, sizeof(*sp));
	int r;

	*out = NULL;
	if (!sp)
		return -ENOMEM;
	sp->host = host;
	r = workq_start(threads, 0, workq_run_call, sp, &sp->q);
	if (r < 0) {
		spawner_free(sp);
		return r;
	}
	*out = sp;
	return 0;
}

void spawner_free(struct spawner *sp)
{
	if (!sp)
		return;
	workq_free(sp->q);
	free(sp);
}

int spawner_box_start(struct spawner *sp, const struct box_config *cfg,
		      struct box **out, char *err, size_t errlen)
{
	struct request rq = { .cfg = cfg, .out = out, .err = err, .errlen = errlen };

	*out = NULL;
	return workq_call(sp->q, start_box, &rq);
}
