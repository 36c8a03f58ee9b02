"""Files the commands write and the measurements they read: one place for their errors.

Every failure is an InputError naming the file, so the command line prints one line and exits 2.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from topo.codec import measurements_from_json, measurements_to_json, snapshot_to_json
from topo.errors import InputError
from topo.formats.results import read_measurements
from topo.model import Measurements, Snapshot
from topo.sources import read_text_file


def write_text_file(path: str, text: str) -> None:
    """Write `text` (plus a final newline) to `path`."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror})") from None


def check_writable(path: str) -> None:
    """InputError now, before a long run, when `path` could not be written later."""
    import os

    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(f"{path}: cannot write (it is a directory)")
    if not os.path.isdir(parent):
        raise InputError(f"{path}: cannot write (no directory {parent})")
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        raise InputError(f"{path}: cannot write (permission denied)")


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


def load_measurements(path: str) -> Measurements:
    """Measurements from a file: what `linkscope bench -o` / `import -o` wrote, a snapshot carrying them,
    or the raw output of nccl-tests, nvbandwidth or p2pBandwidthLatencyTest."""
    text = read_text_file(path)
    if text.lstrip().startswith("{"):
        return measurements_from_json(text, path)
    return read_measurements(text, path)


def with_measurements(snapshot: Snapshot, measurements: Measurements) -> Snapshot:
    """`snapshot` carrying `measurements` (replacing any it had)."""
    return dataclasses.replace(snapshot, measurements=measurements)


def write_measurements(path: str, measurements: Measurements, attach_to: Snapshot | None = None) -> None:
    """Write measurements JSON to `path`; with `attach_to` (the snapshot --attach opened), write that
    snapshot carrying them."""
    if attach_to is None:
        write_text_file(path, measurements_to_json(measurements))
        return
    write_text_file(path, snapshot_to_json(with_measurements(attach_to, measurements)))


def replace_text_file(path: str, text: str) -> None:
    """Write `text` to `path` atomically: a temporary file beside it, then a rename, so a reader never
    sees half a file and an interrupted write leaves the old one."""
    import os
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".linkscope-", suffix=".tmp", dir=directory)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)  # as an ordinary write would create it, not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text if text.endswith("\n") else text + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror})") from None
