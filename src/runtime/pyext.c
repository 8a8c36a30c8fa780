/* _petri — the C half of the Python runtime's template (zygote) mode.
 *
 * Built as a CPython extension, embedded in the petri binary and written to
 * /opt/petri/ in the template sandbox; the driver imports it only in
 * template mode (driver.py --zygote).  It exposes serve(), the template's
 * loop over fork requests, and fork(), for a request serve() hands back;
 * both run the jail's template_fork() (src/jail/template.c): the jail's
 * logic stays in C, the template only calls it.  And collapse(), which
 * puts the template's memory into huge pages once, after its imports.
 *
 * The seccomp filter is built once, at import, from the same policy code
 * the supervisor uses. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/policy.h"
#include "jail/safe.h"
#include "jail/template.h"

static struct policy policy;
static int landlock_version;

/* Is this process one thread?  (/proc/self/stat, field 20.)  A raw
 * clone of a threaded process could copy a lock another thread holds. */
static bool single_threaded(void)
{
	unsigned long long threads;

	return safe_stat_fields(20, 1, &threads) == 0 && threads == 1;
}

static void reply(int sock, const char *error)
{
	char buf[320];

	if (error)
		snprintf(buf, sizeof(buf), "{\"ok\":false,\"error\":\"%.256s\"}", error);
	(void)send(sock, error ? buf : "{\"ok\":true}", error ? strlen(buf) : 11,
		   MSG_NOSIGNAL);
}

static void close_fds(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* One request: its bytes in *w (*len of them) and up to 8 descriptors.
 * 1, 0 at the end of the stream, or -errno. */
static int receive(int sock, struct template_wire *w, size_t *len, int fds[8], int *nfds)
{
	char cbuf[CMSG_SPACE(8 * sizeof(int))];
	struct iovec iov = { .iov_base = w, .iov_len = sizeof(*w) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;

	*nfds = 0;
	n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < k && *nfds < 8; i++)
				memcpy(&fds[(*nfds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	if (n == 0 && !*nfds)
		return 0;
	/* A cut message or cut descriptors is refused like a bad one. */
	*len = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? 0 : (size_t)n;
	return 1;
}

/* serve(sock): the template's loop (driver.py zygote_main), in C, so that
 * the template touches as few of its pages between forks as it can: each
 * one it writes is copied, once per live sandbox.  Returns
 *   0             in a new sandbox's main process;
 *   None          when the supervisor closed the socket;
 *   (bytes, fds)  a checked request the template cannot fork directly
 *                 (it has threads now): the runtime forks first, and its
 *                 child calls fork(bytes, fds).
 * No PyOS_BeforeFork() around the direct fork: the template is one thread
 * holding no lock but the GIL, which PyOS_AfterFork_Child() resets in the
 * copy, where the runtime's at-fork hooks for the child run as well. */
static PyObject *py_serve(PyObject *self, PyObject *args)
{
	struct template_wire w;
	struct template_request rq;
	char err[256];
	int sock, fds[8], nfds, r;
	size_t len = 0;

	(void)self;
	if (!PyArg_ParseTuple(args, "i", &sock))
		return NULL;
	for (;;) {
		r = receive(sock, &w, &len, fds, &nfds);
		if (r == -EINTR) {
			if (PyErr_CheckSignals() < 0)
				return NULL;
			continue;
		}
		if (r <= 0)
			Py_RETURN_NONE;
		if (nfds != 5) {
			close_fds(fds, nfds);
			reply(sock, "a fork request needs five descriptors");
			continue;
		}
		if (template_decode(&w, len, fds, &rq, err, sizeof(err)) < 0) {
			close_fds(fds, nfds);
			reply(sock, err);
			continue;
		}
		if (!single_threaded())
			return Py_BuildValue("y#(iiiii)", (const char *)&w, (Py_ssize_t)sizeof(w),
					     fds[0], fds[1], fds[2], fds[3], fds[4]);
		r = template_fork(&rq, &policy, landlock_version, true);
		if (r == 0) {
			/* The sandbox's main process. */
			PyOS_AfterFork_Child();
			return PyLong_FromLong(0);
		}
		close_fds(fds, nfds);
		if (r < 0)
			snprintf(err, sizeof(err), "cannot fork: %s", strerror(-r));
		reply(sock, r < 0 ? err : NULL);
	}
}

/* fork(bytes, fds): a request serve() handed back, in a fresh child of the
 * template made by the runtime's fork(); returns 0 in the sandbox's main
 * process, never anywhere else (the child exits once pid 1 is made). */
static PyObject *py_fork(PyObject *self, PyObject *args)
{
	struct template_request rq;
	const char *bytes;
	Py_ssize_t len;
	int fds[5];
	char err[256];
	struct template_wire w;

	(void)self;
	if (!PyArg_ParseTuple(args, "y#(iiiii)", &bytes, &len, &fds[0], &fds[1], &fds[2],
			      &fds[3], &fds[4]))
		return NULL;
	if ((size_t)len != sizeof(w)) {
		PyErr_SetString(PyExc_ValueError, "not a fork request");
		return NULL;
	}
	memcpy(&w, bytes, sizeof(w));
	if (template_decode(&w, sizeof(w), fds, &rq, err, sizeof(err)) < 0) {
		PyErr_SetString(PyExc_ValueError, err);
		return NULL;
	}
	template_fork(&rq, &policy, landlock_version, false);
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
	{ "serve", py_serve, METH_VARARGS, "Serve fork requests (see pyext.c)." },
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
