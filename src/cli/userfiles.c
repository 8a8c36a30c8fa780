#include "cli/userfiles.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/savefile.h"

static int read_file(const char *path, size_t max, struct buf *out)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return -errno;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (out->len + n > max) {
			fclose(f);
			return -EFBIG;
		}
		if (buf_append(out, chunk, n) < 0) {
			fclose(f);
			return -ENOMEM;
		}
	}
	n = (size_t)ferror(f);
	fclose(f);
	return n ? -EIO : 0;
}

void userfiles_load(struct userfile *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *copy = strdup(v[i].host_path), why[160];
		int r;

		if (!copy)
			die(125, "out of memory");
		snprintf(v[i].name, sizeof(v[i].name), "%s", basename(copy));
		free(copy);
		if (files_check_path(v[i].name, false, why, sizeof(why)) < 0)
			die(2, "--file: '%s' cannot be named '%s' in /work: %s", v[i].host_path,
			    v[i].name, why);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v[k].name, v[i].name))
				die(2, "--file: two files are named '%s'", v[i].name);
		v[i].data = (struct buf)BUF_INIT;
		r = read_file(v[i].host_path, USERFILES_READ_MAX, &v[i].data);
		if (r == -EFBIG)
			die(2, "--file: '%s' is larger than %u MiB", v[i].host_path,
			    USERFILES_READ_MAX >> 20);
		if (r < 0)
			die(2, "--file: cannot read '%s': %s", v[i].host_path, strerror(-r));
	}
}

void userfiles_release(struct userfile *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_release(&v[i].data);
}

int userfiles_save(const char *dir, const char *rel, const void *data, size_t len)
{
	char why[160];

	if (files_check_path(rel, false, why, sizeof(why)) < 0)
		return -EINVAL;
	return savefile_write(dir, rel, data, len);
}

/* ---- --dir: a directory as a tar -------------------------------------- */

static la_ssize_t append(struct archive *a, void *ctx, const void *data, size_t n)
{
	(void)a;
	return buf_append(ctx, data, n) < 0 ? -1 : (la_ssize_t)n;
}

/* Everything below dir, named relative to it: regular files, directories
 * and symlinks (as links, never followed); the rest is skipped, said so. */
static int tar_tree(struct archive *disk, struct archive *w, const char *dir,
		    size_t max_entries, uint64_t max_bytes, char *why, size_t whylen)
{
	size_t skip = strlen(dir), entries = 0;
	uint64_t bytes = 0;
	char block[65536];
	struct archive_entry *e = archive_entry_new();
	int r = 0;

	if (!e)
		return -ENOMEM;
	while (r == 0) {
		const char *name;
		mode_t type;
		la_ssize_t n;

		r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF) {
			r = 0;
			break;
		}
		if (r < ARCHIVE_WARN) {
			snprintf(why, whylen, "%s", archive_error_string(disk));
			r = -EIO;
			break;
		}
		r = 0;
		archive_read_disk_descend(disk);
		name = archive_entry_pathname(e);
		if (strncmp(name, dir, skip) || (name[skip] && name[skip] != '/'))
			continue;
		name += skip;
		while (*name == '/')
			name++;
		if (!*name)
			continue;	/* dir itself */
		type = archive_entry_filetype(e);
		if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
			fprintf(stderr, "petri run: --dir: %s is not a file, directory or link: "
				"left out\n", archive_entry_pathname(e));
			continue;
		}
		if (++entries > max_entries) {
			snprintf(why, whylen, "more than %zu entries (archive_max_entries)",
				 max_entries);
			r = -E2BIG;
			break;
		}
		if (type == AE_IFREG)
			bytes += (uint64_t)archive_entry_size(e);
		if (bytes > max_bytes) {
			snprintf(why, whylen, "more than the %llu MiB that /work holds (--disk)",
				 (unsigned long long)(max_bytes >> 20));
			r = -E2BIG;
			break;
		}
		archive_entry_copy_pathname(e, name);
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
		archive_entry_set_uname(e, NULL);
		archive_entry_set_gname(e, NULL);
		if (archive_write_header(w, e) < ARCHIVE_WARN) {
			snprintf(why, whylen, "%s", archive_error_string(w));
			r = -EIO;
			break;
		}
		while (type == AE_IFREG && (n = archive_read_data(disk, block, sizeof(block))) > 0)
			if (archive_write_data(w, block, (size_t)n) < 0)
				n = -1;
		if (type == AE_IFREG && n < 0) {
			snprintf(why, whylen, "cannot read %s: %s", archive_entry_pathname(e),
				 archive_error_string(disk));
			r = -EIO;
		}
	}
	archive_entry_free(e);
	return r;
}

void userfiles_archive(const char *dir, size_t max_entries, uint64_t max_bytes,
		       struct buf *out)
{
	struct archive *disk = archive_read_disk_new(), *w = archive_write_new();
	char why[512] = "";
	struct stat st;
	int r = -ENOMEM;

	if (stat(dir, &st) < 0)
		die(2, "--dir: cannot open '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		die(2, "--dir: '%s' is not a directory", dir);
	if (disk && w && archive_read_disk_set_symlink_physical(disk) == ARCHIVE_OK &&
	    archive_write_set_format_pax_restricted(w) == ARCHIVE_OK &&
	    archive_write_open(w, out, NULL, append, NULL) == ARCHIVE_OK) {
		r = archive_read_disk_open(disk, dir) == ARCHIVE_OK ? 0 : -EIO;
		if (r < 0)
			snprintf(why, sizeof(why), "%s", archive_error_string(disk));
		else
			r = tar_tree(disk, w, dir, max_entries, max_bytes, why, sizeof(why));
		if (r == 0 && archive_write_close(w) != ARCHIVE_OK)
			r = -EIO;
	}
	if (disk)
		archive_read_free(disk);
	if (w)
		archive_write_free(w);
	if (r == -ENOMEM)
		die(125, "out of memory");
	if (r < 0)
		die(2, "--dir: '%s': %s", dir, *why ? why : strerror(-r));
}
