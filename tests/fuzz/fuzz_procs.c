/* What the kernel reports of a sandbox's process and the process chose:
 * its /proc/PID/stat line (the command name in it may hold ')', spaces and
 * newlines) through procs_parse_stat(), and its command line (any bytes,
 * NUL-separated or not) through processes_json().
 *
 * The first byte says where the stat line ends and the command line
 * begins.  The parse never reads outside the line and keeps a name that
 * ends within its 16 bytes; the JSON is built, every string of it valid
 * UTF-8, with no more arguments than the command line had bytes. */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jail/procs.h"
#include "runtime/processes.h"
#include "util/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void all_utf8(const json_t *v)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v)) {
		assert(utf8_valid(json_string_value(v), json_string_length(v)));
	} else if (json_is_array(v)) {
		json_array_foreach((json_t *)v, i, x)
			all_utf8(x);
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			all_utf8(x);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jail_proc p;
	struct procs_stat st;
	size_t split, n;
	char *line;
	json_t *j;

	if (size < 1)
		return 0;
	split = 1 + (size - 1) * data[0] / 255;
	/* A copy of exactly the line's bytes: ASan sees any read past it. */
	n = split - 1;
	line = malloc(n ? n : 1);
	memcpy(line, data + 1, n);
	if (procs_parse_stat(line, n, &st) == 0) {
		assert(memchr(st.name, '\0', sizeof(st.name)));
		assert(st.ppid >= 0);
	}
	free(line);

	memset(&p, 0, sizeof(p));
	p.pid = 3;
	memcpy(p.name, st.name, sizeof(p.name));
	p.name[sizeof(p.name) - 1] = '\0';
	p.state = st.state;
	p.cmd_len = size - split < JAIL_PROC_CMD_MAX ? size - split : JAIL_PROC_CMD_MAX;
	p.cmd_cut = size - split > JAIL_PROC_CMD_MAX;
	memcpy(p.cmd, data + split, p.cmd_len);
	j = processes_json(&p, 1, 2);
	assert(j);
	all_utf8(j);
	assert(json_array_size(json_object_get(json_array_get(json_object_get(j, "processes"), 0),
					       "command")) <= p.cmd_len);
	assert(json_is_true(json_object_get(j, "truncated")));
	json_decref(j);
	return 0;
}
