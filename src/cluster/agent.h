/* agent — what HAProxy's agent-check reads from a node (docs/cluster.md).
 *
 * HAProxy connects to [cluster] agent_listen every few seconds and reads
 * one line; the agent writes it and closes:
 *
 *	ready up 73%	serving: weight by free capacity (max_sessions less
 *			the live sessions, as a share of max_sessions; 0%
 *			when full, so that no new session comes here)
 *	drain		draining (smgr_drain): no new sessions; the sessions
 *			named by their ids still reach the node
 *	down		stopping: its sessions are ending
 *
 * "ready" cancels a drain HAProxy took from an earlier answer.  The agent
 * reads nothing from its client and holds nothing for it: a connection
 * costs one accept, one short write and a close, on a thread of its own. */
#ifndef PETRI_AGENT_H
#define PETRI_AGENT_H

#include <stddef.h>

#include "session/session.h"

struct node_agent;

/* Listen at listen_at ("HOST:PORT"; port 0 picks one): before anything
 * else starts, so that an address in use is a quick error.  0, or -errno
 * with a message in err. */
int agent_open(const char *listen_at, struct node_agent **out, char *err, size_t errlen);
/* Answer from sm's health, on a thread of its own.  0, or -errno with a
 * message in err (then a is freed). */
int agent_start(struct node_agent *a, struct smgr *sm, char *err, size_t errlen);
/* Where it listens, "HOST:PORT". */
const char *agent_address(const struct node_agent *a);
/* From now on, answer "down" whatever the health says (the daemon is
 * stopping: its requests are refused). */
void agent_stopping(struct node_agent *a);
/* Stop the thread, close the socket, free. */
void agent_stop(struct node_agent *a);

/* The line for h, "\n" included, into out (at least 32 bytes). */
void agent_line(const struct smgr_health *h, char *out, size_t len);

#endif
