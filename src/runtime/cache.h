/* cache — what the sandboxes' libraries would build on first use, built
 * once by petri, on the host, and bound read-only into every sandbox.
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
 * Inside, the directory is JAIL_CACHE_DIR (read-only, nosuid, nodev,
 * noexec): fontconfig finds it through CACHE_FONTS_CONF, a configuration
 * that includes the host's and names it as a cache directory, matplotlib
 * through links the driver makes in MPLCONFIGDIR (a directory matplotlib
 * must be able to write, or it makes a temporary one).
 *
 * Errors: 0 or -errno, with a message in err. */
#ifndef PETRI_CACHE_H
#define PETRI_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "jail/jail.h"

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
 * missing, mode 0755) and write its path into dir.  -EACCES when the
 * sandboxes' users could not reach it (a directory above not searchable
 * by others, as root); any error leaves sandboxes to build what they need
 * themselves, as before. */
int cache_prepare(const char *base, char *dir, size_t dirlen, char *err, size_t errlen);

#endif
