"""`linkscope merge host-*.json -o cluster.json`: join host snapshots gathered any other way into a cluster.

For snapshots collected with pdsh, Ansible or a job's own prologue (`linkscope probe -o host-$(hostname).json`).
Every file is validated as any SOURCE is; files of another schema version and host names that come
twice are reported (exit 2) rather than guessed at.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_json_flag, add_output_flag
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text, read_json
from linkscope.topo.common.text import comparable, printable, say


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `merge` subcommand."""
    parser = subparsers.add_parser(
        "merge",
        help="join host snapshots (linkscope probe -o) into one cluster snapshot",
        description=(
            "Join snapshot files written by `linkscope probe -o` on each node (or earlier cluster files) into one "
            "cluster snapshot that show, check, plan, open and doctor read. Gaps keep the host they came from. "
            "Refused (exit 2, one line): a file that is not a snapshot, files of different schema versions, a "
            "host name found in two files."
        ),
        epilog="example:\n  pdsh -w gpu[01-16] 'linkscope probe -o /shared/host-$(hostname).json'\n"
               "  linkscope merge /shared/host-*.json -o cluster.json && linkscope show cluster.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="snapshot JSON files, one or more hosts each")
    add_output_flag(parser, "where to write the cluster snapshot", required=True)
    add_json_flag(parser, "print one JSON object: output, hosts, gpus, files")
    parser.set_defaults(run=run)


def _schema_of(text: str) -> object:
    try:
        data = read_json(text, "")
    except InputError:
        return None
    if isinstance(data, dict) and "schema" not in data and isinstance(data.get("snapshot"), dict):
        data = data["snapshot"]
    return data.get("schema") if isinstance(data, dict) else None


def run(args: argparse.Namespace) -> int:
    """Read, check and join the files; write the cluster snapshot atomically."""
    from linkscope.topo.common.collector import collector_paused
    from linkscope.topo.common.files import check_writable

    check_writable(args.output)
    with collector_paused():  # a thousand hosts' objects live on to the end, and make no cycles
        return _merge(args)


def _merge(args: argparse.Namespace) -> int:
    from linkscope.topo.common.files import write_text_file
    from linkscope.topo.formats.source import read_text_file
    from linkscope.topo.machine.cluster import combine_hosts
    from linkscope.topo.model.codec import snapshot_from_json, snapshot_to_json
    from linkscope.topo.model.snapshot import SCHEMA_VERSION

    snapshots = []
    other_schema: dict[object, list[str]] = {}
    origin: dict[str, str] = {}
    for path in args.files:
        text = read_text_file(path)
        if not text.lstrip().startswith("{"):
            raise InputError(f"{path}: not a snapshot JSON file (write one per host with `linkscope probe -o`)")
        try:
            snapshot = snapshot_from_json(text, path)
        except InputError:
            schema = _schema_of(text)
            if schema == SCHEMA_VERSION:
                raise
            other_schema.setdefault(schema, []).append(path)
            continue
        for host in snapshot.hosts:
            key = comparable(host.hostname)
            if key in origin:
                raise InputError(f"{path}: host {printable(host.hostname)!r} is also in {origin[key]} "
                                 "(collected twice? keep one file per host; names are compared without invisible "
                                 "characters and case)")
            origin[key] = path
        snapshots.append(snapshot)
    if other_schema:
        listed = "; ".join(f"schema {schema!r}: {', '.join(paths[:3])}" + (f" (+{len(paths) - 3})" if len(paths) > 3 else "")
                           for schema, paths in other_schema.items())
        raise InputError(f"mixed snapshot schema versions ({listed}; {len(snapshots)} file(s) of schema "
                         f"{SCHEMA_VERSION}): this linkscope reads schema {SCHEMA_VERSION}; probe those hosts again "
                         "with this version")
    carried = [path for path, snapshot in zip(args.files, snapshots, strict=True) if snapshot.measurements is not None]
    if carried:
        say(f"linkscope: note: the measurements in {', '.join(carried[:3])}{' ...' if len(carried) > 3 else ''} are not "
              "carried into the cluster (they describe one host); pass them with --measurements", stderr=True)
    meta = (("merged", f"{len(args.files)} file(s) by linkscope merge"),)
    cluster = combine_hosts(snapshots, "merge", meta=meta).snapshot
    write_text_file(args.output, snapshot_to_json(cluster, indent=None))
    gpus = sum(len(host.gpus) for host in cluster.hosts)
    if args.json:
        say(json_text({"output": args.output, "hosts": [host.hostname for host in cluster.hosts], "gpus": gpus,
                          "files": len(args.files)}), block=True)
    else:
        say(f"{args.output}: {len(cluster.hosts)} hosts, {gpus} GPUs from {len(args.files)} file(s)")
    return 0
