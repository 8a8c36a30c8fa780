"""Every relative link in README.md and docs/*.md leads somewhere inside the
repository: the file exists, and an #anchor names a heading of the page it
points to (GitHub's slug of the heading).  A clone has nothing outside the
repository, so a link that leaves it is dead even when this machine has the
file."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
INLINE_CODE = re.compile(r'`[^`]*`')
# [text](target) and ![alt](target); the target ends at a space (a title
# may follow) or at the closing parenthesis.
LINK = re.compile(r'!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
EXTERNAL = re.compile(r'^[a-z][a-z0-9+.-]*:', re.I)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading: the text without markup, lower case,
    punctuation dropped (letters, digits, '-' and '_' stay), spaces to '-'."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)   # links: their text
    text = re.sub(r'<[^>]+>', '', text)                           # inline HTML
    text = text.replace('`', '').lower()
    return ''.join(c for c in text
                   if c in '-_ ' or unicodedata.category(c)[0] in 'LN').replace(' ', '-')


def anchors(path):
    seen, found = {}, set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        found.add(base if k == 0 else f'{base}-{k}')
    return found


def links(path):
    for n, line in prose_lines(path):
        for m in LINK.finditer(INLINE_CODE.sub('', line)):
            yield n, m.group(1)


def dead_links(path):
    dead = []
    for n, target in links(path):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition('#')
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f'{path.relative_to(ROOT)}:{n}: {target}'
        if not dest.is_relative_to(ROOT):
            dead.append(f'{where} (outside the repository)')
        elif not dest.exists():
            dead.append(f'{where} (no such file)')
        elif anchor and dest.suffix == '.md' and anchor not in anchors(dest):
            dead.append(f'{where} (no heading with that anchor in {dest.relative_to(ROOT)})')
    return dead


@pytest.mark.parametrize('page', PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    dead = dead_links(page)
    assert not dead, 'dead links:\n' + '\n'.join(dead)


def test_the_checker_sees_what_it_checks():
    """The slugs are GitHub's, and the pages are not empty of links."""
    assert slug('Known limits') == 'known-limits'
    assert slug('#### POST /v1/sessions/{id}/execute'.lstrip('# ')) == 'post-v1sessionsidexecute'
    assert slug('Streaming: Server-Sent Events') == 'streaming-server-sent-events'
    assert slug('The `files` field, [here](x.md)') == 'the-files-field-here'
    assert sum(1 for p in PAGES for _ in links(p)) > 20
