"""petri's in-sandbox driver: runs every execution of one session.

The supervisor starts this file as ``/usr/bin/python3 -I -u /opt/petri/driver.py``
inside the sandbox and talks to it over fd 3 with the frames described in
docs/protocol.md: it sends ``exec`` frames; the driver answers each with zero or
more ``result`` frames, at most one ``error`` frame and a final ``done`` frame.
Output is not framed: fds 1 and 2 are the execution's stdout and stderr.

Design
------
* Start-up is as cheap as bare Python.  The driver runs as a script from a
  read-only path, so its bytecode is never cached and compiling all of it would
  cost more than the interpreter's own start-up.  Hence two stages: this file's
  top (the bootstrap) imports only modules the interpreter has already loaded
  and sends ``ready`` (built by hand); the rest of the driver is the ``SESSION``
  source below, compiled right after ``ready`` (under this file's name and line
  numbers), together with the standard library modules it needs
  (``load_modules``).  All that happens before any user code runs, so a user's
  ``/work/json.py`` can never shadow the driver's own imports.  numpy, pandas
  and matplotlib are never imported by the driver: they are used only when the
  user's code has already imported them (``sys.modules``).

* Python runs in-process, with notebook-cell semantics: the cell is parsed with
  ``ast``; a final expression statement is evaluated separately and its value
  displayed (unless it is ``None`` or the line ends with ``;``).  Top-level
  ``await`` works.  The namespace is the ``__dict__`` of a fresh module that
  replaces ``sys.modules['__main__']``, so the driver's globals are not in it and
  pickle/dataclasses find user classes.  Cells are compiled as ``<cell N>`` and
  registered in ``linecache``; the driver's frames are removed from tracebacks.

* Rich results are MIME bundles (``mime_bundle``): ``text/plain`` is ``repr()``,
  the IPython ``_repr_*_`` methods add more types, each call guarded.  Every
  open matplotlib figure is sent as PNG after each Python execution, and
  ``pyplot.show()`` is patched to do the same at the point it is called (like a
  notebook's inline backend: figures are closed once shown).  A plotly figure
  is its JSON (``application/vnd.plotly.v1+json``, as Jupyter's) and a small
  ``text/html`` that draws it with a plotly.js already on the page;
  ``fig.show()`` and ``plotly.io.show()`` publish the same (``plotly_bundle``).
  Both libraries are patched as they are imported (``ImportPatches``).

* Every other language is a program (the exec frame's ``program``: the
  table of languages in src/exec/languages.c, or an operator's
  ``[language.NAME]``): the code is written to its ``file``, compiled with
  ``compile`` when there is one, and started with ``run``, as child processes
  in their own session/process group with the execution's stdin (the
  driver's fd 0: ``/dev/null`` unless the exec frame carries ``stdin``) and the
  driver's fds 1 and 2, so their output streams live; the driver only waits.
  ``{tmp}`` is a private 0700 directory under /tmp, made for the one
  execution and removed afterwards.  What the program leaves in
  ``$PETRI_RESULTS`` (images, its value, its error) becomes results
  (``program_results``; docs/languages.md).

* Interrupts: the supervisor sends SIGINT.  ``on_sigint`` raises
  KeyboardInterrupt only while user code runs (``run_user``) and never in the
  middle of writing a frame (it is deferred until the frame is out).  Between
  executions SIGINT is ignored.  For programs, an interrupt kills the child's
  process group.

* Frames are checked strictly: a malformed frame from the supervisor is a bug,
  so the driver says why on stderr and exits with status 2.  EOF on fd 3 at a
  frame boundary ends the session (status 0).  Outgoing frames are bounded
  (representation and text caps, ``FRAME_MAX``) and always valid UTF-8 JSON
  without NUL characters.

Where docs/protocol.md leaves room
---------------------------------
* ``SystemExit(n)`` gives ``n & 0xFF``, what the process itself would exit
  with; no error frame.  An interrupted program gives exit code 130
  (128 + SIGINT, as a shell reports it) with an error named KeyboardInterrupt.
  A program's command line runs through ``/bin/sh -c`` only when it needs a
  shell (``command_argv``), so that a program killed by a signal is reported
  as such.
* Text in frames: NUL becomes U+FFFD and lone surrogates ``\\udcXX`` escapes
  (the supervisor's JSON parser refuses both); error name, message and
  traceback are cut to 256 B, 64 KiB and 256 KiB of UTF-8, keeping head and
  tail.  A representation that is dropped (too big, failing ``_repr_*_``,
  invalid base64 or JSON) is noted on stderr as ``[petri] ...``.
* Results stay within the caps the exec frame gives (``results_cap`` bytes
  as the supervisor counts them and as frames on the wire, ``results_max``
  results): past them the driver sends one note, "[further results dropped:
  ...]", and drops the rest, so that honest code never meets the
  supervisor's frame budget (which ends the session).
* ``display()`` from a user thread belongs to the exec in flight; between
  execs it is dropped.  A process forked by user code never writes frames and
  exits when it reaches the end of the cell.
"""

import _signal  # the C half of `signal`, already loaded: `import signal` costs ~3 ms
import _thread
import builtins
import os
import sys
import types

CONTROL_FD = 3
FRAME_MAX = 16 << 20           # largest frame either side may send
REPR_MAX = 8 << 20             # a larger representation is dropped
PLAIN_MAX = 64 << 10           # text/plain is cut here, with a note
NAME_MAX = 256                 # error name, in UTF-8 bytes (as the supervisor keeps)
MESSAGE_MAX = 64 << 10         # error message, likewise
TRACEBACK_MAX = 256 << 10      # error traceback, likewise
RESULTS_CAP = 32 << 20         # results of one exec, unless the exec frame says
RESULTS_MAX = 1000             # likewise, their number
RESULT_OVERHEAD = 64           # what each result and MIME type counts for (box.c)
COMPILER_TAIL_LINES = 40       # lines of compiler output kept for CompileError
SHELL_LINES_MAX = 100          # `!command` / `%pip` lines made commands per cell
PROTOCOL_ERROR = 2             # exit status after a malformed frame
CO_COROUTINE = 0x0080          # inspect.CO_COROUTINE: the cell uses top-level await
IN_PROCESS = ('python',)       # languages without a "program": the driver's own
PROGRAM_FILE_MAX = 64          # exec/languages.h: LANG_FILE_MAX
PROGRAM_COMMAND_MAX = 1024     # likewise LANG_COMMAND_MAX
LEFT_RESULT_MAX = 1000         # files of $PETRI_RESULTS looked at
LEFT_ERROR_MAX = 1 << 20       # error.json read, at most
LEFT_TYPES = (                 # what a file left in $PETRI_RESULTS is, by suffix
    ('.png', 'image/png'), ('.jpg', 'image/jpeg'), ('.jpeg', 'image/jpeg'),
    ('.svg', 'image/svg+xml'), ('.html', 'text/html'), ('.md', 'text/markdown'),
    ('.json', 'application/json'), ('.txt', 'text/plain'),
)
SHELL_CHARS = frozenset('|&;<>()$`\\"\'*?[]#~%!{}\n')
REPR_METHODS = (
    ('text/html', '_repr_html_'),
    ('text/markdown', '_repr_markdown_'),
    ('image/svg+xml', '_repr_svg_'),
    ('image/png', '_repr_png_'),
    ('image/jpeg', '_repr_jpeg_'),
    ('text/latex', '_repr_latex_'),
    ('application/json', '_repr_json_'),
)
BINARY_TYPES = ('image/png', 'image/jpeg')
PLOTLY_TYPE = 'application/vnd.plotly.v1+json'
# plotly.js from a Debian package (python3-plotly is +dfsg and has none):
# r-cran-plotly's, a Recommends of petri's package.  src/api/web.c serves
# the same file to the web page.
PLOTLY_JS = '/usr/lib/R/site-library/plotly/htmlwidgets/lib/plotlyjs/plotly-latest.min.js'
PLOTLY_HEIGHT = 450            # plotly.js's default height, in CSS pixels
DRIVER_FILE = (lambda: None).__code__.co_filename
DRIVER_PID = os.getpid()
MAIN_THREAD = _thread.get_ident()
SEND_LOCK = _thread.allocate_lock()

LIBC = None                    # ctypes handle for fflush(NULL), set by load_modules()
# Where pip installs a session's packages (a --user install: PYTHONUSERBASE
# is /work/.local, box.c), inside the workspace whatever the environment says.
USER_SITE = '/work/.local/lib/python%d.%d/site-packages' % sys.version_info[:2]


class State:
    """Mutable state of the driver (never visible in the user's namespace)."""

    exec_id = None             # id of the exec in flight; None between execs
    interruptible = False      # SIGINT raises KeyboardInterrupt right now
    defer = 0                  # > 0 while the main thread writes a frame
    pending = False            # a SIGINT arrived while it could not be raised
    error_sent = False         # this exec already has its error frame
    results_cap = RESULTS_CAP  # caps of the exec in flight (its exec frame)
    results_max = RESULTS_MAX
    results_kept = 0           # what its results count for, as the supervisor counts
    results_wire = 0           # bytes of its result frames, headers included
    results_sent = 0
    results_dropped = False    # the note that results were dropped went out
    shown_figures = []         # figures displayed during this exec
    plotly_missing_said = False  # the note that plotly.js is missing went out
    future_flags = 0           # __future__ features enabled by earlier cells
    loop = None                # asyncio event loop for top-level await
    user_ns = None             # the user's namespace: __main__.__dict__
    main_ns = None             # ... of the default context
    contexts = {}              # other contexts' namespaces, by name
    driver_module = None       # this module, once it is no longer __main__
    user_site = None           # (inode, mtime) of USER_SITE when last looked at
    set_up = False             # serve_setup() has run
    streams = ()               # the line-buffered stdout and stderr it made, the originals


S = State()


def fatal(message, status):
    """Say what went wrong on stderr and leave at once."""
    flush_stdio()
    try:
        os.write(2, ('petri driver: %s\n' % message).encode('utf-8', 'replace'))
    except OSError:
        pass
    os._exit(status)


def write_all(data):
    view = memoryview(data)
    while view:
        try:
            written = os.write(CONTROL_FD, view)
        except OSError as exc:
            fatal('cannot write to the control socket: %s' % exc, 1)
        view = view[written:]


def send_ready():
    """The ready frame, built by hand: json is not loaded yet."""
    version = '%d.%d.%d' % sys.version_info[:3]
    body = '{"type":"ready","python":"%s","pid":%d}' % (version, os.getpid())
    write_all(len(body).to_bytes(4, 'big') + body.encode('ascii'))


def flush_stdio():
    """Push Python's and C's buffered output into the pipes."""
    streams = []
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if not any(stream is seen for seen in streams):
            streams.append(stream)
    for stream in streams:
        try:
            stream.flush()
        except Exception:
            pass
    if LIBC is not None:
        try:
            LIBC.fflush(None)
        except Exception:
            pass


def on_sigint(signum, frame):
    """SIGINT: KeyboardInterrupt in user code, deferred while a frame is being
    written or the driver itself works, ignored between executions."""
    if S.interruptible and not S.defer:
        raise KeyboardInterrupt
    if S.exec_id is not None:
        S.pending = True


def extend_sys_path():
    """-I leaves the user site and PYTHONPATH out of sys.path: put in the
    session's own installs (USER_SITE) and the operator's [python] path
    (PETRI_PYTHON_PATH, set by the supervisor), after the standard library,
    so that the driver's own imports never come from them, and before
    Debian's packages.  Python programs that the code starts get the
    operator's directories as PYTHONPATH."""
    extra = [d for d in os.environ.get('PETRI_PYTHON_PATH', '').split(':') if d[:1] == '/']
    if extra:
        os.environ.setdefault('PYTHONPATH', ':'.join(extra))
    at = len(sys.path)
    for i, entry in enumerate(sys.path):
        if entry.endswith(('/dist-packages', '/site-packages')):
            at = i
            break
    sys.path[at:at] = [d for d in [USER_SITE] + extra if d not in sys.path]


CACHE_DIR = '/opt/petri/cache'       # cache.h's CACHE_SANDBOX_DIR


def link_caches():
    """matplotlib's font list, built once by petri for every sandbox
    (src/runtime/cache.h), linked into MPLCONFIGDIR: that directory must
    stay the sandbox's own and writable (matplotlib makes a temporary one,
    and so rebuilds the list, otherwise), the list itself stays read-only.
    Each sandbox has a fresh /tmp: the cold driver, the template and each
    driver forked from it link once, before any code runs."""
    source = CACHE_DIR + '/matplotlib'
    target = os.environ.get('MPLCONFIGDIR', '')
    try:
        names = os.listdir(source)
    except OSError:
        return                          # no cache: matplotlib builds its own
    if target[:1] != '/':
        return
    try:
        os.makedirs(target, exist_ok=True)
        for name in names:
            if name.startswith('fontlist-') and name.endswith('.json'):
                os.symlink(source + '/' + name, target + '/' + name)
    except OSError:
        pass                            # a full /tmp: matplotlib rebuilds


def make_user_namespace():
    """A fresh __main__ module for user code; the driver keeps its own globals."""
    S.driver_module = sys.modules['__main__']
    main = types.ModuleType('__main__')
    main.__builtins__ = builtins
    sys.modules['__main__'] = main
    S.user_ns = S.main_ns = main.__dict__


# ---------------------------------------------------------------- template

# What a template imports before it forks sessions comes on its command
# line: `[python] preload` (src/config/config.c has the default and the
# rules, checked again here).
PRELOAD_MAX = 64
PRELOAD_NAME_MAX = 128
PRELOAD_ERROR_MAX = 160        # per module in the ready message (zygote.c's buffer)
FORKED = False                 # this driver was forked from a template


def preload(names):
    """Import each module of names (dotted identifiers); a missing or broken
    one is not fatal: [{"module", "error"}] for the ready message."""
    failed = []
    for name in names[:PRELOAD_MAX]:
        parts = name.split('.')
        if (len(name) > PRELOAD_NAME_MAX or not name.isascii()
                or not all(part.isidentifier() for part in parts)):
            failed.append({'module': name[:PRELOAD_NAME_MAX], 'error': 'not a module name'})
            continue
        try:
            __import__(name)
        except BaseException as exc:    # SystemExit too: nothing stops the template
            error = '%s: %s' % (type(exc).__name__, exc)
            failed.append({'module': name, 'error': error[:PRELOAD_ERROR_MAX]})
    return failed


def zygote_main(names):
    """Template mode (docs/protocol.md): import the modules named on the
    command line ([python] preload), then make a sandbox per request with
    the C extension _petri; never run user code.

    The control socket is SOCK_SEQPACKET: one fork request per message (a
    fixed binary struct, src/jail/template.h), with the new sandbox's five
    descriptors attached.  Each request is answered with {"ok": true} or
    {"ok": false, "error": ...}.
    """
    import gc
    import json
    import socket
    padding = '\n' * (SESSION_LINE - 1)
    exec(compile(padding + SESSION, DRIVER_FILE, 'exec'), globals())
    load_modules()  # noqa: F821 -- defined by SESSION
    sys.path.insert(0, '/opt/petri')
    import _petri
    del sys.path[0]
    failed = preload(names)
    draw_a_figure()
    # Objects made so far stay put: the collector will not walk (and so
    # copy) the pages they live on in every session.
    gc.collect()
    gc.freeze()
    # Cheaper to copy at every fork and to tear down at every exit: see
    # collapse() in pyext.c.  Once, before the first sandbox; without it
    # the template works as well, its forks cost more.
    try:
        huge = _petri.collapse()
    except (OSError, MemoryError):
        huge = 0
    leftover = open_descriptors()
    if leftover:
        fatal('the template holds descriptors %s after its imports; sandboxes '
              'forked from it would inherit them' % leftover, 1)
    sock = socket.socket(fileno=CONTROL_FD)
    version = '%d.%d.%d' % sys.version_info[:3]
    sock.send(json.dumps({'type': 'ready', 'python': version,
                          'preload_failed': failed,
                          'huge_pages_mib': huge >> 20}).encode())
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)     # children reap themselves
    while True:
        # The requests and the direct forks, in C (pyext.c): this process
        # touches few of its pages between forks, and each one it touches
        # is copied once per live sandbox.
        got = _petri.serve(CONTROL_FD)
        if got is None:
            return 0
        if got == 0:
            sock.detach()               # fd 3 is the session's now
            return session_main()
        # Threads (a threaded BLAS): fork through the runtime first, so
        # that their locks are in order in the copy.
        request, fds = got
        pid = os.fork()
        if pid == 0:
            sock.detach()               # fd 3 is about to become the session's
            try:
                _petri.fork(request, fds)
            except BaseException:
                os._exit(125)
            return session_main()
        for fd in fds:
            os.close(fd)
        sock.send(b'{"ok":true}')


def draw_a_figure():
    """Pay matplotlib's first-figure costs (fonts, the Agg renderer) once,
    here, rather than in every session's first chart."""
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is None:
        return
    import io
    try:
        figure = plt.figure()
        plt.plot([0, 1], [0, 1])
        figure.savefig(io.BytesIO(), format='png')
    except Exception as exc:
        os.write(2, ('petri template: cannot draw a figure: %s\n' % exc).encode())
    finally:
        plt.close('all')
    # Loaded fonts keep their files open: a sandbox must not inherit a
    # descriptor (its number would be closed under a stale object there).
    font_manager = sys.modules.get('matplotlib.font_manager')
    if font_manager is not None and hasattr(font_manager, '_get_font'):
        font_manager._get_font.cache_clear()


def open_descriptors():
    """Descriptors beyond 0-3 in this process (a template must hold none).
    The listing's own descriptor is closed by the time it returns: keep only
    those still open."""
    try:
        listed = [int(fd) for fd in os.listdir('/proc/self/fd') if int(fd) > 3]
    except OSError:
        return []
    still = []
    for fd in listed:
        try:
            os.fstat(fd)
            still.append(fd)
        except OSError:
            pass
    return still


# The warm-up's cell: small, but with a value, so that the display of a
# result and its frame are part of what it pays for.
WARM_UP_FRAME = {'type': 'exec', 'id': 0, 'language': 'python', 'code': '1 + 1'}


def warm_up():
    """In a sandbox forked from the template, before it says ready: run one
    cell exactly as an execution runs, its exec frame read from fd 3 and its
    result and done frames written there through the driver's own code, with
    fd 3 a socket pair of its own for the while.  The first real execution
    then does not pay, while a client waits, for the pages that a first run
    touches (copy-on-write faults in the frame reader and writer, the display
    of a value, the cell's compilation): measured on a loaded 2-core machine,
    a pooled session's first `1+1` took 19-42 ms (7-11 ms of CPU) with an
    empty cell run with frames dropped, 3-11 ms (1-4 ms) this way.  The
    supervisor sees none of it: fd 3 is the control socket again before
    "ready", and the pool hands out a sandbox only after its "ready"."""
    import socket
    saved = os.dup(CONTROL_FD)
    ours, theirs = socket.socketpair()
    try:
        os.dup2(ours.fileno(), CONTROL_FD, inheritable=False)
        theirs.sendall(encode_frame(WARM_UP_FRAME))  # noqa: F821 -- defined by SESSION
        handle_exec(read_request())  # noqa: F821
    finally:
        os.dup2(saved, CONTROL_FD, inheritable=False)
        os.close(saved)
        ours.close()
        theirs.close()


def session_main():
    """In a sandbox just forked from the template: become its driver.  Its
    environment comes in an "env" frame from the supervisor, never through
    the template (whose memory every later sandbox inherits)."""
    global DRIVER_PID
    DRIVER_PID = os.getpid()
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    # The template's generators were seeded once, at import; random reseeds
    # itself after a fork, numpy's global generator does not.
    numpy = sys.modules.get('numpy')
    if numpy is not None:
        numpy.random.seed()
    sys.argv = ['']
    global FORKED
    FORKED = True
    return main()


# ---------------------------------------------------------------- keeper
#
# The sandbox's main process keeps the session; an interpreter, forked from
# it, runs the code.  When the interpreter dies (the memory limit, a crash,
# os._exit, a signal) or a "restart" frame asks, the keeper kills what is
# left of it and forks a fresh one from its own image: the sandbox, /work
# and the session stay, variables go, as when a notebook's kernel restarts.
# In a sandbox forked from a template, the fresh interpreter is as warm as
# the first (pandas and the rest are already in the keeper's image).
#
# Only the keeper holds the control socket (fd 3); each interpreter gets a
# socket pair of its own as its fd 3, and the keeper passes whole frames
# between the two, so that what a dying interpreter half-wrote is never
# sent on.  It adds frames of its own (docs/protocol.md): "ready" for each
# interpreter (with why it started) and "died" for one that ended.  An
# interpreter that sends one of those itself, or a frame over FRAME_MAX,
# is killed, and the "died" frame names the violation (the supervisor ends
# the session).  The interpreter says "started" (to the keeper only) when
# it has read an exec, before any of its code runs: an exec it never
# started goes to the next interpreter instead, and an exec's end is its
# own only when it started.  The keeper runs no user code, and neither it
# nor the interpreter is dumpable (user code cannot reach their memory);
# code can still kill it, as the same user, which ends its own session.
#
# The keeper also starts the session's processes (commands beside the
# interpreter, docs/protocol.md): a "spawn" frame comes with four
# descriptors (SCM_RIGHTS) the supervisor made: the process's stdin, stdout
# and stderr, and a status pipe on which the keeper says "pid N" once it
# started it (or "fail ERRNO"), and "exit STATUS" (waitpid's) when it
# reaped it.  Only the keeper holds that pipe (an interpreter closes its
# copies): the process's code cannot speak on it.  Its output never passes
# through the keeper.  A process ends with the interpreter (the sandbox's
# processes all do), and with the session.

KEEPER_SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2',
                  'SIGWINCH')          # what pid 1 passes on to us (reap.c)
QUICK_DEATHS_MAX = 3           # fresh interpreters ending before "ready", in a row
KEEPER_READ = 1 << 20          # the most read from the supervisor at once
EXIT_SHOWS_MS = 500            # an ending interpreter's exit, after its socket closed
SPAWN_FDS = 4                  # a "spawn" frame's: stdin, stdout, stderr, status
PROCS_MAX = 64                 # processes the keeper keeps (the supervisor asks fewer)
# What a spawned process runs first, as /bin/sh: into its directory, then
# the command itself.  (The supervisor makes it the memory limit's first
# victim, as the interpreter, when it learns its pid.)
PROC_WRAPPER = 'cd -- "$1" || exit 1; shift; exec "$@"'
OOM_SCORE_ADJ_MAX = b'1000'    # the interpreter: the memory limit's first victim
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
KEPT = False                   # this interpreter has a keeper: it says "started"


class Keeper:
    libc = None                # ctypes' libc, for prctl
    dumpable = 0               # what the interpreter is (the keeper is not)
    pid = 0                    # the interpreter
    pidfd = -1
    fd = -1                    # our end of its socket pair
    ready = False              # it said "ready" (and we said so upward)
    cause = 'start'            # why it was started: the next "ready" says so
    started = 0                # id of the last exec it said it started
    pending = None             # an exec frame passed to it, not yet started
    closed = False             # it closed or shut its end of the socket
    quick_deaths = 0
    head = bytearray()         # the length of the frame it is writing, so far
    body = None                # that frame's body (preallocated), or None
    got = 0                    # bytes of body read
    down = bytearray()         # bytes from the supervisor: part of a frame
    ctl = None                 # the control socket as a socket (recvmsg)
    fds = None                 # descriptors received, for the next "spawn"s
    procs = None               # pid: (pidfd, status fd) of the processes spawned


def frame_head(payload):
    """(type, id) from the head of a frame, read as frame.c's parse_head
    reads it: ``{"type":"T"`` then maybe ``,"id":N``; (None, 0) if it does
    not begin so."""
    p = bytes(payload[:64])
    i = 0

    def token(i, lit):
        while i < len(p) and p[i] in b' \t\r\n':
            i += 1
        return i + len(lit) if p.startswith(lit, i) else -1
    for lit in (b'{', b'"type"', b':', b'"'):
        i = token(i, lit)
        if i < 0:
            return None, 0
    end = p.find(b'"', i)
    if end < 0:
        return None, 0
    kind = p[i:end].decode('ascii', 'replace')
    i = token(end + 1, b',')
    if i >= 0:
        i = token(i, b'"id"')
    if i >= 0:
        i = token(i, b':')
    number = 0
    while i >= 0 and i < len(p) and 48 <= p[i] <= 57:
        number = number * 10 + p[i] - 48
        i += 1
    return kind, number


def write_fd(fd, *parts):
    """All of parts to fd (blocking); False if the other end is gone."""
    for data in parts:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except InterruptedError:
                continue
            except OSError:
                return False
    return True


def keeper_send(text):
    body = text.encode('utf-8')
    if not write_fd(CONTROL_FD, len(body).to_bytes(4, 'big') + body):
        os._exit(0)                     # the supervisor went away


def kill_the_rest(reaped=None):
    """Kill every process of the sandbox but pid 1 and us, and reap ours:
    nothing of an interpreter outlives it.  A process that forks meanwhile
    is killed in the next round.  reaped(pid, status): told of each reaped
    child."""
    import time
    me = os.getpid()
    deadline = time.monotonic() + 5.0
    while True:
        try:
            os.kill(-1, _signal.SIGKILL)    # all but pid 1 and this process
        except OSError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if reaped:
                reaped(pid, status)
        try:
            others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)]
        except OSError as exc:
            fatal('cannot list the processes of the sandbox: %s' % exc, 125)
        if not others:
            return
        if time.monotonic() > deadline:
            fatal('processes of the interpreter did not end: %s' % ' '.join(others), 125)
        time.sleep(0.005)


def signal_interpreter(K, signum):
    if K.pidfd >= 0:
        try:
            _signal.pidfd_send_signal(K.pidfd, signum)
        except OSError:
            pass


def weigh_for_oom(K):
    """In a fresh interpreter: the memory limit's first victim, it and what
    it starts (oom_score_adj is inherited), rather than the keeper, whose
    size counts the template's pages it shares.  Raising it needs no
    privilege, but the file of a process that is not dumpable is root's:
    dumpable for the moment of the write, when nothing of the code runs
    yet, then as the keeper found it.  The supervisor sets it too, when it
    reads "ready"."""
    if K.libc is None:
        return
    K.libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open('/proc/self/oom_score_adj', 'wb', buffering=0) as f:
            f.write(OOM_SCORE_ADJ_MAX)
    except OSError:
        pass
    finally:
        K.libc.prctl(PR_SET_DUMPABLE, K.dumpable, 0, 0, 0)


def spawn_interpreter(K):
    """Fork a fresh interpreter.  True in it (the caller goes on to serve),
    False in the keeper."""
    import _socket
    global DRIVER_PID, KEPT
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    ours, theirs = ours.detach(), theirs.detach()
    pid = os.fork()
    if pid == 0:
        # The keeper's alone: the control socket (forgotten, not closed:
        # fd 3 becomes the interpreter's own), the descriptors of
        # processes, which the code must never hold.
        K.ctl.detach()
        for fd in K.fds + [fd for pair in K.procs.values() for fd in pair]:
            os.close(fd)
        K.fds, K.procs = [], {}
        os.dup2(theirs, CONTROL_FD, inheritable=False)
        os.close(theirs)
        os.close(ours)
        if K.pidfd >= 0:
            os.close(K.pidfd)
        _signal.signal(_signal.SIGINT, on_sigint)      # first: never the default
        for name in KEEPER_SIGNALS[1:]:
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
        DRIVER_PID = os.getpid()
        KEPT = True
        weigh_for_oom(K)
        return True
    os.close(theirs)
    K.pid, K.fd, K.ready, K.closed = pid, ours, False, False
    K.head, K.body = bytearray(), None
    try:
        K.pidfd = os.pidfd_open(pid)
    except OSError as exc:
        fatal('cannot watch the interpreter: %s' % exc, 125)
    if K.pending is not None and not write_fd(K.fd, K.pending):
        signal_interpreter(K, _signal.SIGKILL)
    return False


def end_interpreter(K, violation=None, report=True):
    """The interpreter is gone, or must go: kill and reap it and everything
    it started, pass on the whole frames it wrote before it ended, say
    "died" (when it had said ready and report is set)."""
    if violation or not report:
        signal_interpreter(K, _signal.SIGKILL)
    try:
        status = os.waitpid(K.pid, 0)[1]
    except ChildProcessError:
        status = 0
    kill_the_rest(lambda pid, status: process_ended(K, pid, status))
    os.close(K.pidfd)
    K.pidfd = -1
    if report and K.ready and not violation:
        os.set_blocking(K.fd, False)
        try:
            while not violation:
                violation = read_up(K)
        except (BlockingIOError, ConnectionResetError):
            pass
        if violation in ('eof', 'closed'):
            violation = None
    os.close(K.fd)
    K.fd = -1
    K.pid = 0
    if report and K.ready:
        died = '{"type":"died","id":%d,"status":%d' % (K.started, status)
        if violation:
            died += ',"violation":"%s"' % violation
        elif K.closed:
            died += ',"closed":true'
        keeper_send(died + '}')
        if K.cause != 'restart':
            K.cause = 'died'
        K.quick_deaths = 0
    elif report:
        K.quick_deaths += 1
        if K.quick_deaths >= QUICK_DEATHS_MAX:
            fatal('%d fresh interpreters ended before they were ready' % K.quick_deaths, 125)


def read_up(K):
    """Read from the interpreter into the frame it is writing (its body
    preallocated: no copy of it is made) and take the frame when it is
    whole.  None, 'eof', or the name of a violation."""
    if K.body is None:
        chunk = os.read(K.fd, 4 - len(K.head))
        if not chunk:
            return 'eof'
        K.head += chunk
        if len(K.head) < 4:
            return None
        size = int.from_bytes(K.head, 'big')
        if size > FRAME_MAX:
            return 'frame_max'
        K.body, K.got = bytearray(size), 0
    if K.got < len(K.body):
        n = os.readv(K.fd, [memoryview(K.body)[K.got:]])
        if n == 0:
            return 'eof'
        K.got += n
        if K.got < len(K.body):
            return None
    head, body = K.head, K.body
    K.head, K.body = bytearray(), None
    return take_up(K, head, body)


def take_up(K, head, body):
    """A whole frame from the interpreter: its "ready" and "started" are
    ours; anything else goes on to the supervisor."""
    kind, number = frame_head(body)
    if not K.ready:
        if kind != 'ready':
            return 'forged'
        K.ready = True
        version = '%d.%d.%d' % sys.version_info[:3]
        keeper_send('{"type":"ready","python":"%s","pid":%d,"cause":"%s"}'
                    % (version, K.pid, K.cause))
        K.cause = 'start'
        return None
    if kind in ('ready', 'died'):
        return 'forged'
    if kind == 'started':
        K.started = number
        K.pending = None
        return None
    if not write_fd(CONTROL_FD, head, body):
        os._exit(0)
    return None


def pass_down(K):
    """Pass the whole frames from the supervisor on to the interpreter, but
    a "restart" (ours: the frames after it wait for the fresh one).  The
    environment is ours too, for the next one; an exec is kept until the
    interpreter says it started it."""
    while len(K.down) >= 4:
        size = int.from_bytes(K.down[:4], 'big')
        if size > FRAME_MAX:
            fatal('a frame over FRAME_MAX from the supervisor', PROTOCOL_ERROR)
        if len(K.down) < 4 + size:
            return
        frame = bytes(K.down[:4 + size])
        del K.down[:4 + size]
        kind = frame_head(frame[4:])[0]
        if kind == 'spawn':
            spawn_process(K, frame[4:])
            continue
        if kind == 'restart':
            K.cause = 'restart'
            K.pending = None
            end_interpreter(K, report=False)
            return
        if kind == 'env':
            # What a fresh interpreter starts with, whatever the code did
            # to the old one's os.environ.
            import json
            for item in json.loads(frame[4:])['env']:
                name, _, value = item.partition('=')
                os.environ[name] = value
        elif kind == 'exec':
            K.pending = frame
        if not write_fd(K.fd, frame):
            # It died, or shut its end: it can no longer be told
            # anything.  Its end is seen next.
            K.closed = True
            signal_interpreter(K, _signal.SIGKILL)


def say(fd, line):
    """A line on a process's status pipe (never blocks: a pipe takes it)."""
    try:
        os.write(fd, line.encode('ascii'))
    except OSError:
        pass


def spawn_process(K, payload):
    """Start the process of a "spawn" frame with its four descriptors, as
    the sandbox's code would start it (same user, limits and filter), in a
    session of its own; say its pid, or why not, on its status pipe."""
    import json
    if len(K.fds) < SPAWN_FDS:
        fatal('a "spawn" frame without its %d descriptors' % SPAWN_FDS, PROTOCOL_ERROR)
    fds, K.fds = K.fds[:SPAWN_FDS], K.fds[SPAWN_FDS:]
    stdin, stdout, stderr, status = fds
    job = json.loads(payload)
    argv, env, cwd, pty = job.get('argv'), job.get('env'), job.get('cwd'), job.get('pty')
    if (not isinstance(argv, list) or not argv or not isinstance(env, list)
            or not isinstance(cwd, str) or not cwd.startswith('/')
            or not isinstance(pty, bool) or not all(isinstance(a, str) for a in argv + env)):
        fatal('a malformed "spawn" frame', PROTOCOL_ERROR)
    environ = dict(os.environ)
    for item in env:
        name, _, value = item.partition('=')
        environ[name] = value
    try:
        if len(K.procs) >= PROCS_MAX:
            raise OSError(11, 'too many processes')          # EAGAIN
        if not os.path.isdir(cwd):
            raise OSError(2, 'no such directory')             # ENOENT
        # On a terminal: setsid(1) makes it a session's leader with the
        # terminal (its fd 0) as the controlling one, in place.
        lead = ['/usr/bin/setsid', '--ctty'] if pty else []
        pid = os.posix_spawn('/bin/sh', ['sh', '-c', PROC_WRAPPER, 'sh', cwd] + lead + argv,
                             environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, stdin, 0),
                                           (os.POSIX_SPAWN_DUP2, stdout, 1),
                                           (os.POSIX_SPAWN_DUP2, stderr, 2)],
                             setsid=not pty, setsigmask=(),
                             setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            # Not to be watched, then not to run: untracked, it would
            # outlive what the supervisor knows of it.
            os.kill(pid, _signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
    except (OSError, ValueError) as exc:
        say(status, 'fail %d\n' % (getattr(exc, 'errno', None) or 22))
        os.close(status)
        return
    finally:
        for fd in (stdin, stdout, stderr):
            os.close(fd)
    K.procs[pid] = (pidfd, status)
    say(status, 'pid %d\n' % pid)


def process_ended(K, pid, status):
    """pid was reaped: if it is a process of ours, say how it ended."""
    if pid in K.procs:
        pidfd, fd = K.procs.pop(pid)
        os.close(pidfd)
        say(fd, 'exit %d\n' % status)
        os.close(fd)


def reap_process(K, pid):
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done, status = pid, 0
    if done:
        process_ended(K, pid, status)


def read_control(K):
    """What the supervisor sent, and the descriptors that came with it."""
    import _socket
    space = _socket.CMSG_SPACE(SPAWN_FDS * 4) * 8
    try:
        data, ancillary, flags, _ = K.ctl.recvmsg(KEEPER_READ, space, _socket.MSG_CMSG_CLOEXEC)
    except OSError:
        return b''
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            K.fds.extend(memoryview(payload[:len(payload) - len(payload) % 4]).cast('i'))
    if flags & _socket.MSG_CTRUNC:
        fatal('descriptors from the supervisor were cut', PROTOCOL_ERROR)
    return data


def keep():
    """Become the keeper of the session (in the main process of a sandbox)
    and return only in each fresh interpreter."""
    import select
    import _socket
    K = Keeper()
    os.set_blocking(CONTROL_FD, True)
    K.ctl = _socket.socket(fileno=CONTROL_FD)
    K.fds, K.procs = [], {}
    # Not dumpable, whatever the interpreter is (a cold one is, after its
    # exec): the code, as the same user, cannot read or write our memory.
    try:
        import ctypes
        K.libc = ctypes.CDLL(None)
        K.dumpable = K.libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
        if K.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError('prctl')
    except (OSError, ImportError, AttributeError) as exc:
        fatal('the keeper cannot make itself undumpable: %s' % exc, 125)
    for name in KEEPER_SIGNALS:
        _signal.signal(getattr(_signal, name), lambda n, f: signal_interpreter(K, n))
    while True:
        if not K.pid:
            if spawn_interpreter(K):
                return
            pass_down(K)                # what came after a restart
            if not K.pid:
                continue
        poller = select.poll()
        poller.register(CONTROL_FD, select.POLLIN)
        if not K.closed:                # its end would poll as hung up for ever
            poller.register(K.fd, select.POLLIN)
        poller.register(K.pidfd, select.POLLIN)
        ended = {}
        for pid, (pidfd, _) in K.procs.items():
            poller.register(pidfd, select.POLLIN)
            ended[pidfd] = pid
        events = dict(poller.poll())
        for pidfd, pid in ended.items():
            if events.get(pidfd):
                reap_process(K, pid)
        if K.fd in events and not K.closed:
            try:
                what = read_up(K)
            except ConnectionResetError:
                what = 'eof'
            if what == 'eof':
                # Its end closed: it is ending (its files close before its
                # exit shows), or it closed or shut its end and can no
                # longer be told anything.
                ending = select.poll()
                ending.register(K.pidfd, select.POLLIN)
                if not ending.poll(EXIT_SHOWS_MS):
                    K.closed = True
                    signal_interpreter(K, _signal.SIGKILL)
                events[K.pidfd] = select.POLLIN
            elif what:
                end_interpreter(K, what)
                continue
        if events.get(K.pidfd):
            end_interpreter(K)
            continue
        if events.get(CONTROL_FD):
            chunk = read_control(K)
            if not chunk:               # the supervisor ended the session
                kill_the_rest()
                os._exit(0)
            K.down += chunk
            pass_down(K)


def main():
    """Bootstrap: answer ready as early as possible, then serve the session."""
    if not FORKED:
        extend_sys_path()               # a forked driver has its template's
    link_caches()
    if sys.argv[1:2] == ['--zygote']:
        return zygote_main(sys.argv[2:])
    _signal.signal(_signal.SIGINT, on_sigint)
    try:
        os.set_inheritable(CONTROL_FD, False)   # children get only fds 0-2
    except OSError as exc:
        fatal('fd 3 is not the control socket: %s' % exc, PROTOCOL_ERROR)
    make_user_namespace()
    sys.argv = ['']
    if os.getppid() == 1:
        keep()                          # returns in each fresh interpreter
    if FORKED:
        serve_setup()  # noqa: F821 -- the warm-up runs as every exec will
        warm_up()
    send_ready()
    if 'serve' not in globals():        # a template compiled it already
        padding = '\n' * (SESSION_LINE - 1)     # keep this file's line numbers
        exec(compile(padding + SESSION, DRIVER_FILE, 'exec'), globals())
    return serve()  # noqa: F821 -- defined by SESSION


SESSION_LINE = sys._getframe().f_lineno + 1   # the line of `SESSION = ...`
SESSION = r'''
# ---------------------------------------------------------------- frames

def read_exact(size):
    """Read size bytes from fd 3; fewer only at end of file."""
    buf = bytearray()
    while len(buf) < size:
        try:
            chunk = os.read(CONTROL_FD, min(size - len(buf), 1 << 20))
        except ConnectionResetError:    # the supervisor went away: end of file
            break
        except OSError as exc:
            fatal('cannot read the control socket: %s' % exc, 1)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def clean_text(text):
    """Make text safe for a frame: valid UTF-8 and no NUL (which C JSON
    parsers commonly refuse)."""
    if not text.isascii():
        try:
            text.encode('utf-8')
        except UnicodeEncodeError:      # lone surrogates
            text = text.encode('utf-8', 'backslashreplace').decode('utf-8')
    if '\0' in text:
        text = text.replace('\0', '\ufffd')
    return text


def encode_frame(frame):
    body = json.dumps(frame, ensure_ascii=False, allow_nan=False,
                      separators=(',', ':')).encode('utf-8')
    return len(body).to_bytes(4, 'big') + body


def send(frame, exec_id=None, kept=None):
    """Write one frame.  With exec_id, only while that exec is in flight;
    with kept (a result: what it counts for), only within the exec's caps.

    Safe from any thread.  In the main thread a SIGINT that arrives while the
    frame is written is raised after it is out, if user code is running."""
    if os.getpid() != DRIVER_PID:       # a process forked by user code stays silent
        return
    payload = encode_frame(frame)
    main = _thread.get_ident() == MAIN_THREAD
    if main:
        for stream in S.streams[:2]:    # a partial line written before this result
            try:
                stream.flush()
            except Exception:
                pass
        S.defer += 1
    try:
        with SEND_LOCK:
            if kept is not None and exec_id == S.exec_id:
                payload = admit_result(payload, kept)
            if payload and (exec_id is None or exec_id == S.exec_id):
                write_all(payload)
    finally:
        if main:
            S.defer -= 1
    if main and S.pending and S.interruptible and not S.defer:
        S.pending = False
        raise KeyboardInterrupt


def send_error(name, message, tb):
    S.error_sent = True
    send({'type': 'error', 'id': S.exec_id, 'name': clip(clean_text(name), NAME_MAX),
          'message': clip(clean_text(message), MESSAGE_MAX),
          'traceback': clip(clean_text(tb), TRACEBACK_MAX)})


def publish(data, main=False):
    """Send a MIME bundle as a result of the exec in flight (any thread);
    main: it is the value of the cell's last expression, not a display()."""
    exec_id = S.exec_id
    if exec_id is None:
        return
    data = {mime: clean_text(value) for mime, value in data.items()}
    frame = {'type': 'result', 'id': exec_id, 'data': data}
    if main:
        frame['main'] = True
    while len(encode_frame(frame)) > FRAME_MAX and len(data) > 1:
        largest = max((m for m in data if m != 'text/plain'), key=lambda m: len(data[m]))
        note('%s representation dropped: the result frame would exceed 16 MiB' % largest)
        del data[largest]
    kept = RESULT_OVERHEAD + sum(len(value.encode('utf-8')) + len(mime) + RESULT_OVERHEAD
                                 for mime, value in data.items())
    send(frame, exec_id, kept)


def admit_result(payload, kept):
    """The frame to write for a result (under SEND_LOCK): payload while the
    exec's results stay within its caps, else once the note that the rest
    is dropped, then nothing.  The supervisor drops results past the caps
    too, but it counts every frame against the exec's budget and ends a
    session that sends more: this keeps honest code within it."""
    if (S.results_sent < S.results_max and S.results_kept + kept <= S.results_cap
            and S.results_wire + len(payload) <= S.results_cap):
        S.results_sent += 1
        S.results_kept += kept
        S.results_wire += len(payload)
        return payload
    if S.results_dropped:
        return None
    S.results_dropped = True
    text = '[further results dropped: over the limit of %d MiB or %d results]' % (
        S.results_cap >> 20, S.results_max)
    return encode_frame({'type': 'result', 'id': S.exec_id, 'data': {'text/plain': text}})


def reject(reason):
    fatal('protocol error: %s' % reason, PROTOCOL_ERROR)


def reject_constant(name):
    reject('invalid JSON constant %s' % name)


def read_request():
    """Next exec frame, validated; None at end of file."""
    head = read_exact(4)
    if not head:
        return None
    if len(head) < 4:
        reject('end of file inside a frame header')
    size = int.from_bytes(head, 'big')
    if size > FRAME_MAX:
        reject('frame of %d bytes exceeds FRAME_MAX' % size)
    body = read_exact(size)
    if len(body) < size:
        reject('end of file inside a frame (%d of %d bytes)' % (len(body), size))
    try:
        frame = json.loads(body.decode('utf-8'), parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:     # ValueError includes bad UTF-8
        reject('frame is not UTF-8 JSON: %s' % exc)
    check_exec_frame(frame)
    return frame


def check_exec_frame(frame):
    if not isinstance(frame, dict):
        reject('frame is not a JSON object')
    kind = frame.get('type')
    if not isinstance(kind, str):
        reject('frame has no string "type"')
    if kind == 'env':
        check_env_list(frame.get('env'), 'env frame')
        return
    if kind == 'restart':
        if set(frame) != {'type'}:
            reject('restart frame: no member but "type"')
        return
    if kind != 'exec':
        reject('unknown frame type %r' % kind)
    exec_id = frame.get('id')
    if not isinstance(exec_id, int) or isinstance(exec_id, bool):
        reject('exec frame: "id" must be an integer')
    language = frame.get('language')
    if not (isinstance(language, str) and 0 < len(language) <= 32):
        reject('exec frame: "language" must be a short string')
    if language in IN_PROCESS:
        if 'program' in frame:
            reject('exec frame: %s has no "program"' % language)
    else:
        check_program(frame.get('program'))
    if not isinstance(frame.get('code'), str):
        reject('exec frame: "code" must be a string')
    for cap in ('results_cap', 'results_max'):
        value = frame.get(cap, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            reject('exec frame: "%s" must be a non-negative integer' % cap)
    if 'env' in frame:
        check_env_list(frame['env'], 'exec frame')
    context = frame.get('context')
    if context is not None and not (isinstance(context, str) and 0 < len(context) <= 64
                                    and context.isascii() and context.isprintable()):
        reject('exec frame: "context" must be a short printable ASCII string')
    cwd = frame.get('cwd')
    if cwd is not None and not (isinstance(cwd, str) and cwd.startswith('/')
                                and len(cwd) <= 4096 and '\0' not in cwd):
        reject('exec frame: "cwd" must be an absolute path')
    if not isinstance(frame.get('fresh', False), bool):
        reject('exec frame: "fresh" must be a boolean')
    if 'stdin' in frame and not isinstance(frame['stdin'], str):
        reject('exec frame: "stdin" must be a string')
    if 'unpack' in frame:
        check_unpack(frame['unpack'])


def check_unpack(job):
    if not isinstance(job, dict) or set(job) != {'archive', 'dest', 'max_entries',
                                                 'max_bytes', 'max_ratio'}:
        reject('exec frame: "unpack" must be an object of archive, dest and the caps')
    name = job['archive']
    if not (isinstance(name, str) and name.startswith(UNPACK_ARCHIVE) and '/' not in name
            and len(name) <= 64):
        reject('exec frame: unpack "archive" must be a name the supervisor chose')
    if not (isinstance(job['dest'], str) and len(job['dest']) <= 4096
            and '\0' not in job['dest'] and '..' not in job['dest'].split('/')):
        reject('exec frame: unpack "dest" must be a path in /work')
    for cap in ('max_entries', 'max_bytes', 'max_ratio'):
        value = job[cap]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            reject('exec frame: unpack "%s" must be a positive integer' % cap)


def check_program(program):
    if not isinstance(program, dict) or set(program) - {'file', 'compile', 'run'}:
        reject('exec frame: "program" must be an object of file, compile and run')
    name = program.get('file')
    if not (isinstance(name, str) and 0 < len(name) <= PROGRAM_FILE_MAX):
        reject('exec frame: program "file" must be a short string')
    base = name[6:] if name.startswith('{tmp}/') else name
    if not base or base[0] in '.-' or not all(c.isascii() and (c.isalnum() or c in '+-_.')
                                                for c in base):
        reject('exec frame: program "file" must be a plain file name')
    for key in ('compile', 'run'):
        command = program.get(key)
        if key == 'compile' and command is None:
            continue
        if not (isinstance(command, str) and 0 < len(command) <= PROGRAM_COMMAND_MAX
                and command.isprintable()):
            reject('exec frame: program "%s" must be a one-line command' % key)


def context_namespace(name, fresh):
    """The namespace of a context: the default one (None), or one of its
    own, new when first named or when fresh.  Contexts share the process:
    modules, files and the working directory, not variables."""
    if name is None:
        if fresh:
            S.main_ns.clear()
            S.main_ns.update({'__name__': '__main__', '__builtins__': builtins})
        return S.main_ns
    if fresh or name not in S.contexts:
        S.contexts[name] = {'__name__': '__main__', '__builtins__': builtins}
    return S.contexts[name]


def check_env_list(env, where):
    if not isinstance(env, list) or not all(isinstance(item, str) for item in env):
        reject('%s: "env" must be a list of strings' % where)
    for item in env:
        name, sep, _ = item.partition('=')
        if not sep or not name or '\0' in item:
            reject('%s: %r is not NAME=value' % (where, item[:100]))


def apply_env(env):
    """Set "NAME=value" items in os.environ (which programs
    inherit); what they replaced, to give to restore_env()."""
    saved = {}
    for item in env:
        name, _, value = item.partition('=')
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value
    return saved


def restore_env(saved):
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# ---------------------------------------------------------------- helpers

def clip(text, limit):
    """Keep the head and the tail of a text of more than limit UTF-8 bytes."""
    if len(text) <= limit // 4:
        return text
    data = text.encode('utf-8')
    if len(data) <= limit:
        return text
    keep = limit - 100                  # room for the note
    head = data[:keep // 4].decode('utf-8', 'ignore')
    tail = data[len(data) - (keep - keep // 4):].decode('utf-8', 'ignore')
    return '%s\n... [%d bytes omitted] ...\n%s' % (head, len(data) - keep, tail)


def note(message):
    """A diagnostic of the driver, shown on the user's stderr."""
    try:
        sys.stderr.write('[petri] %s\n' % message)
    except Exception:
        pass


def safe_str(obj):
    try:
        return str(obj)
    except Exception:
        return '<str() failed>'


def exception_name(exc):
    """Class name, qualified by its module unless builtins or __main__."""
    cls = type(exc)
    name = safe_str(getattr(cls, '__qualname__', cls.__name__))
    module = getattr(cls, '__module__', None)
    if module in (None, 'builtins', '__main__'):
        return name
    return '%s.%s' % (safe_str(module), name)


def describe(exc):
    return '%s: %s' % (exception_name(exc), safe_str(exc))


def run_user(fn, *args):
    """Call fn(*args) as user code: interruptible by SIGINT.

    Returns the exception it raised (any BaseException), or None."""
    try:
        S.interruptible = True
        try:
            if S.pending:
                S.pending = False
                raise KeyboardInterrupt
            fn(*args)
        finally:
            S.interruptible = False
    except BaseException as exc:
        return exc
    return None


# ---------------------------------------------------------------- rich results

def mime_bundle(obj):
    """The MIME bundle of obj: text/plain plus whatever _repr_*_ methods give."""
    if is_figure(obj):
        return figure_bundle(obj)
    if is_plotly_figure(obj):
        return plotly_bundle(obj)
    data = {'text/plain': plain_text(obj)}
    if isinstance(obj, type) or has_attribute(obj, '_petri_no_such_attribute_'):
        return data                     # classes, and objects that claim every name
    for mime, method in REPR_METHODS:
        value = encode_representation(mime, call_repr_method(obj, method))
        if value is not None and fits(mime, value):
            data[mime] = value
    if 'text/html' not in data and is_pandas_series(obj):
        html = series_html(obj)
        if html is not None and fits('text/html', html):
            data['text/html'] = html
    if is_pandas_frame(obj):
        table = frame_json(obj)
        if table is not None and fits(FRAME_MIME, table):
            data[FRAME_MIME] = table
    return data


FRAME_MIME = 'application/vnd.petri.dataframe+json'
FRAME_CELLS_MAX = 10000         # a larger DataFrame is shown as HTML and text only


def is_pandas_frame(obj):
    frame = getattr(sys.modules.get('pandas'), 'DataFrame', None)
    return isinstance(frame, type) and isinstance(obj, frame)


def frame_json(frame):
    """A DataFrame's columns as JSON, {"column": [values, ...]} (E2B's
    result.data); None when it is larger than FRAME_CELLS_MAX cells or
    cannot be read."""
    try:
        if frame.size > FRAME_CELLS_MAX:
            return None
        columns = frame.to_dict(orient='list')
        return json.dumps({str(name): [chart_value(v) for v in values]
                           for name, values in columns.items()},
                          allow_nan=False, separators=(',', ':'))
    except Exception as exc:
        note('the DataFrame could not be read as data: %s' % describe(exc))
        return None


def plain_text(obj):
    try:
        text = repr(obj)
    except Exception as exc:
        text = '%s\n(repr() raised %s)' % (object.__repr__(obj), describe(exc))
    return cap_plain(text)


def cap_plain(text):
    if len(text) <= PLAIN_MAX // 4:
        return text
    data = text.encode('utf-8', 'replace')
    if len(data) <= PLAIN_MAX:
        return text
    return '%s\n... [text/plain cut at 64 KiB of %d bytes]' % (
        data[:PLAIN_MAX].decode('utf-8', 'ignore'), len(data))


def has_attribute(obj, name):
    try:
        return hasattr(obj, name)
    except Exception:
        return False


def call_repr_method(obj, name):
    """obj.name() if obj has such a method; None if not or if it fails."""
    try:
        method = getattr(obj, name, None)
        if not callable(method):
            return None
        value = method()
    except Exception as exc:
        note('%s() of %s raised %s' % (name, type(obj).__name__, describe(exc)))
        return None
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]                # (data, metadata), as IPython allows
    return value


def encode_representation(mime, value):
    """The string a frame carries for value, or None if it is unusable."""
    if value is None:
        return None
    if mime in BINARY_TYPES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(value).decode('ascii')
        return base64_text(value) if isinstance(value, str) else None
    if mime == 'application/json':
        return json_text(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode('utf-8', 'replace')
    return value if isinstance(value, str) else None


def base64_text(text):
    """A str from _repr_png_/_repr_jpeg_ is base64 already: check it, drop newlines."""
    text = ''.join(text.split())
    try:
        base64.b64decode(text, validate=True)
    except ValueError:                  # binascii.Error, non-ASCII
        note('an image representation is neither bytes nor base64: dropped')
        return None
    return text


def json_text(value):
    try:
        if isinstance(value, str):
            json.loads(value)           # already JSON text: keep it if valid
            return value
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except Exception as exc:
        note('_repr_json_ gave no valid JSON: %s' % describe(exc))
        return None


def fits(mime, text):
    if len(text) <= REPR_MAX // 4 or len(text.encode('utf-8', 'replace')) <= REPR_MAX:
        return True
    note('%s representation dropped: larger than 8 MiB' % mime)
    return False


def is_pandas_series(obj):
    pandas = sys.modules.get('pandas')
    series = getattr(pandas, 'Series', None)
    return isinstance(series, type) and isinstance(obj, series)


def series_html(series):
    """pandas gives a Series no HTML; show it as a one-column DataFrame."""
    try:
        frame = series.to_frame()
    except Exception as exc:
        note('Series.to_frame() raised %s' % describe(exc))
        return None
    html = call_repr_method(frame, '_repr_html_')
    return html if isinstance(html, str) else None


def display(*objs):
    """Show each object as a rich result of the current execution (like a notebook)."""
    for obj in objs:
        publish(mime_bundle(obj))


# ---------------------------------------------------------------- matplotlib

def is_figure(obj):
    figure = getattr(sys.modules.get('matplotlib.figure'), 'Figure', None)
    return isinstance(figure, type) and isinstance(obj, figure)


def figure_bundle(fig):
    """PNG, text/plain and the chart's data of a matplotlib figure;
    remembered as shown."""
    S.shown_figures.append(fig)
    text = plain_text(fig)
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format='png', bbox_inches='tight')
    except Exception as exc:
        return {'text/plain': '%s\n(rendering the figure failed: %s)' % (text, describe(exc))}
    bundle = {'image/png': base64.b64encode(buf.getvalue()).decode('ascii'), 'text/plain': text}
    chart = chart_json(fig)             # after drawing: tick labels are set then
    if chart is not None:
        bundle[CHART_MIME] = chart
    return bundle


# ---------------------------------------------------------------- charts as data
#
# What a figure shows, as data a model can read instead of a picture: the
# kind of chart, its title, axes and elements (lines and their points, bars,
# wedges, boxes), in the shape E2B's code interpreter gives (result.chart).
# docs/api.md, "Charts as data".

CHART_MIME = 'application/vnd.petri.chart+json'
CHART_VALUES_MAX = 20000        # points, bars, wedges and boxes of one figure
UNIT = None                     # re of a unit in an axis label: "Time (s)", "Length [m]"


def chart_json(fig):
    """The chart of fig as JSON text; None for a figure with no data, one
    with more than CHART_VALUES_MAX values, or one that cannot be read."""
    try:
        axes = [ax for ax in fig.get_axes()]
        if not axes or not any(ax.has_data() for ax in axes):
            return None
        if sum(values_in(ax) for ax in axes) > CHART_VALUES_MAX:
            return None
        if len(axes) == 1:
            chart = axes_chart(axes[0])
        else:
            suptitle = getattr(fig, '_suptitle', None)
            chart = {'type': 'superchart',
                     'title': text_or_none(suptitle.get_text() if suptitle else ''),
                     'elements': [axes_chart(ax) for ax in axes]}
        return json.dumps(chart, allow_nan=False, separators=(',', ':'))
    except Exception as exc:
        note('the chart of a figure could not be read: %s' % describe(exc))
        return None


def values_in(ax):
    n = len(ax.patches) + len(ax.collections)
    for line in ax.get_lines():
        n += len(line.get_xdata(orig=False))
    for collection in ax.collections:
        n += len(collection.get_offsets())
    return n


def axes_chart(ax):
    kind = chart_kind(ax)
    chart = {'type': kind, 'title': text_or_none(ax.get_title())}
    if kind not in ('pie', 'unknown'):
        chart.update(axis_labels(ax))
    if kind in ('line', 'scatter'):
        chart.update(axis_ticks(ax, 'x'))
        chart.update(axis_ticks(ax, 'y'))
    chart['elements'] = {'line': line_elements, 'scatter': scatter_elements,
                         'bar': bar_elements, 'pie': pie_elements,
                         'box_and_whisker': box_elements}.get(kind, lambda c, ax: [])(chart, ax)
    return chart


def chart_kind(ax):
    """By what the axes hold, text aside: only lines, only boxes (patches
    and their lines), only markers, only wedges or only bars; anything else
    is "unknown"."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text
    children = getattr(ax, '_children', None)
    if children is None:
        children = list(ax.lines) + list(ax.patches) + list(ax.collections)
    drawn = [c for c in children if not isinstance(c, Text)]
    if all(isinstance(c, Line2D) for c in drawn):
        return 'line'
    if all(isinstance(c, (PathPatch, Line2D)) for c in drawn):
        return 'box_and_whisker'
    drawn = [c for c in drawn if not (isinstance(c, Line2D) and is_rule(c))]
    for kind, types in (('scatter', PathCollection), ('pie', Wedge), ('bar', Rectangle)):
        if all(isinstance(c, types) for c in drawn):
            return kind
    return 'unknown'


def is_rule(line):
    """A straight horizontal or vertical line of two points (a grid line,
    axhline), not data."""
    x, y = line.get_xdata(orig=False), line.get_ydata(orig=False)
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def text_or_none(text):
    return text if text else None


def axis_labels(ax):
    global UNIT
    if UNIT is None:
        import re
        UNIT = re.compile(r'\s\((.*?)\)|\[(.*?)\]')
    out = {}
    for axis, label in (('x', ax.get_xlabel()), ('y', ax.get_ylabel())):
        match = UNIT.search(label) if label else None
        out[axis + '_label'] = text_or_none(label)
        out[axis + '_unit'] = (match.group(1) or match.group(2)) if match else None
    return out


def is_date_axis(axis):
    from matplotlib import dates
    formatter = axis.get_major_formatter()
    return isinstance(formatter, (dates.DateFormatter, dates.AutoDateFormatter,
                                  dates.ConciseDateFormatter))


def axis_ticks(ax, name):
    from matplotlib import dates
    axis = getattr(ax, name + 'axis')
    ticks = list(axis.get_ticklocs())
    labels = [t.get_text() for t in axis.get_ticklabels()]
    if is_date_axis(axis):
        values, scale = [dates.num2date(t).isoformat() for t in ticks], 'datetime'
    else:
        values, scale = [chart_value(t) for t in ticks], axis.get_scale()
        category = getattr(sys.modules.get('matplotlib.category'), 'StrCategoryConverter', None)
        if category is not None and isinstance(getattr(axis, 'converter', None), category):
            scale = 'categorical'       # the data were strings
    return {name + '_ticks': values, name + '_tick_labels': labels, name + '_scale': scale}


def chart_value(v):
    """A value of a chart or a table as JSON takes it: dates in ISO 8601,
    numbers as numbers (NaN and infinities as null), other things as their
    text."""
    import datetime
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
        return v.isoformat()
    numpy = sys.modules.get('numpy')
    if numpy is not None and isinstance(v, numpy.datetime64):
        return str(v.astype('datetime64[s]'))
    if numpy is not None and isinstance(v, numpy.bool_):
        return bool(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float('inf'), float('-inf')):
        return None
    return int(f) if f.is_integer() and abs(f) < 2 ** 53 and not isinstance(v, float) else f


def rounded(v):
    """8 significant digits: what a picture's coordinates are worth."""
    return float('%.8g' % v)


def numbered(label, prefix, name):
    """matplotlib's unnamed '_child3' as 'Line 3'."""
    if label.startswith(prefix) and label[len(prefix):].isdigit():
        return '%s %s' % (name, label[len(prefix):])
    return label


def line_elements(chart, ax):
    return [{'label': numbered(line.get_label(), '_child', 'Line'),
             'points': [[chart_value(x), chart_value(y)]
                        for x, y in zip(line.get_xdata(), line.get_ydata())]}
            for line in ax.get_lines() if not is_rule(line)]


def scatter_elements(chart, ax):
    return [{'label': c.get_label(),
             'points': [[chart_value(x), chart_value(y)] for x, y in c.get_offsets()]}
            for c in ax.collections]


def swap_axes(chart):
    for a, b in (('x_label', 'y_label'), ('x_unit', 'y_unit')):
        chart[a], chart[b] = chart.get(b), chart.get(a)


def bar_elements(chart, ax):
    out = []
    for container in ax.containers:
        bars = list(container)
        group = numbered(container.get_label(), '_container', 'Group')
        horizontal = getattr(container, 'orientation', None) == 'horizontal'
        if getattr(container, 'orientation', None) is None:
            heights = [bar.get_height() for bar in bars]
            horizontal = len(set(heights)) == 1 and len(heights) > 1
        if horizontal:
            swap_axes(chart)
            labels = [t.get_text() for t in ax.get_yticklabels()]
            values = [bar.get_width() for bar in bars]
        else:
            labels = [t.get_text() for t in ax.get_xticklabels()]
            values = [bar.get_height() for bar in bars]
        out += [{'label': label, 'value': chart_value(value), 'group': group}
                for label, value in zip(labels, values)]
    return out


def pie_elements(chart, ax):
    # A wedge's angles are float32 inside: 324 comes back as 323.99999237.
    return [{'label': wedge.get_label(), 'angle': float('%.6g' % abs(wedge.theta2 - wedge.theta1)),
             'radius': chart_value(wedge.r)}
            for wedge in ax.patches]


def box_elements(chart, ax):
    """Each box (a patch) with its median, whiskers and outliers, found
    among the axes' lines by where they lie."""
    boxes = []
    for patch in ax.patches:
        vertices = patch.get_path().vertices
        xs = [rounded(v) for v in vertices[:, 0]]
        ys = [rounded(v) for v in vertices[:, 1]]
        boxes.append({'x0': min(xs), 'x1': max(xs), 'y0': min(ys), 'y1': max(ys)})
    # Upright boxes share a width; lying ones a height.
    horizontal = len(boxes) > 1 and len({b['y1'] - b['y0'] for b in boxes}) == 1 \
        and len({b['x1'] - b['x0'] for b in boxes}) > 1
    if horizontal:
        swap_axes(chart)
        for b in boxes:
            b['x0'], b['x1'], b['y0'], b['y1'] = b['y0'], b['y1'], b['x0'], b['x1']
    labels = [t.get_text() for t in (ax.get_yticklabels() if horizontal else ax.get_xticklabels())]
    for b in boxes:
        b.update(low=b['y0'], high=b['y1'], median=None, outliers=[])
    for line in ax.get_lines():
        xs = [rounded(v) for v in line.get_xdata(orig=False)]
        ys = [rounded(v) for v in line.get_ydata(orig=False)]
        if horizontal:
            xs, ys = ys, xs
        if not xs:
            continue
        box = next((b for b in boxes if b['x0'] <= min(xs) and max(xs) <= b['x1']), None)
        if box is None:
            continue
        if line.get_linestyle() in ('None', '', ' '):           # markers only: outliers
            box['outliers'] += ys
        elif len(ys) == 2 and ys[0] == ys[1] and box['y0'] <= ys[0] <= box['y1']:
            box['median'] = ys[0]                              # across the box
        elif len(xs) == 2 and xs[0] == xs[1]:                  # a whisker, from an edge
            if max(ys) == box['y0']:
                box['low'] = min(ys)
            elif min(ys) == box['y1']:
                box['high'] = max(ys)
    return [{'label': label, 'min': b['low'], 'first_quartile': b['y0'],
             'median': b['median'], 'third_quartile': b['y1'], 'max': b['high'],
             'outliers': b['outliers']}
            for label, b in zip(labels, boxes)]


def emit_figures():
    """Send every open figure not yet shown in this exec, then close them all."""
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is None:
        return
    try:
        for number in plt.get_fignums():
            fig = plt.figure(number)
            if not any(fig is shown for shown in S.shown_figures):
                publish(figure_bundle(fig))
    finally:
        plt.close('all')


def close_figures():
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is not None:
        try:
            plt.close('all')
        except Exception:
            pass


def patch_pyplot(plt):
    """Make pyplot.show() send the open figures now (notebook inline style)."""
    if getattr(getattr(plt, 'show', None), 'petri', False):
        return

    def show(*args, **kwargs):
        """Show every open figure as a result of this execution and close it."""
        emit_figures()

    show.petri = True
    plt.show = show


# ---------------------------------------------------------------- plotly

def is_plotly_figure(obj):
    base = getattr(sys.modules.get('plotly.basedatatypes'), 'BaseFigure', None)
    return isinstance(base, type) and isinstance(obj, base)


def plotly_bundle(fig, validate=True):
    """A plotly figure (or figure dict) as Jupyter's plotly MIME type, plus
    text/html when plotly.js is installed, and text/plain.  The HTML does not
    carry plotly.js (2.3 MB per figure would blow the record's bound on an
    entry, docs/api.md): it draws the figure where plotly.js is on the page,
    and says so where scripts are off."""
    text = plain_text(fig) if is_plotly_figure(fig) else 'plotly figure'
    try:
        import plotly.io
        from plotly.io._utils import validate_coerce_fig_to_dict
        fig_dict = validate_coerce_fig_to_dict(fig, validate)
        figure = plotly.io.to_json(fig_dict, validate=False)
    except Exception as exc:
        note('the plotly figure could not be turned into JSON: %s' % describe(exc))
        return {'text/plain': text}
    data = {PLOTLY_TYPE: figure, 'text/plain': text}
    if not fits(PLOTLY_TYPE, figure):
        return {'text/plain': text}
    if not os.path.exists(PLOTLY_JS):
        if not S.plotly_missing_said:
            S.plotly_missing_said = True
            note('plotly.js is not installed (Debian package r-cran-plotly): plotly figures '
                 'come back as %s only, without text/html' % PLOTLY_TYPE)
        return data
    layout = fig_dict.get('layout') if isinstance(fig_dict, dict) else None
    height = layout.get('height') if isinstance(layout, dict) else None
    if not isinstance(height, (int, float)) or not 10 <= height <= 10000:
        height = PLOTLY_HEIGHT
    div = 'plotly-%s' % os.urandom(8).hex()
    # JSON cannot hold "</" outside a string, and "<\/" is the same string
    # in JavaScript: the figure cannot end the script element.
    html = ('<div id="%s" class="plotly-graph-div" style="height:%dpx;width:100%%"></div>\n'
            '<noscript>An interactive plotly figure: it needs JavaScript and plotly.js '
            '(its data is the %s representation).</noscript>\n'
            '<script type="text/javascript">(function () { var f = %s;\n'
            'if (window.Plotly) Plotly.newPlot("%s", f.data, f.layout, f.config || {}); })();'
            '</script>\n') % (div, int(height), PLOTLY_TYPE,
                               figure.replace('</', '<\\/').replace('<!--', '<\\!--'), div)
    if fits('text/html', html):
        data['text/html'] = html
    return data


def plotly_show(fig, renderer=None, validate=True, **kwargs):
    """Show a plotly figure as a result of this execution (petri: its JSON
    and HTML, docs/api.md), whatever renderer is named."""
    publish(plotly_bundle(fig, validate))


def plotlyjs():
    """The text of plotly.js, from its Debian package: fig.write_html() and
    to_html() inline it (include_plotlyjs=True), so their files work offline."""
    try:
        with open(PLOTLY_JS, encoding='utf-8') as f:
            return f.read()
    except OSError as exc:
        raise FileNotFoundError('plotly.js is not installed (Debian package r-cran-plotly): '
                                'pass include_plotlyjs=False or "cdn"') from exc


def patch_plotly_io(module):
    module.show = plotly_show
    renderers = sys.modules.get('plotly.io._renderers')
    if renderers is not None:
        renderers.show = plotly_show


def patch_plotlyjs(module):
    module.get_plotlyjs = plotlyjs


def patch_pil_image(module):
    """PIL's Image.show() would start a viewer (xdg-open) that outlives the
    execution: it shows the image as a result instead.  Image.save() to a
    file by the code itself shows it too, as E2B's interpreter does (not a
    library's save: matplotlib's savefig() writes its PNG through PIL)."""
    image = getattr(module, 'Image', None)
    if not isinstance(image, type) or getattr(image.show, 'petri', False):
        return
    save = image.save

    def show(self, title=None, **options):
        display(self)

    def save_and_show(self, fp, format=None, **params):
        save(self, fp, format, **params)
        caller = sys._getframe(1).f_globals.get('__name__') or ''
        if isinstance(fp, (str, bytes, os.PathLike)) and \
                caller.partition('.')[0] not in ('matplotlib', 'PIL'):
            display(self)

    show.petri = True
    image.show = show
    image.save = save_and_show


# ---------------------------------------------------------------- patches

# What is patched in a library as it is imported: module name -> patch.
IMPORT_PATCHES = {
    'matplotlib.pyplot': patch_pyplot,
    'plotly.io': patch_plotly_io,
    'plotly.io._renderers': patch_plotly_io,
    'plotly.io._html': patch_plotlyjs,
    'plotly.offline': patch_plotlyjs,
    'plotly.offline.offline': patch_plotlyjs,
    'PIL.Image': patch_pil_image,
}


def apply_patches():
    """Patch the libraries already imported (before the hook, or by the
    template's preload)."""
    for name, patch in IMPORT_PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)


class ImportPatches:
    """Meta path finder that patches the modules of IMPORT_PATCHES as soon
    as they are imported."""

    def find_spec(self, name, path=None, target=None):
        patch = IMPORT_PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, 'find_spec'):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        else:
            return None
        load = getattr(spec.loader, 'exec_module', None)
        if load is not None:
            def exec_module(module):
                load(module)
                patch(module)
            spec.loader.exec_module = exec_module
        return spec


# ---------------------------------------------------------------- python

def run_python(exec_id, source):
    filename = '<cell %d>' % exec_id
    source = dedent_cell(source)
    lines = [line + '\n' for line in source.split('\n')]
    linecache.cache[filename] = (len(source), None, lines, filename)   # before `!` lines
    try:
        source = shell_escapes(source, filename)
        body, last = compile_cell(source, filename,
                                  [line + '\n' for line in source.split('\n')])
    except Exception as exc:            # SyntaxError, ValueError (NUL), RecursionError
        exc.__traceback__ = None        # a compile-time error: no frames to show
        report_exception(exc)
        return 1
    apply_patches()
    exit_code = conclude(run_user(run_cell, body, last))
    figure_error = run_user(emit_figures)
    close_figures()
    S.shown_figures = []
    if figure_error is not None and not S.error_sent:
        exit_code = conclude(figure_error)
    return exit_code


def dedent_cell(source):
    """A cell pasted with its indentation, as a notebook takes it: when the
    first line of code (not blank, not a comment) is indented, which Python
    refuses anyway, that indentation is taken off every line that starts
    with it.  Line numbers stay."""
    for line in source.split('\n'):
        code = line.lstrip(' \t')
        if code and code[0] != '#' and code.strip():
            break
    else:
        return source
    indent = line[:len(line) - len(code)]
    if not indent:
        return source
    return '\n'.join(line[len(indent):] if line.startswith(indent) else line
                     for line in source.split('\n'))


def compile_cell(source, filename, lines):
    """Code for the cell's statements, and for its final expression (or None)."""
    try:
        tree = ast.parse(source, filename, 'exec')
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) \
                and not ends_with_semicolon(tree.body[-1], lines):
            last = ast.Expression(tree.body.pop().value)
        body = compile_tree(tree, filename, 'exec')
        return body, (compile_tree(last, filename, 'eval') if last else None)
    except SyntaxError as exc:
        if exc.text is None and exc.filename == filename and exc.lineno \
                and 0 < exc.lineno <= len(lines):
            exc.text = lines[exc.lineno - 1]    # errors found when compiling the tree
        raise


def compile_tree(tree, filename, mode):
    flags = S.future_flags | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(tree, filename, mode, flags=flags, dont_inherit=True)
    S.future_flags |= code.co_flags & FUTURE_MASK
    return code


def shell_escapes(source, filename):
    """IPython's `!command` and `%pip ARGS` lines, as calls of _petri_shell.
    Only a line that makes the cell a syntax error is one (never a line of a
    string, say); it is replaced in place, so line numbers stay."""
    lines = source.split('\n')
    candidates = sum(line.lstrip()[:1] in ('!', '%') for line in lines)
    if not candidates:
        return source
    # One parse per command found: a bound keeps a hostile cell from costing
    # the square of its size before it is even interruptible.
    for _ in range(min(candidates, SHELL_LINES_MAX)):
        try:
            ast.parse('\n'.join(lines), filename, 'exec')
            break
        except SyntaxError as exc:
            call = None
            if exc.lineno and 0 < exc.lineno <= len(lines):
                call = shell_call(lines[exc.lineno - 1])
            if call is None:
                break                   # a syntax error of its own: compile_cell says so
            lines[exc.lineno - 1] = call
        except Exception:               # ValueError (NUL): compile_cell says so
            break
    return '\n'.join(lines)


def is_pip(command):
    """Is a shell command pip itself: pip, pip3, pip3.11, python3 -m pip
    (any path)?"""
    words = command.split()
    if not words:
        return False
    first = words[0].rsplit('/', 1)[-1]
    for name, rest in (('pip', words[1:1]), ('python', words[1:3])):
        if first.startswith(name) and all(c in '0123456789.' for c in first[len(name):]):
            return name == 'pip' or rest == ['-m', 'pip']
    return False


def shell_call(line):
    """`!command` -> `_petri_shell('command')` with its indentation; `%pip
    ARGS` as `!python3 -m pip ARGS` (as IPython runs it); None for others.
    A pip that fails raises (`check`): a model must see that an install
    failed, where IPython only prints pip's complaint."""
    body = line.lstrip()
    indent = line[:len(line) - len(body)]
    if body.startswith('!'):
        command = body[1:].strip()
    elif body.startswith('%pip') and body[4:5] in ('', ' ', '\t'):
        command = ('%s -m pip%s' % (sys.executable or 'python3', body[4:])).strip()
    else:
        return None
    return '%s_petri_shell(%r, %r)' % (indent, command, is_pip(command))


def shell_escape(command, check=False):
    """`!command` in a cell: bash runs it as a bash execution runs (its own
    process group, stdin /dev/null, output live); an interrupt kills the
    group.  Its exit status is `_exit_code` in the cell's namespace, as in
    IPython, and what it installed imports at once.  check: a non-zero
    exit raises CalledProcessError."""
    proc = spawn(['/bin/bash', '-c', command])
    try:
        proc.wait()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        refresh_user_site(force=True)
    S.user_ns['_exit_code'] = proc.returncode
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, command)


def refresh_user_site(force=False):
    """Packages installed since the last look (by `%pip`, `!pip` or a bash
    execution) import now: the import system caches what each directory on
    sys.path held, and that USER_SITE did not exist.  Its .pth files are
    read as site would have."""
    try:
        st = os.stat(USER_SITE)
        state = (st.st_ino, st.st_mtime_ns)
    except OSError:
        state = None
    if state == S.user_site and not force:
        return
    S.user_site = state
    importlib.invalidate_caches()
    if state is not None:
        site.addsitedir(USER_SITE)


def ends_with_semicolon(node, lines):
    """`expr;` as the last statement hides its value, as in a notebook."""
    line = lines[node.end_lineno - 1].encode('utf-8', 'replace')
    rest = line[node.end_col_offset:].decode('utf-8', 'replace')
    return rest.lstrip().startswith(';')


def run_cell(body, last):
    refresh_user_site()
    run_code(body)
    if last is not None:
        value = run_code(last)
        if value is not None:
            builtins._ = value
            publish(mime_bundle(value), main=True)


def run_code(code):
    value = eval(code, S.user_ns)
    if code.co_flags & CO_COROUTINE:
        value = event_loop().run_until_complete(value)
    return value


def event_loop():
    if S.loop is None:
        import asyncio
        S.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(S.loop)
    return S.loop


def conclude(exc):
    """Exit code for how user code ended; reports an exception as the error."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        return exit_status(exc.code)
    report_exception(exc)
    return 1


def exit_status(code):
    """Like the interpreter does for SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write('%s\n' % code)
    except Exception:
        pass
    return 1


def report_exception(exc):
    strip_driver_frames(exc)
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
    send_error(exception_name(exc), safe_str(exc), format_exception(exc))


def format_exception(exc):
    try:
        return ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        return describe(exc) + '\n'


def strip_driver_frames(exc):
    """Remove the driver's frames from exc and the exceptions chained to it."""
    todo, seen = [exc], set()
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = user_frames(current.__traceback__)
        todo += (current.__cause__, current.__context__)


def user_frames(tb):
    """tb without the driver's frames, nor the library frames the driver called
    before the first frame of a cell (asyncio's, for top-level await)."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != DRIVER_FILE:
            kept.append(tb)
        tb = tb.tb_next
    cells = [i for i, entry in enumerate(kept)
             if entry.tb_frame.f_code.co_filename.startswith('<cell ')]
    if cells:
        kept = kept[cells[0]:]
    result = None
    for entry in reversed(kept):
        result = types.TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


# ---------------------------------------------------------------- programs

def run_program_language(code, program):
    """Write, compile and run a program (see the module docstring)."""
    scratch = make_scratch_dir()
    try:
        results = os.path.join(scratch, 'results')
        os.mkdir(results, 0o700)
        path = program_path(program['file'], scratch)
        write_file(os.path.dirname(path), os.path.basename(path), code, 0o600)
        env = dict(os.environ, PETRI_RESULTS=results)
        if program.get('compile'):
            failed = compile_program(command_argv(program['compile'], scratch, path),
                                     os.path.dirname(path), env)
            if failed is not None:
                return failed
        try:
            # fd 0: the execution's stdin, or /dev/null without one.
            proc = spawn(command_argv(program['run'], scratch, path), inherit_stdin=True,
                         env=env)
        except FileNotFoundError as exc:
            return not_found(exc)
        exc = run_user(proc.wait)
        if exc is not None:
            return abandon(proc, exc)
        return program_results(results, proc.returncode)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def program_path(name, scratch):
    """Where the code goes: {tmp}/NAME, else NAME in the working directory
    (replacing what is there: a link is replaced, never followed)."""
    if name.startswith('{tmp}/'):
        return os.path.join(scratch, name[6:])
    path = os.path.join(os.getcwd(), name)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return path


def command_argv(command, scratch, path):
    """A command line as argv, {tmp} and {file} replaced: split on blanks
    when it is a plain command, else through /bin/sh -c (pipes, quotes,
    variables, NAME=value first).  The paths are never split nor read by
    the shell (the working directory, and so {file}, may hold anything)."""
    words = command.split()
    if not words or SHELL_CHARS.intersection(command.replace('{tmp}', '').replace(
            '{file}', '')) or '=' in words[0]:
        return ['/bin/sh', '-c', command.replace('{tmp}', shlex.quote(scratch)).replace(
            '{file}', shlex.quote(path))]
    return [w.replace('{tmp}', scratch).replace('{file}', path) for w in words]


def not_found(exc):
    """A program whose command is not there: as a shell says it."""
    send_error('CommandNotFound', '%s: command not found' % (exc.filename or exc), '')
    return 127


def program_results(results, returncode):
    """The results a program left in results/, then its exit status (an
    error.json it left names the error of a failed run).  main.txt and
    error.json are looked for by name; of the rest, the first
    LEFT_RESULT_MAX the directory lists, in the order of their names."""
    names = []
    try:
        with os.scandir(results) as it:
            for entry in it:
                if entry.name not in ('main.txt', 'error.json'):
                    names.append(entry.name)
                    if len(names) >= LEFT_RESULT_MAX:
                        note('more than %d files in $PETRI_RESULTS: the rest were '
                             'left out' % LEFT_RESULT_MAX)
                        break
    except OSError:
        pass
    for name in sorted(names) + ['main.txt']:
        mime = next((m for suffix, m in LEFT_TYPES if name.endswith(suffix)), None)
        data = read_left(os.path.join(results, name), REPR_MAX, name) if mime else None
        if data is None:
            continue
        if mime in BINARY_TYPES:
            bundle = {mime: base64.b64encode(data).decode('ascii'),
                      'text/plain': '<%s>' % name}
        else:
            bundle = {mime: data.decode('utf-8', 'replace')}
            if mime != 'text/plain':
                bundle['text/plain'] = '<%s>' % name
        publish(bundle, main=name == 'main.txt')
    error = os.path.join(results, 'error.json')
    if returncode != 0 and send_left_error(error):
        return returncode if returncode > 0 else 128 - returncode
    return program_status(returncode)


def read_left(path, limit, name=None):
    """A regular file's bytes, if it is one and at most limit bytes (a
    larger one is noted, under name)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            if name:
                note('%s left out: it is over %d MiB' % (name, limit >> 20))
            return None
        with open(fd, 'rb', closefd=False) as file:
            data = file.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def send_left_error(path):
    data = read_left(path, LEFT_ERROR_MAX)
    try:
        error = json.loads(data) if data is not None else None
    except ValueError:
        error = None
    if not isinstance(error, dict):
        return False
    fields = [error.get(k) for k in ('name', 'message', 'traceback')]
    if not isinstance(fields[0], str) or not fields[0]:
        return False
    send_error(*(f if isinstance(f, str) else '' for f in fields))
    return True


def make_scratch_dir():
    """A new private directory under /tmp."""
    while True:
        path = '/tmp/petri-%s' % os.urandom(8).hex()
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def write_file(directory, name, text, mode):
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    with open(fd, 'wb') as file:
        file.write(text.encode('utf-8', 'surrogateescape'))
    return path


def spawn(argv, inherit_stdin=False, **options):
    """A child in its own session and process group, stdin /dev/null (or
    the driver's fd 0), only fds 0-2."""
    flush_stdio()
    return subprocess.Popen(argv, stdin=None if inherit_stdin else subprocess.DEVNULL,
                            close_fds=True,
                            start_new_session=True, **options)


def kill_group(proc):
    """Kill the child's process group, and wait until none of it is left.

    The leader's wait returns when it has died; the others die a moment
    later, and one still running on another CPU could write into the next
    execution's output (a flood killed at the output limit did).  pid 1
    reaps them at once; the wait is bounded all the same."""
    import time
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except OSError:
            break
        time.sleep(0.001)


def abandon(proc, exc):
    """Kill a child whose wait ended by exc (normally KeyboardInterrupt)."""
    kill_group(proc)
    if isinstance(exc, KeyboardInterrupt):
        send_error('KeyboardInterrupt', 'interrupted: the process group was killed', '')
        return 130
    report_exception(exc)
    return 1


def program_status(returncode):
    if returncode > 0:
        send_error('NonZeroExit', 'exit status %d' % returncode, '')
        return returncode
    if returncode < 0:
        send_error('Signal', 'killed by signal %s' % signal_label(-returncode), '')
        return 128 - returncode
    return 0


def signal_label(number):
    try:
        return '%d (%s: %s)' % (number, signal.Signals(number).name, signal.strsignal(number))
    except (ValueError, TypeError):
        return str(number)


def compile_program(argv, cwd, env):
    """The compile step; the compiler's output goes live to stderr.

    Returns None on success, else the exit code of the exec."""
    try:
        proc = spawn(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError as exc:
        return not_found(exc)
    command = argv[2] if argv[:2] == ['/bin/sh', '-c'] else argv[0]
    output = bytearray()
    try:
        exc = run_user(relay_output, proc, output)
    finally:
        proc.stdout.close()
    if exc is not None:
        return abandon(proc, exc)
    if proc.returncode == 0:
        return None
    send_error('CompileError', compile_error_message(output, proc.returncode, command),
               compiler_tail(output))
    return proc.returncode if proc.returncode > 0 else 128 - proc.returncode


def relay_output(proc, output):
    """Copy the child's output to stderr as it comes, keeping the end of it."""
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        try:
            os.write(2, chunk)
        except OSError:
            pass
        output += chunk
        del output[:-65536]
    proc.wait()


def compile_error_message(output, returncode, command):
    """The compiler's first error line (gcc, clang, javac: "error:";
    rustc: "error[E...]"), else which compiler failed how."""
    for line in output.decode('utf-8', 'replace').splitlines():
        if 'error:' in line or line.startswith('error['):
            return line.strip()
    return '%s failed with exit status %d' % (command.split()[0], returncode)


def compiler_tail(output):
    lines = output.decode('utf-8', 'replace').splitlines(keepends=True)
    return ''.join(lines[-COMPILER_TAIL_LINES:])


# ---------------------------------------------------------------- archives

class ArchiveRefused(Exception):
    """An archive that is not extracted, and why (the message); name is
    the error's: ArchiveTooLarge for one over a cap, else ArchiveRefused."""

    def __init__(self, message, name='ArchiveRefused'):
        Exception.__init__(self, message)
        self.name = name


UNPACK_PREFIX = '.petri-unpack-'   # the staging directory, in /work
UNPACK_ARCHIVE = '.petri-archive-' # the archive the supervisor wrote (box.h)
RATIO_FLOOR = 16 << 20             # below this many bytes no ratio is too high
COPY_BLOCK = 1 << 20
CENTRAL_MAX = 64 << 20            # a zip's central directory, at most
BAD_NAME_CHARS = None              # control characters, bytes not UTF-8 (archive_modules)


def run_unpack(job):
    """Extract the archive job['archive'] (a file the supervisor wrote in
    /work, removed after) into job['dest'], all or nothing: every entry is
    checked and counted before anything is written (a first pass over a
    tar, the central directory of a zip), extracted into a staging
    directory, then moved into place (docs/api.md#archives).  Interruptible
    like user code: an interrupt leaves nothing behind."""
    archive_modules()
    archive = os.path.join('/work', job['archive'])
    done, stage = {}, []
    try:
        exc = run_user(unpack, archive, job, done, stage)
    finally:
        if stage:
            shutil.rmtree(stage[0], ignore_errors=True)
        try:
            os.unlink(archive)
        except OSError:
            pass
    if exc is None:
        publish({'application/json': json.dumps(done)}, main=True)
        return 0
    if isinstance(exc, KeyboardInterrupt):
        send_error('KeyboardInterrupt', 'interrupted: nothing was extracted', '')
        return 130
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        exc = ArchiveRefused('the workspace is full: the archive does not fit in the '
                             "session's disk limit", 'ArchiveTooLarge')
    elif not isinstance(exc, ArchiveRefused):
        exc = ArchiveRefused('the archive cannot be extracted: %s' % describe(exc))
    send_error(exc.name, str(exc), '')
    return 1


def unpack(archive, job, done, stage):
    dest = job['dest'].strip('/')
    kind = archive_kind(archive)
    size = os.stat(archive).st_size
    if kind == 'zip':
        zip_count(archive, job['max_entries'])
    reader = zip_entries if kind == 'zip' else tar_entries
    plan = unpack_plan(reader(archive), job, size)
    check_workspace(plan, dest)
    stage.append(make_stage())
    if kind == 'zip':
        with zipfile.ZipFile(archive) as zf:
            extract(plan, stage[0], lambda info, _size, fd: zip_copy(zf, info, fd))
    else:
        with TAR_OPENERS[kind](archive, 'rb') as stream:
            extract(plan, stage[0], lambda offset, size, fd: tar_copy(stream, offset, size, fd))
    into = os.path.join('/work', dest)
    os.makedirs(into, 0o755, exist_ok=True)
    merge(stage[0], into)
    done.update({'format': kind, 'entries': len(plan.entries), 'files': plan.files,
                 'directories': plan.dirs, 'links': plan.links, 'bytes': plan.bytes})


def archive_modules():
    """What only archives need, imported on the first (tarfile costs ms)."""
    global BAD_NAME_CHARS, TAR_OPENERS, errno, lzma, struct, tarfile, time, zipfile, zlib
    import bz2, errno, gzip, lzma, re, struct, tarfile, time, zipfile, zlib
    BAD_NAME_CHARS = re.compile('[\x00-\x1f\x7f\udc80-\udcff]')
    TAR_OPENERS = {'tar': open, 'tar.gz': gzip.open, 'tar.bz2': bz2.open,
                   'tar.xz': lzma.open}


def archive_kind(path):
    with open(path, 'rb') as file:
        head = file.read(4)
    if head in (b'PK\x03\x04', b'PK\x05\x06'):
        return 'zip'
    if head[:2] == b'\x1f\x8b':
        return 'tar.gz'
    if head[:3] == b'BZh':
        return 'tar.bz2'
    if head == b'\xfd7zX':
        return 'tar.xz'
    if head[:4] == b'\x28\xb5\x2f\xfd':
        raise ArchiveRefused('zstd-compressed archives are not supported: '
                             'send tar, tar.gz, tar.bz2, tar.xz or zip')
    return 'tar'


class Plan:
    """What pass one admitted, all that pass two needs: it reads the
    archive's content again, never its headers."""

    def __init__(self):
        self.entries = []          # (name, kind, size, link, mode, mtime, where), in order
        self.kinds = {}            # name -> 'file', 'dir', 'link', 'hardlink'
        self.files = self.dirs = self.links = self.bytes = 0


def entry_name(raw):
    """An entry's path, normalized (no '.', empty or trailing components),
    or None for the archive's root itself; refused when absolute, with a
    '..', a control character or over the length limits."""
    if not isinstance(raw, str):
        raise ArchiveRefused('an entry has no name')
    shown = raw[:200]
    if raw.startswith('/'):
        raise ArchiveRefused("'%s' is an absolute path" % shown)
    if BAD_NAME_CHARS.search(raw):
        raise ArchiveRefused("'%s' has a control character or is not UTF-8" % shown.encode(
            'utf-8', 'backslashreplace').decode())
    parts = [p for p in raw.split('/') if p not in ('', '.')]
    if '..' in parts:
        raise ArchiveRefused("'%s' has a '..' component" % shown)
    if not parts:
        return None
    name = '/'.join(parts)
    if len(name.encode()) > 4000 or any(len(p.encode()) > 255 for p in parts):
        raise ArchiveRefused("'%s...' is too long a path" % shown)
    return name


def check_link(name, target, dest):
    """A symbolic link stays inside /work: a relative target whose '..'
    come first only, ending inside /work from the link's directory (which
    is a real directory: nothing is extracted through a link)."""
    if not target or target.startswith('/') or '\0' in target or len(target) > 4000:
        raise ArchiveRefused("'%s' is a symbolic link to an absolute path or to nothing"
                             % name[:200])
    parts = [p for p in target.split('/') if p not in ('', '.')]
    ups = 0
    while ups < len(parts) and parts[ups] == '..':
        ups += 1
    if '..' in parts[ups:]:
        raise ArchiveRefused("'%s' is a symbolic link with '..' after a name: %s"
                             % (name[:200], target[:200]))
    depth = len([p for p in dest.split('/') if p]) + name.count('/')
    if ups > depth:
        raise ArchiveRefused("'%s' is a symbolic link out of the workspace: %s"
                             % (name[:200], target[:200]))


def unpack_plan(entries, job, size):
    """Pass one: every entry checked and counted, nothing written."""
    plan = Plan()
    max_entries, max_bytes = job['max_entries'], job['max_bytes']
    for raw, kind, length, link, mode, mtime, where in entries:
        name = entry_name(raw)
        if name is None:
            continue
        if kind not in ('file', 'dir', 'link', 'hardlink'):
            raise ArchiveRefused("'%s' is a %s: only files, directories and links are "
                                 "extracted" % (name[:200], KIND_WORDS[kind]))
        if len(plan.entries) >= max_entries:
            raise ArchiveRefused('the archive has more than %d entries' % max_entries, 'ArchiveTooLarge')
        if length > max_bytes - plan.bytes:
            raise ArchiveRefused('the archive expands to more than %d MiB (the '
                                 'session\'s disk limit)' % (max_bytes >> 20), 'ArchiveTooLarge')
        plan.bytes += length
        if plan.bytes > RATIO_FLOOR and plan.bytes > job['max_ratio'] * max(size, 1):
            raise ArchiveRefused('the archive expands more than %d times (%d bytes to '
                                 'more than %d): refused as a compression bomb'
                                 % (job['max_ratio'], size, plan.bytes), 'ArchiveTooLarge')
        parent = name.rpartition('/')[0]
        while parent:                   # its directories are directories
            had = plan.kinds.get(parent)
            if had == 'dir':
                break                   # and so are theirs
            if had is not None:
                raise ArchiveRefused("'%s' is inside '%s', which the archive makes a %s"
                                     % (name[:200], parent[:200], KIND_WORDS[had]))
            plan.kinds[parent] = 'dir'
            parent = parent.rpartition('/')[0]
        had = plan.kinds.get(name)
        if had is not None and (had == 'dir') != (kind == 'dir'):
            raise ArchiveRefused("'%s' is in the archive twice, as a %s and as a %s"
                                 % (name[:200], KIND_WORDS[had], KIND_WORDS[kind]))
        if kind == 'link':
            check_link(name, link, job['dest'])
        elif kind == 'hardlink':
            try:
                target = entry_name(link)
            except ArchiveRefused:
                target = None
            if target is None or plan.kinds.get(target) not in ('file', 'hardlink'):
                raise ArchiveRefused("'%s' is a hard link to '%s', which is not a file "
                                     "earlier in the archive" % (name[:200], str(link)[:200]))
            link = target
        plan.kinds[name] = kind
        plan.entries.append((name, kind, length, link, mode, mtime, where))
        plan.files += kind in ('file', 'hardlink')
        plan.dirs += kind == 'dir'
        plan.links += kind == 'link'
    return plan


KIND_WORDS = {'file': 'file', 'dir': 'directory', 'link': 'symbolic link',
              'hardlink': 'file', 'device': 'device', 'fifo': 'FIFO', 'other': 'special file',
              'sparse': 'sparse file'}


def check_workspace(plan, dest):
    """Nothing in the workspace is in the way: every directory an entry
    goes into is a directory there (not a link, so nothing is written
    through one), and no directory would be replaced by a file, nor a file
    or a link by a directory."""
    seen = {}

    def kind_at(rel):
        if rel not in seen:
            try:
                mode = os.lstat(os.path.join('/work', rel)).st_mode
                seen[rel] = ('dir' if stat.S_ISDIR(mode) else
                             'link' if stat.S_ISLNK(mode) else 'file')
            except (FileNotFoundError, NotADirectoryError):
                seen[rel] = None
        return seen[rel]

    def check_dirs(parts, name):
        for i in range(1, len(parts) + 1):
            d = '/'.join(parts[:i])
            had = kind_at(d)
            if had is None:
                return False            # new from here on
            if had != 'dir':
                raise ArchiveRefused("'%s' is a %s in the workspace, not a directory to "
                                     "extract %s into" % (d[:200], KIND_WORDS[had], name))
        return True

    base = [p for p in dest.split('/') if p]
    if not check_dirs(base, 'the archive'):
        return                          # dest is new: nothing is in the way
    for name, kind, *_ in plan.entries:
        parts = base + name.split('/')
        if check_dirs(parts[:-1], "'%s'" % name[:200]):
            had = kind_at('/'.join(parts))
            if had is not None and (had == 'dir') != (kind == 'dir'):
                raise ArchiveRefused("'%s' is a %s in the workspace and a %s in the archive"
                                     % ('/'.join(parts)[:200], KIND_WORDS[had],
                                        KIND_WORDS[kind]))


def make_stage():
    while True:
        path = '/work/%s%s' % (UNPACK_PREFIX, os.urandom(8).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def extract(plan, stage, copy):
    """Pass two: write what pass one admitted into stage, which only this
    process writes to; copy(where, size, fd) writes an entry's content.
    The modes are the entries' own (the umask is 0 meanwhile) without
    set-user-id, set-group-id or sticky bits, and writable by their owner;
    directories get theirs last (they must stay writable until then)."""
    made, written, dirs = {''}, set(), []
    old_umask = os.umask(0)
    try:
        for name, kind, size, link, mode, mtime, where in plan.entries:
            parent = name.rpartition('/')[0]
            if parent not in made:
                make_parents(stage, parent, made)
            path = stage + '/' + name
            if kind == 'dir':
                if name not in made:
                    os.mkdir(path, 0o700)
                    made.add(name)
                dirs.append((path, (mode & 0o777) | 0o700, mtime))
                continue
            if name in written:
                os.unlink(path)         # a later entry of the same name wins
            written.add(name)
            if kind == 'link':
                os.symlink(link, path)
                if mtime is not None:
                    os.utime(path, (mtime, mtime), follow_symlinks=False)
            elif kind == 'hardlink':
                os.link(stage + '/' + link, path, follow_symlinks=False)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                             os.O_CLOEXEC, (mode & 0o777) | 0o600)
                try:
                    copy(where, size, fd)
                    if mtime is not None:
                        os.utime(fd, (mtime, mtime))
                finally:
                    os.close(fd)
    finally:
        os.umask(old_umask)
    for path, dmode, mtime in reversed(dirs):
        os.chmod(path, dmode)
        if mtime is not None:
            os.utime(path, (mtime, mtime))


def make_parents(stage, parent, made):
    """The directories on the way to an entry that the archive does not
    list itself (or lists later)."""
    missing = []
    while parent not in made:
        missing.append(parent)
        parent = parent.rpartition('/')[0]
    for d in reversed(missing):
        os.mkdir(stage + '/' + d, 0o755)
        made.add(d)


def write_all_fd(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def tar_copy(stream, offset, size, fd):
    """size bytes at offset of the (decompressed) tar stream: entries come
    in order, so this only ever reads on (a seek forward decompresses)."""
    if stream.tell() != offset:
        stream.seek(offset)
    while size:
        chunk = stream.read(min(size, COPY_BLOCK))
        if not chunk:
            raise ArchiveRefused('the archive ends inside a file')
        write_all_fd(fd, chunk)
        size -= len(chunk)


def zip_copy(zf, info, fd):
    with zf.open(info) as src:
        while True:
            chunk = src.read(COPY_BLOCK)
            if not chunk:
                return
            write_all_fd(fd, chunk)


def merge(src, dst):
    """Move what src holds into dst: new names in one rename each, a file
    over a file, a directory into a directory."""
    with os.scandir(src) as it:
        names = [e.name for e in it]
    for name in names:
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s) and not os.path.islink(s) and os.path.isdir(d) \
                and not os.path.islink(d):
            merge(s, d)
        else:
            os.rename(s, d)


def tar_entries(path):
    """(name, kind, size, link, mode, mtime, offset of the content) of
    each entry.  The content is skipped, not read (tarfile seeks; a
    compressed stream decompresses, within the byte budget that pass one
    checks before going on)."""
    try:
        tf = tarfile.open(path, 'r:*')
    except tarfile.ReadError:
        raise ArchiveRefused('this is not an archive petri reads: send tar, tar.gz, '
                             'tar.bz2, tar.xz or zip') from None
    with tf:
        while True:
            m = tf.next()
            if m is None:
                return
            tf.members = []             # pass one must not keep 100,000 TarInfo
            if m.isreg():
                kind = 'file'
            elif m.isdir():
                kind = 'dir'
            elif m.issym():
                kind = 'link'
            elif m.islnk():
                kind = 'hardlink'
            elif m.ischr() or m.isblk():
                kind = 'device'
            elif m.isfifo():
                kind = 'fifo'
            else:
                kind = 'other'
            if m.issparse():
                kind = 'sparse'         # its content is not where pass two reads
            yield (m.name, kind, m.size if kind == 'file' else 0, m.linkname, m.mode,
                   m.mtime if isinstance(m.mtime, (int, float)) else None, m.offset_data)


def zip_count(path, limit):
    """Count the central directory's entries before zipfile reads it (it
    keeps every entry in memory): refused past limit."""
    with open(path, 'rb') as fp:
        end = zipfile._EndRecData(fp)
        if end is None:
            raise ArchiveRefused('the zip archive has no end of central directory')
        size = end[zipfile._ECD_SIZE]
        if end[zipfile._ECD_ENTRIES_TOTAL] > limit:
            raise ArchiveRefused('the archive has more than %d entries' % limit,
                                 'ArchiveTooLarge')
        if size > CENTRAL_MAX:
            raise ArchiveRefused('the zip archive\'s central directory is larger than %d MiB'
                                 % (CENTRAL_MAX >> 20), 'ArchiveTooLarge')
        start = end[zipfile._ECD_LOCATION] - size
        if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:
            start -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
        fp.seek(max(start, 0))
        central = fp.read(size)
    pos = count = 0
    while pos + 46 <= len(central) and central[pos:pos + 4] == b'PK\x01\x02':
        names, extra, comment = struct.unpack_from('<HHH', central, pos + 28)
        pos += 46 + names + extra + comment
        count += 1
        if count > limit:
            raise ArchiveRefused('the archive has more than %d entries' % limit,
                                 'ArchiveTooLarge')


def zip_entries(path):
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        for info in infos:
            unix = info.external_attr >> 16 if info.create_system == 3 else 0
            fmt = stat.S_IFMT(unix)
            if info.flag_bits & 1:
                raise ArchiveRefused("'%s' is encrypted" % info.filename[:200])
            if info.is_dir() or fmt == stat.S_IFDIR:
                kind = 'dir'
            elif fmt == stat.S_IFLNK:
                kind = 'link'
            elif fmt in (0, stat.S_IFREG):
                kind = 'file'
            elif fmt in (stat.S_IFCHR, stat.S_IFBLK):
                kind = 'device'
            elif fmt == stat.S_IFIFO:
                kind = 'fifo'
            else:
                kind = 'other'
            link = None
            if kind == 'link':
                if info.file_size > 4000:
                    raise ArchiveRefused("'%s' is a symbolic link too long to be one"
                                         % info.filename[:200])
                link = zf.read(info).decode('utf-8', 'surrogateescape')
            mode = unix & 0o777 if unix else (0o755 if kind == 'dir' else 0o644)
            try:
                mtime = time.mktime(info.date_time + (0, 0, -1))
            except (OverflowError, ValueError):
                mtime = None
            yield (info.filename, kind, info.file_size if kind == 'file' else 0, link,
                   mode, mtime, info)


# ---------------------------------------------------------------- session

def handle_exec(request):
    S.exec_id = request['id']
    S.error_sent = S.pending = False
    S.shown_figures = []
    S.results_cap = request.get('results_cap') or RESULTS_CAP
    S.results_max = request.get('results_max') or RESULTS_MAX
    S.results_kept = S.results_wire = S.results_sent = 0
    S.results_dropped = False
    _signal.signal(_signal.SIGINT, on_sigint)   # user code may have replaced it
    # The execution's own variables, for its duration only: what it
    # replaced comes back after (also what the code set of those names).
    saved = apply_env(request.get('env', ()))
    S.user_ns = context_namespace(request.get('context'), request.get('fresh', False))
    home = os.getcwd() if request.get('cwd') else None
    saved_stdin = None
    try:
        if 'stdin' in request:
            saved_stdin = attach_stdin(request['stdin'])
        if home:
            os.chdir(request['cwd'])    # programs start there too
        if 'unpack' in request:
            exit_code = run_unpack(request['unpack'])
        elif 'program' in request:
            exit_code = run_program_language(request['code'], request['program'])
        else:
            exit_code = run_python(request['id'], request['code'])
    except Exception as exc:            # the driver failed around user code (e.g. /tmp full)
        if not S.error_sent:
            report_exception(exc)
        exit_code = 1
    finally:
        if saved_stdin is not None:
            detach_stdin(saved_stdin)
        restore_env(saved)
        S.user_ns = S.main_ns
        if home:
            try:
                os.chdir(home)
            except OSError:
                pass
    flush_stdio()
    if os.getpid() != DRIVER_PID:       # a child that user code forked finished the cell
        os._exit(exit_code)
    exec_id, S.exec_id = S.exec_id, None
    send({'type': 'done', 'id': exec_id, 'exit_code': exit_code})


def attach_stdin(text):
    """fd 0 for one execution: its stdin in a memfd (charged to the
    session's memory like the rest of the driver, nothing written to /tmp),
    read by sys.stdin (a fresh one: the usual one's buffer stays clean) and
    inherited by programs.  Returns what detach_stdin() restores."""
    fd = os.memfd_create('stdin', os.MFD_CLOEXEC)
    try:
        write_all_fd(fd, text.encode('utf-8', 'surrogateescape'))
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 0)
    finally:
        if fd != 0:                     # the code closed fd 0: the memfd is it
            os.close(fd)
    os.set_inheritable(0, True)
    saved = sys.stdin
    usual = sys.__stdin__
    sys.stdin = io.TextIOWrapper(io.FileIO(0, 'rb', closefd=False),
                                 encoding=getattr(usual, 'encoding', None) or 'utf-8',
                                 errors=getattr(usual, 'errors', None) or 'surrogateescape')
    return saved


def detach_stdin(saved):
    """fd 0 is /dev/null again between executions, as before any."""
    null = os.open('/dev/null', os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    sys.stdin = saved


def load_modules():
    """The rest of the standard library the driver needs."""
    global ast, base64, importlib, io, json, linecache, shlex, shutil, signal, site, stat
    global subprocess, traceback, LIBC, FUTURE_MASK
    import __future__
    import ast, base64, importlib, io, json, linecache, shlex, shutil, signal, site, stat
    import subprocess, traceback
    FUTURE_MASK = 0                     # compiler flags of all __future__ features
    for feature in __future__.all_feature_names:
        FUTURE_MASK |= getattr(__future__, feature).compiler_flag
    try:
        import ctypes
        LIBC = ctypes.CDLL(None)
    except Exception:
        LIBC = None


def serve_setup():
    """What every exec runs with besides the modules: once, by serve(), or
    earlier in a forked driver, so that its warm-up runs as an exec will."""
    if S.set_up:
        return
    S.set_up = True
    load_modules()
    # Also as sys.__stdout__, what code that captured output restores; the
    # interpreter's own stay referenced (collected, they would close fd 1).
    S.streams = (line_buffered(1, sys.stdout), line_buffered(2, sys.stderr),
                 sys.__stdout__, sys.__stderr__)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__ = S.streams[:2]
    builtins.display = display
    builtins._petri_shell = shell_escape        # `!command` and `%pip` (shell_escapes)
    sys.path.insert(0, '')              # like the REPL: modules in the cwd import
    sys.meta_path.insert(0, ImportPatches())


def line_buffered(fd, usual):
    """Python's stdout or stderr for user code: written out at each newline
    (and at the end of every execution, flush_stdio()), as on a terminal.
    The interpreter runs with -u, which writes each piece apart, so
    print('hello') would reach the client as 'hello' and then '\\n': two
    events where a notebook sends one line."""
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, 'wb', closefd=False)),
                            encoding=getattr(usual, 'encoding', None) or 'utf-8',
                            errors=getattr(usual, 'errors', None) or 'backslashreplace',
                            line_buffering=True)


def serve():
    """Finish setting up, then run execs until EOF on fd 3."""
    serve_setup()
    while True:
        request = read_request()
        if request is None:
            return 0
        if request['type'] == 'env':
            # The session's variables, sent by the supervisor before any
            # exec (a sandbox forked from a template starts with the
            # template's).
            apply_env(request['env'])
            continue
        if request['type'] == 'restart':
            # The keeper's to act on; it never passes one on.
            reject('restart: this driver is not the main process of a sandbox')
        if KEPT:
            # Before any of the cell runs: an exec its keeper never hears
            # of as started goes to the next interpreter if this one ends.
            write_all(encode_frame({'type': 'started', 'id': request['id']}))
        handle_exec(request)
'''


if __name__ == '__main__':
    sys.exit(main())
