"""`linkscope bench`: measure this machine's links (collectives on NCCL or gloo, GPU peer copies)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from linkscope.render.progress import progress_bar
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_COPIES_PER_SAMPLE
from linkscope.topo.common.numbers import seconds, whole_number
from linkscope.topo.common.units import format_gbps

if TYPE_CHECKING:
    from linkscope.probes.bench.runner import BenchOutcome
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST
from linkscope.topo.common.text import printable

EXIT_OK, EXIT_FINDINGS, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 130


def register(subparsers: Any) -> None:
    """Add `bench collectives` and `bench p2p`."""
    parser = subparsers.add_parser(
        "bench",
        help="measure collectives and GPU peer copies on this machine",
        description="Measure this machine: collectives the way nccl-tests does (NCCL on GPUs, gloo on CPUs) and "
        "GPU peer copies the way nvbandwidth does. Workers run in their own process groups under a deadline and "
        "are always cleaned up. Exit status: 0 ok, 1 a result was wrong or a finding (see bench p2p), 2 bad input or the run "
        "could not complete, 130 interrupted.",
        epilog="example:\n  linkscope bench collectives --backend gloo --nproc 2 --max-bytes 1M --json",
    )
    parser.set_defaults(run=lambda args: _usage(parser))
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH")
    _register_collectives(sub)
    _register_p2p(sub)
    from linkscope.commands.bench_step import register_step

    register_step(sub)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_FAILED


def _register_collectives(sub: Any) -> None:
    from linkscope.probes.bench.spec import add_collective_arguments

    parser = sub.add_parser(
        "collectives",
        help="collective sweep (all_reduce, all_gather, ...) with algbw/busbw like nccl-tests",
        description="Run collectives over a size sweep and report time, algbw and busbw (nccl-tests' factors) and "
        "a correctness count per row. With --layout the op runs in every group of the layout at once.\n\n"
        "For several nodes run the same worker under torchrun:\n"
        "  torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\\n"
        "    -m linkscope.probes.bench.worker collectives [options] -o FILE",
        epilog="example:\n  linkscope bench collectives --backend gloo --nproc 4 --ops all_reduce,all_gather "
        "--max-bytes 4M --layout tp=2,dp=2 --json",
    )
    add_collective_arguments(parser)
    parser.add_argument("--nproc", type=whole_number(0, MAX_GPUS_PER_HOST), default=None,
                        help="local worker processes (default: all GPUs; 2 on CPU)")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl with CUDA, gloo otherwise")
    parser.add_argument("--reuse", action="store_true",
                        help="instead of the sweep: all_reduce on one reused process group against a group created and "
                        "destroyed for every call, per size (what re-creating communicators costs)")
    _common_options(parser)
    parser.set_defaults(run=run_collectives)


def _register_p2p(sub: Any) -> None:
    parser = sub.add_parser(
        "p2p",
        help="GPU peer copies and host<->GPU copies (bandwidth, latency, verified data)",
        description="Copy-engine copies between every ordered GPU pair, pushed by the source GPU (unidirectional, "
        "bidirectional, small-copy latency), timed with CUDA events behind a spin kernel, median of samples, copied "
        "data verified; and "
        "host<->GPU copies from pinned memory on the GPU's own NUMA node and on a remote one. Needs CUDA GPUs. "
        "Findings (exit 1): corrupted data; NVLink pairs without peer access; a pair, or a copy from the GPU's own "
        "NUMA node, below 75% of what its link typically delivers (copies of 32 MiB and more).",
        epilog="example:\n  linkscope bench p2p --pairs 0-1,1-0 --bytes 256M --json",
    )
    parser.add_argument("--pairs", default=None, help="ordered pairs SRC-DST, comma-separated (default: every ordered pair)")
    parser.add_argument("--bytes", default="256M", help="copy size (default 256M)")
    parser.add_argument("--samples", type=whole_number(0, 1_000_000), default=5,
                        help="timed samples per measurement; the median is reported")
    parser.add_argument("--copies", type=whole_number(0, 1_000_000), default=4,
                        help=f"copies per sample, 1 to {MAX_COPIES_PER_SAMPLE} (default 4)")
    parser.add_argument("--no-host", action="store_true", help="skip the host<->GPU copies")
    parser.add_argument("--pageable", action="store_true",
                        help="also copy host<->GPU from pageable memory on the GPU's own NUMA node (what plain tensors "
                        "use; staged by CUDA, shown beside the PCIe figure, never judged)")
    parser.add_argument("--local", action="store_true",
                        help="also copy within each GPU's own memory (GB/s of bytes copied; the memory moves twice that)")
    _common_options(parser)
    parser.set_defaults(run=run_p2p)


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--expect", default=None, metavar="SOURCE",
                        help="snapshot to take the expected figures from (default: probe this machine); every result "
                        "is shown next to it with its ratio and verdict (ok, slow below 75%%, far below 50%%)")
    parser.add_argument("--timeout", type=seconds(), default=900.0, help="deadline for the whole run in seconds (default 900)")
    parser.add_argument("--force", action="store_true", help="run on GPUs that have other processes or little free memory; "
                        "--attach to a snapshot of a different kind of machine")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("-o", "--output", default=None, metavar="FILE", help="write Measurements JSON to FILE")
    parser.add_argument("--attach", default=None, metavar="SOURCE",
                        help="with -o: write SOURCE's snapshot carrying the results instead (opens in the app)")


def _run_guarded(function: Callable[[Any], int]) -> int:
    """Run `function(cancel)` (measure, then report) with SIGINT and SIGTERM turned into `cancel`: a
    signal while measuring ends the run keeping its rows; one after it cannot cut the table or -o short."""
    from linkscope.probes.bench.preflight import GpuBusy
    from linkscope.probes.bench.runner import BenchError, Interruption, signals_cancel

    interruption = Interruption()
    try:
        with signals_cancel(interruption):
            status = function(interruption)
        if interruption.is_set() and status not in (EXIT_INTERRUPTED, EXIT_FAILED):  # not already said
            print(f"linkscope: bench {interruption.reason} after the run ended; every row is shown"
                  " (and written with -o)", file=sys.stderr)
            return EXIT_INTERRUPTED
        return status
    except (BenchError, GpuBusy) as exc:
        return _failure_status(exc, shown=False)


def _failure_status(exc: Exception, shown: bool) -> int:
    """Say why a run ended (one line) and return its exit status: 130 interrupted, 2 failed."""
    from linkscope.probes.bench.runner import BenchInterrupted

    kept = "; what it measured before is shown above" if shown else ""
    if isinstance(exc, BenchInterrupted):
        print(f"linkscope: bench {printable(str(exc))}; workers ended{kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"linkscope: error: bench: {printable(str(exc))}{kept}", file=sys.stderr)
    return EXIT_FAILED


def run_collectives(args: argparse.Namespace) -> int:
    """Parse, check the GPUs, spawn the workers, render rows (and write -o)."""
    from linkscope.probes.bench.preflight import cuda_device_count, gpu_preflight
    from linkscope.probes.bench.spec import check_sweep_flags, layout_world_size, spec_from_args

    check_sweep_flags(args)  # a wrong flag is said before torch is imported (seconds)
    if args.nproc is not None and args.nproc < 1:
        raise InputError(f"--nproc: must be at least 1, got {args.nproc}")
    _check_output_options(args)
    gpus = cuda_device_count()
    backend = args.backend or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise InputError("bench collectives --backend nccl: no CUDA GPU is present (use --backend gloo)")
    nproc = args.nproc
    if nproc is None:
        nproc = layout_world_size(args.layout) if args.layout else (gpus if backend == "nccl" else 2)
    if nproc < 1:
        raise InputError(f"--nproc: must be at least 1, got {nproc}")
    if backend == "nccl" and nproc > gpus:
        raise InputError(f"--nproc {nproc}: only {gpus} CUDA GPU(s) visible (one process per GPU with nccl)")
    spec = spec_from_args(args, backend, nproc)
    if args.reuse:
        return _run_guarded(lambda cancel: _reuse(args, spec, cancel))

    def body(cancel: Any) -> int:
        from linkscope.probes.bench.api import run_collectives as measure

        preflight = gpu_preflight(nproc, args.force) if backend == "nccl" else []

        def measured() -> BenchOutcome:
            with progress_bar(spec.steps, f"{backend} x{nproc}", not args.json) as update:
                return measure(spec, args.timeout, lambda done, _total: update(done), cancel=cancel,
                               notes=tuple(preflight))

        return _measure_then_report(measured, lambda measurements, result: _report_collectives(args, measurements, result))

    return _run_guarded(body)


def _measure_then_report(measure: Callable[[], BenchOutcome], report: Callable[[Any, dict[str, Any]], int]) -> int:
    """Run `measure` and report its outcome; a run cut short (Ctrl-C, the deadline, a failed worker)
    still reports what it measured before it ended, then fails as it would have."""
    outcome = measure()
    status = report(outcome.measurements, outcome.result)
    return status if outcome.stopped is None else _failure_status(outcome.stopped, shown=True)


def _expected_on(args: argparse.Namespace, notes: list[str]) -> Any:
    """The snapshot expectations are priced on: --expect, else this machine probed; None (with a note) when it
    cannot be opened."""
    try:
        from linkscope.source import open_source

        snapshot = open_source(args.expect)
    except InputError as exc:
        notes.append(f"no expected figures: {exc}")
        return None
    return snapshot if snapshot.hosts and snapshot.host.gpus else None


def _report_collectives(args: argparse.Namespace, measurements: Any, result: dict[str, Any]) -> int:
    from dataclasses import replace

    from linkscope.probes.bench.results import stragglers
    from linkscope.topo.cost.expect import row_expectations

    notes = list(result["notes"])
    slow_groups = stragglers(result["rows"])
    snapshot = None
    if measurements.collectives and measurements.collectives[0].backend == "nccl":
        snapshot = _expected_on(args, notes)
    else:
        notes.append("gloo runs on CPU processes: no GPU link to expect a figure from")
    if result["rows"] and all(row.get("nranks") == 1 for row in result["rows"]):
        notes.append("one rank: nothing crosses a link, so no figure is judged; the times are the calls' own cost "
                     "(an in-place all_reduce does nothing; out-of-place ops copy locally), and busbw follows "
                     "nccl-tests' factors (broadcast and reduce keep algbw)")
    expected: list[Any] = [None] * len(result["rows"])
    if snapshot is not None:
        if args.expect is None and measurements.identity is not None:
            names = " / ".join(sorted({gpu.name for gpu in snapshot.host.gpus if gpu.name})) or None
            measurements = replace(measurements, identity=replace(measurements.identity, gpu_model=names))
        expected = list(row_expectations(measurements, snapshot).collectives)
    rows = [{**row, "expected_busbw_gbps": each.expected_gbps if each else None, "ratio": each.ratio if each else None,
             "verdict": each.verdict if each else None, "link": each.link if each else None}
            for row, each in zip(result["rows"], expected, strict=True)]
    if args.json:
        print(json_text({"rows": rows, "group_setup_ms": dict(result["setup_ms"]),
                         "stragglers": slow_groups, "notes": notes}))
    else:
        _print_collectives(result["rows"], result["setup_ms"], slow_groups, notes, expected,
                           snapshot.source if snapshot is not None else None)
    _write_output(args, measurements)
    wrong = sum(row["wrong"] or 0 for row in result["rows"])
    if wrong:
        print(f"linkscope: {wrong} wrong element(s) in the correctness pass", file=sys.stderr)
    # a straggler on GPUs is a finding (a slower link); gloo's CPU processes straggle by contention alone
    on_gpus = bool(measurements.collectives) and measurements.collectives[0].backend == "nccl"
    if slow_groups and on_gpus:
        print(f"linkscope: {len(slow_groups)} straggler group(s): a group well below its fastest peer", file=sys.stderr)
    return EXIT_FINDINGS if wrong or (slow_groups and on_gpus) else EXIT_OK


def _check_output_options(args: argparse.Namespace) -> None:
    """Torch, -o and --attach checked before the run, so no result is lost; the --attach snapshot kept on `args`."""
    from linkscope.files import open_output

    args.attached = open_output(args)
    if importlib.util.find_spec("torch") is None:
        raise InputError("bench needs torch: pip install 'linkscope[bench]' (a CPU build is enough for --backend gloo)")


def _write_output(args: argparse.Namespace, measurements: Any) -> None:
    if args.output:
        from linkscope.files import check_measured_on, write_measurements

        if args.attached is not None:
            check_measured_on(args.attached, measurements, args.force, "--attach")

        write_measurements(args.output, measurements, args.attached)


def _print_collectives(rows: list[dict[str, Any]], setup_ms: list[tuple[str, float]], slow_groups: list[dict[str, Any]],
                       notes: list[str], expected: list[Any], against: str | None) -> None:
    from rich import box
    from rich.table import Table

    from linkscope.render.console import table_console
    from linkscope.render.expected import add_expected_columns, expected_cells, print_verdict_summary
    from linkscope.topo.common.sizes import format_size_bytes

    table = Table(title="collectives: time averaged over ranks, GB/s, busbw by nccl-tests' factors", box=box.SIMPLE_HEAD)
    for column in ("op", "size", "dtype", "group", "time us", "algbw", "busbw", "wrong"):
        table.add_column(column, justify="right" if column not in ("op", "dtype", "group") else "left",
                         min_width=14 if column == "op" else None, overflow="fold")
    if against is not None:
        add_expected_columns(table)
    for row, each in zip(rows, expected, strict=True):
        group = row["group"]
        wrong = "-" if row["wrong"] is None else str(row["wrong"])
        table.add_row(row["op"], format_size_bytes(row["bytes"]), row["dtype"], group, f"{row['time_us']:.1f}",
                      f"{row['algbw_gbps']:.3f}", f"{row['busbw_gbps']:.3f}", wrong,
                      *(expected_cells(each) if against is not None else ()),
                      style="bold red" if row["wrong"] else None)
    console = table_console()
    console.print(table)
    if against is not None:
        print_verdict_summary(console, [each for each in expected if each is not None], against)
    groups = {row["group"]: row["ranks"] for row in rows if row["group"] != "world"}
    if groups:
        console.print("groups: " + ", ".join(f"{label} {ranks}" for label, ranks in groups.items()), highlight=False)
    if setup_ms:
        console.print("process-group set-up: " + ", ".join(f"{label} {ms:.1f} ms" for label, ms in setup_ms),
                      highlight=False)
    for slow in slow_groups:
        console.print(f"straggler: {slow['op']} {format_size_bytes(slow['bytes'])} in {slow['dim']}: {slow['group']} "
                      f"{format_gbps(slow['busbw_gbps'], '.3f')} busbw is {slow['ratio']:.0%} of {slow['fastest_group']} "
                      f"{slow['fastest_busbw_gbps']:.3f}", highlight=False, markup=False)
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False)


def run_p2p(args: argparse.Namespace) -> int:
    """Peer copies: needs CUDA; one worker drives every GPU, then matrices with expected speeds."""
    from linkscope.probes.bench.p2p_report import parse_pairs
    from linkscope.probes.bench.preflight import cuda_device_count, gpu_preflight
    from linkscope.topo.common.sizes import parse_size_bytes

    # the flags first: a wrong one is said before torch is imported (seconds)
    size_bytes = parse_size_bytes(args.bytes, "--bytes")
    if size_bytes < 4:
        raise InputError(f"--bytes: at least 4 bytes, got {size_bytes}")
    if args.samples < 1 or not 1 <= args.copies <= MAX_COPIES_PER_SAMPLE:
        raise InputError(f"--samples: at least 1; --copies: 1 to {MAX_COPIES_PER_SAMPLE} (the spin kernel must outlast "
                         "the host enqueueing a sample)")
    _check_output_options(args)
    count = cuda_device_count()
    if count == 0:
        raise InputError("bench p2p: no CUDA GPU is present on this machine (peer copies need CUDA GPUs)")
    pairs = parse_pairs(args.pairs, count)
    if not pairs and args.no_host and not args.pageable and not args.local:
        raise InputError("bench p2p: one GPU and --no-host leave nothing to measure (add --local or --pageable)")

    def body(cancel: Any) -> int:
        from linkscope.probes.bench.api import run_peer_copies

        preflight = gpu_preflight(count, args.force)
        steps = len(pairs) + count * (int(not args.no_host) + int(args.pageable) + int(args.local))

        def measured() -> BenchOutcome:
            with progress_bar(steps, f"p2p x{count}", not args.json) as update:
                return run_peer_copies(pairs, size_bytes, args.samples, args.copies, not args.no_host, args.timeout,
                                       lambda done, _total: update(done), cancel=cancel, gpu_count=count,
                                       notes=tuple(preflight), pageable=args.pageable, local=args.local)

        return _measure_then_report(measured, lambda measurements, result: _report_p2p(args, measurements, result))

    return _run_guarded(body)


def _report_p2p(args: argparse.Namespace, measurements: Any, result: dict[str, Any]) -> int:
    from dataclasses import replace

    from linkscope.probes.bench.p2p_report import copy_findings, matrix, pair_cells, positions_by_bus_id, vs_local

    copies = measurements.peer_copies
    notes = list(result["notes"])
    snapshot = None
    try:
        from linkscope.source import open_source

        snapshot = open_source(args.expect)
    except InputError as exc:
        notes.append(f"no expected link speeds: {exc}")
    host = snapshot.host if snapshot is not None and snapshot.hosts else None
    positions = positions_by_bus_id(host, [d["pci_bus_id"] for d in result["devices"]]) if host else []
    host_rows = [_with_verdict({**row, "expected_gbps": _pcie_typical(host, positions, row["gpu"]), "vs_local": ratio})
                 for row, ratio in zip(result["host"], vs_local(result["host"]), strict=True)]
    pageable_rows = [_unjudged({**row, "expected_gbps": _pcie_typical(host, positions, row["gpu"])})
                     for row in result.get("pageable", [])]
    local_rows = list(result.get("local_copies", []))
    uni = pair_cells(copies, host, positions)
    bi = pair_cells(copies, host, positions, bidir=True)
    measurements = replace(measurements, notes=tuple(notes))
    count = len(result["devices"])
    findings = copy_findings(uni, copies, host_rows, result.get("refused", []))
    if args.json:
        rows = [{**row, "link": u.link_token, "expected_unidir_gbps": u.expected.typical_gbps if u.expected else None,
                 "ratio": u.ratio, "verdict": u.verdict, "bidir_ratio": b.ratio}
                for row, u, b in zip(result["peer"], uni, bi, strict=True)]
        payload = {
            "devices": result["devices"],
            "peer": rows,
            "host": host_rows,
            "matrices": {
                "unidir_gbps": matrix(count, {(c.src, c.dst): c.unidir_gbps for c in copies}),
                "bidir_gbps": matrix(count, {(c.src, c.dst): c.bidir_gbps for c in copies}),
                "latency_us": matrix(count, {(c.src, c.dst): c.latency_us for c in copies}),
            },
            "findings": [finding.to_json() for finding in findings],
            "notes": notes,
        }
        if pageable_rows:
            payload["pageable"] = pageable_rows
        if local_rows:
            payload["local_copies"] = local_rows
        print(json_text(payload))
    else:
        _print_p2p({**result, "host": host_rows, "pageable": pageable_rows, "local_copies": local_rows}, copies, uni, bi,
                   findings, notes)
    _write_output(args, measurements)
    if not copies and not result["host"] and not pageable_rows and not local_rows:
        print("linkscope: error: bench p2p: nothing could be measured (see the findings)", file=sys.stderr)
        return EXIT_FAILED
    if findings:
        listed = ", ".join(f"{finding.code} {finding.path}" for finding in findings[:6])
        more = f" and {len(findings) - 6} more" if len(findings) > 6 else ""
        print(f"linkscope: bench p2p found {len(findings)} problem(s): {listed}{more}", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_OK


def _with_verdict(row: dict[str, Any]) -> dict[str, Any]:
    """A host-copy row with `ratio` (GB/s over expected) and its `verdict` (local copies of judged size only)."""
    from linkscope.topo.cost.expect import copy_judged, speed_ratio, verdict

    ratio = speed_ratio(row["gbps"], row["expected_gbps"])
    judged = row["local"] and copy_judged(row.get("size_bytes"))
    return {**row, "ratio": ratio, "verdict": verdict(ratio) if judged else None}


def _unjudged(row: dict[str, Any]) -> dict[str, Any]:
    """A pageable host-copy row with its ratio to the PCIe figure and no verdict (CUDA stages such copies)."""
    from linkscope.topo.cost.expect import speed_ratio

    return {**row, "ratio": speed_ratio(row["gbps"], row["expected_gbps"]), "verdict": None}


def _pcie_typical(host: Any, positions: list[int | None], gpu: int) -> float | None:
    """Typical host<->GPU bandwidth of CUDA device `gpu`'s PCIe link, from the snapshot."""
    from linkscope.topo.machine.links import gpu_pcie_speed

    position = positions[gpu] if gpu < len(positions) else None
    if host is None or position is None:
        return None
    return gpu_pcie_speed(host, position).typical_gbps


def _verdict_text(verdict: str | None) -> Any:
    from rich.text import Text

    from linkscope.render.expected import VERDICT_STYLES

    return Text(verdict or "-", style=VERDICT_STYLES.get(verdict or "", ""))


def _print_p2p(result: dict[str, Any], copies: Any, uni: Any, bi: Any, findings: Any, notes: list[str]) -> None:
    from rich.table import Table
    from rich.text import Text

    from linkscope.probes.bench.p2p_report import matrix
    from linkscope.render.console import table_console
    from linkscope.topo.common.sizes import format_size_bytes

    console = table_console()
    count = len(result["devices"])
    matrices = (("unidirectional GB/s", "unidir_gbps", "{:.1f}"), ("bidirectional GB/s", "bidir_gbps", "{:.1f}"),
                ("small-copy latency us", "latency_us", "{:.2f}"))
    for title, attribute, fmt in matrices if copies else ():  # one GPU, or --no-host alone: no pair to show
        table = Table(title=title)
        table.add_column("from\\to")
        for dst in range(count):
            table.add_column(str(dst), justify="right")
        values = matrix(count, {(c.src, c.dst): getattr(c, attribute) for c in copies})
        for src, row in enumerate(values):
            table.add_row(str(src), *("-" if v is None else fmt.format(v) for v in row))
        console.print(table)
    pairs = Table(title="peer copies (GB/s, us) against the expected link speed")
    for column in ("pair", "link", "uni", "expect", "ratio", "verdict", "bi", "ratio", "lat", "p2p", "data"):
        pairs.add_column(column, justify="left" if column in ("pair", "link", "data", "verdict") else "right", no_wrap=True)
    for copy, u, b in zip(copies, uni, bi, strict=True):
        pairs.add_row(f"{copy.src}->{copy.dst}", Text(u.link_token or "?"), f"{copy.unidir_gbps:.1f}",
                      f"{u.expected.typical_gbps:.1f}" if u.expected else "-", f"{u.ratio:.2f}" if u.ratio else "-",
                      _verdict_text(u.verdict),
                      f"{copy.bidir_gbps:.1f}", f"{b.ratio:.2f}" if b.ratio else "-", f"{copy.latency_us:.2f}",
                      {True: "yes", False: "no", None: "?"}[copy.p2p_enabled],
                      Text("ok" if copy.verified else "CORRUPTED", style="" if copy.verified else "bold red"))
    if copies:
        console.print(pairs)
    if result["host"]:
        host = Table(title="host <-> GPU from pinned memory per NUMA node")
        for column in ("GPU", "dir", "NUMA node", "local", "GB/s", "vs local", "expect", "ratio", "verdict", "data"):
            host.add_column(column, justify="right" if column in ("GB/s", "vs local", "expect", "ratio") else "left")
        for row in result["host"]:
            expected = "-" if row["expected_gbps"] is None else f"{row['expected_gbps']:.1f}"
            penalty = "-" if row["vs_local"] is None else f"{row['vs_local']:.2f}"
            host.add_row(str(row["gpu"]), row["direction"], str(row["numa_node"]), "yes" if row["local"] else "no",
                         f"{row['gbps']:.1f}", penalty, expected, "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                         _verdict_text(row["verdict"]),
                         Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(host)
    if result.get("pageable"):
        pageable = Table(title="host <-> GPU, pageable memory (not judged)")
        for column in ("GPU", "dir", "NUMA node", "GB/s", "PCIe expect", "ratio", "data"):
            pageable.add_column(column, justify="right" if column in ("GB/s", "PCIe expect", "ratio") else "left")
        for row in result["pageable"]:
            pageable.add_row(str(row["gpu"]), row["direction"], "-" if row["numa_node"] is None else str(row["numa_node"]),
                             f"{row['gbps']:.1f}", "-" if row["expected_gbps"] is None else f"{row['expected_gbps']:.1f}",
                             "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                             Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(pageable)
    if result.get("local_copies"):
        local = Table(title="copy within one GPU")
        for column in ("GPU", "size", "GB/s copied", "data"):
            local.add_column(column, justify="right" if column in ("size", "GB/s copied") else "left")
        for row in result["local_copies"]:
            local.add_row(str(row["gpu"]), format_size_bytes(row["size_bytes"]), f"{row['gbps']:.1f}",
                          Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(local)
    for device in result["devices"]:
        console.print(Text(f"GPU {device['index']}: {device['name']} {device['pci_bus_id'] or ''}"))
    for finding in findings:
        console.print(Text(f"{finding.severity}: {finding.message}", style="bold red" if finding.severity == "error" else "bold"))
    for note in notes:
        console.print(Text(f"note: {note}"))


def _reuse(args: argparse.Namespace, spec: Any, cancel: Any) -> int:
    """Run the communicator-reuse comparison and print it (table or JSON)."""
    from linkscope.probes.bench.api import run_reuse_experiment
    from linkscope.probes.bench.reuse import summarise_reuse

    if args.layout or args.output:
        raise InputError("--reuse compares group set-up on the whole world: drop --layout and -o")
    with progress_bar(len(spec.sizes_bytes), f"reuse {spec.backend} x{spec.world_size}", not args.json) as update:
        outcome = run_reuse_experiment(spec, args.timeout, lambda done, _total: update(done), cancel)
    rows = summarise_reuse(outcome.result["rows"])
    if args.json:
        print(json_text({"reuse": rows, "backend": spec.backend, "nproc": spec.world_size}))
        return EXIT_OK
    from rich import box
    from rich.table import Table

    from linkscope.render.console import table_console
    from linkscope.topo.common.sizes import format_size_bytes

    table = Table(title=f"all_reduce per call (us, slowest rank): reused group vs a new group per call, "
                  f"{spec.backend} x{spec.world_size}", box=box.SIMPLE_HEAD)
    for column in ("size", "reused", "new group per call", "group set-up", "slowdown"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(format_size_bytes(row["size_bytes"]), f"{row['reuse_us']:.1f}", f"{row['recreate_us']:.1f}",
                      f"{row['group_setup_us']:.1f}", f"{row['slowdown']:.1f}x" if row["slowdown"] else "-")
    table_console().print(table)
    return EXIT_OK
