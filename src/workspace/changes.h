/* workspace/changes — reading a sandbox's /work from the host side.
 *
 * The directory fd comes from jail_work_fd().  The tree under it was made
 * by hostile code: nothing here follows a symlink, every walk is bounded in
 * depth and entries, and paths are never resolved with plain open(). */
#ifndef PETRI_WORKSPACE_CHANGES_H
#define PETRI_WORKSPACE_CHANGES_H

#include <jansson.h>
#include <time.h>

#define WS_MAX_DEPTH 32
#define WS_MAX_SCAN 20000	/* entries looked at per walk */
#define WS_MAX_LIST 1000	/* entries reported per walk */

/* Regular files under work_fd changed (ctime) at or after `since`, but not
 * under .local (the session's installed packages), as an
 * array of {"path", "size"} sorted by path, appended to files.  Returns 0,
 * 1 if the walk was cut short by a bound, or -errno. */
int ws_changed_files(int work_fd, const struct timespec *since, json_t *files);

#endif
