"""Open a SOURCE: a snapshot JSON file, `nvidia-smi topo -m` text, NCCL's topology XML, `-` (stdin) or `sample:NAME`.

The format is detected from the content, not the file name. "This machine" (no SOURCE) is
resolved by the command line through the probes, since the core never touches hardware.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.files import open_input
from linkscope.topo.common.limits import MAX_SNAPSHOT_BYTES
from linkscope.topo.model.codec import snapshot_from_json
from linkscope.topo.model.snapshot import Snapshot

SAMPLE_PREFIX = "sample:"


def load_source(spec: str, stdin: TextIO | None = None) -> Snapshot:
    """Load the snapshot that `spec` names; raise InputError with one clear line on bad input."""
    if spec.startswith(SAMPLE_PREFIX):
        from linkscope.topo.samples import load_sample

        return load_sample(spec[len(SAMPLE_PREFIX) :])
    if spec == "-":
        return parse_source_text(read_stdin_text(stdin), "<stdin>")
    return parse_source_text(read_text_file(spec), spec)


def read_named_text(path: str) -> tuple[str, str]:
    """The text of file `path`, or of stdin for `-`, and the name to report it by."""
    if path == "-":
        return read_stdin_text(), "<stdin>"
    return read_text_file(path), path


def read_stdin_text(stdin: TextIO | None = None, max_bytes: int = MAX_SNAPSHOT_BYTES) -> str:
    """Read `-` (standard input) with the same size limit and checks as a file."""
    stream = stdin if stdin is not None else sys.stdin
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text stream without bytes underneath (tests pass StringIO)
        text = stream.read(max_bytes + 1)
        if len(text) > max_bytes:
            raise InputError(f"<stdin>: input is larger than the {max_bytes // (1024 * 1024)} MiB limit")
        return text
    return _decode(binary.read(max_bytes + 1), "<stdin>", max_bytes)


def read_text_file(path: str, max_bytes: int = MAX_SNAPSHOT_BYTES) -> str:
    """Read a UTF-8 text file with a size limit; every failure becomes one InputError line."""
    try:
        handle = open_input(path)
    except InputError as exc:
        if str(exc) == f"{path}: no such file":
            hint = "for a built-in machine use sample:NAME; `linkscope samples` lists them"
            raise InputError(f"{path}: no such file ({hint})") from None
        raise
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise InputError(f"{path}: file is {size} bytes, more than the {max_bytes // (1024 * 1024)} MiB limit")
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    return _decode(raw, path, max_bytes)


def _decode(raw: bytes, path: str, max_bytes: int) -> str:
    if len(raw) > max_bytes:
        raise InputError(f"{path}: input is larger than the {max_bytes // (1024 * 1024)} MiB limit")
    if b"\x00" in raw:
        raise InputError(f"{path}: binary data, not a snapshot or text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def parse_source_text(text: str, name: str) -> Snapshot:
    """Detect the format of `text` (snapshot JSON, `nvidia-smi topo -m` or NCCL's topology XML) and parse it."""
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise InputError(f"{name}: input is larger than the {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB limit")
    if "\x00" in text:
        raise InputError(f"{name}: binary data, not a snapshot or text file")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{name}: empty input")
    if stripped.startswith("{"):
        return snapshot_from_json(text, name)
    from linkscope.topo.formats.nccl_topo_xml import looks_like_nccl_topo_xml

    if looks_like_nccl_topo_xml(text):
        from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of
        from linkscope.topo.formats.nccl_topo_xml import read_nccl_topo_xml
        from linkscope.topo.model.validate import validate_snapshot

        snapshot = snapshot_of(read_nccl_topo_xml(text, name))
        validate_snapshot(snapshot, name)  # what a file states that the model cannot hold (an impossible index) is one line
        return snapshot
    from linkscope.topo.formats.nvsmi_topo import looks_like_nvsmi_topo, read_nvsmi_topo

    if looks_like_nvsmi_topo(text):
        return read_nvsmi_topo(text, name)
    raise InputError(f"{name}: not a linkscope snapshot (JSON), `nvidia-smi topo -m` output nor an NCCL topology XML file")
