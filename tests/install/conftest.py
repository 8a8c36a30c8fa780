"""The fixture of the install tier: `installed` (module-scoped), `make install
DESTDIR=<tmp> PREFIX=/usr`; the DESTDIR path.  Helpers: installhelp.py."""
import pytest

from installhelp import make


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    dest = tmp_path_factory.mktemp('destdir')
    make('install', f'DESTDIR={dest}', 'PREFIX=/usr')
    return dest
