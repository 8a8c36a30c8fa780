"""The fixture of the driver's tests: `driver`, a Driver (driverhelp.py) in
the test's directory, closed after the test if it still runs."""
import pytest

from driverhelp import Driver


@pytest.fixture
def driver(tmp_path):
    instance = Driver(tmp_path)
    yield instance
    if instance.proc.poll() is None:
        instance.close()
