"""Harness for the in-sandbox driver (src/runtime/driver.py); the fixture
`driver` (conftest.py) is a Driver in the test's directory.

Driver starts the driver as the supervisor would, minus the sandbox: fd 3 is
one end of a socketpair, fds 1 and 2 are pipes, stdin is /dev/null, cwd is a
temporary directory.  Every frame the driver sends is checked against
docs/protocol.md.
"""

import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from harness import process_tree, stat_fields, wait_for

# The built-in programs as src/exec/languages.c sends them (the box adds
# "program" to every exec frame of a language other than Python).
PROGRAMS = {
    'bash': {'file': '{tmp}/main.sh', 'run': '/bin/bash {file}'},
    'c': {'file': '{tmp}/main.c', 'compile': 'gcc -O2 -std=gnu17 -o prog main.c -lm',
          'run': '{tmp}/prog'},
    'javascript': {'file': '{tmp}/main.js', 'run': 'node /opt/petri/run.js {file}'},
}

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / 'src' / 'runtime' / 'driver.py'
PYTHON = '/usr/bin/python3'
FRAME_MAX = 16 << 20
FRAME_MEMBERS = {                       # required members and their types
    'ready': {'python': str, 'pid': int},
    'result': {'id': int, 'data': dict},
    'error': {'id': int, 'name': str, 'message': str, 'traceback': str},
    'done': {'id': int, 'exit_code': int},
}


def check_frame(body):
    """Parse a frame body the way a strict supervisor would."""
    assert len(body) <= FRAME_MAX
    frame = json.loads(body.decode('utf-8'), parse_constant=pytest.fail)
    assert isinstance(frame, dict)
    members = FRAME_MEMBERS[frame['type']]
    for name, kind in members.items():
        assert isinstance(frame[name], kind), (name, frame)
        assert not isinstance(frame[name], bool)
    if frame['type'] == 'result':
        for mime, value in frame['data'].items():
            assert isinstance(mime, str) and isinstance(value, str)
            assert '\0' not in value
    return frame


class Outcome:
    """Everything one exec produced."""

    def __init__(self, frames, stdout, stderr, seconds):
        self.frames, self.stdout, self.stderr, self.seconds = frames, stdout, stderr, seconds
        assert frames and frames[-1]['type'] == 'done', frames
        assert all(f['type'] != 'done' for f in frames[:-1])
        errors = [f for f in frames if f['type'] == 'error']
        assert len(errors) <= 1, errors
        self.error = errors[0] if errors else None
        self.results = [f['data'] for f in frames if f['type'] == 'result']
        self.exit_code = frames[-1]['exit_code']

    @property
    def out(self):
        return self.stdout.decode('utf-8', 'replace')

    @property
    def err(self):
        return self.stderr.decode('utf-8', 'replace')

    @property
    def plain(self):
        return [r.get('text/plain') for r in self.results]

    def __repr__(self):
        return 'Outcome(frames=%r, stdout=%r, stderr=%r)' % (self.frames, self.stdout, self.stderr)


class Driver:
    def __init__(self, cwd, env=None):
        self.cwd = Path(cwd)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.fileno()

        def child_setup():
            os.dup2(fd, 3, inheritable=True)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        environment = {
            'HOME': str(self.cwd), 'PATH': '/usr/local/bin:/usr/bin:/bin', 'LANG': 'C.UTF-8',
            'MPLBACKEND': 'Agg', 'MPLCONFIGDIR': str(self.cwd / '.matplotlib'),
            'PYTHONUNBUFFERED': '1', 'PYTHONDONTWRITEBYTECODE': '1', 'TERM': 'dumb',
        }
        environment.update(env or {})
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [PYTHON, '-I', '-u', str(DRIVER)], cwd=self.cwd, env=environment,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            close_fds=False, preexec_fn=child_setup)   # fds are non-inheritable but 3
        theirs.close()
        self.sock = ours
        self.buffer = bytearray()
        self.stdout, self.stderr = bytearray(), bytearray()
        self.next_id = 1
        self.selector = selectors.DefaultSelector()
        for stream in (self.sock, self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ)
        self.ready = self.next_frame(timeout=10)
        self.ready_seconds = time.monotonic() - self.started
        assert self.ready['type'] == 'ready'

    # -- low level

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, frame):
        if (isinstance(frame, dict) and frame.get('type') == 'exec'
                and frame.get('language') in PROGRAMS and 'program' not in frame):
            frame = dict(frame, program=PROGRAMS[frame['language']])
        body = json.dumps(frame).encode()
        self.send_raw(struct.pack('>I', len(body)) + body)

    def read_from(self, stream):
        """One read; False at end of file."""
        try:
            data = os.read(stream.fileno(), 1 << 20)
        except BlockingIOError:
            return True
        except ConnectionResetError:    # the driver exited with frames unread
            data = b''
        if stream is self.sock:
            self.buffer += data
        elif stream is self.proc.stdout:
            self.stdout += data
        else:
            self.stderr += data
        if not data:
            self.selector.unregister(stream)
        return bool(data)

    def pump(self, timeout):
        """Read whatever arrives within timeout; False at EOF of the socket."""
        alive = True
        for key, _ in self.selector.select(timeout):
            if not self.read_from(key.fileobj) and key.fileobj is self.sock:
                alive = False
        return alive

    def pop_frame(self):
        if len(self.buffer) < 4:
            return None
        size = struct.unpack('>I', self.buffer[:4])[0]
        assert size <= FRAME_MAX
        if len(self.buffer) < 4 + size:
            return None
        body = bytes(self.buffer[4:4 + size])
        del self.buffer[:4 + size]
        return check_frame(body)

    def next_frame(self, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            frame = self.pop_frame()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            assert left > 0, 'no frame within %ss; stderr: %r' % (timeout, bytes(self.stderr))
            if not self.pump(left) and not self.buffer:
                raise EOFError('driver closed fd 3; stderr: %r' % bytes(self.stderr))

    def drain_pipes(self):
        """Everything the driver wrote before its done frame is in the pipes."""
        while True:
            ready = [key.fileobj for key, _ in self.selector.select(0)
                     if key.fileobj is not self.sock]
            if not ready:
                return
            for stream in ready:
                self.read_from(stream)

    def asleep(self):
        """The driver and every process it started are asleep (state S)."""
        pids = [self.proc.pid, *process_tree(self.proc.pid)]
        return all((stat_fields(pid) or ['S'])[0] == 'S' for pid in pids)

    # -- execs

    def start(self, code, language='python'):
        exec_id = self.next_id
        self.next_id += 1
        self.send({'type': 'exec', 'id': exec_id, 'language': language, 'code': code})
        return exec_id

    def collect(self, exec_id, interrupt_on=None, timeout=30):
        began = time.monotonic()
        out_mark, err_mark = len(self.stdout), len(self.stderr)
        frames = []
        interrupted = False
        while not frames or frames[-1]['type'] != 'done':
            if interrupt_on is not None and not interrupted \
                    and interrupt_on in self.stdout[out_mark:]:
                # The code has reached its blocking call (a sleep, a wait,
                # a write to the socket this loop does not read meanwhile).
                assert wait_for(self.asleep, timeout), 'the code never blocked'
                os.kill(self.proc.pid, signal.SIGINT)
                interrupted = True
            frame = self.pop_frame()
            if frame is None:
                left = began + timeout - time.monotonic()
                assert left > 0, 'exec %d timed out; frames %r stderr %r' % (
                    exec_id, frames, bytes(self.stderr[err_mark:]))
                if not self.pump(min(left, 0.05)) and not self.buffer:
                    raise EOFError('driver closed fd 3; stderr: %r' % bytes(self.stderr))
                continue
            assert frame['type'] != 'ready'
            assert frame['id'] == exec_id, frame
            frames.append(frame)
        self.drain_pipes()
        return Outcome(frames, bytes(self.stdout[out_mark:]), bytes(self.stderr[err_mark:]),
                       time.monotonic() - began)

    def run(self, code, language='python', **options):
        return self.collect(self.start(code, language), **options)

    def close(self, timeout=10):
        """EOF on fd 3; the driver's exit status."""
        self.sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.pump(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
        status = self.proc.wait()
        self.pump(0)
        self.sock.close()
        self.selector.close()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return status
