"""`linkscope collect -o cluster.json`: run on every node (torchrun or srun); rank 0 writes the cluster snapshot.

Each node probes itself as `linkscope probe` does; the snapshots travel over a gloo group as JSON
(see :mod:`probes.cluster_collect`). A node whose probe fails or misses `--probe-timeout` is a gap
naming the host; the rendezvous has its own deadline. The file is written atomically.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import ExitStatus, add_json_flag, add_output_flag
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.numbers import seconds
from linkscope.topo.common.text import say

EPILOG = """\
examples (N nodes, HOST0 the first node's address):
  torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
      -m linkscope collect -o cluster.json
  MASTER_ADDR=HOST0 MASTER_PORT=29500 srun --nodes N --ntasks-per-node 1 linkscope collect -o cluster.json

Rank 0 (torchrun) or task 0 (srun) writes the file; `linkscope show cluster.json` and every other
command that takes a SOURCE open it.
exit status: 0 every node reported, 1 a node is missing (its gap is in the file), 2 bad input or the
rendezvous or gather failed"""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `collect` subcommand."""
    parser = subparsers.add_parser(
        "collect",
        help="probe every node of a cluster (under torchrun or srun) into one cluster snapshot",
        description=(
            "Run once per node under torchrun or srun: every node probes itself (NVML + sysfs, as `linkscope "
            "probe`), the snapshots are gathered over a torch.distributed gloo group, and rank 0 writes one "
            "cluster snapshot. A node whose probe fails or takes longer than --probe-timeout is recorded as a gap "
            "with its host name; a rendezvous that does not complete within --rendezvous-timeout ends the run "
            "(exit 2). Needs torch."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_output_flag(parser, "where rank 0 writes the cluster snapshot", required=True)
    parser.add_argument("--probe-timeout", type=seconds(), default=60.0, metavar="SECONDS",
                        help="a node's probe that takes longer is a gap (default 60)")
    parser.add_argument("--rendezvous-timeout", type=seconds(), default=120.0, metavar="SECONDS",
                        help="give up when the nodes have not all joined by then (default 120)")
    add_json_flag(parser, "rank 0 prints one JSON object: output, hosts, gaps, duplicates, timings_s "
                        "(rendezvous, probe, gather, write)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Collect; on rank 0 write the file and summarise. Exit 0, or 1 when some node gave no snapshot."""
    from linkscope.probes.cluster_collect import collect_cluster, launch_from_env
    from linkscope.topo.common.files import check_writable, write_text_file
    from linkscope.topo.model.codec import snapshot_to_json

    launch = launch_from_env()
    if launch.rank == 0:
        check_writable(args.output)
    result = collect_cluster(launch, args.probe_timeout, args.rendezvous_timeout)
    if result is None:
        return ExitStatus.OK
    import time

    started = time.monotonic()
    write_text_file(args.output, snapshot_to_json(result.snapshot, indent=None))
    timings = {**dict(result.timings_s), "write": time.monotonic() - started}
    missing = [gap for gap in result.snapshot.gaps if gap.subject.startswith("collect")]
    if args.json:
        say(json_text({
            "output": args.output,
            "hosts": [host.hostname for host in result.snapshot.hosts],
            "gaps": [{"host": gap.host, "subject": gap.subject, "reason": gap.reason} for gap in missing],
            "duplicates": list(result.duplicates),
            "timings_s": timings,
        }), block=True)
    else:
        say(f"{args.output}: {result.reported} of {result.nodes} nodes "
              f"({sum(len(host.gpus) for host in result.snapshot.hosts)} GPUs)")
        for gap in missing:
            say(f"  {gap.host}: {gap.reason}", stderr=True)
        for name in result.duplicates:
            say(f"  {name}: more than one node has this host name (kept as {name}#2...)", stderr=True)
    return ExitStatus.FINDINGS if missing else ExitStatus.OK
