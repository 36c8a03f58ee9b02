"""`linkscope open [SOURCE]`: the terminal app (links, topology, ranks, bench, monitor).

This is also what `linkscope` runs with no command. A file or sample is read before the app
starts, so bad input is one line and exit status 2; this machine is probed inside the app, in a
worker, so the first screen appears at once (with no GPU the app says so and shows a sample).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from linkscope.options import add_force_flag, add_source_argument
from linkscope.topo.common.errors import InputError

TAB_NAMES = ("links", "topology", "ranks", "bench", "monitor", "steps")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `open` subcommand."""
    parser = subparsers.add_parser(
        "open",
        help="open the terminal app on a machine (the default command)",
        description=(
            "Open the terminal app: the GPU x GPU link grid, the NUMA/PCIe topology tree, a rank\n"
            "layout checker with live findings, benchmarks and live NVLink/PCIe counters.\n"
            "Keys 1-6 switch tabs, ctrl+p opens the command palette (samples are there), q quits.\n"
            "With no SOURCE it probes this machine; without an NVIDIA GPU it shows a sample."
        ),
        epilog=(
            "examples:\n"
            "  linkscope open sample:dgx-h100\n"
            "  linkscope open snapshot.json --tab ranks\n"
            "  linkscope open sample:dgx-h100 --measurements nvbandwidth-imported.json\n"
            "  linkscope open sample:dgx-h100 --trace traces/   (a job's profiler traces on the Steps tab)\n"
            "  linkscope open sample:consumer-2gpu --nccl-log train.log\n"
            "  linkscope open box.json --nccl-graph graph.xml     (NCCL's rings on the Links grid; g: next ring)\n"
            "  linkscope                  (this machine)"
        ),
    )
    add_source_argument(parser, "snapshot JSON, `nvidia-smi topo -m` text or sample:NAME; default: this machine")
    parser.add_argument("--tab", choices=TAB_NAMES, default="links", help="the tab to start on (default: links)")
    parser.add_argument("--measurements", default=None, metavar="FILE",
                        help="measurements (linkscope bench/import -o) to show on SOURCE: measured GB/s on the Links grid, "
                        "results on the Bench tab, calibrated costs on the Ranks tab; refused when they come from a "
                        "different kind of machine")
    add_force_flag(parser, "use --measurements from a different kind of machine anyway")
    parser.add_argument("--trace", action="append", default=None, metavar="PATH",
                        help="a job's profiler traces (files or a directory; repeatable) for the Steps tab: exposed "
                        "communication per step and the collectives below their links' speed")
    parser.add_argument("--nccl-log", default=None, metavar="FILE",
                        help="an NCCL_DEBUG=INFO log of a job on SOURCE: the Links grid shows the transport NCCL chose "
                        "for each GPU pair, and SHM or NET where P2P should be stands out")
    parser.add_argument("--nccl-graph", default=None, metavar="FILE",
                        help="NCCL's searched graphs (NCCL_GRAPH_DUMP_FILE, or a log with its `Pattern` lines): the Links "
                        "grid draws NCCL's ring channels on SOURCE's links, one at a time (g: next)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the source (if any), then run the app until the user quits."""
    source: str | None = getattr(args, "source", None)
    traces: tuple[str, ...] = tuple(getattr(args, "trace", None) or ())
    tab: str = getattr(args, "tab", "links")
    if traces and tab == "links":
        tab = "steps"
    if traces:
        from linkscope.topo.trace.files import trace_paths

        trace_paths(traces)  # a missing file or an empty directory is one line now, not a message in the app
    if source == "-":
        raise InputError("open: the app needs the terminal, so it cannot read stdin; save the input to a file first")
    # the app paints first and loads a plain SOURCE in its worker (a 1,024-host cluster takes seconds); a SOURCE
    # that other options build on, or one that cannot reach a terminal anyway, is loaded here
    in_app = (source is not None and args.measurements is None and getattr(args, "nccl_log", None) is None
              and terminal_problem() is None)
    snapshot = None
    if source is not None and not in_app:
        from linkscope.topo.formats.source import load_source

        snapshot = load_source(source)
    if args.measurements is not None:
        from linkscope.files import check_measured_on, load_measurements, with_measurements

        if snapshot is None:
            raise InputError("--measurements: name the SOURCE they were measured on (e.g. a `linkscope probe -o` file)")
        measurements = load_measurements(args.measurements)
        check_measured_on(snapshot, measurements, getattr(args, "force", False), "--measurements")
        snapshot = with_measurements(snapshot, measurements)
    nccl = None
    if getattr(args, "nccl_log", None) is not None:
        if snapshot is None:
            raise InputError("--nccl-log: name the SOURCE the job ran on (a snapshot, topo text or sample:NAME)")
        from linkscope.topo.formats.nccl_log import read_nccl_log_file
        from linkscope.topo.nccl.placement import place_edges

        nccl = place_edges(read_nccl_log_file(args.nccl_log), snapshot)
    graphs = None
    if getattr(args, "nccl_graph", None) is not None:
        if source is None:
            raise InputError("--nccl-graph: name the SOURCE the job ran on (a snapshot, topo text or sample:NAME)")
        from linkscope.topo.formats.nccl_graph_source import load_nccl_graphs

        graphs = load_nccl_graphs(args.nccl_graph)
    problem = terminal_problem()
    if problem is not None:
        shown = f" {source}" if source is not None else ""
        raise InputError(f"open: the app needs a terminal, but {problem}; for text run `linkscope show{shown}` "
                         "(or `linkscope show --json`)")
    from linkscope.tui.app import build_app

    app = build_app(source, snapshot=snapshot, initial_tab=tab, trace_paths=traces, nccl=nccl, nccl_graphs=graphs)
    app.run()
    if app.load_error is not None:  # the SOURCE did not open: one line and status 2, as every command says it
        raise InputError(app.load_error)
    return app.return_code or 0


def terminal_problem() -> str | None:
    """Why the app cannot run here (its output or its keys are not a terminal: a redirect, a pipe, cron),
    or None; without this check the app would write screen codes into the file and wait for keys forever."""
    if not sys.stdout.isatty():
        return "its output is not a terminal"
    if not sys.stdin.isatty():
        return "its input is not a terminal"
    if not sys.stderr.isatty():
        return "its screen (standard error, where the app draws) is not a terminal"
    return None
