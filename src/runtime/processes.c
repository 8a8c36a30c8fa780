#include "runtime/processes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail/jail.h"
#include "util/timefmt.h"
#include "util/utf8.h"

static const char *state_name(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "disk_sleep";
	case 'Z': return "zombie";
	case 'T': return "stopped";
	case 't': return "tracing_stop";
	case 'X': case 'x': return "dead";
	case 'I': return "idle";
	case 'P': return "parked";
	default: return "unknown";
	}
}

/* The command line as its arguments; a last one cut short is kept. */
static json_t *command(const struct jail_proc *p)
{
	json_t *argv = json_array();
	size_t i = 0;

	while (argv && i < p->cmd_len) {
		const char *arg = p->cmd + i;
		const char *nul = memchr(arg, '\0', p->cmd_len - i);
		size_t n = nul ? (size_t)(nul - arg) : p->cmd_len - i;

		if (json_array_append_new(argv, utf8_json_string(arg, n)) < 0) {
			json_decref(argv);
			return NULL;
		}
		i += n + 1;
	}
	return argv;
}

static json_t *describe(const struct jail_proc *p)
{
	char started[TIMEFMT_LEN];

	return json_pack("{s:i, s:i, s:o, s:o, s:b, s:s, s:i, s:s, s:f, s:I, s:I}",
			 "pid", (int)p->pid, "ppid", (int)p->ppid,
			 "name", utf8_json_string(p->name, strlen(p->name)), "command", command(p),
			 "command_truncated", p->cmd_cut, "state", state_name(p->state),
			 "threads", (int)p->threads,
			 "started_at", timefmt_rfc3339(p->started_at, started),
			 "elapsed_s", (double)(long long)(p->elapsed_s * 1000.0) / 1000.0,
			 "rss_bytes", (json_int_t)p->rss_bytes,
			 "cpu_ms", (json_int_t)(p->cpu_ns / 1000000));
}

json_t *processes_json(const struct jail_proc *procs, size_t n, size_t total)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < n; i++)
		if (json_array_append_new(list, describe(&procs[i])) < 0) {
			json_decref(list);
			list = NULL;
		}
	return list ? json_pack("{s:o, s:I, s:b}", "processes", list, "count",
				(json_int_t)total, "truncated", total > n) : NULL;
}

int processes_list(struct box *b, json_t **out)
{
	struct jail_proc *procs = calloc(JAIL_PROCS_MAX, sizeof(*procs));
	size_t total = 0;
	int n;

	*out = NULL;
	if (!procs)
		return -ENOMEM;
	n = jail_procs(box_jail(b), procs, JAIL_PROCS_MAX, &total);
	if (n >= 0 && !(*out = processes_json(procs, (size_t)n, total)))
		n = -ENOMEM;
	free(procs);
	return n < 0 ? n : 0;
}

int processes_signal(struct box *b, int pid, int sig, char *why, size_t whylen)
{
	int r = jail_proc_signal(box_jail(b), pid, sig);

	if (r == -EPERM && pid == JAIL_INIT_PID)
		snprintf(why, whylen, "pid %d is the sandbox's init: it ends with the session "
			 "(delete the session to end it)", pid);
	else if (r == -EPERM)
		snprintf(why, whylen, "pid %d is petri's driver (the sandbox's keeper or the "
			 "interpreter that runs the session's code): interrupt a running "
			 "execution, restart the interpreter, or delete the session", pid);
	else if (r == -ESRCH)
		snprintf(why, whylen, "the session has no process %d", pid);
	else if (r < 0)
		snprintf(why, whylen, "cannot signal process %d: %s", pid, strerror(-r));
	return r;
}
