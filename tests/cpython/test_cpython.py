"""Inside petri, CPython's regression tests pass as they do bare.

For each path (cold, warm) and each module of cpythonhelp.MODULES: a test case
that passes bare must pass inside, and a module that passes bare must pass
inside (a crash, a timeout or a failure in a subtest shows only at module
level).  What fails or is skipped bare is not expected inside; what petri
refuses on purpose is left out of every run alike (runner.py, ARGS, says
why for each).  A change of the filter, the mounts or the limits that
breaks ordinary programs fails here.
"""
import pytest

from cpythonhelp import MODULES


def differences(bare, inside):
    problems = []
    bare_failed = set(bare['failed'])
    for mod in MODULES:
        b = bare['modules'].get(mod)
        i = inside['modules'].get(mod)
        if b is None or mod in bare_failed:
            continue                    # not passing bare: nothing expected inside
        if i is None:
            problems.append(f'{mod}: no result inside (crashed?)')
            continue
        new = sorted(set(i['bad']) - set(b['bad']))
        if new:
            problems.append(f'{mod}: {len(new)} test(s) pass bare and fail inside: '
                            + ', '.join(new[:20]))
        elif mod in inside['failed']:
            problems.append(f'{mod}: passes bare, fails inside (outside any test case '
                            f'or in a subtest)')
        if i['run'] < b['run']:
            problems.append(f'{mod}: {i["run"]} test cases ran inside, {b["run"]} bare')
    return problems


def describe(name, r):
    total = sum(m['run'] for m in r['modules'].values())
    skipped = sum(m['skipped'] for m in r['modules'].values())
    ok = [m for m in MODULES if m in r['modules'] and m not in r['failed']]
    tail = r['tail']
    slowest = tail[tail.find('10 slowest'):].split('\n\n')[0] if '10 slowest' in tail else ''
    return (f'{slowest}\n{name}: {len(ok)}/{len(MODULES)} modules pass, {total} test cases, '
            f'{skipped} skipped, failed: {r["failed"]}, flaky (passed when run again): '
            f'{r.get("flaky", [])}, {r.get("wall_s")} s')


def test_bare_runs(results):
    bare = results['bare']
    if isinstance(bare, BaseException):
        raise bare
    print('\n' + describe('bare', bare))
    missing = [m for m in MODULES if m not in bare['modules']]
    assert not missing, f'modules with no result bare: {missing}\n{bare["tail"]}'


@pytest.mark.parametrize('path', ('cold', 'warm'))
def test_inside_as_bare(results, path):
    bare, inside = results['bare'], results[path]
    if isinstance(bare, BaseException):
        pytest.skip(f'the bare run failed: {bare!r}')
    if isinstance(inside, BaseException):
        raise inside
    print('\n' + describe(path, inside))
    problems = differences(bare, inside)
    assert not problems, f'{path}:\n' + '\n'.join(problems) + '\n--- tail:\n' + inside['tail']
