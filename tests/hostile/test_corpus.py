"""Every program of tests/hostile/corpus against the three paths.

A program makes ONE attack and says what it saw on stderr (stdout is lost
on the warm path, see hostilehelp.WARM_STDOUT_LOST): `CONTAINED ...` when the
attack failed as it must, `ESCAPE ...` when it got something it must never
get.  The header of each file says which statuses count as contained (see
hostilehelp.Program).  Then, from the host: the sandbox's processes and cgroups
are gone after the run (petri run) or the session's deletion (serve), host
files and kernel knobs are unchanged, no sandbox uid listens on the host,
and (serve) the daemon still answers a neighbour session.

A program whose attack needs a host feature (header `needs`) and finds it
missing says `LACKS ...`: accepted, with a warning that says why, only
where the host lacks the feature outside any sandbox too.
"""
import warnings

import pytest

import hostilehelp as H

PROGRAMS = H.corpus_programs()

# Attacks on the jail alone (privileges, the network, what a sandbox can
# learn of the host): the daemon only relays a line of their output, so
# `make ci-san` leaves them to the release build's run (`-m 'not jail'`) and
# keeps the exhaustion, output and protocol attacks, which are the daemon's.
# It runs those on the cold path only: there the jail's own set-up code runs
# instrumented (in the daemon's child, before the exec), while a warm
# sandbox comes from the template, which is never built with sanitizers
# (the daemon's side of the warm path is in the API tier), and `petri run`
# handles a result with the code the daemon uses.
JAIL_ONLY = ('priv_', 'net_', 'info_')


def _params():
    out = []
    for prog in PROGRAMS:
        for path in prog.paths:
            marks = []
            if path in prog.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=prog.xfail[path]))
            if prog.name.startswith(JAIL_ONLY):
                marks.append(pytest.mark.jail)
            out.append(pytest.param(prog, path, id=f'{path}:{prog.name}', marks=marks))
    return out


def check_result(prog, result, path, host_lacks):
    """What the result must say; a list of problems."""
    problems = []
    marker = prog.marker
    stdout = H.out_bytes(result, 'stdout')
    stderr = H.out_bytes(result, 'stderr')
    text = (stdout + b'\n' + stderr).decode('utf-8', 'replace')
    if result.get('error'):
        text += '\n' + (result['error'].get('message') or '')
    if result['status'] not in prog.statuses:
        problems.append(f'status {result["status"]!r}, expected one of {sorted(prog.statuses)}')
    if 'ESCAPE' in text:
        lines = [ln for ln in text.splitlines() if 'ESCAPE' in ln]
        problems.append('the program reports an escape: ' + ' | '.join(lines)[:3000])
    lacks = [ln for ln in text.splitlines() if ln.startswith('LACKS')]
    if lacks:
        why = prog.needs and host_lacks(prog.needs)
        if why:
            warnings.warn(f'[{path}] {prog.name}: accepted {len(lacks)} LACKS lines '
                          f'({lacks[0]}): {why}')
            marker = 'LACKS'
        else:
            problems.append(f'the program could not make its attack, yet this host has '
                            f'{prog.needs or "what it needs"}: ' + ' | '.join(lacks)[:3000])
    if marker != '-' and marker not in text:
        problems.append(f'{marker!r} is not in the output: the program did not get '
                        f'as far as its checks')
    stdout_lost = path == 'serve-warm' and H.WARM_STDOUT_LOST
    if prog.exact is not None:
        if stderr != prog.exact:
            problems.append(f'stderr is not what was written: {stderr[:300]!r} != {prog.exact[:300]!r}')
        if not stdout_lost and stdout != prog.exact:
            problems.append(f'stdout is not what was written: {stdout[:300]!r} != {prog.exact[:300]!r}')
    if prog.truncated and not (prog.truncated == 'stdout' and stdout_lost):
        if not result[prog.truncated + '_truncated']:
            problems.append(f'{prog.truncated} is not marked truncated')
    cap = (1 << 20) if path == 'run' else prog.limits['output_kb'] << 10
    for name, data in (('stdout', stdout), ('stderr', stderr)):
        if len(data) > cap + 4096:
            problems.append(f'{name} holds {len(data)} bytes, over the {cap} cap')
    return problems


@pytest.mark.parametrize('prog,path', _params())
def test_corpus(prog, path, servers, host_guard, host_lacks):
    problems, result = attack(prog, path, prog.limits, servers, host_lacks)
    if problems and H.starved(result, prog.limits['timeout']):
        problems, result = attack(prog, path, H.longer(prog.limits), servers, host_lacks)
    assert not problems, '\n'.join(problems) + '\n' + H.describe(result)


def attack(prog, path, limits, servers, host_lacks):
    """Run prog on path with limits: (problems, result)."""
    problems = []
    if path == 'run':
        result, tag, _ = H.petri_run(prog.path, prog.lang, limits)
        problems += check_result(prog, result, path, host_lacks)
        if not H.wait_until(lambda: not H.run_leftovers(tag)):
            problems.append(f'left behind by petri run: {H.run_leftovers(tag)}')
    else:
        srv = servers(path)
        sid = srv.api.session(limits=H.api_limits(limits))
        watch = H.SessionWatch(srv.api, sid, warm=(path == 'serve-warm'))
        result = srv.api.execute(sid, prog.source, language=prog.lang)
        problems += check_result(prog, result, path, host_lacks)
        why = srv.neighbour_ok()
        if why:
            problems.append(f'after the program: {why}')
        r = srv.api.delete(f'/v1/sessions/{sid}')
        if r.status_code not in (200, 204, 404, 410):
            problems.append(f'DELETE answered {r.status_code}: {r.text[:300]}')
        if not H.wait_until(lambda: not watch.leftovers()):
            problems.append(f'left behind by the session: {watch.leftovers()}')
    return problems, result


def test_corpus_size():
    """The corpus holds at least 80 programs, each with a unique name and
    one attack."""
    assert len(PROGRAMS) >= 80, len(PROGRAMS)
    names = [p.path.stem for p in PROGRAMS]
    assert len(set(names)) == len(names)
