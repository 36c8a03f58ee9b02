"""`linkscope doctor [SOURCE]`: is this box healthy? Degraded links, PCIe, NUMA placement, settings, environment.

Exit status as `check`: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 bad input.
`--json` prints `findings`, each with `code`, `severity`, `gpus` (NVML indices; `host:index` on a
cluster snapshot), `message`, `evidence` and `fix`, plus `source`, `hosts` and `looked_at`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from linkscope.options import add_fail_on_flag, add_force_flag, add_json_flag, add_source_argument, findings_status
from linkscope.source import open_source
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST
from linkscope.topo.common.numbers import parse_int
from linkscope.topo.common.text import say
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.rules import run_health
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot

if TYPE_CHECKING:  # NCCL's topology readers load only for a run that reads NCCL's view
    from linkscope.topo.formats.nccl_topo_model import NcclTopology

NCCL_PREFIXES = ("NCCL_", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
"""Environment variables doctor reads (and lists as looked at)."""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `doctor` subcommand."""
    parser = subparsers.add_parser(
        "doctor",
        help="health check of a machine: degraded NVLink/PCIe, NUMA placement, P2P/IOMMU/MIG, NCCL environment",
        description=(
            "Look for what makes collectives slower than the hardware allows: a GPU with fewer NVLinks up than\n"
            "its peers (NV16 among NV18), NVLink ports down, error counters growing during a `linkscope record`\n"
            "recording, an NVSwitch fabric not ready, a PCIe link narrower than it can be (or a slower generation\n"
            "while moving data: an idle GPU at Gen1 is normal), a GPU whose nearest NIC is on another NUMA node,\n"
            "this process bound away from its GPU, P2P off where it could be on, a translating IOMMU, MIG, a\n"
            "missing nvidia_peermem, NCCL_* / CUDA_VISIBLE_DEVICES settings that change NCCL's paths, and with\n"
            "--baseline whatever got worse since a known-good snapshot. Each finding has evidence and a fix."
        ),
        epilog=(
            "examples:\n"
            "  linkscope doctor sample:dgx-h100-degraded\n"
            "  linkscope doctor box.json --baseline box-last-week.json --json\n"
            "  linkscope doctor recording.json --env-file job.env\n"
            "  linkscope doctor            (this machine, this process's environment and CPU binding)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_argument(parser)
    parser.add_argument("--measurements", default=None, metavar="FILE",
                        help="measurements (linkscope bench/import -o, or raw nccl-tests/nvbandwidth output) to judge; "
                        "default: those the snapshot carries")
    parser.add_argument("--baseline", default=None, metavar="SOURCE",
                        help="a known-good snapshot of this machine (or of one of its kind): report what got worse")
    add_force_flag(parser, "judge --measurements or --baseline of a different kind of machine anyway")
    parser.add_argument("--nccl-topo", default=None, metavar="FILE",
                        help="NCCL's own view of the machine to set beside the snapshot's: its topology dump "
                        "(NCCL_TOPO_DUMP_FILE), an NCCL_TOPO_FILE, or an NCCL_DEBUG=INFO log with its topology lines; "
                        "default: the SOURCE itself when it is NCCL topology XML")
    parser.add_argument("--env-file", default=None, metavar="FILE",
                        help="KEY=VALUE lines to judge instead of this process's environment (e.g. the job's env)")
    add_fail_on_flag(parser)
    add_json_flag(parser, "print one JSON object (findings, looked_at...)")
    parser.set_defaults(run=run)


NOT_THIS_MACHINE = "not judged: SOURCE is not this machine, and this shell's variables are not its (--env-file FILE)"
"""What `looked_at` says of the environment when doctor reads a SOURCE without --env-file."""


def _environment(env_file: str | None, source: str | None) -> tuple[dict[str, str], str]:
    """The environment of the machine under test: --env-file, this process's only when probing this machine
    (a SOURCE from elsewhere is never judged by the local shell's NCCL_* variables)."""
    if env_file is None:
        if source is not None:
            return {}, NOT_THIS_MACHINE
        return dict(os.environ), "this process's environment"
    from linkscope.topo.formats.source import read_text_file
    from linkscope.topo.health.environment import parse_env_file

    return parse_env_file(read_text_file(env_file), env_file), env_file


def cuda_order(host: Host, env: Mapping[str, str]) -> tuple[int, ...] | None:
    """NVML indices in the order CUDA numbers the GPUs under `env`; None when that is every GPU in NVML order."""
    from linkscope.probes.identity import identity_table

    rows = [row for row in identity_table(host, env).rows if row.cuda_index is not None]
    order = tuple(row.nvml_index for row in sorted(rows, key=lambda row: row.cuda_index or 0))
    return None if order == tuple(gpu.index for gpu in host.gpus) else order


def _local_rank(env: Mapping[str, str], env_name: str) -> int | None:
    value = env.get("LOCAL_RANK")
    if value is None:
        return None
    return parse_int(value.strip(), f"LOCAL_RANK in {env_name}:", 0, MAX_GPUS_PER_HOST - 1)


def _numa_count(host: Host) -> int:
    """NUMA nodes of a host: those probed, else those its GPUs' affinity names (a topology text lists no nodes)."""
    return len(host.numa_nodes) or len({gpu.numa_node for gpu in host.gpus if gpu.numa_node is not None})


def _check_baseline_kind(snapshot: Snapshot, baseline: Snapshot, force: bool) -> None:
    """A baseline is this machine, or one of its kind: refuse one whose GPU models differ, unless `force`."""
    from linkscope.topo.model.provenance import gpu_names, same_gpu_model

    here, there = gpu_names(snapshot), gpu_names(baseline)
    if here and there and not any(same_gpu_model(a, b) for a in here for b in there):
        message = (f"--baseline: {baseline.source or 'the baseline'} has {', '.join(there)}, the machine has "
                   f"{', '.join(here)}: not a baseline of this kind of machine")
        if not force:
            raise InputError(message + " (--force to compare anyway)")
        say(f"linkscope: note: {message} (compared anyway: --force)", stderr=True)


def _nccl_view(args: argparse.Namespace, snapshot: Snapshot) -> NcclTopology | None:
    """`--nccl-topo FILE`, else the SOURCE itself when it is NCCL's topology XML."""
    file = getattr(args, "nccl_topo", None) or (args.source if snapshot.meta_value("format") is not None else None)
    if not file:
        return None
    from linkscope.topo.formats.nccl_topo_snapshot import FORMAT_NAME
    from linkscope.topo.formats.nccl_view import load_nccl_topology

    if getattr(args, "nccl_topo", None) or snapshot.meta_value("format") == FORMAT_NAME:
        return load_nccl_topology(file)
    return None


def build_context(args: argparse.Namespace, snapshot: Snapshot) -> tuple[HealthContext, list[str]]:
    """The rules' context from the flags, and lines that say what was looked at."""
    from linkscope.topo.formats.source import load_source

    measurements = snapshot.measurements
    if args.measurements:
        from linkscope.files import check_measured_on, load_measurements  # the readers of other tools' results

        measurements = load_measurements(args.measurements)
        check_measured_on(snapshot, measurements, args.force, "--measurements")
    baseline = load_source(args.baseline) if args.baseline else None
    if baseline is not None:
        _check_baseline_kind(snapshot, baseline, args.force)
    env, env_name = _environment(args.env_file, args.source)
    nccl_topology = _nccl_view(args, snapshot)
    looked_at = []
    for host in snapshot.hosts:
        models = sorted({gpu.name for gpu in host.gpus if gpu.name})
        named = f" ({', '.join(models)})" if models else ""
        looked_at.append(f"Host {host.hostname or '(unnamed)'}: {len(host.gpus)} GPU(s){named}, "
                         f"{len(host.nics)} NIC(s), {_numa_count(host)} NUMA node(s)   [{snapshot.source or 'snapshot'}]")
    looked_at += [f"Note: {value}" for key, value in snapshot.meta if key == "note"]
    if snapshot.gaps:
        looked_at.append(f"Not read: {len(snapshot.gaps)} item(s) (`linkscope probe` or `show` lists them); "
                         "rules that need them stay silent")
    if snapshot.recording is not None:
        recording = snapshot.recording
        looked_at.append(f"Recording: {len(recording.samples)} readings over {recording.duration_s:g} s of "
                         f"{recording.hostname}")
    if measurements is not None:
        looked_at.append(f"Measurements: {measurements.source}")
    if baseline is not None:
        looked_at.append(f"Baseline: {args.baseline}")
    if nccl_topology is not None:
        from linkscope.topo.health.nccl_view import matched_gpus

        looked_at.append(f"NCCL's view: {nccl_topology.name} ({len(nccl_topology.gpus)} GPU(s), "
                         f"{len(nccl_topology.nets)} NIC(s)), set beside the snapshot's: "
                         f"{matched_gpus(nccl_topology, snapshot)} of its GPUs found there by PCI bus id")
    steering = sorted(name for name in env if name.startswith(NCCL_PREFIXES))
    if env_name == NOT_THIS_MACHINE:
        looked_at.append(f"Environment: {NOT_THIS_MACHINE}")
    else:
        looked_at.append(f"Environment ({env_name}): "
                         f"{', '.join(steering) if steering else 'no NCCL_* or CUDA_* variables'}")
    binding = None
    if args.source is None and hasattr(os, "sched_getaffinity"):
        binding = frozenset(os.sched_getaffinity(0))
        looked_at.append(f"This process may run on {len(binding)} CPU(s)")
    context = HealthContext(
        snapshot=snapshot,
        measurements=measurements,
        baseline=baseline,
        env=env,
        cuda_order=cuda_order(snapshot.host, env) if snapshot.hosts else None,
        cpu_binding=binding,
        local_rank=_local_rank(env, env_name),
        nccl_topology=nccl_topology,
    )
    return context, looked_at


def run(args: argparse.Namespace) -> int:
    """Run every health rule and print the findings; exit 1 when one reaches --fail-on."""
    snapshot = open_source(args.source)
    context, looked_at = build_context(args, snapshot)
    findings = run_health(context)
    qualified = len(snapshot.hosts) > 1
    if args.json:
        say(json_text(doctor_json(snapshot, findings, looked_at, qualified, doctor_judged(context))), block=True)
    else:
        from linkscope.render.console import table_console
        from linkscope.render.doctor_view import doctor_view

        table_console().print(doctor_view(findings, looked_at, qualified))
    return findings_status((finding.severity for finding in findings), args.fail_on)


def doctor_judged(context: HealthContext) -> dict[str, Any]:
    """The `judged` object of `doctor --json`: what could be judged (GPUs, environment, measurement rows)."""
    from linkscope.topo.cost.expect import judged_counts, row_expectations

    rows: dict[str, int] | None = None
    if context.measurements is not None and context.snapshot.hosts:
        expected = row_expectations(context.measurements, context.snapshot)
        rows = judged_counts([*expected.collectives, *expected.peer_copies, *expected.host_copies])
    return {"gpus": sum(len(host.gpus) for host in context.snapshot.hosts), "environment": bool(context.env),
            "measurements": rows}


def doctor_json(snapshot: Snapshot, findings: tuple[HealthFinding, ...], looked_at: list[str],
                qualified: bool, judged: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `doctor --json` object."""
    return {
        "source": snapshot.source,
        "hosts": [host.hostname for host in snapshot.hosts],
        "looked_at": looked_at,
        "findings": [finding.to_json(qualified) for finding in findings],
        "judged": judged,
    }
