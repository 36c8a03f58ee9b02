"""`linkscope export nccl-topo SOURCE -o FILE`: the topology file NCCL reads with NCCL_TOPO_FILE, written from a snapshot.

For the VM (or container) that cannot see its own PCIe tree: write the file from a snapshot of the machine (or of
one of its kind on bare metal) and run the job with `NCCL_TOPO_FILE=FILE`. Exit status: 0 written, 2 bad input.
`--json` prints `output`, `gpus`, `nics`, `cpus` and `notes` (what the snapshot lacked, which NCCL then reads on the
machine itself).
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import ExitStatus, add_json_flag, add_output_flag, add_source_argument
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `export` subcommand and its formats."""
    parser = subparsers.add_parser(
        "export",
        help="write a machine in another tool's format (nccl-topo: an NCCL_TOPO_FILE)",
        description="Write the machine a SOURCE describes in a format another tool reads.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    topo = formats.add_parser(
        "nccl-topo",
        help="the topology XML NCCL reads with NCCL_TOPO_FILE",
        description=(
            "Write the XML topology file NCCL reads with NCCL_TOPO_FILE (NCCL 2.12 to 2.28 read the same schema):\n"
            "one <cpu numaid affinity> per NUMA node, under it the PCIe tree of bridges with every GPU and NIC as a\n"
            "<pci busid class link_speed link_width> leaf, the structure cloud vendors ship for their GPU VMs (Azure\n"
            "NDv4/NDv5, AWS p4d). GPUs get no <gpu>/<nvlink> elements: NCCL reads those on the machine through\n"
            "NVML. Use it where NCCL sees the wrong machine (`linkscope doctor SOURCE --nccl-topo DUMP` says so):\n"
            "virtual PCIe ports without speed, GPUs and NICs under the wrong CPU. What the snapshot lacks (a NIC's\n"
            "link speed, the CPU model) is left out for NCCL to read itself, and listed on stderr."
        ),
        epilog=(
            "examples:\n"
            "  linkscope probe -o box.json                       (on the machine, or one of its kind on bare metal)\n"
            "  linkscope export nccl-topo box.json -o nccl-topo.xml && NCCL_TOPO_FILE=$PWD/nccl-topo.xml torchrun ...\n"
            "  linkscope export nccl-topo vendor-topo.xml -o -   (an NCCL topology file as SOURCE, written back)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_argument(topo)
    add_output_flag(topo, "where to write the XML (- for stdout)", required=True)
    add_json_flag(topo, "print one JSON object (output, gpus, nics, cpus, notes) instead of the notes")
    topo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Export the SOURCE's first host as an NCCL topology file."""
    from linkscope.source import open_source
    from linkscope.topo.common.errors import InputError
    from linkscope.topo.common.files import check_writable, write_text_file
    from linkscope.topo.nccl.topo_export import export_nccl_topology

    if args.output != "-":
        check_writable(args.output)
    snapshot = open_source(args.source)
    exported = export_nccl_topology(snapshot)
    if exported.gpus == 0:
        raise InputError(f"{snapshot.source or 'the snapshot'}: no GPU with a PCI bus id to write")
    if args.output == "-":
        say(exported.text, end="", block=True)
    else:
        write_text_file(args.output, exported.text)
    if args.json:
        report = {"output": args.output, "gpus": exported.gpus, "nics": exported.nics, "cpus": exported.cpus,
                  "notes": list(exported.notes)}
        say(json_text(report), stderr=args.output == "-", block=True)
    else:
        for note in exported.notes:
            say(f"linkscope: note: {note}", stderr=True)
    return ExitStatus.OK
