"""Measurements files the commands read and write, and the output checks done before any work.

Every failure is an InputError naming the file, so the command line prints one line and exits 2; files
are written by the one writer, :func:`topo.common.files.write_text_file`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.files import check_writable, write_text_file
from linkscope.topo.common.text import say
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import read_stdin_text, read_text_file
from linkscope.topo.model.codec import measurements_from_json, measurements_to_json, snapshot_to_json
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.model.validate import validate_measurements


def open_output(args: Any) -> Snapshot | None:
    """Check `-o` and `--attach` before any work, so none is lost to a bad one; return the snapshot
    `--attach` names (opened now and once: it may be stdin), or None."""
    if args.attach and not args.output:
        raise InputError("--attach: name the snapshot file to write with -o FILE")
    if args.output:
        check_writable(args.output)
    if not args.attach:
        return None
    from linkscope.source import open_source

    return open_source(args.attach)


def load_measurements(path: str, op: str | None = None) -> Measurements:
    """Measurements from a file (`-`: stdin): what `linkscope bench -o` / `import -o` wrote, a snapshot
    carrying them, or the raw output of nccl-tests, nvbandwidth or p2pBandwidthLatencyTest."""
    name = "<stdin>" if path == "-" else path
    text = read_stdin_text() if path == "-" else read_text_file(path)
    if text.lstrip().startswith("{"):
        return measurements_from_json(text, name)
    measurements = read_measurements(text, name, op)
    try:
        validate_measurements(measurements)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    return measurements


def with_measurements(snapshot: Snapshot, measurements: Measurements) -> Snapshot:
    """`snapshot` carrying `measurements` (replacing any it had)."""
    return dataclasses.replace(snapshot, measurements=measurements)


def check_measured_on(snapshot: Snapshot, measurements: Measurements, force: bool, flag: str) -> None:
    """Refuse (InputError naming `flag`) measurements of a different kind of machine unless `force`;
    another host of the same kind, unknown identity or a forced mismatch is a note on stderr."""

    from linkscope.topo.model.provenance import check_identity

    verdict = check_identity(measurements.identity, snapshot)
    if verdict.refused and not force:
        raise InputError(f"{flag}: {verdict.message}")
    if verdict.message:
        forced = " (used anyway: --force)" if verdict.refused else ""
        say(f"linkscope: note: {verdict.message.removesuffix(' (--force to use them anyway)')}{forced}", stderr=True)


def write_measurements(path: str, measurements: Measurements, attach_to: Snapshot | None = None) -> None:
    """Write measurements JSON to `path`; with `attach_to` (the snapshot --attach opened), write that
    snapshot carrying them."""
    if attach_to is None:
        write_text_file(path, measurements_to_json(measurements))
        return
    write_text_file(path, snapshot_to_json(with_measurements(attach_to, measurements)))
