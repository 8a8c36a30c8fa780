"""Hostile HTTP clients against `petri serve`, each daemon in a memory
cgroup of the test's own (tests/memcg.py): bodies built to cost the daemon
memory, and a thousand connections that never finish their headers.  The
daemon must refuse fast, stay small and keep serving its neighbour.

Numbers (peak RSS under the bodies, /healthz p99 under the slow connections)
are printed; only generous bounds are asserted (the machine is shared).
"""
import os
import resource
import socket
import threading
import time

import pytest

import hostilehelp as H

import memcg

pytestmark = pytest.mark.skipif(memcg.available() is not None, reason=str(memcg.available()))

CGROUP_LIMIT = 1536 << 20   # the sandboxes of the test count here too


@pytest.fixture
def jailed_server(tmp_path):
    """A daemon in a memory cgroup; yields (server, cgroup)."""
    with H.jailed_server(tmp_path, 'http-flood', CGROUP_LIMIT) as pair:
        yield pair


def nested_objects(size):
    """About size bytes of {"a":[{},{},...]}: ~100 bytes of jansson tree
    per 3 bytes of text."""
    n = (size - 10) // 3
    return b'{"a":[' + b'{},' * n + b'{}]}'


def post_raw(port, path, body, chunked=False, timeout=60):
    """Send body as fast as the server takes it; returns the status line
    the server answered (or why there is none).  The server may answer
    and close before the body is sent: that is the point."""
    s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    head = (f'POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n'
            'Content-Type: application/json\r\n')
    head += 'Transfer-Encoding: chunked\r\n' if chunked else f'Content-Length: {len(body)}\r\n'
    try:
        s.sendall(head.encode() + b'\r\n')
        try:
            step = 1 << 20
            for i in range(0, len(body), step):
                part = body[i:i + step]
                s.sendall(b'%x\r\n%s\r\n' % (len(part), part) if chunked else part)
            if chunked:
                s.sendall(b'0\r\n\r\n')
        except OSError:
            pass                 # refused early: the answer is waiting
        data = b''
        while b'\r\n' not in data:
            c = s.recv(4096)
            if not c:
                break
            data += c
        return data.split(b'\r\n', 1)[0].decode(errors='replace') or 'no answer'
    except OSError as e:
        return f'error: {e}'
    finally:
        s.close()


def test_hostile_json_bodies_are_refused_cheaply(jailed_server):
    srv, cg = jailed_server
    body60 = nested_objects(60 << 20)
    statuses = []

    def attack(path, body, chunked):
        statuses.append((path, chunked, post_raw(srv.port, path, body, chunked)))

    threads = [threading.Thread(target=attack, args=('/v1/sessions', body60, False)),
               threading.Thread(target=attack, args=('/v1/execute', body60, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    attack('/v1/sessions', nested_objects(16 << 20), False)
    attack('/v1/sessions', nested_objects(16 << 20), True)
    # Under the size cap, over the cost cap: refused before jansson.
    attack('/v1/sessions', nested_objects(4 << 20), False)
    attack('/v1/sessions', b'[' * (1 << 20), False)
    peak = memcg.peak_rss(srv.proc.pid)
    print(f'\ndaemon peak RSS after the hostile bodies: {peak / 2**20:.1f} MiB '
          f'(cgroup peak {cg.peak() / 2**20:.1f} MiB)')
    for path, chunked, status in statuses:
        assert status.split()[1:2] in (['413'], ['400']), (path, chunked, status)
    assert srv.proc.poll() is None, srv.stderr_text()[-3000:]
    # One 60 MiB body alone cost the old daemon gigabytes.  (ASan's
    # quarantine and shadow memory make RSS meaningless.)
    if os.environ.get('PETRI_SANITIZED') != '1':
        assert peak < 400 << 20, f'peak RSS {peak >> 20} MiB'


def slow_socket(src, port):
    s = socket.socket()
    s.setblocking(True)
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(('127.0.0.1', port))
    s.sendall(f'POST /v1/execute HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: '.encode())
    s.setblocking(False)
    return s


def closed_by_peer(s):
    """Has the server closed s (EOF or reset)?"""
    try:
        return s.recv(1, socket.MSG_PEEK) == b''
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


@pytest.mark.slow
def test_slow_connections_leave_room_for_everyone(jailed_server):
    srv, cg = jailed_server
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = []
    try:
        # 1000 connections from ten addresses (max_connections_per_ip is
        # 256), each trickling a header byte now and then.
        for i in range(1000):
            held.append(slow_socket(f'127.0.0.{2 + i // 100}', srv.port))
        time.sleep(1)       # nothing may happen: a second in which the server could drop them
        dropped = sum(closed_by_peer(s) for s in held)
        assert dropped == 0, f'the server dropped {dropped} of 1000 slow connections at once'
        latencies, executes, exec_s = [], [], []
        stop = threading.Event()

        def trickle():
            # A byte each, every 2 s: well within http_timeout_s (30 s), so
            # a slow round of the measurement below never idles them out.
            while not stop.wait(2):
                for s in held:
                    try:
                        s.send(b'x')
                    except OSError:
                        pass

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        t_end = time.monotonic() + 15
        while time.monotonic() < t_end:
            for _ in range(10):
                t0 = time.monotonic()
                r = srv.api.get('/healthz', timeout=30)
                latencies.append(time.monotonic() - t0)
                assert r.status_code == 200, r.text
            t0 = time.monotonic()
            r = srv.api.post(f'/v1/sessions/{srv.neighbour}/execute', {'code': '1+1'},
                             timeout=60)
            exec_s.append(time.monotonic() - t0)
            executes.append(r.status_code)
        stop.set()
        trickler.join(30)
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(f'\n/healthz with 1000 slow connections held: p50 '
              f'{latencies[len(latencies) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, '
              f'{len(latencies)} requests; daemon RSS {memcg.peak_rss(srv.proc.pid) >> 20} MiB')
        assert executes and set(executes) == {200}, executes
        assert p99 < 10, f'/healthz p99 {p99:.2f} s'
        # The slow connections are still held, not dropped to make room.
        # (Once in a dozen runs on a loaded machine a few dozen were closed
        # by the end; the old server dropped 850 at once.)
        gone = [i for i, s in enumerate(held) if closed_by_peer(s)]
        assert len(gone) <= 100, (f'{len(gone)} slow connections were dropped (first {gone[:5]}, '
                          f'last {gone[-5:]}; longest execute {max(exec_s):.1f} s): '
                          f'{srv.stderr_text()[-2000:]}')
    finally:
        for s in held:
            s.close()
