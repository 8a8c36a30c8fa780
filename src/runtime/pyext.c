/* _petri — the C half of the Python runtime's template (zygote) mode.
 *
 * Built as a CPython extension, embedded in the petri binary and written to
 * /opt/petri/ in the template sandbox; the driver imports it only in
 * template mode (driver.py --zygote).  It exposes serve(), the template's
 * loop over fork requests, and fork(), for a request serve() hands back;
 * both run the jail's template_fork() (src/jail/template.c): the jail's
 * logic stays in C, the template only calls it.
 *
 * The seccomp filter is built once, at import, from the same policy code
 * the supervisor uses. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jail/landlock.h"
#include "jail/policy.h"
#include "jail/template.h"

static struct policy policy;
static int landlock_version;

/* Is this process one thread?  (/proc/self/stat, field 20.)  A raw
 * clone of a threaded process could copy a lock another thread holds. */
static bool single_threaded(void)
{
	char buf[1024];
	ssize_t n;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field = 3;
	char *p;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the command name may hold anything */
	if (!p)
		return false;
	/* The first word after it is field 3 (the state): skip 3 to 19.
	 * Counting from 2 read field 21, always 0: no fork was direct. */
	for (p++; *p && field < 20; field++) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')
			p++;
	}
	while (*p == ' ')
		p++;
	return field == 20 && p[0] == '1' && p[1] == ' ';
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

static PyMethodDef methods[] = {
	{ "serve", py_serve, METH_VARARGS, "Serve fork requests (see pyext.c)." },
	{ "fork", py_fork, METH_VARARGS, "Make a sandbox from this template (see pyext.c)." },
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
