/* The operator's config file: config_load (inih and petri's checks) on the
 * input written to a memfd.  A config that loads must keep the promises of
 * config.h: defaults within the maxima, absolute ro_binds, a cgroup_parent
 * without "..", NAME=value env entries, a uid_base that is not root's and
 * a uid range with room for every sandbox that can live at once.
 *
 * api_keys_file and admin_keys_file may name any file, and a device
 * (/dev/zero), a FIFO or /proc/kmsg would block the fuzzer, not find a bug:
 * inputs that name a keys_file and mention dev, proc, sys, run or fd are
 * skipped.  The seeds point it at KEYS, written at start-up. */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config/config.h"
#include "jail/jail.h"

#define KEYS "/tmp/petri-fuzz-keys"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

/* The keys file goes when the fuzzer exits: nothing is left in /tmp. */
static void remove_keys(void)
{
	unlink(KEYS);
}

static void setup(void)
{
	static const char keys[] = "# keys\nk1, k2\n\n  k3\t,\n";
	int kfd = open(KEYS, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (kfd < 0 || write(kfd, keys, sizeof(keys) - 1) != sizeof(keys) - 1)
		abort();
	close(kfd);
	atexit(remove_keys);
	fd = memfd_create("petri.conf", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
}

static bool blocking_keys_file(const uint8_t *data, size_t size)
{
	static const char *const risky[] = { "dev", "proc", "sys", "run", "fd", NULL };

	if (!memmem(data, size, "keys_file", 9))
		return false;
	for (size_t i = 0; risky[i]; i++)
		if (memmem(data, size, risky[i], strlen(risky[i])))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct petri_config c;
	char err[512];

	if (fd < 0)
		setup();
	if (blocking_keys_file(data, size))
		return 0;
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (config_load(&c, path, err, sizeof(err)) < 0) {
		assert(err[0]);
		return 0;
	}
	assert(c.defaults.memory_mb <= c.max.memory_mb && c.defaults.cpu <= c.max.cpu &&
	       c.defaults.timeout_s <= c.max.timeout_s && c.defaults.output_kb <= c.max.output_kb);
	assert(!limits_above(&c.defaults, &c.max));
	for (size_t i = 0; i < limit_rule_count; i++)
		assert(limit_get(&c.defaults, &limit_rules[i]) >= limit_rules[i].min &&
		       limit_get(&c.max, &limit_rules[i]) <= limit_rules[i].max);
	assert(memchr(c.listen, '\0', sizeof(c.listen)));
	assert(!c.cgroup_parent[0] || (c.cgroup_parent[0] == '/' && !strstr(c.cgroup_parent, "..")));
	assert(c.uid_base == 0 || c.uid_base >= 100000);
	assert(c.uid_count >= 1 && c.uid_count <= JAIL_UID_COUNT_MAX &&
	       c.uid_count >= (uint64_t)c.max_sessions + c.pool_max + 3 &&
	       c.pool_min <= c.pool_max && c.pool_max <= CONFIG_POOL_MAX);
	for (size_t i = 0; i < c.nro_binds; i++)
		assert(c.ro_binds[i][0] == '/');
	for (size_t i = 0; i < c.nenv; i++)
		assert(strchr(c.env[i], '=') > c.env[i]);
	for (size_t i = 0; i < c.napi_keys; i++)
		assert(c.api_keys[i][0]);
	(void)config_listen_is_local(c.listen);
	config_release(&c);
	return 0;
}
