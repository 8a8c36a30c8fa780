/* userfiles — the user's own files on the host, for petri run and petri ask.
 *
 * --file PATH: the CLI reads PATH (the user's file, with the user's rights)
 * and puts it into /work under its basename.  --save-dir DIR: what came out
 * of the sandbox (a path it chose, checked first) is written under DIR
 * without ever following a link there. */
#ifndef PETRI_USERFILES_H
#define PETRI_USERFILES_H

#include <stddef.h>
#include <stdint.h>

#include "workspace/files.h"
#include "util/buf.h"

#define USERFILES_MAX 64		/* --file arguments */
#define USERFILES_READ_MAX (1u << 30)

struct userfile {
	const char *host_path;		/* as given on the command line */
	char name[FILES_NAME_MAX + 1];	/* in /work */
	struct buf data;
};

/* Read every v[i].host_path, before any sandbox exists: an unreadable,
 * too large or badly named file, or two with one name, ends the command
 * with status 2 and a message naming the option. */
void userfiles_load(struct userfile *v, size_t n);
void userfiles_release(struct userfile *v, size_t n);

/* --dir DIR: the tree under DIR as a tar in out (names relative to DIR;
 * files, directories and symlinks, never followed; the rest left out with
 * a word on stderr), at most max_entries entries and max_bytes of files,
 * else the command ends with status 2 and why. */
void userfiles_archive(const char *dir, size_t max_entries, uint64_t max_bytes,
		       struct buf *out);

/* Write data to dir/rel, making rel's parents; rel is a path out of the
 * sandbox (checked with files_check_path: -EINVAL).  0 or -errno. */
int userfiles_save(const char *dir, const char *rel, const void *data, size_t len);

#endif
