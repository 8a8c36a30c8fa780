/* The sandboxes' cache (src/runtime/cache.h): its key moves with every
 * change of what it is made from and with nothing else; it is built once,
 * whole, and what it replaces is removed. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cache.h"
#include "unit.h"

static char top[256];

static void make_top(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(top, sizeof(top), "%s/petri-cache-XXXXXX", t && t[0] == '/' ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void remove_top(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void sub(char *out, size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", top, rel);
}

static uint64_t key_of_top(void)
{
	char fonts[512], conf[512];
	const char *paths[] = { fonts, conf, NULL };

	sub(fonts, sizeof(fonts), "fonts");
	sub(conf, sizeof(conf), "fonts.conf");
	return cache_key(paths);
}

static void make_fonts(void)
{
	char path[512];

	sub(path, sizeof(path), "fonts");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	sub(path, sizeof(path), "fonts/truetype");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	put("fonts/truetype/a.ttf", "a font");
	put("fonts.conf", "<fontconfig/>");
}

START_TEST(key_is_stable)
{
	make_top();
	make_fonts();
	ck_assert_uint_eq(key_of_top(), key_of_top());
	remove_top();
}
END_TEST

/* The key now, which must differ from before. */
static uint64_t moved(uint64_t before)
{
	uint64_t now = key_of_top();

	ck_assert_uint_ne(before, now);
	return now;
}

START_TEST(key_moves_with_every_change)
{
	char path[512], target[512];
	struct timespec past[2] = { { 1000000, 0 }, { 1000000, 0 } };
	uint64_t k;

	make_top();
	make_fonts();
	k = key_of_top();
	/* A font added deep down (its directory's mtime moves too). */
	put("fonts/truetype/b.ttf", "another font");
	k = moved(k);
	/* A font replaced in place by one of another size. */
	put("fonts/truetype/b.ttf", "another font, longer");
	k = moved(k);
	/* Only its modification time (same size). */
	sub(path, sizeof(path), "fonts/truetype/b.ttf");
	ck_assert_int_eq(utimensat(AT_FDCWD, path, past, 0), 0);
	k = moved(k);
	/* The configuration file, a single path. */
	put("fonts.conf", "<fontconfig><dir>/srv</dir></fontconfig>");
	k = moved(k);
	/* A link below a directory is not followed: what it points to is
	 * named by the link (whose own stat is hashed), and a loop of links
	 * ends. */
	sub(path, sizeof(path), "fonts/loop");
	sub(target, sizeof(target), "fonts");
	ck_assert_int_eq(symlink(target, path), 0);
	k = moved(k);
	ck_assert_uint_eq(k, key_of_top());
	remove_top();
}
END_TEST

START_TEST(missing_paths_count)
{
	char fonts[512], gone[512];
	const char *one[] = { fonts, NULL }, *two[] = { fonts, gone, NULL };

	make_top();
	make_fonts();
	sub(fonts, sizeof(fonts), "fonts");
	sub(gone, sizeof(gone), "not-there");
	ck_assert_uint_ne(cache_key(one), cache_key(two));
	/* A path that appears changes the key again. */
	{
		uint64_t missing = cache_key(two);

		put("not-there", "");
		ck_assert_uint_ne(missing, cache_key(two));
	}
	remove_top();
}
END_TEST

static bool exists(const char *rel)
{
	char path[512];
	struct stat st;

	sub(path, sizeof(path), rel);
	return lstat(path, &st) == 0;
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* The real thing, with this host's fonts: built once, whole, readable by
 * others, with nothing of the build left; a second call finds it; other
 * keys' directories and dead builds go. */
START_TEST(prepare_builds_once_and_prunes)
{
	char base[512], err[1024], path[4200];
	struct cache c, again;
	struct stat st, st2;
	bool list = false;

	make_top();
	sub(base, sizeof(base), "cache");
	ck_assert_int_eq(mkdir(base, 0755), 0);
	ck_assert_int_eq(mkdir(strcat(strcpy(path, base), "/sandbox-0000000000000000"), 0755), 0);
	ck_assert_int_eq(mkdir(strcat(strcpy(path, base), "/.build-999999999-1"), 0755), 0);
	ck_assert_msg(cache_prepare(base, &c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(stat(c.dir, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0755);
	ck_assert(!exists("cache/sandbox-0000000000000000"));
	ck_assert(!exists("cache/.build-999999999-1"));
	ck_assert_int_eq(entries(base), 1);
	snprintf(path, sizeof(path), "%s/build.log", c.dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/build-fonts.conf", c.dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	if (access("/usr/bin/fc-cache", X_OK) == 0) {
		snprintf(path, sizeof(path), "%s/fontconfig", c.dir);
		ck_assert_int_gt(entries(path), 0);
	}
	/* Its files, in memory, at their place inside, read-only. */
	ck_assert_uint_gt(c.nfiles, 0);
	for (size_t i = 0; i < c.nfiles; i++) {
		ck_assert_msg(!strncmp(c.files[i].path, CACHE_SANDBOX_DIR "/", 17), "%s",
			      c.files[i].path);
		ck_assert_uint_eq(c.files[i].mode, 0444);
		if (strstr(c.files[i].path, "/matplotlib/fontlist-")) {
			list = true;
			ck_assert(c.files[i].len > 2 && ((const char *)c.files[i].data)[0] == '{');
		}
	}
	ck_assert(list || access("/usr/lib/python3/dist-packages/matplotlib", F_OK) != 0);
	ck_assert_msg(cache_prepare(base, &again, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(c.dir, again.dir);
	ck_assert_uint_eq(c.nfiles, again.nfiles);
	ck_assert_int_eq(stat(again.dir, &st2), 0);
	ck_assert_uint_eq(st.st_ino, st2.st_ino);	/* found, not rebuilt */
	cache_release(&c);
	cache_release(&again);
	ck_assert_uint_eq(c.nfiles, 0);
	remove_top();
}
END_TEST

START_TEST(prepare_refuses_a_relative_base)
{
	struct cache c;
	char err[256];

	ck_assert_int_eq(cache_prepare("cache", &c, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(c.dir, "");
	ck_assert_uint_eq(c.nfiles, 0);
}
END_TEST

Suite *cache_suite(void)
{
	Suite *s = suite_create("cache");
	TCase *t = tcase_create("cache");

	tcase_set_timeout(t, 600);	/* one real build: fc-cache and matplotlib */
	tcase_add_test(t, key_is_stable);
	tcase_add_test(t, key_moves_with_every_change);
	tcase_add_test(t, missing_paths_count);
	tcase_add_test(t, prepare_builds_once_and_prunes);
	tcase_add_test(t, prepare_refuses_a_relative_base);
	suite_add_tcase(s, t);
	return s;
}
