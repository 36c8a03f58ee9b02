"""Without torch, `linkscope bench` says how to get it in one line instead of failing inside a worker."""

from __future__ import annotations

import importlib.util

import pytest

from linkscope.cli import main


def test_bench_without_torch_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    assert main(["bench", "collectives", "--backend", "gloo"]) == 2
    assert "pip install 'linkscope[bench]'" in capsys.readouterr().err
