#include "jail/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Our own copy of the ruleset attribute: Debian's headers predate the
 * net and scope members; the kernel takes the size it is given. */
struct ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;	/* ABI 4 */
	uint64_t scoped;		/* ABI 6 */
};

#define FS_EXECUTE	(1ULL << 0)
#define FS_WRITE_FILE	(1ULL << 1)
#define FS_READ_FILE	(1ULL << 2)
#define FS_READ_DIR	(1ULL << 3)
#define FS_REMOVE_DIR	(1ULL << 4)
#define FS_REMOVE_FILE	(1ULL << 5)
#define FS_MAKE_CHAR	(1ULL << 6)
#define FS_MAKE_DIR	(1ULL << 7)
#define FS_MAKE_REG	(1ULL << 8)
#define FS_MAKE_SOCK	(1ULL << 9)
#define FS_MAKE_FIFO	(1ULL << 10)
#define FS_MAKE_BLOCK	(1ULL << 11)
#define FS_MAKE_SYM	(1ULL << 12)
#define FS_REFER	(1ULL << 13)	/* ABI 2 */
#define FS_TRUNCATE	(1ULL << 14)	/* ABI 3 */
#define FS_IOCTL_DEV	(1ULL << 15)	/* ABI 5 */
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)	/* ABI 6 */
#define SCOPE_SIGNAL	(1ULL << 1)

#define FS_READ		(FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
#define FS_WRITE_ALL	(FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | \
			 FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | \
			 FS_MAKE_FIFO | FS_MAKE_SYM | FS_REFER | FS_TRUNCATE)

int landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);

	return abi < 0 ? 0 : (int)abi;
}

static uint64_t handled_fs(int abi)
{
	uint64_t fs = FS_READ | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE |
		      FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK |
		      FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM;

	if (abi >= 2)
		fs |= FS_REFER;
	if (abi >= 3)
		fs |= FS_TRUNCATE;
	if (abi >= 5)
		fs |= FS_IOCTL_DEV;
	return fs;
}

static int add_rule(int ruleset, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr attr = { .allowed_access = access };
	int r = 0;

	attr.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (attr.parent_fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
		    &attr, 0) < 0)
		r = -errno;
	close(attr.parent_fd);
	return r;
}

int landlock_apply(int abi)
{
	struct ruleset_attr attr = { 0 };
	uint64_t fs = handled_fs(abi);
	size_t size = sizeof(attr.handled_access_fs);
	int ruleset, r;

	if (abi <= 0)
		return -EOPNOTSUPP;
	attr.handled_access_fs = fs;
	if (abi >= 6) {
		attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (ruleset < 0)
		return -errno;
	/* Everything in the sandbox's root may be read and executed: it is
	 * all read-only binds and synthesized files.  Writing is confined to
	 * the writable mounts and the device nodes. */
	if ((r = add_rule(ruleset, "/", FS_READ)) < 0 ||
	    (r = add_rule(ruleset, "/dev", (FS_WRITE_FILE | FS_TRUNCATE |
					    FS_IOCTL_DEV) & fs)) < 0 ||
	    (r = add_rule(ruleset, "/dev/shm", FS_WRITE_ALL & fs)) < 0 ||
	    (r = add_rule(ruleset, "/tmp", FS_WRITE_ALL & fs)) < 0 ||
	    (r = add_rule(ruleset, "/work", FS_WRITE_ALL & fs)) < 0)
		goto out;
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		r = -errno;
out:
	close(ruleset);
	return r;
}
