/* _petri — the C half of the Python runtime's template (zygote) mode.
 *
 * Built as a CPython extension, embedded in the petri binary and written to
 * /opt/petri/ in the template sandbox; the driver imports it only in
 * template mode (driver.py --zygote).  It exposes one function, fork(),
 * which runs the jail's template_fork() (src/jail/template.c): the jail's
 * logic stays in C, the template only calls it.
 *
 * The seccomp filter is built once, at import, from the same policy code
 * the supervisor uses. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>

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

static PyMethodDef methods[] = {
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
