/* fake_box — a sandbox that lives in memory, in place of runtime/box.c and
 * of what the session manager reaches below it (the jail's stop, usage,
 * owner and /work; files_write and the upload sink; the warm pool), so
 * that test_session.c tests the session manager's logic without sandboxes.
 *
 * An execution's code is its script:
 *   "ok"      returns at once: status ok, stdout "ok\n"
 *   "write"   the same, and the execution wrote FAKE_WRITTEN ("out.csv")
 *   "block"   blocks until the box is stopped (then ends as killed with the
 *             stop's reason, as a real box does), interrupted (box_interrupt():
 *             then ends as an error) or ex->cancel_fd is readable (then ends
 *             as a timeout)
 *   "die"     the runtime dies during the execution: killed, and the box is
 *             dead from then on with FAKE_DIED_REASON
 *   "einval"  refused as a real box refuses bad code: -EINVAL
 * Any execution on a dead box fails with -EPIPE, as a real box's does.
 *
 * A box's /work holds its limits' work_bytes (from disk_mb): files_write()
 * past that fails with -ENOSPC, and with -EISDIR for a path ending in '/'.
 * An upload past the box's memory limit fails with -ENOMEM and counts as
 * the kernel's OOM kill of the sandbox (jail_usage()).
 *
 * Its processes (jail_procs()): FAKE_PID, running `sleep 1000`; a signal
 * to it succeeds, pid 1 and 2 are refused as petri's own, any other pid is
 * no process.  A dead box has none.
 *
 * Unlike a real box, a stopped box is dead at once (box_alive() is false
 * right after box_stop(), not only once an execution noticed). */
#ifndef PETRI_FAKE_BOX_H
#define PETRI_FAKE_BOX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct box;

#define FAKE_DIED_REASON "the runtime crashed (fake)"
#define FAKE_WRITTEN "out.csv"
#define FAKE_PID 7

/* Make every box_start() fail (or succeed again). */
void fake_box_fail_starts(bool fail);
/* Hold every box_start() until released (false); wait until n are held. */
void fake_box_hold_starts(bool hold);
void fake_box_wait_held(int n);
/* Boxes started and not yet freed; boxes started in all. */
int fake_box_live(void);
int fake_box_started(void);
/* The box started last, and the thread that started it. */
struct box *fake_box_last(void);
pthread_t fake_box_last_starter(void);
/* The /work and memory limits the last box was started with. */
uint64_t fake_box_last_work_bytes(void);
/* Wait until n executions are blocked in "block" (the test's timeout
 * bounds the wait). */
void fake_box_wait_blocked(int n);
/* How many times the host's writes were noted (box_note_host_write). */
int fake_box_host_writes(void);
/* Wait until every box is freed (the disposer frees them off the caller's
 * thread). */
void fake_box_wait_all_freed(void);

#endif
