#include "cli/userfiles.h"

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
