#include "session/tables.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/num.h"

/* pids below this are the kernel's own at boot: once pids wrap, the
 * allocator starts again here (RESERVED_PIDS in kernel/pid.c). */
#define KERNEL_RESERVED_PIDS 300

static int read_u64(const char *proc, const char *name, uint64_t *v)
{
	char path[512], buf[64];
	uint32_t u;
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/sys/kernel/%s", proc, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!num_u32(buf, 0, UINT32_MAX, &u))
		return -EINVAL;
	*v = u;
	return 0;
}

int host_tables_read(const char *proc, struct host_tables *t)
{
	int r;

	memset(t, 0, sizeof(*t));
	if ((r = read_u64(proc, "pid_max", &t->pid_max)) ||
	    (r = read_u64(proc, "threads-max", &t->threads_max)) ||
	    (r = read_u64(proc, "pty/max", &t->pty_max)) ||
	    (r = read_u64(proc, "pty/reserve", &t->pty_reserve)))
		memset(t, 0, sizeof(*t));
	return r;
}

/* Kept for the host: an eighth of the table, and at least 2048.  A host's
 * own processes and threads (its services, petri's own threads and
 * templates, a shell to repair it) number a few hundred to a couple of
 * thousand; an eighth of the kernel's default pid_max (32768) is 4096,
 * twice that, and of the 4194304 systemd sets on 64-bit hosts it is far
 * more than any host needs. */
uint64_t host_tasks_budget(const struct host_tables *t)
{
	uint64_t tasks = t->pid_max < t->threads_max ? t->pid_max : t->threads_max;
	uint64_t reserve = tasks / 8 > 2048 ? tasks / 8 : 2048;

	return tasks > KERNEL_RESERVED_PIDS + reserve ? tasks - KERNEL_RESERVED_PIDS - reserve : 0;
}

/* Kept for the others: a quarter of what every devpts instance but the
 * host's shares (3072 by default), for the host's containers and any other
 * daemon.  The host's own terminals (ssh, consoles) draw from pty.reserve,
 * which no sandbox can touch. */
uint64_t host_ptys_budget(const struct host_tables *t)
{
	uint64_t shared = t->pty_max > t->pty_reserve ? t->pty_max - t->pty_reserve : 0;

	return shared - shared / 4;
}
