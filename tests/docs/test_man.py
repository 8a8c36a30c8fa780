"""The man pages (man/petri.1, man/petri.ini.5) are well-formed, and cannot
go stale without this failing: every command and subcommand `petri --help`
lists, and every option each one's `--help` prints (and every long option
of the getopt tables in src/cli/), is in petri(1), under that command's
heading; every section and key src/config/config.c reads is in
petri.ini(5).

The pages are checked as a reader sees them: rendered by mandoc, so that
"\\-\\-cpu\\-time" in the source counts as "--cpu-time"."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAN1 = ROOT / 'man' / 'petri.1'
MAN5 = ROOT / 'man' / 'petri.ini.5'
PETRI = os.environ.get('PETRI_BIN') or str(ROOT / 'build' / 'petri')

# An option in help text: --long-name or -x, not the dash inside a word
# (one-shot), a date (2026-11-30) or a lone '-' (standard input).
OPTION = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])')
# "  name     what it does", under a "commands:" or "subcommands:" line.
LISTED = re.compile(r'^  ([a-z]+) {2,}\S')


def render(page):
    """The page as text, as a terminal shows it (overstrike removed)."""
    p = subprocess.run(['mandoc', '-T', 'ascii', '-O', 'width=500', str(page)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return re.sub(r'.\x08', '', p.stdout)


def subsections(text):
    """{heading: body} of the page's subsections (.Ss), e.g. 'petri run'."""
    parts, name = {}, None
    for line in text.splitlines():
        if re.match(r'^\S', line):          # a section heading ends the last subsection
            name = None
        elif re.match(r'^ {3}\S', line):
            name = line.strip()
            parts[name] = []
        elif name:
            parts[name].append(line)
    return {k: '\n'.join(v) for k, v in parts.items()}


def helps(*argv):
    """What `petri ARGV --help` prints, stdout and stderr (some commands
    print their usage on stderr)."""
    p = subprocess.run([PETRI, *argv, '--help'], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (argv, p.stderr)
    return p.stdout + p.stderr


def listed(help_text):
    """The commands a usage text lists under 'commands:'/'subcommands:'."""
    names, inside = [], False
    for line in help_text.splitlines():
        if re.match(r'^(sub)?commands:$', line):
            inside = True
        elif inside and (m := LISTED.match(line)):
            names.append(m.group(1))
        elif inside and not line.strip():
            inside = False
    return names


def commands():
    """['run', ..., 'record verify', 'record export']: every command line
    petri's own help leads to."""
    if not os.environ.get('PETRI_BIN') and not os.path.exists(PETRI):
        pytest.skip('no petri binary: build it (make) or set PETRI_BIN')
    found = []
    for cmd in listed(helps()):
        subs = listed(helps(cmd))
        found += [f'{cmd} {s}' for s in subs] if subs else [cmd]
    assert {'run', 'serve', 'mcp', 'ask', 'record verify'} <= set(found), found
    return found


@pytest.mark.parametrize('page', [MAN1, MAN5], ids=lambda p: p.name)
def test_the_page_lints_clean(page):
    if not shutil.which('mandoc'):
        pytest.fail('mandoc is missing: scripts/deps installs it')
    # Warnings and worse; style hints (a manual of SEE ALSO this machine
    # lacks) are no error.
    p = subprocess.run(['mandoc', '-T', 'lint', '-W', 'warning', str(page)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr
    if shutil.which('man'):
        # man-db and groff, as most Linux readers see it.
        p = subprocess.run(['man', '--warnings', '-E', 'UTF-8', '-l', str(page)],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, 'MANWIDTH': '80', 'MANPAGER': 'cat'})
        assert p.returncode == 0 and not p.stderr.strip(), p.stderr
        assert 'NAME' in p.stdout and 'SEE ALSO' in p.stdout


def test_every_command_and_option_is_in_petri_1():
    text = render(MAN1)
    parts = subsections(text)
    synopsis = text.split('SYNOPSIS', 1)[1].split('DESCRIPTION', 1)[0]
    missing = []
    for cmd in commands():
        heading = f'petri {cmd}'
        if heading not in parts:
            missing.append(f'{heading}: no subsection')
            continue
        if not re.search(rf'petri {re.escape(cmd)}\b', synopsis):
            missing.append(f'{heading}: not in the SYNOPSIS')
        for opt in sorted(set(OPTION.findall(helps(*cmd.split())))):
            if not re.search(rf'(?<![\w-]){re.escape(opt)}(?![\w-])', parts[heading]):
                missing.append(f'{heading}: {opt}')
    assert not missing, 'petri.1 lacks: ' + ', '.join(missing)


def test_every_long_option_of_the_code_is_in_petri_1():
    """The getopt tables themselves, in case a help text forgets one."""
    text = render(MAN1)
    names = set()
    for src in sorted((ROOT / 'src' / 'cli').glob('*.c')):
        names |= set(re.findall(r'\{\s*"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument',
                                src.read_text()))
    assert len(names) > 20, names           # the pattern still finds the tables
    missing = sorted(n for n in names if not re.search(rf'(?<![\w-])--{n}(?![\w-])', text))
    assert not missing, 'petri.1 lacks: ' + ', '.join(f'--{n}' for n in missing)


def config_keys():
    """(sections, keys) that src/config/config.c reads, [limits]' keys
    from the table of src/exec/limits.c."""
    config = (ROOT / 'src' / 'config' / 'config.c').read_text()
    sections = set(re.findall(r'strcmp\(section, "([a-z_]+)"\)', config))
    sections |= {f'{p}NAME' for p in re.findall(r'strncmp\(section, "([a-z_]+\.)"', config)}
    keys = set(re.findall(r'strcmp\(name, "([a-z_]+)"\)', config))
    limits = (ROOT / 'src' / 'exec' / 'limits.c').read_text()
    table = limits.split('limit_rules[] = {', 1)[1].split('};', 1)[0]
    keys |= set(re.findall(r'\{\s*"([a-z_]+)",', table))
    # The patterns still find what they look for.
    assert {'server', 'sessions', 'limits', 'max_limits', 'sandbox', 'python'} <= sections
    assert len(keys) > 45 and {'listen', 'memory_mb', 'pool_min', 'preload'} <= keys, keys
    return sections, keys


def test_every_config_key_is_in_petri_ini_5():
    text = render(MAN5)
    sections, keys = config_keys()
    missing = [f'[{s}]' for s in sorted(sections)
               if f'[{s.replace("NAME", "name")}]' not in text]
    # Each key where it is described: "key = value".
    missing += sorted(k for k in keys if not re.search(rf'(?<![\w.]){k} = ', text))
    assert not missing, 'petri.ini.5 lacks: ' + ', '.join(missing)
