"""What one session can make the execution record cost (docs/security.md,
"What a tenant can cost the daemon"; the bounds in src/record/record.h).

A `petri serve` of its own, in a memory cgroup of the test's own, with the
in-memory record.  One session fills it, with big entries (256 KiB of code
and of output that are six times larger as JSON) and with more tiny ones
than the whole record keeps; then:

  - another session's entries are all still there (the hog's own oldest
    went: it holds at most a quarter of the record);
  - its listing with limit=1000 stays within 8 MiB, says `truncated`, and
    pages back with `before` to what the record holds;
  - the daemon's peak RSS stays small (it was ~550 MiB with eight readers).
Every measured number is printed (pytest -s).
"""
import os

import pytest

import hostilehelp as H

import memcg  # noqa: E402 -- tests/memcg.py, shared by the tiers

pytestmark = pytest.mark.skipif(memcg.available() is not None,
                                reason=str(memcg.available()))

CG_LIMIT = 1536 << 20
LIST_MAX = 8 << 20             # RECORD_LIST_MAX
KEEP = 1000                    # RECORD_KEEP_MEMORY
# ASan's quarantine keeps freed memory: a sanitized daemon's RSS says nothing.
SANITIZED = os.environ.get('PETRI_SANITIZED') == '1'
RSS_BOUND = 320 << 20          # measured 245 MiB (the record 64, a listing 3 x 8, glibc arenas); the old code: ~550
BIG = 40                       # 40 x 0.5 MiB: past a session's 16 MiB share
BIG_CODE = 'print("\\x01" * 250000)\n#' + '\x01' * 250000


@pytest.fixture
def server(tmp_path):
    # The in-memory record: what it costs is the daemon's memory.
    with H.jailed_server(tmp_path, 'record', CG_LIMIT, extra_config='[server]\nrecord =\n') as (srv, cg):
        srv.cg = cg
        yield srv


def listing(api, sid, **params):
    r = api.get(f'/v1/sessions/{sid}/executions', params=dict(limit=1000, **params), timeout=120)
    assert r.status_code == 200, r.text[:500]
    return len(r.content), r.json()


@pytest.mark.slow
def test_one_session_cannot_take_the_record(server):
    api = server.api
    quiet = api.session()
    for i in range(3):
        assert api.execute(quiet, f'print({i})')['status'] == 'ok'
    hog = api.session(limits={'output_kb': 1024, 'timeout_s': 30})
    for _ in range(BIG):
        r = api.post(f'/v1/sessions/{hog}/execute', {'code': BIG_CODE}, timeout=120)
        assert r.status_code == 200, r.text[:500]
    size, body = listing(api, hog)
    print(f'\nhog listing after {BIG} big executions: {size >> 10} KiB, '
          f'{len(body["executions"])} entries, truncated={body["truncated"]}')
    assert size <= LIST_MAX + (64 << 10)
    assert body['truncated'] is True
    # Page back to the oldest the record still holds.
    seqs = [e['seq'] for e in body['executions']]
    while body['truncated']:
        _, body = listing(api, hog, before=seqs[0])
        assert body['executions'], body
        seqs = [e['seq'] for e in body['executions']] + seqs
    assert seqs == sorted(set(seqs))
    held_big = len(seqs)
    print(f'the hog holds {held_big} of its {BIG} big entries')
    assert 16 <= held_big < BIG                # its share is 16 MiB of 0.5 MiB entries
    # More tiny executions than the whole record keeps.
    for _ in range(KEEP + 50):
        r = api.post(f'/v1/sessions/{hog}/execute', {'code': 'pass'}, timeout=60)
        assert r.status_code == 200, r.text[:500]
    _, body = listing(api, hog)
    print(f'after {KEEP + 50} tiny ones: the hog holds {len(body["executions"])} entries')
    assert len(body['executions']) <= KEEP // 4
    _, mine = listing(api, quiet)
    assert [e['result']['stdout'] for e in mine['executions']] == ['0\n', '1\n', '2\n']
    _, neighbour = listing(api, server.neighbour)
    assert neighbour['executions'], 'the neighbour session lost its record'
    rss = memcg.peak_rss(server.proc.pid)
    print(f'daemon peak RSS {rss >> 20} MiB, cgroup peak {server.cg.peak() >> 20} MiB')
    assert SANITIZED or rss < RSS_BOUND, f'daemon peak RSS {rss >> 20} MiB'
