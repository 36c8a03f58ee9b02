"""Each cap of topo/common/limits.py: the largest input is accepted (in linear time), one more is one line naming the cap."""

from __future__ import annotations

import time

import pytest

from linkscope.topo.common.errors import InputError
from support.caps import CAP_CASES, CapCase
from support.fuzz import run_cli


@pytest.mark.parametrize("case", CAP_CASES, ids=[case.name for case in CAP_CASES])
def test_the_cap_itself_is_accepted(case: CapCase, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    case.call(case.cap)
    assert time.perf_counter() - started < 20.0


@pytest.mark.parametrize("case", CAP_CASES, ids=[case.name for case in CAP_CASES])
def test_one_past_the_cap_is_refused_at_once(case: CapCase, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    with pytest.raises(InputError) as refused:
        case.call(case.cap + 1)
    message = str(refused.value) + capsys.readouterr().err
    assert f"{case.cap:,}" in message or str(case.cap) in message, message
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "sample:dgx-h100", "--tp", "8", "--rank-map", "{hostlist}"],
        ["check", "sample:dgx-h100", "--tp", "8", "--rank-map", "{slurm}"],
    ],
    ids=["hostlist", "slurm-tasks"],
)
def test_absurd_rank_maps_are_refused_before_anything_is_built(argv: list[str], tmp_path: pytest.TempPathFactory) -> None:
    """`r[0-99999]n[0-99999]` names 10^10 hosts and `2(x999999999)` a billion nodes: refused in a blink."""
    hostlist = tmp_path / "hostlist"  # type: ignore[operator]
    hostlist.write_text("r[0-99999]n[0-99999]\n")
    slurm = tmp_path / "slurm.env"  # type: ignore[operator]
    slurm.write_text("SLURM_JOB_NODELIST=n[1-2]\nSLURM_TASKS_PER_NODE=2(x999999999)\n")
    outcome = run_cli([part.format(hostlist=hostlist, slurm=slurm) for part in argv], seconds=5)
    assert outcome.status == 2 and "cap" in outcome.err and outcome.seconds < 2, outcome
