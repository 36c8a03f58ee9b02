"""`linkscope nccl-log FILE`: which transport NCCL really chose for every connection, and what that costs.

Exit status: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 unreadable
input. The JSON form (`--json`) is a public contract: `ranks` (each `rank`, `host`, `cuda_dev`,
`bus_id`, null where unknown), `edges` (each `src`, `dst`, `channel`, `transport` in
P2P|SHM|NET|NVLS|COLLNET, `detail`, `same_host`) and `findings` (each `code`, `severity`,
`message`, `ranks`), with `version`, `communicators`, `env`, `warnings`, `errors` alongside.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_fail_on_flag, add_json_flag, findings_status
from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.formats.nccl_log import read_nccl_log_file

JSON_INDENT_LIMIT = 5000
"""Past this many connections the JSON is printed on one line without spaces (indenting costs seconds at that
size)."""


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
    add_json_flag(parser, "print one JSON object instead of tables")
    add_fail_on_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the log, check it, print it; the exit status says whether a finding reached --fail-on."""
    with collector_paused():  # a large log's connections become as many objects again in findings and JSON
        return _checked_and_printed(args)


def _checked_and_printed(args: argparse.Namespace) -> int:
    from linkscope.topo.nccl.checks import implied_hosts, judged_counts, nccl_findings, not_placed_finding, report_json

    log = read_nccl_log_file(args.file)
    hosts = implied_hosts(log)
    findings = nccl_findings(log, hosts)
    placement = None
    if args.snapshot is not None:
        from linkscope.topo.formats.source import load_source
        from linkscope.topo.nccl.placement import judged_on_snapshot, place_edges

        snapshot = load_source(args.snapshot)
        placement = place_edges(log, snapshot)
        findings = judged_on_snapshot(findings, placement, snapshot) + placement.findings
        unmatched = not_placed_finding(log, len(placement.edges), args.snapshot)
        findings += (unmatched,) if unmatched is not None else ()
    if args.json:
        report = report_json(log, findings, hosts)
        report["judged"] = judged_counts(log, len(placement.edges) if placement is not None else None, hosts)
        if placement is not None:
            report["placement"] = placement.to_json()
        large = len(log.edges) > JSON_INDENT_LIMIT
        say(json_text(report, compact=large), block=True)
    else:
        from linkscope.render.nccl_log_view import print_report

        print_report(log, findings, placement)
    return findings_status((finding.severity for finding in findings), args.fail_on)
