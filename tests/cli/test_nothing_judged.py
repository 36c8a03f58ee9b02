"""Never silently clean, across every command that judges a measured figure: given an input of which nothing can be
judged, none prints "No findings" or a clean verdict, each says NOTHING JUDGED (or warns that nothing was judged), and
its JSON `judged` counts 0 judged.

The inputs, read by hand: a 16-rank all_reduce run on 2 hosts x 8 H200 (its `# Rank` lines) against a real 3-GPU
workstation's topology, which cannot hold 8 GPUs per host; a trace whose 6 calls are known only from their CPU launches;
an NCCL log of one version line and one config line (no connection); bench rows of 8 ranks on that 3-GPU box, and
peer copies on GPUs whose bus ids a topology text does not give."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import pytest

from linkscope.probes.bench.results import CollectiveSweep, SweepRow, bench_identity, measurements_from_rows
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.model.measurements import Measurements, PeerCopy
from support.bench import FIXTURES, cli_main
from support.paths import ROOT

RUN_2X8 = FIXTURES / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"
THREE_GPUS = FIXTURES / "topo" / "rtx-a6000-3gpu-nv4-pair-phb-2nic.txt"
CPU_LAUNCHES_ONLY = FIXTURES / "traces" / "hta-no-distributedinfo-1-step-6-all_to_all-no-kernels-edited.json.gz"
A100_SENDRECV = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
ONE_VERSION_LINE = ROOT / "tests" / "fixtures" / "nccl_logs" / "version-line-only.txt"
CLEAN = ("No findings", "row(s) judged: ")
"""What a clean verdict reads like in text: none may appear when nothing was judged."""


def _import(as_json: bool) -> int:
    return _cli(["import", str(RUN_2X8), "--expect", str(THREE_GPUS), "--force"], as_json)


def _doctor(as_json: bool) -> int:
    return _cli(["doctor", str(THREE_GPUS), "--measurements", str(RUN_2X8), "--force"], as_json)


def _show(as_json: bool) -> int:
    return _cli(["show", str(THREE_GPUS), "--measurements", str(RUN_2X8), "--force"], as_json)


def _check(as_json: bool) -> int:
    return _cli(["check", str(THREE_GPUS), "--dp", "3", "--measurements", str(RUN_2X8), "--force"], as_json)


def _trace(as_json: bool) -> int:
    return _cli(["trace", str(CPU_LAUNCHES_ONLY), "--source", "sample:dgx-a100"], as_json)


def _nccl_log(as_json: bool) -> int:
    return _cli(["nccl-log", str(ONE_VERSION_LINE)], as_json)


def _cli(argv: list[str], as_json: bool) -> int:
    return cli_main([*argv, "--json"] if as_json else argv)


def _bench_collectives(as_json: bool) -> int:
    from linkscope.commands.bench_collectives import report_collectives

    measured = read_measurements(A100_SENDRECV.read_text(), "a100")
    rows = [SweepRow(r.op, r.size_bytes, r.dtype, r.time_us, r.algbw_gbps, r.busbw_gbps, 0, "world", "world",
                     tuple(range(8)), 8, r.in_place, "nccl") for r in measured.collectives]
    measurements = measurements_from_rows(rows, [], [], identity=bench_identity("linkscope bench collectives nccl",
                                                                                processes=8))
    args = argparse.Namespace(expect=str(THREE_GPUS), json=as_json, output=None, attached=None, force=True,
                              fail_on="warning")
    return report_collectives(args, measurements, CollectiveSweep(tuple(rows)))


def _bench_p2p(as_json: bool) -> int:
    from linkscope.commands.bench_p2p import report_p2p

    peer: list[dict[str, Any]] = [{"src": a, "dst": b, "size_bytes": 1 << 28, "unidir_gbps": 20.0, "bidir_gbps": 30.0,
                                   "latency_us": 12.5, "p2p_enabled": True, "verified": True} for a, b in ((0, 1), (1, 0))]
    result = {"devices": [{"index": i, "name": "GPU", "pci_bus_id": f"00000000:0{i + 1}:00.0", "free_bytes": 1}
                          for i in range(2)], "peer": peer, "host": [], "notes": []}
    measurements = Measurements("linkscope bench p2p", peer_copies=tuple(PeerCopy(**row) for row in peer))
    args = argparse.Namespace(expect=str(THREE_GPUS), json=as_json, output=None, fail_on="warning")
    return report_p2p(args, measurements, result)


JUDGING: dict[str, tuple[Callable[[bool], int], Callable[[dict[str, Any]], int]]] = {
    "import --expect": (_import, lambda payload: payload["judged"]["judged"]),
    "doctor --measurements": (_doctor, lambda payload: payload["judged"]["measurements"]["judged"]),
    "check --measurements": (_check, lambda payload: payload["judged"]["judged"]),
    "show --measurements": (_show, lambda payload: payload["measurements"]["judged"]["judged"]),
    "trace --source": (_trace, lambda payload: payload["judged"]["priced"]),
    "nccl-log": (_nccl_log, lambda payload: payload["judged"]["connections"]),
    "bench collectives": (_bench_collectives, lambda payload: payload["judged"]["judged"]),
    "bench p2p": (_bench_p2p, lambda payload: payload["judged"]["judged"]),
}


@pytest.mark.parametrize("command", sorted(JUDGING))
def test_a_command_that_judges_nothing_never_reads_clean(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    run, judged = JUDGING[command]
    run(False)
    text = " ".join(capsys.readouterr().out.split())
    assert not any(clean in text for clean in CLEAN), f"{command} reads clean: {text[-400:]}"
    assert "NOTHING JUDGED" in text or "not judged" in text
    run(True)
    payload = json.loads(capsys.readouterr().out)
    assert judged(payload) == 0
