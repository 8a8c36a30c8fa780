"""Fixtures of the adversarial tier; the helpers live in tests/hostilehelp.py.

One `petri serve` per path (cold sessions, warm sessions) per xdist worker,
started on first use and stopped at the end of the worker's session, when
it must exit 0 and leave no sandbox process and no cgroup behind.
"""
import os
import secrets
import socket

import pytest

import hostilehelp as H


def pytest_configure(config):
    config.addinivalue_line('markers', 'jail: an attack on the jail alone, whose output the '
                            'daemon only relays (test_corpus.JAIL_ONLY)')


@pytest.fixture(scope='session')
def markers(tmp_path_factory):
    """Host files no sandbox may change: one in a temporary directory and
    one in /root (sandboxes must not even see /root)."""
    worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
    token = secrets.token_hex(16).encode()
    paths = [tmp_path_factory.mktemp('marker') / 'host-marker', f'/root/.petri-hostile-marker-{worker}-{os.getpid()}']
    for p in paths:
        with open(p, 'wb') as f:
            f.write(b'petri hostile marker ' + token + b'\n')
    yield [str(p) for p in paths]
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


@pytest.fixture(scope='session')
def host_lacks(tmp_path_factory):
    """lacks(feature): why this kernel cannot take an attack that needs
    FEATURE (the sentence the test reports), or None when it can.  Probed
    outside any sandbox, once per worker (hostilehelp.HOST_FEATURES)."""
    known = {}

    def lacks(feature):
        if feature not in known:
            probe, missing = H.HOST_FEATURES[feature]
            known[feature] = None if probe(tmp_path_factory.mktemp(feature)) else missing
        return known[feature]

    return lacks


@pytest.fixture(scope='session')
def servers(tmp_path_factory):
    started = {}

    def get(path):
        if path not in started:
            started[path] = H.Server(tmp_path_factory.mktemp(path), warm=(path == 'serve-warm'))
        return started[path]

    yield get
    problems = []
    for path, srv in started.items():
        why = srv.neighbour_ok()
        if why:
            problems.append(f'{path}: at the end: {why}')
        tag = H.cgroup_tag(srv.proc.pid)
        code = srv.stop()
        if code != 0:
            problems.append(f'{path}: petri serve exited {code}: {srv.stderr_text()[-3000:]}')
        left = H.wait_until(lambda: not H.run_leftovers(tag), timeout=H.SETTLE_S)
        if not left:
            problems.append(f'{path}: left behind: {H.run_leftovers(tag)}')
    assert not problems, '\n'.join(problems)


HOST_PORT = 47123                     # net_host_loopback.py tries it
HOST_ABSTRACT = b'\0petri-hostile-host'   # net_abstract_host.py tries it


@pytest.fixture(scope='session')
def host_listeners():
    """Listeners on the host that no sandbox may reach: TCP on 127.0.0.1
    and ::1, an abstract unix socket.  Another worker may hold the same
    address already: then its listener serves the same purpose."""
    socks = []
    for fam, addr in ((socket.AF_INET, ('127.0.0.1', HOST_PORT)), (socket.AF_INET6, ('::1', HOST_PORT)),
                      (socket.AF_UNIX, HOST_ABSTRACT)):
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            if fam != socket.AF_UNIX:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
            s.listen(16)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            s.close()
    yield socks
    for s in socks:
        s.close()


def accepted(socks):
    """Connections that reached the host's listeners."""
    got = []
    for s in socks:
        try:
            c, peer = s.accept()
            got.append((s.getsockname(), peer))
            c.close()
        except (BlockingIOError, OSError):
            pass
    return got


@pytest.fixture
def host_guard(markers, host_listeners):
    """Snapshot the host before a test and check it after: host files and
    kernel knobs unchanged, no listening socket of a sandbox uid in the
    host's network namespace, no sandbox process of a petri of ours that has exited."""
    before = H.HostSnapshot(markers)
    listeners0 = H.sandbox_listeners()
    yield
    after = H.HostSnapshot(markers)
    problems = before.changes(after)
    got = accepted(host_listeners)
    if got:
        problems.append(f'a sandbox reached a listener of the host: {got}')
    new = {k: v for k, v in H.sandbox_listeners().items() if k not in listeners0}
    if new:
        problems.append(f'listening sockets of a sandbox uid on the host: {new}')
    if not H.wait_until(lambda: not H.orphans()):
        problems.append(f'sandbox processes of a dead petri (ours) left behind: {H.orphans()}')
    assert not problems, '\n'.join(problems)
