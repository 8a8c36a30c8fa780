/* savefile — write a file under a host directory the user named (petri
 * run --save-dir, petri ask --save-dir), making its parent directories and
 * never following a link on the way: the relative path may have come out
 * of a sandbox (the caller checks it first, e.g. files_check_path). */
#ifndef PETRI_SAVEFILE_H
#define PETRI_SAVEFILE_H

#include <stddef.h>

/* Write data to dir/rel, creating rel's parents; a component of rel that
 * is a symbolic link is refused (-ELOOP or -ENOTDIR), and so is a path
 * through a directory named .git (any case: -EPERM), whose files git runs.
 * The file is written beside its name and renamed over it, so what was
 * there is replaced, never written through (a hard link to a file outside
 * dir, a FIFO); it must have been a regular file (else -EINVAL, -EISDIR),
 * whose permission bits the new one keeps.  0 or -errno. */
int savefile_write(const char *dir, const char *rel, const void *data, size_t len);

#endif
