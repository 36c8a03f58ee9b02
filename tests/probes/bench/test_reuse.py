"""`linkscope bench collectives --reuse`: what a process group created per call costs, for real on gloo."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from support.bench import cli_main

pytest.importorskip("torch")


def test_a_group_per_call_costs_its_set_up() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(["bench", "collectives", "--backend", "gloo", "--nproc", "2", "--reuse", "--min-bytes", "1K",
                           "--max-bytes", "64K", "--factor", "64", "--iters", "6", "--warmup", "1", "--json"])
    assert status == 0
    report = json.loads(out.getvalue())
    assert [row["size_bytes"] for row in report["reuse"]] == [1024, 65536]
    for row in report["reuse"]:
        assert row["op"] == "all_reduce" and row["reuse_us"] > 0
        # a gloo group is a store round trip and new connections: far more than one small all_reduce
        assert row["recreate_us"] > row["reuse_us"]
        assert row["group_setup_us"] == pytest.approx(row["recreate_us"] - row["reuse_us"], abs=0.02)


def test_reuse_refuses_what_it_does_not_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "collectives", "--backend", "gloo", "--reuse", "--layout", "tp=2"]) == 2
    assert "--reuse" in capsys.readouterr().err
