/* _petri — the C half of the Python runtime's template (zygote) mode.
 *
 * Built as a CPython extension, embedded in the petri binary and written to
 * /opt/petri/ in the template sandbox; the driver imports it only in
 * template mode (driver.py --zygote).  It exposes fork(), which runs the
 * jail's template_fork() (src/jail/template.c): the jail's logic stays in
 * C, the template only calls it; and collapse(), which puts the template's
 * memory into huge pages once, after its imports.
 *
 * The seccomp filter is built once, at import, from the same policy code
 * the supervisor uses. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/policy.h"
#include "jail/template.h"

static struct policy policy;
static int landlock_version;

/* fork(fds, work_bytes, tmp_bytes, inodes, rlimits, hostname, uid, direct)
 *   fds: (stdout, stderr, ctl, status, sync)
 *   rlimits: sequence of (resource, soft, hard)
 *   uid: the sandbox's leased uid (and gid) in the template's namespace
 * direct (a single-threaded template): call it in the template; returns
 * the new sandbox's pid 1 there, and 0 in the sandbox's main process.
 * Not direct: call it in a fresh child of the template (os.fork());
 * returns 0 in the sandbox's main process, never anywhere else. */
static PyObject *py_fork(PyObject *self, PyObject *args)
{
	struct template_request rq;
	unsigned long long work, tmp, inodes;
	unsigned int uid;
	PyObject *limits;
	const char *hostname;
	int direct, r;
	Py_ssize_t n;

	(void)self;
	memset(&rq, 0, sizeof(rq));
	if (!PyArg_ParseTuple(args, "(iiiii)KKKOsIp", &rq.stdout_fd, &rq.stderr_fd, &rq.ctl_fd,
			      &rq.status_fd, &rq.sync_fd, &work, &tmp, &inodes, &limits,
			      &hostname, &uid, &direct))
		return NULL;
	rq.uid = uid;
	rq.limits.work_bytes = work;
	rq.limits.tmp_bytes = tmp;
	rq.limits.inodes = inodes;
	rq.hostname = hostname;
	n = PySequence_Length(limits);
	if (n < 0 || n > TEMPLATE_NRLIMITS) {
		PyErr_SetString(PyExc_ValueError, "too many rlimits");
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PySequence_GetItem(limits, i);
		int resource;
		unsigned long long soft, hard;

		if (!item || !PyArg_ParseTuple(item, "iKK", &resource, &soft, &hard)) {
			Py_XDECREF(item);
			return NULL;
		}
		Py_DECREF(item);
		rq.rlimits[i].resource = resource;
		rq.rlimits[i].lim.rlim_cur = soft;
		rq.rlimits[i].lim.rlim_max = hard;
		rq.nrlimits++;
	}
	if (direct)
		PyOS_BeforeFork();	/* the interpreter's locks, taken for the copy */
	r = template_fork(&rq, &policy, landlock_version, direct);
	if (r > 0 || r < 0) {		/* still the template (direct only) */
		PyOS_AfterFork_Parent();
		if (r < 0) {
			errno = -r;
			return PyErr_SetFromErrno(PyExc_OSError);
		}
		return PyLong_FromLong(r);
	}
	/* The sandbox's main process, made by fork() from pid 1: let the
	 * interpreter know (thread state, at-fork hooks such as random's
	 * reseeding). */
	PyOS_AfterFork_Child();
	return PyLong_FromLong(0);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25	/* Linux 6.1; older headers lack it */
#endif

#define HUGE_SIZE (2ul << 20)		/* a PMD on x86-64 and arm64 (4 KiB pages) */
#define HUGE_MIN_RESIDENT 256		/* of its 512 small pages; see below */

/* How many of the small pages of [start, start + HUGE_SIZE) are in memory;
 * -1 if the kernel will not say. */
static int resident_pages(unsigned long start, unsigned long page)
{
	unsigned char vec[HUGE_SIZE / 4096];
	unsigned long n = HUGE_SIZE / page;
	int count = 0;

	if (n > sizeof(vec) || mincore((void *)start, HUGE_SIZE, vec) < 0)
		return -1;
	for (unsigned long i = 0; i < n; i++)
		count += vec[i] & 1;
	return count;
}

/* Collapse the 2 MiB blocks of one mapping that are at least half in
 * memory; add the bytes collapsed to *done. */
static void collapse_range(unsigned long start, unsigned long end, unsigned long page,
			   unsigned long long *done)
{
	unsigned long a = (start + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);

	for (; a + HUGE_SIZE <= end; a += HUGE_SIZE) {
		int resident = resident_pages(a, page);

		if (resident < 0 || (unsigned long)resident * page < HUGE_MIN_RESIDENT * 4096ul)
			continue;
		/* EINVAL (no THP, or not for this mapping), EAGAIN, ENOMEM (no
		 * free huge page now): the block stays in small pages. */
		if (madvise((void *)a, HUGE_SIZE, MADV_COLLAPSE) == 0)
			*done += HUGE_SIZE;
	}
}

/* collapse() -> the number of bytes now in huge pages
 *
 * Every sandbox is a fork of this process, and a fork copies (and an exit
 * tears down) one page-table entry per 4 KiB page of private memory, but
 * one entry per 2 MiB huge page: put the template's private anonymous
 * memory (the heap, the interpreter's and numpy's buffers) into
 * transparent huge pages, once, after the imports.  MADV_COLLAPSE works
 * whatever the system's THP mode (it obeys only "never") and without
 * MADV_HUGEPAGE, which would also give the sandboxes' own new memory huge
 * pages: 2 MiB of private memory where a session asked for a few bytes.
 * A sandbox that writes to a shared huge page gets a 4 KiB copy (the
 * kernel splits its mapping, not the page), so a session's private memory
 * does not grow; so does the template where it writes after a fork, so
 * only what it never writes again stays huge (docs/configuration.md).
 *
 * A collapse fills the gaps of a block, so only blocks at least half in
 * memory are collapsed: the template grows by less than a MiB for each
 * 512 entries fewer per fork, and a mostly empty thread stack is left
 * alone, as are the main stack and file mappings.  Call it before the
 * first fork: a collapse copies the block, which, shared with a live
 * sandbox, would cost both the copy and the memory. */
static PyObject *py_collapse(PyObject *self, PyObject *args)
{
	unsigned long long done = 0;
	unsigned long *ranges = NULL, page;
	size_t n = 0, cap = 0;
	char *line = NULL;
	size_t linecap = 0;
	PyObject *res = NULL;
	FILE *f;

	(void)self;
	(void)args;
	page = (unsigned long)sysconf(_SC_PAGESIZE);
	if (!(f = fopen("/proc/self/maps", "re")))
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, "/proc/self/maps");
	/* The list first, the calls after: nothing changes the mappings while
	 * the file is read. */
	while (getline(&line, &linecap, f) > 0) {
		unsigned long start, end, inode;
		char perms[5], name[32];
		int used = 0;

		name[0] = '\0';
		if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %lu %n", &start, &end, perms, &inode,
			   &used) != 4)
			continue;
		if (used > 0)
			sscanf(line + used, "%31s", name);
		/* Private, writable, anonymous: unnamed, or the brk heap. */
		if (strcmp(perms, "rw-p") || inode != 0 || (name[0] && strcmp(name, "[heap]")) ||
		    end - start < HUGE_SIZE)
			continue;
		if (n == cap) {
			unsigned long *more;

			cap = cap ? 2 * cap : 64;
			if (!(more = realloc(ranges, cap * 2 * sizeof(*ranges)))) {
				PyErr_NoMemory();
				goto out;
			}
			ranges = more;
		}
		ranges[2 * n] = start;
		ranges[2 * n + 1] = end;
		n++;
	}
	Py_BEGIN_ALLOW_THREADS
	for (size_t i = 0; i < n; i++)
		collapse_range(ranges[2 * i], ranges[2 * i + 1], page, &done);
	Py_END_ALLOW_THREADS
	res = PyLong_FromUnsignedLongLong(done);
out:
	free(line);
	free(ranges);
	fclose(f);
	return res;
}

static PyMethodDef methods[] = {
	{ "fork", py_fork, METH_VARARGS, "Make a sandbox from this template (see pyext.c)." },
	{ "collapse", py_collapse, METH_NOARGS,
	  "Put this template's private memory into huge pages (see pyext.c)." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_petri", "petri's template support", -1, methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__petri(void);

PyMODINIT_FUNC PyInit__petri(void)
{
	char err[256];

	if (policy_build(&policy, err, sizeof(err)) < 0) {
		PyErr_SetString(PyExc_OSError, err);
		return NULL;
	}
	landlock_version = landlock_abi();
	return PyModule_Create(&module);
}
