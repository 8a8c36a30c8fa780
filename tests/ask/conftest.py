"""Fixtures of the `petri ask` tests: `fake_model` is a scripted
OpenAI-compatible Chat Completions server (askhelp.FakeModel)."""
import pytest

from askhelp import FakeModel


@pytest.fixture
def fake_model():
    m = FakeModel()
    yield m
    m.close()
