/* workspace/files: the bounded retries of a path lookup the sandbox races.
 *
 * openat2(RESOLVE_IN_ROOT) returns EAGAIN whenever a rename or a mount
 * happened during a ".." step; a sandbox renaming in a loop makes almost
 * every try fail (19,988 of 20,000 in a review).  The lookup must give up
 * with FILES_ECHANGING instead of spinning the daemon's thread.  A fake
 * openat2 stands in for the race, which cannot be made to happen on cue. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "workspace/files.h"
#include "unit.h"

static int calls, fail_first, fail_errno;

static int fake_open(int dirfd, const char *path, const struct open_how *how)
{
	(void)dirfd;
	(void)path;
	ck_assert(how->resolve & RESOLVE_IN_ROOT);
	if (calls++ < fail_first) {
		errno = fail_errno;
		return -1;
	}
	return 42;
}

static void fake(int first, int err)
{
	calls = 0;
	fail_first = first;
	fail_errno = err;
}

START_TEST(eagain_forever_gives_up)
{
	fake(1 << 30, EAGAIN);
	ck_assert_int_eq(files_open_in(3, "a/b", O_RDONLY, 0, fake_open), FILES_ECHANGING);
	ck_assert_int_le(calls, 64);	/* a few tries, not until it succeeds */
	ck_assert_int_ge(calls, 2);	/* an honest race gets a second try */
}
END_TEST

START_TEST(an_honest_race_is_ridden_out)
{
	fake(1, EAGAIN);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), 42);
	ck_assert_int_eq(calls, 2);
}
END_TEST

START_TEST(eintr_is_retried_and_other_errors_are_not)
{
	fake(3, EINTR);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), 42);
	fake(1 << 30, ENOENT);
	ck_assert_int_eq(files_open_in(3, "a", O_RDONLY, 0, fake_open), -ENOENT);
	ck_assert_int_eq(calls, 1);
}
END_TEST

/* ---- mkdir, rename, walk, remove in a real directory -------------------
 *
 * A temporary directory stands for /work with "outside" beside it, and
 * symlinks inside point out of it (absolute, and by ".."), as sandboxed code
 * would plant them: no operation may touch what is outside. */

static char top[64], work[96], outside[96];
static int work_fd = -1;
static struct files_user me;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

/* valgrind does not know openat2(2) (ENOSYS): these tests then pass
 * without running, as on a kernel before 5.6, where petri cannot run. */
static bool no_openat2;

#define NEED_OPENAT2() do { if (no_openat2) return; } while (0)

static void tree_setup(void)
{
	struct open_how how = { .flags = O_PATH };
	char p[256];
	FILE *f;
	long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

	no_openat2 = fd < 0 && errno == ENOSYS;
	if (fd >= 0)
		close((int)fd);

	snprintf(top, sizeof(top), "/tmp/petri-unit-files-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(work, sizeof(work), "%s/work", top);
	snprintf(outside, sizeof(outside), "%s/outside", top);
	ck_assert_int_eq(mkdir(work, 0755), 0);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	snprintf(p, sizeof(p), "%s/keep.txt", outside);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fputs("keep", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/abs", work);
	ck_assert_int_eq(symlink(outside, p), 0);
	snprintf(p, sizeof(p), "%s/up", work);
	ck_assert_int_eq(symlink("../outside", p), 0);
	work_fd = open(work, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(work_fd, 0);
	me.uid = getuid();
	me.gid = getgid();
}

static void tree_teardown(void)
{
	close(work_fd);
	nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool outside_intact(void)
{
	char p[256];
	struct stat st;
	int n = 0;
	DIR *d = opendir(outside);
	struct dirent *de;

	snprintf(p, sizeof(p), "%s/keep.txt", outside);
	while (d && (de = readdir(d)))
		n++;
	if (d)
		closedir(d);
	return stat(p, &st) == 0 && st.st_size == 4 && n == 3;
}

static bool is_dir(const char *rel)
{
	struct stat st;
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", work, rel);
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

START_TEST(mkdir_makes_parents_and_stays_inside)
{
	struct stat st;
	char target[64];

	NEED_OPENAT2();

	ck_assert_int_eq(files_mkdir(&me, work_fd, "a/b/c"), 0);
	ck_assert(is_dir("a/b/c"));
	ck_assert_int_eq(files_mkdir(&me, work_fd, "a/b/c"), -EEXIST);
	/* Through a symlink that leads out: it resolves inside /work, where
	 * /tmp/... does not exist. */
	ck_assert_int_ne(files_mkdir(&me, work_fd, "abs/new"), 0);
	ck_assert_int_ne(files_mkdir(&me, work_fd, "up/new"), 0);
	ck_assert(outside_intact());
	ck_assert_int_eq(files_stat(&me, work_fd, "abs", &st, target, sizeof(target), NULL), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_str_eq(target, outside);
	ck_assert_int_eq(files_stat(&me, work_fd, "", &st, target, sizeof(target), NULL), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(files_stat(&me, work_fd, "nope", &st, target, sizeof(target), NULL), -ENOENT);
}
END_TEST

START_TEST(rename_moves_links_not_targets)
{
	NEED_OPENAT2();
	ck_assert_int_eq(files_mkdir(&me, work_fd, "d"), 0);
	ck_assert_int_eq(files_rename(&me, work_fd, "d", "x/y/d2"), 0);
	ck_assert(is_dir("x/y/d2"));
	ck_assert(!is_dir("d"));
	ck_assert_int_eq(files_rename(&me, work_fd, "abs", "x/abs2"), 0);
	ck_assert(outside_intact());
	ck_assert_int_eq(files_rename(&me, work_fd, "missing", "m2"), -ENOENT);
	/* The destination's parent through a link out: made inside, or refused. */
	files_rename(&me, work_fd, "x/y/d2", "up/d3");
	ck_assert(outside_intact());
}
END_TEST

struct seen {
	char paths[32][64];
	int n;
};

static int note(void *ctx, const char *path, const struct stat *st, const char *target,
		const struct files_meta *meta)
{
	struct seen *s = ctx;

	(void)st;
	(void)target;
	ck_assert_ptr_null(meta);	/* not asked for */
	if (s->n < 32)
		snprintf(s->paths[s->n++], 64, "%s", path);
	return 0;
}

START_TEST(walk_is_sorted_bounded_and_follows_no_link)
{
	struct seen s = { .n = 0 };

	NEED_OPENAT2();

	ck_assert_int_eq(files_mkdir(&me, work_fd, "t/b/deep"), 0);
	ck_assert_int_eq(files_mkdir(&me, work_fd, "t/a"), 0);
	ck_assert_int_eq(files_write(&me, work_fd, "t/c.txt", "x", 1), 0);
	ck_assert_int_eq(files_walk(&me, work_fd, "t", 1, 100, 0, note, &s), 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_str_eq(s.paths[0], "t/a");
	ck_assert_str_eq(s.paths[1], "t/b");
	ck_assert_str_eq(s.paths[2], "t/c.txt");
	s.n = 0;
	ck_assert_int_eq(files_walk(&me, work_fd, "t", 2, 100, 0, note, &s), 0);
	ck_assert_int_eq(s.n, 4);
	ck_assert_str_eq(s.paths[2], "t/b/deep");
	s.n = 0;
	ck_assert_int_eq(files_walk(&me, work_fd, "t", 3, 2, 0, note, &s), -E2BIG);
	/* The root's links are listed, never entered. */
	s.n = 0;
	ck_assert_int_eq(files_walk(&me, work_fd, "", 5, 100, 0, note, &s), 0);
	for (int i = 0; i < s.n; i++)
		ck_assert_ptr_null(strstr(s.paths[i], "keep.txt"));
}
END_TEST

START_TEST(remove_tree_removes_links_not_targets_and_refuses_big_trees)
{
	char p[256];

	NEED_OPENAT2();

	ck_assert_int_eq(files_mkdir(&me, work_fd, "r/s/t"), 0);
	ck_assert_int_eq(files_write(&me, work_fd, "r/s/f", "x", 1), 0);
	snprintf(p, sizeof(p), "%s/r/s/out", work);
	ck_assert_int_eq(symlink(outside, p), 0);
	/* 4 entries under r: more than 3 is refused, and nothing is lost. */
	ck_assert_int_eq(files_remove_tree(&me, work_fd, "r", 3), -E2BIG);
	ck_assert(is_dir("r/s/t"));
	ck_assert_int_eq(files_remove_tree(&me, work_fd, "r", 4), 0);
	ck_assert(!is_dir("r"));
	ck_assert(outside_intact());
	/* A link to a directory outside is removed itself. */
	ck_assert_int_eq(files_remove_tree(&me, work_fd, "abs", 10), 0);
	ck_assert(outside_intact());
	ck_assert_int_eq(files_remove_tree(&me, work_fd, "gone", 10), -ENOENT);
}
END_TEST

START_TEST(remove_tree_refuses_a_tree_too_deep)
{
	char path[FILES_TREE_DEPTH * 2 + 8] = "z";

	NEED_OPENAT2();

	for (int i = 0; i < FILES_TREE_DEPTH; i++)
		strcat(path, "/z");
	ck_assert_int_eq(files_mkdir(&me, work_fd, path), 0);
	ck_assert_int_eq(files_remove_tree(&me, work_fd, "z", 1000), -E2BIG);
	ck_assert(is_dir(path));
}
END_TEST

/* ---- metadata: user.e2b.* attributes, bounded ---------------------------- */

START_TEST(metadata_is_bounded_as_e2b_counts_it)
{
	static struct files_meta m;
	char key[FILES_META_KEY_MAX + 2], value[FILES_META_BYTES];

	memset(&m, 0, sizeof(m));
	memset(key, 'k', sizeof(key));
	memset(value, 'v', sizeof(value));
	ck_assert_int_eq(files_meta_add(&m, "", 0, "v", 1), -EINVAL);
	ck_assert_int_eq(files_meta_add(&m, key, FILES_META_KEY_MAX + 1, "v", 1), -E2BIG);
	ck_assert_int_eq(files_meta_add(&m, key, FILES_META_KEY_MAX, "v", 1), 0);
	ck_assert_int_eq(files_meta_add(&m, key, FILES_META_KEY_MAX, "w", 1), -EEXIST);
	/* 4096 with each key's prefix: 9 + 246 + 1 taken, 9 + 1 for the next key */
	ck_assert_int_eq(files_meta_add(&m, "a", 1, value, FILES_META_BYTES - 256 - 10 + 1),
			 -E2BIG);
	ck_assert_int_eq(files_meta_add(&m, "a", 1, value, FILES_META_BYTES - 256 - 10), 0);
	ck_assert_int_eq(files_meta_add(&m, "b", 1, "", 0), -E2BIG);
	ck_assert_uint_eq(m.n, 2);
	ck_assert_int_eq(memcmp(m.data + m.kv[1].key, "a", 1), 0);
	ck_assert_uint_eq(m.kv[1].vlen, FILES_META_BYTES - 266);
	/* 32 keys at most, however small */
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < FILES_META_KEYS; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_int_eq(files_meta_add(&m, k, strlen(k), "", 0), 0);
	}
	ck_assert_int_eq(files_meta_add(&m, "z", 1, "", 0), -E2BIG);
}
END_TEST

/* Whether this filesystem takes user.* attributes (the host's /tmp). */
static bool user_xattrs(void)
{
	char p[512];
	int r;

	snprintf(p, sizeof(p), "%s/probe", work);
	close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	r = setxattr(p, "user.probe", "1", 1, 0);
	unlink(p);
	return r == 0;
}

static void set_attr(const char *rel, const char *name, const char *value)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", work, rel);
	ck_assert_int_eq(lsetxattr(p, name, value, strlen(value), 0), 0);
}

static const char *meta_value(const struct files_meta *m, const char *key, char *out)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->kv[i].klen == strlen(key) && !memcmp(m->data + m->kv[i].key, key,
							    strlen(key))) {
			memcpy(out, m->data + m->kv[i].value, m->kv[i].vlen);
			out[m->kv[i].vlen] = '\0';
			return out;
		}
	return NULL;
}

struct metas {
	char path[8][64];
	struct files_meta m[8];
	int n;
};

static int note_meta(void *ctx, const char *path, const struct stat *st, const char *target,
		     const struct files_meta *meta)
{
	struct metas *ms = ctx;

	(void)st;
	(void)target;
	ck_assert_ptr_nonnull(meta);
	if (ms->n < 8) {
		snprintf(ms->path[ms->n], 64, "%s", path);
		ms->m[ms->n++] = *meta;
	}
	return 0;
}

static void metadata_is_read_through_no_link(void)
{
	static struct files_meta m;
	static struct metas ms;
	char v[FILES_META_BYTES + 1], name[32], p[512];
	struct stat st;
	char target[64];

	if (!user_xattrs())
		return;		/* a filesystem without them: nothing to read */
	ck_assert_int_eq(files_write(&me, work_fd, "m/f.txt", "x", 1), 0);
	set_attr("m/f.txt", "user.e2b.author", "mish");
	set_attr("m/f.txt", "user.other", "not metadata");
	ck_assert_int_eq(files_mkdir(&me, work_fd, "m/d"), 0);
	set_attr("m/d", "user.e2b.kind", "dir");
	snprintf(p, sizeof(p), "%s/m/link", work);
	ck_assert_int_eq(symlink("f.txt", p), 0);
	ck_assert_int_eq(files_write(&me, work_fd, "m/many", "x", 1), 0);
	for (int i = 0; i < 40; i++) {	/* small: ext4 holds 4 KiB of them */
		snprintf(name, sizeof(name), "user.e2b.k%02d", i);
		set_attr("m/many", name, "v");
	}
	ck_assert_int_eq(files_stat(&me, work_fd, "m/f.txt", &st, target, sizeof(target), &m),
			 0);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_str_eq(meta_value(&m, "author", v), "mish");
	ck_assert_int_eq(files_stat(&me, work_fd, "m/d", &st, target, sizeof(target), &m), 0);
	ck_assert_str_eq(meta_value(&m, "kind", v), "dir");
	/* a link is described, not followed */
	ck_assert_int_eq(files_stat(&me, work_fd, "m/link", &st, target, sizeof(target), &m), 0);
	ck_assert_uint_eq(m.n, 0);
	/* 40 keys: 32 of them (the byte bound is the API tests', on tmpfs) */
	ck_assert_int_eq(files_stat(&me, work_fd, "m/many", &st, target, sizeof(target), &m), 0);
	ck_assert_uint_eq(m.n, FILES_META_KEYS);
	ck_assert_uint_le(m.used + m.n * FILES_META_PREFIX_LEN, FILES_META_BYTES);
	/* "" is the directory itself */
	set_attr("", "user.e2b.root", "r");
	ck_assert_int_eq(files_stat(&me, work_fd, "", &st, target, sizeof(target), &m), 0);
	ck_assert_str_eq(meta_value(&m, "root", v), "r");
	/* a walk gives each entry's */
	memset(&ms, 0, sizeof(ms));
	ck_assert_int_eq(files_walk(&me, work_fd, "m", 1, 100, FILES_WALK_META, note_meta, &ms),
			 0);
	ck_assert_int_eq(ms.n, 4);
	ck_assert_str_eq(ms.path[0], "m/d");
	ck_assert_str_eq(meta_value(&ms.m[0], "kind", v), "dir");
	ck_assert_str_eq(ms.path[1], "m/f.txt");
	ck_assert_str_eq(meta_value(&ms.m[1], "author", v), "mish");
	ck_assert_uint_eq(ms.m[1].n, 1);
	ck_assert_str_eq(ms.path[2], "m/link");
	ck_assert_uint_eq(ms.m[2].n, 0);
	ck_assert_uint_eq(ms.m[3].n, FILES_META_KEYS);
}

START_TEST(metadata_is_read_with_xattrat)
{
	NEED_OPENAT2();
	metadata_is_read_through_no_link();
}
END_TEST

START_TEST(metadata_is_read_through_proc_on_older_kernels)
{
	NEED_OPENAT2();
	files_meta_without_xattrat();	/* this test's own process: CK_FORK */
	metadata_is_read_through_no_link();
}
END_TEST

Suite *files_suite(void)
{
	Suite *s = suite_create("files");
	TCase *tc = tcase_create("open_in");

	tcase_add_test(tc, eagain_forever_gives_up);
	tcase_add_test(tc, an_honest_race_is_ridden_out);
	tcase_add_test(tc, eintr_is_retried_and_other_errors_are_not);
	suite_add_tcase(s, tc);
	tc = tcase_create("tree");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, mkdir_makes_parents_and_stays_inside);
	tcase_add_test(tc, rename_moves_links_not_targets);
	tcase_add_test(tc, walk_is_sorted_bounded_and_follows_no_link);
	tcase_add_test(tc, remove_tree_removes_links_not_targets_and_refuses_big_trees);
	tcase_add_test(tc, remove_tree_refuses_a_tree_too_deep);
	tcase_add_test(tc, metadata_is_read_with_xattrat);
	tcase_add_test(tc, metadata_is_read_through_proc_on_older_kernels);
	suite_add_tcase(s, tc);
	tc = tcase_create("metadata");
	tcase_add_test(tc, metadata_is_bounded_as_e2b_counts_it);
	suite_add_tcase(s, tc);
	return s;
}
