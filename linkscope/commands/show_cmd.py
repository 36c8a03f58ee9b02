"""`linkscope show [SOURCE] [--json]`: the link matrix, legend, affinities and NICs of a machine.

The JSON form is a public contract (README, "linkscope show --json"): one object with the first
host's `hostname`, `gpus`, `matrix`, `nics`, `gpu_nic`, `cpu_affinity`, `numa_affinity`, plus
`source`, `gaps` and `hosts` (every host of the snapshot in that same per-host form), and `measurements`
(`source`, `identity`, `expected`: every row next to what the model expects, `judged` and `placement` as `import
--expect` gives them) when the snapshot carries some.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_force_flag, add_json_flag, add_source_argument
from linkscope.render import gpu_nic_tokens, matrix_tokens
from linkscope.source import open_source
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.model.host import Gpu, Host
from linkscope.topo.model.snapshot import Snapshot


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `show` subcommand."""
    parser = subparsers.add_parser(
        "show",
        help="print the link matrix, legend, CPU/NUMA affinity and NICs of a machine",
        description=(
            "Print how the GPUs and NICs of a machine are wired: the link matrix with the\n"
            "tokens of `nvidia-smi topo -m` (NV<n>, PIX, PXB, PHB, NODE, SYS) coloured by link\n"
            "class, the bandwidth each class should deliver, every GPU's CPU and NUMA affinity\n"
            "and PCIe/NVLink state, the NICs with their nearest GPUs, and what could not be read.\n"
            "--json prints one object: gpus, matrix, nics, gpu_nic, cpu_affinity, numa_affinity,\n"
            "hostname, source, gaps, hosts (every host, for multi-host snapshots), and for a cluster\n"
            "cluster_findings (hosts unlike the others: fewer NVLinks, narrower PCIe, another driver,\n"
            "a NIC missing or slower, a node that did not report).\n"
            "With measurements (carried by the snapshot, or --measurements FILE) every row is shown\n"
            "next to what the cost model expects on this machine: expected GB/s, ratio, verdict\n"
            "(`measurements` in --json)."
        ),
        epilog=(
            "examples:\n"
            "  linkscope show sample:dgx-h100\n"
            "  linkscope show sample:dgx1-v100 --json\n"
            "  nvidia-smi topo -m | linkscope show -\n"
            "  linkscope show            (this machine)"
        ),
    )
    add_source_argument(parser)
    add_json_flag(parser, "print one JSON object (see the README for its fields)")
    parser.add_argument("--measurements", default=None, metavar="FILE",
                        help="measurements (linkscope bench/import -o, or raw tool output) to show against this machine")
    add_force_flag(parser, "use --measurements from a different kind of machine anyway")
    parser.set_defaults(run=run)


def gpu_json(gpu: Gpu) -> dict[str, Any]:
    """The per-GPU object of the JSON output."""
    return {
        "index": gpu.index,
        "name": gpu.name,
        "uuid": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id,
        "numa_node": gpu.numa_node,
        "cpu_affinity": gpu.cpu_affinity,
        "numa_affinity": gpu.numa_affinity,
        "memory_total_bytes": gpu.memory_total_bytes,
        "compute_capability": gpu.compute_capability,
        "nvlink_active": gpu.nvlink_active_count,
        "nvlink_total": len(gpu.nvlinks),
        "pcie_gen_current": gpu.pcie_gen_current,
        "pcie_gen_max": gpu.pcie_gen_max,
        "pcie_width_current": gpu.pcie_width_current,
        "pcie_width_max": gpu.pcie_width_max,
    }


def host_json(host: Host) -> dict[str, Any]:
    """One host in the `show --json` form."""
    return {
        "hostname": host.hostname,
        "gpus": [gpu_json(gpu) for gpu in host.gpus],
        "matrix": matrix_tokens(host),
        "nics": [nic.name for nic in host.nics],
        "gpu_nic": gpu_nic_tokens(host),
        "cpu_affinity": [gpu.cpu_affinity for gpu in host.gpus],
        "numa_affinity": [gpu.numa_affinity for gpu in host.gpus],
    }


def show_json(snapshot: Snapshot) -> dict[str, Any]:
    """The `show --json` object: the first host at the top level, every host under `hosts`."""
    hosts = [host_json(host) for host in snapshot.hosts]
    shown: dict[str, Any] = {
        **hosts[0],
        "source": snapshot.source,
        "gaps": [{"subject": gap.subject, "reason": gap.reason, **({"host": gap.host} if gap.host else {})}
                 for gap in snapshot.gaps],
        "hosts": hosts,
    }
    if len(snapshot.hosts) > 1 or any(gap.host for gap in snapshot.gaps):
        from linkscope.topo.health.cluster import cluster_findings  # a cluster's rules load for a cluster only

        shown["cluster_findings"] = [finding.to_json() for finding in cluster_findings(snapshot)]
    return shown


def measurements_json(snapshot: Snapshot) -> dict[str, Any] | None:
    """The `measurements` object of `show --json`: source, identity and every row next to its expectation."""
    from linkscope.options import asked_rows
    from linkscope.topo.cost.expect import judged_counts, placement_lines, row_expectations
    from linkscope.topo.model.codec import to_jsonable

    measurements = snapshot.measurements
    if measurements is None:
        return None
    asked = asked_rows(row_expectations(measurements, snapshot))
    rows = [row for row in asked if row is not None]
    return {"source": measurements.source, "identity": to_jsonable(measurements.identity),
            "expected": [row.to_json() for row in rows], "judged": judged_counts(asked),
            "placement": placement_lines(rows)}


def run(args: argparse.Namespace) -> int:
    """Load SOURCE and print it as rich text or, with --json, as one JSON object."""
    from linkscope.files import check_measured_on, load_measurements, with_measurements

    snapshot = open_source(args.source)
    if not snapshot.hosts:
        raise InputError(f"{args.source or 'this machine'}: the snapshot describes no host")
    if args.measurements is not None:
        snapshot = with_measurements(snapshot, load_measurements(args.measurements))
    if snapshot.measurements is not None:
        check_measured_on(snapshot, snapshot.measurements, args.force or args.measurements is None, "--measurements")
    if args.json:
        payload = show_json(snapshot)
        if snapshot.measurements is not None:
            payload["measurements"] = measurements_json(snapshot)
        say(json_text(payload), block=True)
        return 0
    from linkscope.render.console import console as safe_console
    from linkscope.render.view import snapshot_view

    console = safe_console()
    console.print(snapshot_view(snapshot))
    if snapshot.measurements is not None:
        _print_measurements(console, snapshot)
    return 0


def _print_measurements(console: Any, snapshot: Snapshot) -> None:
    """The snapshot's measurements that are large enough to judge, next to their expectations."""
    from rich.text import Text

    from linkscope.options import asked_rows
    from linkscope.render.expected import expected_table, print_verdict_summary
    from linkscope.topo.cost.expect import row_expectations
    from linkscope.topo.model.provenance import describe

    assert snapshot.measurements is not None
    asked = asked_rows(row_expectations(snapshot.measurements, snapshot))
    rows = [row for row in asked if row is not None]
    console.print(Text(f"\nMeasurements: {snapshot.measurements.source}, measured on {describe(snapshot.measurements.identity)}"))
    judged = [row for row in rows if row.verdict is not None]
    if judged:
        console.print(expected_table(judged, "measured against expected (rows large enough to judge)"))
    print_verdict_summary(console, asked, snapshot.source or "this machine")
