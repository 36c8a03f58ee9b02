"""Files the commands write and the measurements they read: one place for their errors.

Every failure is an InputError naming the file, so the command line prints one line and exits 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.text import printable
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import read_stdin_text, read_text_file
from linkscope.topo.model.codec import measurements_from_json, measurements_to_json, snapshot_to_json
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.model.validate import validate_measurements


def write_text_file(path: str, text: str) -> None:
    """Write `text` (plus a final newline) to `path` whole or not at all.

    The text goes to a temporary file in the same directory, which then replaces `path` in one
    step: a write cut short (disk full, a file-size limit, a signal) leaves the previous file as
    it was. A symlink at `path` is refused rather than followed. The new file gets the mode the
    old one had, or 0666 less the umask, like a file the shell creates.
    """
    import tempfile

    check_writable(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise InputError(f"{printable(path)}: cannot write ({exc.strerror})") from None
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=".linkscope-", suffix=".tmp", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise InputError(f"{printable(path)}: cannot write ({exc.strerror}); the previous file is unchanged") from None
    finally:
        if temporary is not None:
            _remove_quietly(temporary)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def write_text_file_atomic(path: str, text: str) -> None:
    """Write `text` to `path` all at once: a temporary file in the same directory, then renamed over `path`,
    so a reader never sees half a file and an interrupted write leaves the old one."""
    import os
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the file it replaces is an ordinary one
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror})") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


def check_writable(path: str) -> None:
    """InputError now, before a long run, when `path` could not be written later (or is a symlink)."""
    if "\x00" in path:
        raise InputError(f"{path!r}: a file name cannot hold a NUL character")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.islink(path):
        raise InputError(f"{printable(path)}: is a symbolic link; linkscope does not write through links (name the target)")
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
    import sys

    from linkscope.topo.model.provenance import check_identity

    verdict = check_identity(measurements.identity, snapshot)
    if verdict.refused and not force:
        raise InputError(f"{flag}: {verdict.message}")
    if verdict.message:
        forced = " (used anyway: --force)" if verdict.refused else ""
        print(f"linkscope: note: {verdict.message.removesuffix(' (--force to use them anyway)')}{forced}", file=sys.stderr)


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
