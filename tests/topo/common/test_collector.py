"""The garbage collector paused around bulk decoding, and left as it was found."""

from __future__ import annotations

import gc

import pytest

from linkscope.topo.common.collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> object:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_paused_inside_and_running_again_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner block leaves the outer pause alone
    assert gc.isenabled()


def test_running_again_after_an_error() -> None:
    gc.enable()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("bad file")
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
