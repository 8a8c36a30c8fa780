"""What a sandbox's control channel and its output may cost the daemon
(docs/security.md, "The supervisor"; the budget in docs/protocol.md).

Code in a sandbox can write to fd 3 itself.  Each test here runs a
`petri serve` of its own inside a memory cgroup of the test's own (1 GiB)
and attacks it from cold and warm sessions:

  - four sessions at once send a 16 MiB frame each of `{}` or of nested
    arrays: the daemon's peak RSS stays small and a bystander answers;
  - a session floods frames (one prebuilt 16 MiB result, or small ones) in
    a loop: it ends with a protocol violation, and the daemon's CPU stays
    small;
  - a session closes fd 3, another fds 1 and 2, then sleeps: no spinning;
  - a thread writes frames between executions: the next one ends at once;
  - honest code with many or big results keeps getting the "[further
    results dropped: ...]" note, never the budget.
  - a session floods stdout and stderr past the output cap (bash, Python
    writes, a print loop), or a process it left running does: the daemon's
    CPU stays a small share of the flood's time, the code is interrupted
    with the output limit as the reason, and the session's next output is
    its own.

The CPU bounds are five times the targets (0.2 s of daemon CPU per flooding
session), so noise cannot fail them while the bugs they catch cost 10 s.
Every measured number is printed (pytest -s).
"""
import os
import threading
import time

import pytest

import hostilehelp as H
from harness import cpu_seconds

import memcg  # noqa: E402 -- tests/memcg.py, shared by the tiers

pytestmark = pytest.mark.skipif(memcg.available() is not None,
                                reason=str(memcg.available()))

CG_LIMIT = 1 << 30
# ASan's quarantine keeps freed memory: a sanitized daemon's RSS says nothing.
SANITIZED = os.environ.get('PETRI_SANITIZED') == '1'
RSS_BOUND = 200 << 20          # four hostile 16 MiB frames at once (target: 300 MiB
                               # for the whole issue, HTTP bodies included)
CPU_BOUND = 1.0                # 5 x the 0.2 s target, per attack
# A flood of big results costs what the results cap lets an honest execution
# cost: 32 MiB of frames parsed (runtime/jstring.c: a copy) and written back
# as JSON for the client, ~0.7 s here, spread by box.c's frame CPU rate over
# ~6 s: then the session is ended.  The bug it catches burns the CPU for the
# whole timeout (60 s here, so that a starved sandbox still reaches the budget).
BIG_FLOOD_CPU_BOUND = 5.0
LIMITS = {'timeout_s': 60}      # room for a starved flood to reach its budget

# The driver's own state (S, in the frames that run the cell) knows the id
# of the execution in flight.
PRELUDE = '''
import os, sys, threading, time
caller = sys._getframe()
while "S" not in caller.f_globals:
    caller = caller.f_back
ID = caller.f_globals["S"].exec_id
del caller
SIXTEEN = (16 << 20) - 64
def raw(body):
    return len(body).to_bytes(4, "big") + body
def write(data):
    view = memoryview(data)
    while view:
        view = view[os.write(3, view):]
'''

BIG_FRAMES = {
    # a valid head, then 16 MiB of empty objects: the tree jansson would build
    'objects': 'write(raw(b\'{"type":"result","id":%d,"data":{"a":[\' % ID + '
               'b"{},"  * (SIXTEEN // 3) + b"{}]}}"))',
    # nested arrays, likewise
    'arrays': 'write(raw(b\'{"type":"result","id":%d,"data":{"a":\' % ID + '
              'b"[[],"  * (SIXTEEN // 4) + b"[]" + b"]" * (SIXTEEN // 4) + b"}}"))',
    # no head at all
    'bare': 'write(raw(b"[" + b"{}," * (SIXTEEN // 3) + b"{}]"))',
}


def reset_peak_rss(pid):
    """VmHWM starts again from the current RSS (proc(5), clear_refs)."""
    with open(f'/proc/{pid}/clear_refs', 'w') as f:
        f.write('5')


@pytest.fixture(params=['serve-cold', 'serve-warm'], scope='module')
def server(request, tmp_path_factory):
    with memcg.MemoryCgroup('frames', CG_LIMIT) as cg:
        srv = H.Server(tmp_path_factory.mktemp(request.param), warm=request.param == 'serve-warm',
                       preexec_fn=cg.enter)
        srv.cg = cg
        try:
            yield srv
        finally:
            why = srv.neighbour_ok()
            code = srv.stop()
            # petri makes its cgroup parent under its own cgroup: remove
            # what it left there (empty by now) before the cgroup itself.
            for dirpath, _, _ in sorted(os.walk(cg.path), key=lambda w: -len(w[0])):
                if dirpath != cg.path:
                    try:
                        os.rmdir(dirpath)
                    except OSError:
                        pass
            assert cg.oom_kills() == 0, 'the daemon reached its memory cgroup limit'
            assert why is None, why
            assert code == 0, srv.stderr_text()[-3000:]


def new_session(srv):
    sid = srv.api.session(limits=LIMITS)
    H.SessionWatch(srv.api, sid, warm=srv.warm)     # and it is the kind asked for
    return sid


def attack(srv, sid, code):
    return srv.api.execute(sid, PRELUDE + code)


def assert_violation(r, srv, sid, what='protocol violation'):
    assert r['status'] == 'killed', H.describe(r)
    assert what in (r['reason'] or ''), H.describe(r)
    again = srv.api.post(f'/v1/sessions/{sid}/execute', {'code': '1'})
    assert again.status_code == 410, again.text[:2000]     # dead, and says why
    assert what in again.text, again.text[:2000]


def test_four_sessions_send_16_mib_frames_at_once(server):
    sids = [new_session(server) for _ in range(4)]
    codes = [BIG_FRAMES['objects'], BIG_FRAMES['arrays'], BIG_FRAMES['bare'],
             BIG_FRAMES['objects']]
    results = [None] * 4

    def run(i):
        results[i] = attack(server, sids[i], codes[i] + '\ntime.sleep(5)')

    reset_peak_rss(server.proc.pid)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    rss = memcg.peak_rss(server.proc.pid)
    print(f'\n{"warm" if server.warm else "cold"}: daemon peak RSS {rss / 2**20:.1f} MiB, '
          f'its cgroup peak {server.cg.peak() / 2**20:.1f} MiB, after four 16 MiB frames')
    for sid, r in zip(sids, results):
        assert r is not None, 'an attack got no answer'
        assert_violation(r, server, sid)
    assert server.neighbour_ok() is None, server.neighbour_ok()
    assert server.cg.oom_kills() == 0
    assert SANITIZED or rss < RSS_BOUND, f'daemon peak RSS {rss >> 20} MiB'


FLOODS = {
    # one prebuilt 16 MiB result, again and again
    'big': 'frame = raw(b\'{"type":"result","id":%d,"data":{"text/plain":"\' % ID + '
           'b"A" * (SIXTEEN - 80) + b\'"}}\')\nwhile True:\n    write(frame)',
    # small results, as fast as the socket takes them
    'small': 'frame = raw(b\'{"type":"result","id":%d,"data":{"text/plain":"x"}}\' % ID) * 256'
             '\nwhile True:\n    write(frame)',
}


@pytest.mark.parametrize('flood', sorted(FLOODS))
def test_a_frame_flood_ends_the_session_not_the_daemons_cpu(server, flood):
    sid = new_session(server)
    pid = server.proc.pid
    before = cpu_seconds(pid)
    r = attack(server, sid, FLOODS[flood])
    spent = cpu_seconds(pid) - before
    print(f'\n{"warm" if server.warm else "cold"} {flood} flood: daemon CPU {spent:.2f} s, '
          f'session ended after {r["duration_ms"]} ms ({r["cpu_ms"]} ms of its CPU): '
          f'{r["reason"]}')
    assert_violation(r, server, sid, 'more ')
    bound = BIG_FLOOD_CPU_BOUND if flood == 'big' else CPU_BOUND
    assert spent < bound, f'the daemon spent {spent:.2f} s of CPU on a flood'
    # Per second of the flooding session: the frame CPU rate of box.c
    # (0.1 s/s) with the results' later cost; 2.5 x the 0.2 s target.
    per_s = spent / max(r['duration_ms'] / 1000, 1.0)
    assert per_s < 0.5, f'the daemon spent {per_s:.2f} s of CPU per second of a flood'
    assert server.neighbour_ok() is None


@pytest.mark.parametrize('fds,status', [((3,), 'killed'), ((1, 2), 'ok')])
def test_closed_streams_do_not_make_the_daemon_spin(server, fds, status):
    sid = new_session(server)
    pid = server.proc.pid
    before = cpu_seconds(pid)
    r = attack(server, sid, ''.join(f'os.close({fd})\n' for fd in fds) + 'time.sleep(4)')
    spent = cpu_seconds(pid) - before
    print(f'\n{"warm" if server.warm else "cold"}: fds {fds} closed: daemon CPU {spent:.2f} s '
          f'in {r["duration_ms"]} ms: {r["status"]} {r["reason"]}')
    assert r['status'] == status, H.describe(r)
    if status == 'killed':
        # The keeper kills an interpreter that closed its end of the
        # control socket and starts another: promptly, not at the end of
        # the 4 s sleep nor of the timeout.
        assert 'closed its control socket' in r['reason'] and r['restarted'], H.describe(r)
        assert r['duration_ms'] < 4000, H.describe(r)
    again = server.api.execute(sid, '1+1')
    assert again['results'] == [{'text/plain': '2'}], H.describe(again)
    assert spent < CPU_BOUND, f'the daemon spent {spent:.2f} s of CPU'


def test_frames_written_between_executions_cost_little(server):
    sid = new_session(server)
    pid = server.proc.pid
    r = attack(server, sid, '''
junk = raw(b'{"type":"result","id":%d,"data":{"a":[' % ID + b"{}," * (SIXTEEN // 3) + b"{}]}}")
def flood():
    time.sleep(0.5)
    while True:
        write(junk)
threading.Thread(target=flood, daemon=True).start()
''')
    assert r['status'] == 'ok', H.describe(r)
    H.wait_until(lambda: False, timeout=2)      # the thread fills the socket meanwhile
    before = cpu_seconds(pid)
    reset_peak_rss(pid)
    r = server.api.execute(sid, '1+1')
    spent = cpu_seconds(pid) - before
    rss = memcg.peak_rss(pid)
    print(f'\n{"warm" if server.warm else "cold"}: frames between executions: daemon CPU '
          f'{spent:.2f} s, peak RSS {rss / 2**20:.1f} MiB: {r["reason"]}')
    assert_violation(r, server, sid, 'another execution')
    assert spent < CPU_BOUND
    assert SANITIZED or rss < RSS_BOUND, f'daemon peak RSS {rss >> 20} MiB'


def test_honest_code_with_many_and_big_results_gets_the_note(server):
    # Honest code, so no attack's 10 s: 42 MiB of results take a few seconds
    # on an idle machine and many more on a loaded one.
    sid = server.api.session(limits={'timeout_s': 120})
    H.SessionWatch(server.api, sid, warm=server.warm)
    r = server.api.execute(sid, '''
class Big:
    def __init__(self, i): self.i = i
    def __repr__(self): return 'big %d' % self.i
    def _repr_html_(self): return '<p>' + 'x' * (7 << 20) + '</p>'
for i in range(6):
    display(Big(i))
''')
    assert r['status'] == 'ok', H.describe(r)
    assert len(r['results']) == 5, H.describe(r)     # four of 7 MiB fit in 32 MiB
    assert r['results'][-1]['text/plain'].startswith('[further results dropped'), H.describe(r)
    r = server.api.execute(sid, 'for i in range(1100):\n    display(i)')
    assert r['status'] == 'ok', H.describe(r)
    assert len(r['results']) == 1001, H.describe(r)
    assert r['results'][-1]['text/plain'].startswith('[further results dropped'), H.describe(r)
    r = server.api.execute(sid, '1+1')
    assert r['results'] == [{'text/plain': '2'}], H.describe(r)


# ---- stdout and stderr past the output cap ----------------------------------------------
#
# Past `output_kb` (plus the 4 MiB box.c still reads and drops) the daemon
# stops reading a stream: its writer blocks on the full pipe, and once it
# has stayed blocked a second the code is interrupted, as at a timeout.
# Before, the daemon read and dropped the flood for as long as it lasted:
# 0.55 of a core for a session writing /dev/zero to both streams.

FLOOD_LIMITS = {'timeout_s': 6, 'output_kb': 64}    # a small cap: the answer's
                                                    # JSON costs little
OUTPUT_FLOODS = {
    # the attack of issue 29: /dev/zero to both streams, from processes
    'bash': ('bash', 'cat /dev/zero & cat /dev/zero >&2; wait'),
    # Python's own writes, the streams in turn, then a print loop
    'python': ('python', 'z = bytes(1 << 16)\nwhile True:\n    os.write(1, z); os.write(2, z)'),
    'print': ('python', 'while True:\n    print("x" * 1000)'),
}
# The daemon's CPU over a flood, as a share of the flood's wall time: the
# daemon's part of the answer (a few ms) over at least a second; the bug
# it catches is about 0.5.
FLOOD_CPU_SHARE = 0.2


@pytest.mark.parametrize('flood', sorted(OUTPUT_FLOODS))
def test_output_past_the_cap_costs_the_writer_not_the_daemon(server, flood):
    language, code = OUTPUT_FLOODS[flood]
    sid = server.api.session(limits=FLOOD_LIMITS)
    H.SessionWatch(server.api, sid, warm=server.warm)
    pid = server.proc.pid
    before = cpu_seconds(pid)
    r = server.api.execute(sid, 'import os\n' + code if language == 'python' else code,
                           language=language)
    spent = cpu_seconds(pid) - before
    wall = r['duration_ms'] / 1000
    print(f'\n{"warm" if server.warm else "cold"} {flood} output flood: daemon CPU {spent:.2f} s '
          f'over {wall:.2f} s ({spent / max(wall, 0.1):.2f} of a core): {r["status"]}, '
          f'{r["reason"]}')
    assert r['stdout_truncated'] is True, H.describe(r)
    assert len(r['stdout'].encode()) <= 64 << 10, H.describe(r)
    if flood != 'print':
        assert r['stderr_truncated'] is True, H.describe(r)
    # Ended for its output, not by the clock, and the result says so.
    assert r['status'] == 'timeout', H.describe(r)
    assert 'output limit of 64 KiB' in (r['reason'] or ''), H.describe(r)
    assert 'session kept' in r['reason'], H.describe(r)
    assert spent < FLOOD_CPU_SHARE * max(wall, 1.0), \
        f'the daemon spent {spent:.2f} s of CPU on {wall:.2f} s of an output flood'
    # The session goes on, and nothing of the flood is left in its pipes.
    again = server.api.execute(sid, 'import sys\nprint("after")\nprint("err", file=sys.stderr)')
    assert again['status'] == 'ok', H.describe(again)
    assert again['stdout'] == 'after\n' and again['stderr'] == 'err\n', H.describe(again)
    assert server.neighbour_ok() is None


@pytest.mark.slow
def test_a_background_writer_costs_the_daemon_little(server):
    # A process the code leaves behind floods the session's stdout, also
    # between executions: each later execution reads at most its cap (and
    # the 4 MiB past it) of that, not the flood.
    sid = server.api.session(limits=FLOOD_LIMITS)
    H.SessionWatch(server.api, sid, warm=server.warm)
    pid = server.proc.pid
    r = server.api.execute(sid, 'import subprocess\n'
                           'subprocess.Popen(["cat", "/dev/zero"], start_new_session=True)\nNone')
    assert r['status'] in ('ok', 'timeout'), H.describe(r)
    before = cpu_seconds(pid)
    started = time.monotonic()
    results = [server.api.execute(sid, 'import time\nfor _ in range(20):\n    time.sleep(0.1)')
               for _ in range(3)]
    wall = time.monotonic() - started
    spent = cpu_seconds(pid) - before
    print(f'\n{"warm" if server.warm else "cold"}: a background writer: daemon CPU {spent:.2f} s '
          f'over {wall:.2f} s: {[(x["status"], x["reason"]) for x in results]}')
    for x in results:
        assert x['stdout_truncated'] is True, H.describe(x)
        assert x['status'] in ('ok', 'timeout'), H.describe(x)
    assert spent < FLOOD_CPU_SHARE * wall, \
        f'the daemon spent {spent:.2f} s of CPU on {wall:.2f} s of a background flood'
    # Stopped through the processes API, the writer leaves the session clean.
    procs = server.api.get(f'/v1/sessions/{sid}/processes').json()['processes']
    cats = [p['pid'] for p in procs if p['name'] == 'cat']
    assert cats, procs
    for p in cats:
        assert server.api.delete(
            f'/v1/sessions/{sid}/processes/{p}?signal=KILL').status_code == 202
    H.wait_until(lambda: not any(p['name'] == 'cat' for p in server.api.get(
        f'/v1/sessions/{sid}/processes').json()['processes']), timeout=10)
    server.api.execute(sid, 'None')     # what the writer left in the pipe
    again = server.api.execute(sid, 'print("after")')
    assert again['stdout'] == 'after\n', H.describe(again)
    assert server.neighbour_ok() is None
