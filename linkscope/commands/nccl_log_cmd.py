"""`linkscope nccl-log FILE`: which transport NCCL really chose for every connection, and what that costs.

Exit status: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 unreadable
input. The JSON form (`--json`) is a public contract: `ranks` (each `rank`, `host`, `cuda_dev`,
`bus_id`, null where unknown), `edges` (each `src`, `dst`, `channel`, `transport` in
P2P|SHM|NET|NVLS|COLLNET, `detail`, `same_host`) and `findings` (each `code`, `severity`,
`message`, `ranks`), with `version`, `communicators`, `env`, `warnings`, `errors` alongside.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from linkscope.topo.common.jsonio import json_text
from linkscope.topo.formats.nccl_log_model import NcclLog
from linkscope.topo.model.findings import SEVERITIES

EXIT_OK = 0
EXIT_FINDINGS = 1
JSON_INDENT_LIMIT = 5000
"""Past this many connections the JSON is printed on one line (indenting costs seconds at that size)."""


def register(subparsers: Any) -> None:
    """Add the `nccl-log` subcommand."""
    parser = subparsers.add_parser(
        "nccl-log",
        help="read an NCCL_DEBUG=INFO log: ranks, hosts, rings and the transport of every connection",
        description=(
            "Read NCCL's own log (run the job with NCCL_DEBUG=INFO) from one or many ranks and hosts, with or "
            "without launcher prefixes, and say which transport NCCL chose for every connection: P2P (NVLink or "
            "PCIe), SHM (through host memory), NET (InfiniBand, RoCE, plug-ins or plain sockets), NVLS, CollNet. "
            "Findings flag GPUs of one host talking over SHM or the network, hosts talking over TCP sockets, RDMA "
            "without GPUDirect, NCCL_* variables that force a path, and NCCL WARN lines. Lines that look like "
            "NCCL's but cannot be read (two processes' output fused, a line cut short) are skipped and counted. "
            "Exit status: 0 no finding at or above --fail-on, 1 there is one, 2 unreadable input."
        ),
        epilog="examples:\n  NCCL_DEBUG=INFO torchrun ... 2>&1 | tee train.log; linkscope nccl-log train.log\n"
        "  linkscope nccl-log train.log --snapshot sample:dgx-h100 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the log, or - for stdin")
    parser.add_argument("--snapshot", default=None, metavar="SOURCE",
                        help="place the connections on this machine's links (snapshot JSON, topo text, sample:NAME)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--fail-on", choices=SEVERITIES, default="warning",
                        help="exit 1 when a finding is at or above this severity (default warning)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the log, check it, print it; the exit status says whether a finding reached --fail-on."""
    from linkscope.topo.nccl.checks import nccl_findings, report_json

    log = read_log_argument(args.file)
    findings = nccl_findings(log)
    placement = None
    if args.snapshot is not None:
        from linkscope.topo.formats.source import load_source
        from linkscope.topo.nccl.placement import judged_on_snapshot, place_edges

        snapshot = load_source(args.snapshot)
        placement = place_edges(log, snapshot)
        findings = judged_on_snapshot(findings, placement, snapshot) + placement.findings
    if args.json:
        report = report_json(log, findings)
        if placement is not None:
            report["placement"] = placement.to_json()
        large = len(log.edges) > JSON_INDENT_LIMIT
        print(json_text(report, indent=None if large else 2))
    else:
        from linkscope.render.nccl_log_view import print_report

        print_report(log, findings, placement)
    worst = max((SEVERITIES.index(finding.severity) for finding in findings), default=-1)
    return EXIT_FINDINGS if worst >= SEVERITIES.index(args.fail_on) else EXIT_OK


def read_log_argument(path: str) -> NcclLog:
    """Read FILE (or `-`, with a size limit) as an NCCL log; every failure is one InputError line."""
    from linkscope.topo.common.errors import InputError
    from linkscope.topo.common.limits import MAX_STDIN_BYTES
    from linkscope.topo.formats.nccl_log import read_nccl_log_stream

    if path == "-":
        return read_nccl_log_stream(sys.stdin.buffer, "<stdin>", MAX_STDIN_BYTES)
    try:
        with open(path, "rb") as handle:
            return read_nccl_log_stream(handle, path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None

