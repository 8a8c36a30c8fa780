/* Default limits of a sandbox: what an operator's config starts from and
 * what `petri run` uses when no flag says otherwise. */
#ifndef PETRI_DEFAULTS_H
#define PETRI_DEFAULTS_H

#include "jail/jail.h"

#define DEFAULT_MEMORY_MB	1024
#define DEFAULT_CPU_MILLICORES	1000
#define DEFAULT_PIDS		256
#define DEFAULT_DISK_MB		512
#define DEFAULT_TMP_MB		256
#define DEFAULT_INODES		65536
#define DEFAULT_NOFILE		1024
#define DEFAULT_TIMEOUT_S	30.0

static inline void default_jail_limits(struct jail_limits *l)
{
	l->memory_bytes = (uint64_t)DEFAULT_MEMORY_MB << 20;
	l->cpu_millicores = DEFAULT_CPU_MILLICORES;
	l->pids = DEFAULT_PIDS;
	l->work_bytes = (uint64_t)DEFAULT_DISK_MB << 20;
	l->tmp_bytes = (uint64_t)DEFAULT_TMP_MB << 20;
	l->inodes = DEFAULT_INODES;
	l->fsize_bytes = 0;
	l->nofile = DEFAULT_NOFILE;
	l->cpu_seconds = 0;
}

#endif
