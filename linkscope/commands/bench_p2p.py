"""`linkscope bench p2p`: peer copies between GPUs and host<->GPU copies, next to what each link should deliver."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from linkscope.commands.bench_run import add_run_options, check_output_options, measure_then_report, run_guarded, write_output
from linkscope.options import ExitStatus, findings_status, verdicts_status
from linkscope.render.bench_tables import print_p2p
from linkscope.render.progress import progress_bar
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_COPIES_PER_SAMPLE
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.common.text import say

if TYPE_CHECKING:
    from linkscope.probes.bench.runner import BenchOutcome


def register_p2p(sub: Any) -> None:
    parser = sub.add_parser(
        "p2p",
        help="GPU peer copies and host<->GPU copies (bandwidth, latency, verified data)",
        description="Copy-engine copies between every ordered GPU pair, pushed by the source GPU (unidirectional, "
        "bidirectional, small-copy latency), timed with CUDA events behind a spin kernel, median of samples, copied "
        "data verified; and "
        "host<->GPU copies from pinned memory on the GPU's own NUMA node and on a remote one. Needs CUDA GPUs. "
        "Findings (exit 1): corrupted data; NVLink pairs without peer access; a pair, or a copy from the GPU's own "
        "NUMA node, below 75% of what its link typically delivers (copies of 32 MiB and more).",
        epilog="example:\n  linkscope bench p2p --pairs 0-1,1-0 --bytes 256M --json\n\n"
        "exit status: 0 nothing at or above --fail-on, 1 a problem (listed on stderr: corrupted data an error, a slow "
        "copy or missing peer access a warning) or a verdict (far below: error; slow, faster than model: warning) at "
        "or above --fail-on, 2 bad input or nothing could be measured, 130 interrupted",
    )
    parser.add_argument("--pairs", default=None, metavar="PAIRS",
                        help="ordered pairs SRC-DST, comma-separated (default: every ordered pair)")
    parser.add_argument("--bytes", default="256M", metavar="SIZE", help="copy size (default 256M)")
    parser.add_argument("--samples", type=whole_number(0, 1_000_000), default=5, metavar="N",
                        help="timed samples per measurement; the median is reported")
    parser.add_argument("--copies", type=whole_number(0, 1_000_000), default=4, metavar="N",
                        help=f"copies per sample, 1 to {MAX_COPIES_PER_SAMPLE} (default 4)")
    parser.add_argument("--no-host", action="store_true", help="skip the host<->GPU copies")
    parser.add_argument("--pageable", action="store_true",
                        help="also copy host<->GPU from pageable memory on the GPU's own NUMA node (what plain tensors "
                        "use; staged by CUDA, shown beside the PCIe figure, never judged)")
    parser.add_argument("--local", action="store_true",
                        help="also copy within each GPU's own memory (GB/s of bytes copied; the memory moves twice that)")
    add_run_options(parser)
    parser.set_defaults(run=run_p2p)


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
    check_output_options(args)
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

        def measured() -> BenchOutcome[Any]:
            with progress_bar(steps, f"p2p x{count}", not args.json) as update:
                return run_peer_copies(pairs, size_bytes, args.samples, args.copies, not args.no_host, args.timeout,
                                       lambda done, _total: update(done), cancel=cancel, gpu_count=count,
                                       notes=tuple(preflight), pageable=args.pageable, local=args.local)

        return measure_then_report(measured, lambda measurements, result: report_p2p(args, measurements, result))

    return run_guarded(body)


def report_p2p(args: argparse.Namespace, measurements: Any, result: dict[str, Any]) -> int:
    from dataclasses import replace

    from linkscope.probes.bench.p2p_report import (
        copy_findings,
        host_expected,
        matched_line,
        matrix,
        pair_cells,
        pair_expected,
        positions_by_bus_id,
        vs_local,
    )
    from linkscope.topo.cost.expect import judged_counts, placement_lines

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
    count = len(result["devices"])
    placed = matched_line(positions, count, snapshot.source) if host is not None and snapshot is not None else ""
    host_rows = [_with_verdict({**row, "expected_gbps": _pcie_typical(host, positions, row["gpu"]), "vs_local": ratio},
                               placed)
                 for row, ratio in zip(result["host"], vs_local(result["host"]), strict=True)]
    pageable_rows = [_unjudged({**row, "expected_gbps": _pcie_typical(host, positions, row["gpu"])})
                     for row in result.get("pageable", [])]
    local_rows = list(result.get("local_copies", []))
    uni = pair_cells(copies, host, positions)
    bi = pair_cells(copies, host, positions, bidir=True)
    measurements = replace(measurements, notes=tuple(notes))
    findings = copy_findings(uni, copies, host_rows, result.get("refused", []))
    asked = [*(pair_expected(u, copy, placed) for u, copy in zip(uni, copies, strict=True)),
             *(host_expected(row, placed) for row in host_rows)]
    if args.json:
        rows = [{**row, "link": u.link_token, "expected_unidir_gbps": u.expected.typical_gbps if u.expected else None,
                 "ratio": u.ratio, "verdict": judged.verdict, "bidir_ratio": b.ratio}
                for row, u, b, judged in zip(result["peer"], uni, bi, asked, strict=False)]
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
            "judged": judged_counts(asked),
            "placement": placement_lines(asked),
        }
        if pageable_rows:
            payload["pageable"] = pageable_rows
        if local_rows:
            payload["local_copies"] = local_rows
        say(json_text(payload), block=True)
    else:
        print_p2p({**result, "host": host_rows, "pageable": pageable_rows, "local_copies": local_rows}, copies, uni, bi,
                   findings, notes, asked, snapshot.source if host is not None and snapshot is not None else None)
    write_output(args, measurements)
    if not copies and not result["host"] and not pageable_rows and not local_rows:
        say("linkscope: error: bench p2p: nothing could be measured (see the findings)", stderr=True)
        return ExitStatus.FAILED
    if findings:
        listed = ", ".join(f"{finding.code} {finding.path}" for finding in findings[:6])
        more = f" and {len(findings) - 6} more" if len(findings) > 6 else ""
        say(f"linkscope: bench p2p found {len(findings)} problem(s): {listed}{more}", stderr=True)
    return max(findings_status((finding.severity for finding in findings), args.fail_on),
               verdicts_status((row.verdict for row in asked), args.fail_on))


def _with_verdict(row: dict[str, Any], placed: str) -> dict[str, Any]:
    """A host-copy row with `ratio` (GB/s over expected) and its `verdict` (local copies of judged size only)."""
    from linkscope.probes.bench.p2p_report import host_expected

    expected = host_expected(row, placed)
    return {**row, "ratio": expected.ratio, "verdict": expected.verdict}


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

