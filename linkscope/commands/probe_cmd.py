"""`linkscope probe [--json] [-o FILE]`: read this machine (NVML, sysfs) into a snapshot, read-only.

Prints the GPU identity table first (NVML index vs CUDA index under the current
`CUDA_DEVICE_ORDER` / `CUDA_VISIBLE_DEVICES`, bus id, UUID, NUMA node, CPUs, nearest NIC), then
the same views as `linkscope show`, the NUMA nodes and the gaps. `-o` writes the snapshot JSON
that `show`, `check` and the app open on any machine.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from linkscope.options import add_json_flag, add_output_flag
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.numbers import seconds
from linkscope.topo.common.text import say

if TYPE_CHECKING:
    from rich.console import RenderableType

    from linkscope.probes.identity import IdentityTable
    from linkscope.topo.model.snapshot import Snapshot


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `probe` subcommand."""
    parser = subparsers.add_parser(
        "probe",
        help="read this machine's GPUs, links, NUMA nodes and NICs (NVML + sysfs, read-only)",
        description=(
            "Read this machine through NVML and sysfs without root and without changing anything: the GPU "
            "identity table (NVML index, CUDA index under CUDA_DEVICE_ORDER / CUDA_VISIBLE_DEVICES, bus id, "
            "UUID, NUMA node, CPUs, nearest NIC), the link matrix as `nvidia-smi topo -m` spells it, NVLink "
            "and PCIe state, NUMA nodes, NICs, and what could not be read (gaps). Works without GPUs: then "
            "it reports NUMA nodes and NICs and says why the GPU part is missing."
        ),
        epilog=(
            "examples:\n"
            "  linkscope probe\n"
            "  linkscope probe --json\n"
            "  linkscope probe -o box.json && linkscope show box.json"
        ),
    )
    add_json_flag(parser, "print one JSON object: `identity` (the identity table) and `snapshot` (what -o writes)")
    add_output_flag(parser, "write the snapshot JSON to FILE")
    parser.add_argument("--budget", type=seconds(), default=None, metavar="SECONDS",
                        help="give up on NVML after this many seconds (default 10); without the persistence daemon NVML "
                             "can need seconds per GPU, and a probe cut short says it is partial")
    parser.add_argument("--with-torch", action="store_true",
                        help="import torch to ask it for the NCCL version (slow: seconds)")
    parser.set_defaults(run=run)


def identity_json(table: IdentityTable) -> dict[str, Any]:
    """The identity table as plain JSON."""
    return {
        "device_order": table.device_order,
        "visible_devices": table.visible_devices,
        "notes": list(table.notes),
        "rows": [
            {
                "nvml_index": row.nvml_index,
                "cuda_index": row.cuda_index,
                "pci_bus_id": row.pci_bus_id,
                "uuid": row.uuid,
                "name": row.name,
                "numa_node": row.numa_node,
                "cpu_affinity": row.cpu_affinity,
                "nearest_nics": list(row.nearest_nics),
                "nearest_nic_link": row.nearest_nic_token,
                "mig_devices": [
                    {"uuid": mig.uuid, "gpu_instance_id": mig.gpu_instance_id,
                     "compute_instance_id": mig.compute_instance_id, "memory_total_bytes": mig.memory_total_bytes}
                    for mig in row.mig_devices
                ],
            }
            for row in table.rows
        ],
    }


def _identity_view(table: IdentityTable) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if not table.rows:
        return Text("No GPUs: no identity table.")
    view = Table(title="GPU identity", title_justify="left", box=None, padding=(0, 1, 0, 0), header_style="bold")
    for name in ("NVML", "CUDA", "bus id", "UUID", "NUMA", "CPUs", "nearest NIC", "name"):
        view.add_column(name, overflow="fold", no_wrap=name in ("NVML", "CUDA", "NUMA"))
    for row in table.rows:
        nics = ", ".join(row.nearest_nics) + (f" ({row.nearest_nic_token})" if row.nearest_nic_token else "")
        view.add_row(
            Text(str(row.nvml_index)),
            Text("-" if row.cuda_index is None else str(row.cuda_index)),
            Text(row.pci_bus_id or "-"),
            Text(row.uuid or "-"),
            Text("-" if row.numa_node is None else str(row.numa_node)),
            Text(row.cpu_affinity or "-"),
            Text(nics or "-"),
            Text(row.name or "-"),
        )
        for mig in row.mig_devices:
            view.add_row(Text(""), Text(""), Text(f"MIG GI {mig.gpu_instance_id} CI {mig.compute_instance_id}"),
                         Text(mig.uuid or "-"), Text(""), Text(""), Text(""), Text(""))
    visible = "unset" if table.visible_devices is None else repr(table.visible_devices)
    lines = [Text(f"CUDA_DEVICE_ORDER={table.device_order}  CUDA_VISIBLE_DEVICES={visible}", style="dim")]
    lines += [Text(note, style="yellow") for note in table.notes]
    return Group(view, *lines)


def _numa_view(snapshot: Snapshot) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    from linkscope.topo.common.sizes import format_size_bytes

    host = snapshot.host
    if not host.numa_nodes:
        return Text("No NUMA nodes recorded.")
    view = Table(title="NUMA nodes", title_justify="left", box=None, padding=(0, 1, 0, 0), header_style="bold")
    for name in ("node", "CPUs", "memory", "distances"):
        view.add_column(name, overflow="fold")
    for node in host.numa_nodes:
        memory = format_size_bytes(node.memory_bytes) if node.memory_bytes is not None else "-"
        view.add_row(Text(str(node.id)), Text(node.cpus or "-"), Text(memory), Text(" ".join(map(str, node.distances)) or "-"))
    return view


def _facts_line(snapshot: Snapshot) -> RenderableType:
    from rich.text import Text

    host = snapshot.host
    caps, versions = host.capabilities, host.versions

    def word(value: object | None) -> str:
        return "unknown" if value is None else ("yes" if value is True else "no" if value is False else str(value))

    return Text(
        f"IOMMU {word(caps.iommu_enabled)}   GPUDirect RDMA (nvidia_peermem) {word(caps.gpudirect_rdma)}   "
        f"NVSwitch fabric {word(caps.nvlink_fabric)}   torch {word(versions.torch)}   NCCL {word(versions.nccl)}   "
        f"torch symmetric memory {word(caps.torch_symmetric_memory)}"
    )


def run(args: argparse.Namespace) -> int:
    """Probe this machine and print the identity table, the views of `show`, NUMA nodes and gaps (or JSON)."""
    from linkscope.probes.host import DEFAULT_BUDGET_S, probe_host
    from linkscope.probes.identity import identity_table
    from linkscope.topo.common.files import write_text_file
    from linkscope.topo.model.codec import snapshot_to_json, to_jsonable

    budget_s = DEFAULT_BUDGET_S if args.budget is None else args.budget
    snapshot = probe_host(budget_s=budget_s, with_torch=args.with_torch)
    table = identity_table(snapshot.host)
    if args.output:
        write_text_file(args.output, snapshot_to_json(snapshot))
    if args.json:
        say(json_text({"identity": identity_json(table), "snapshot": to_jsonable(snapshot)}), block=True)
        return 0
    from rich.text import Text

    from linkscope.render.console import console as safe_console
    from linkscope.render.view import snapshot_view

    console = safe_console()
    for name, value in snapshot.meta:
        if name == "note":
            console.print(Text(f"note: {value}", style="yellow"))
    console.print(_identity_view(table))
    console.print()
    console.print(snapshot_view(snapshot))
    console.print()
    console.print(_numa_view(snapshot))
    console.print(_facts_line(snapshot))
    if args.output:
        console.print(Text(f"snapshot written to {args.output}"))
    return 0
