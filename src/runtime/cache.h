/* cache — what the sandboxes' libraries would build on first use, built
 * once by petri, on the host, and given read-only to every sandbox.
 *
 * matplotlib writes a list of the host's fonts (fontlist-vNNN.json) the
 * first time it is imported, and fontconfig a cache of each font directory
 * (fc-list, matplotlib's font search, R's plots): 0.2 s on a quiet machine,
 * 15-19 s on a loaded one, in every cold sandbox (`petri run`, MCP over
 * stdio, `petri ask`, sessions made while the warm template loads) and in
 * every template start.  No other library of the analyst's set writes on
 * first use (Debian ships their bytecode).
 *
 * cache_prepare() runs at the start of every command that makes sandboxes:
 * it names the cache after a key of what it is made from (cache_key():
 * the stat of every file under the font directories and fontconfig's
 * configuration, and of matplotlib's and fontconfig's code), and builds it
 * only when no directory of that key exists: fc-cache and a Python that
 * imports matplotlib.font_manager, run by petri on the host with a clean
 * environment (no code of a sandbox), into a private directory renamed into
 * place when complete, so that a concurrent petri sees all of it or none.
 * Directories of other keys are removed then.
 *
 * Its files (a few hundred KiB; at most CACHE_BYTES_MAX) are read into
 * memory once and given to every sandbox as files of its read-only root at
 * CACHE_SANDBOX_DIR, as the driver is: a copy in each cold sandbox's root
 * tmpfs, the template's shared by every sandbox forked from it.  Not a
 * bind of the host directory: its host path (/var/cache/..., a user's
 * home) would show in the sandbox's mountinfo, and a bind would fail once
 * another petri replaced the directory.  fontconfig finds them through
 * CACHE_FONTS_CONF, a configuration that includes the host's and names
 * CACHE_SANDBOX_DIR/fontconfig as a cache directory, matplotlib through
 * links the driver makes in MPLCONFIGDIR (a directory matplotlib must be
 * able to write, or it makes a temporary one and rebuilds).
 *
 * Errors: 0 or -errno, with a message in err. */
#ifndef PETRI_CACHE_H
#define PETRI_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "jail/jail.h"

/* Where the cache's files are inside every sandbox. */
#define CACHE_SANDBOX_DIR "/opt/petri/cache"
#define CACHE_FILES_MAX 256
#define CACHE_BYTES_MAX (8u << 20)	/* of the sandbox root's 16 MiB */

/* A cache's files, in memory: owned by the struct, freed by
 * cache_release(). */
struct cache {
	char dir[4096];			/* on the host; "" for none */
	struct jail_file *files;	/* paths under CACHE_SANDBOX_DIR */
	size_t nfiles;
};

/* fontconfig's configuration in every sandbox (FONTCONFIG_FILE), and the
 * same with the host's path of the cache when petri builds it.  One %s:
 * the directory of fontconfig's caches; ours comes first, so that fc-cache
 * writes there, and the host's own (/var/cache/fontconfig, the user's)
 * follow from the included file. */
#define CACHE_FONTS_CONF_PATH "/opt/petri/fonts.conf"
#define CACHE_FONTS_CONF_FMT \
	"<?xml version=\"1.0\"?>\n" \
	"<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n" \
	"<!-- petri: the host's configuration, and the caches petri made of its fonts -->\n" \
	"<fontconfig>\n" \
	"\t<cachedir>%s</cachedir>\n" \
	"\t<include ignore_missing=\"yes\">/etc/fonts/fonts.conf</include>\n" \
	"</fontconfig>\n"

/* What the key covers: directories walked (every entry's stat), files
 * stat'ed; NULL-terminated. */
extern const char *const cache_key_paths[];

/* A key of the paths' state: each path's entries (a directory's, walked
 * without following links, at most 16 deep and 100000 entries), with their
 * type, mode, size, inode and modification time; a missing path counts as
 * missing.  The same paths in the same state give the same key; any entry
 * added, removed, replaced or changed gives another. */
uint64_t cache_key(const char *const *paths);

/* Make sure a cache of the current key exists under base (made when
 * missing, mode 0755) and read its files into c (zeroed first).  Any
 * error (-EFBIG: more than CACHE_FILES_MAX files or CACHE_BYTES_MAX bytes)
 * leaves c empty, and sandboxes to build what they need themselves, as
 * before. */
int cache_prepare(const char *base, struct cache *c, char *err, size_t errlen);
void cache_release(struct cache *c);

#endif
