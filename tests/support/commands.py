"""Every command of `linkscope help`, with an invocation the robustness suites (fuzz, hostile strings, special
files, output files, signals) run it by: its main input written fresh under a folder (optionally carrying
a hostile payload in every free-form string), its `-o` when it has one, and the fakes it needs here (a fake
NVML for `record`, a rank-0 launch for `collect`).

`tests/cli/test_suite_coverage.py` fails when a command of `linkscope.cli.COMMAND_MODULES` has no entry,
so a new command joins every suite or the suite says why not.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.hostile import poisoned, sample_json
from support.paths import REAL
from support.trace import TraceBuilder

NCCL_TESTS = REAL / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"
NCCL_LOG = REAL / "nccl_debug" / "2node-16gpu-single-process-p2p-direct-pointer-net-ib-gdrdma-old-channel-form-excerpt.txt"
NCCL_GRAPH = REAL / "nccl_graph_xml" / "rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml"
TOPO = REAL / "topo" / "a100-8gpu-nv12-compact-6char-columns-no-nics-prompt.txt"

EXAMPLES = int(os.environ.get("LINKSCOPE_FUZZ_EXAMPLES", "0")) or None
"""More sampled examples on demand (`LINKSCOPE_FUZZ_EXAMPLES=500`); CI runs each suite's fixed-seed default."""


def snapshot_file(folder: Path, payload: str = "", name: str = "box.json", host: str | None = None) -> Path:
    """A sample snapshot (dgx-h100), `payload` in every free-form string; `host` renames its host."""
    data = sample_json("dgx-h100")
    if host is not None:
        data["hosts"][0]["hostname"] = host
    path = folder / name
    path.write_text(json.dumps(poisoned(data, payload) if payload else data), encoding="utf-8")
    return path


def trace_file(folder: Path, payload: str = "") -> Path:
    """Rank 0 of 2: two steps, an all_reduce in each; `payload` in the host name."""
    builder = TraceBuilder(0, 2, host=f"node{payload}-a")
    for step in range(2):
        builder.step(step, step * 2000, 1000)
        builder.collective("allreduce", 1 << 20, step * 2000 + 10, step * 2000 + 20, 100)
    return builder.write(folder / "rank0.json")


def nccl_log_file(folder: Path, payload: str = "") -> Path:
    """A real NCCL log, `payload` in its host names."""
    path = folder / "nccl.log"
    path.write_text(NCCL_LOG.read_text().replace("machine-", f"machine{payload}-"), encoding="utf-8")
    return path


def nccl_graph_file(folder: Path, payload: str = "") -> Path:
    """A real NCCL graph dump; `payload` in a comment after its source line (XML cannot carry every hostile
    character in an attribute: the reader's refusal of what it cannot read is tested with the hostile XML)."""
    path = folder / "graph.xml"
    first, rest = NCCL_GRAPH.read_text().split("\n", 1)
    safe = payload.replace("--", "- -").encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    path.write_text(f"{first}\n<!-- {safe} -->\n{rest}", encoding="utf-8")
    return path


def nccl_tests_file(folder: Path, payload: str = "") -> Path:
    """Real nccl-tests output of an H200 machine, `payload` in its device lines."""
    path = folder / "nccl-tests.txt"
    path.write_text(NCCL_TESTS.read_text().replace("NVIDIA H200", f"NVIDIA{payload} H200"), encoding="utf-8")
    return path


@dataclass(frozen=True)
class CommandCase:
    """How the suites run one command."""

    name: str
    argv: Callable[[Path, str], list[str]]
    """The command line, its inputs written under the folder with the payload ("" for a plain run)."""
    writes: bool = False
    """Takes `-o FILE` (the output-file suite checks the one writer's promises on it)."""
    reads_file: bool = True
    """Reads a named input file (the special-file suite hands it a FIFO, a directory and a device)."""
    prepare: Callable[[pytest.MonkeyPatch, str], None] | None = None
    """Fakes the command needs here (given the payload)."""


def _fake_nvml(monkeypatch: pytest.MonkeyPatch, payload: str) -> None:
    from linkscope.topo.model.codec import snapshot_from_json
    from support.fakes import FakeNvml

    snapshot = snapshot_from_json(json.dumps(poisoned(sample_json("consumer-2gpu"), payload) if payload
                                             else sample_json("consumer-2gpu")), "fake")
    fake = FakeNvml.from_snapshot(snapshot)
    monkeypatch.setattr("linkscope.probes.nvml.load_pynvml", lambda: fake)


def _rank_zero_collect(monkeypatch: pytest.MonkeyPatch, payload: str) -> None:
    """`collect` as rank 0 whose gather brought two hosts and lost a third (named with the payload)."""
    import linkscope.probes.cluster_collect as collect
    from linkscope.topo.machine.cluster import combine_hosts
    from linkscope.topo.model.codec import snapshot_from_json
    from linkscope.topo.model.host import Gap

    def gathered(launch: Any, *args: Any) -> Any:
        parts = []
        for host in ("node-a", f"node{payload}-b"):
            data = sample_json("dgx-h100")
            data["hosts"][0]["hostname"] = host
            parts.append(snapshot_from_json(json.dumps(poisoned(data, payload) if payload else data), host))
        lost = Gap("collect (rank 2)", "sent nothing by the probe deadline", f"node{payload}-c")
        combined = combine_hosts(parts, "collect", [lost])
        return collect.CollectResult(combined.snapshot, 2, 3, combined.duplicates, (("gather", 0.1),))

    monkeypatch.setattr(collect, "launch_from_env", lambda: collect.Launch("slurm", 0, 3, 0, "127.0.0.1", 1))
    monkeypatch.setattr(collect, "collect_cluster", gathered)


COMMANDS: dict[str, CommandCase] = {case.name: case for case in (
    CommandCase("open", lambda folder, payload: ["open", str(snapshot_file(folder, payload))]),
    CommandCase("show", lambda folder, payload: ["show", str(snapshot_file(folder, payload))]),
    CommandCase("samples", lambda folder, payload: ["samples"], reads_file=False),
    CommandCase("probe", lambda folder, payload: ["probe"], writes=True, reads_file=False, prepare=_fake_nvml),
    CommandCase("check", lambda folder, payload: ["check", str(snapshot_file(folder, payload)), "--tp", "8", "--nodes", "1"]),
    CommandCase("estimate", lambda folder, payload: ["estimate", "all_reduce", "--bytes", "1G", "--ranks", "8",
                                                     str(snapshot_file(folder, payload))]),
    CommandCase("explain", lambda folder, payload: ["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time",
                                                    "150ms", str(snapshot_file(folder, payload))]),
    CommandCase("plan", lambda folder, payload: ["plan", str(snapshot_file(folder, payload)), "--gpus", "8"]),
    CommandCase("bench", lambda folder, payload: ["bench", "p2p", "--attach", str(snapshot_file(folder, payload))],
                writes=True),
    CommandCase("import", lambda folder, payload: ["import", str(nccl_tests_file(folder, payload)), "--expect",
                                                   str(snapshot_file(folder, payload)), "--force"], writes=True),
    CommandCase("trace", lambda folder, payload: ["trace", str(trace_file(folder, payload))]),
    CommandCase("doctor", lambda folder, payload: ["doctor", str(snapshot_file(folder, payload)), "--measurements",
                                                   str(nccl_tests_file(folder, payload)), "--force"]),
    CommandCase("diff", lambda folder, payload: ["diff", str(snapshot_file(folder, payload)), "sample:dgx-h100-degraded"]),
    CommandCase("record", lambda folder, payload: ["record", "--seconds", "0.2", "--interval", "0.1"], writes=True,
                reads_file=False, prepare=_fake_nvml),
    CommandCase("nccl-log", lambda folder, payload: ["nccl-log", str(nccl_log_file(folder, payload))]),
    CommandCase("collect", lambda folder, payload: ["collect"], writes=True, reads_file=False, prepare=_rank_zero_collect),
    CommandCase("merge", lambda folder, payload: ["merge", str(snapshot_file(folder, payload, "a.json", f"a{payload}")),
                                                  str(snapshot_file(folder, payload, "b.json", f"b{payload}"))],
                writes=True),
    CommandCase("nccl-graph", lambda folder, payload: ["nccl-graph", str(nccl_graph_file(folder, payload))]),
    CommandCase("export", lambda folder, payload: ["export", "nccl-topo", str(snapshot_file(folder, payload))],
                writes=True),
    CommandCase("help", lambda folder, payload: ["help", "trace"], reads_file=False),
)}
"""Every command, by name."""

REQUIRED_OUTPUT = frozenset({"record", "collect", "merge", "export"})
"""Commands whose `-o` is required: the suites always give one."""


def argv_for(case: CommandCase, folder: Path, payload: str = "", output: Path | None = None) -> list[str]:
    """The command line of `case` with inputs under `folder` and `-o` (a default one where it is required)."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = case.argv(folder, payload)
    if output is None and case.name in REQUIRED_OUTPUT:
        output = folder / "out.json"
    return [*argv, "-o", str(output)] if output is not None else argv


def input_position(argv: list[str]) -> int | None:
    """Index of the first input file in `argv` (an existing path), or None."""
    return next((index for index, word in enumerate(argv) if index and os.path.isfile(word)
                 and not word.endswith("out.json")), None)


def sampled(items: list[Any], count: int, seed: str) -> list[Any]:
    """`count` of `items` (all with LINKSCOPE_FUZZ_EXAMPLES set), chosen by a fixed seed: CI runs the same ones."""
    if EXAMPLES is not None or count >= len(items):
        return items
    return random.Random(seed).sample(items, count)
