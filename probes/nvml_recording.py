"""A recording of every NVML call the probes make, with its answer or error, as JSON lines.

Set `LINKSCOPE_NVML_RECORD=FILE` and every :class:`~probes.nvml_query.NvmlQuery` made in that
process (the probe, the live sampler, `record`, the benchmark preflight) appends to FILE: one header
line per query session, then one line per call. The recording is what a real driver answered, so
the fakes can replay it afterwards (tests/support/fakes/nvml_replay.py, and the C stand-in through
:func:`description_lines` in tests); nothing in it is needed to use linkscope.

Line formats (JSON objects):
    {"session": S, "format": "linkscope-nvml-recording", "version": 1, "pid": ..., "argv": [...], "binding": ...}
    {"session": S, "call": N, "function": "nvmlDeviceGetName", "args": [...], "result": ..., "ms": 0.01}
    {"session": S, "call": N, "function": ..., "args": [...], "error": 3, "reason": "NotSupported", "ms": ...}

Values are written with :func:`encode`: numbers and strings as themselves, bytes as {"bytes": hex},
a device handle as {"handle": "gpu0"} (a MIG device "gpu0m1"), a ctypes structure as
{"struct": NAME, "fields": {...}}, a union (nvmlValue_t) with every member, arrays and sequences
as lists, an argument passed by reference as {"byref": <the structure after the call>}.
Writing a line never fails the probe: a value that cannot be encoded is written as its repr.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import json
import math
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say

RECORD_VARIABLE = "LINKSCOPE_NVML_RECORD"
FORMAT = "linkscope-nvml-recording"
VERSION = 1
HANDLE_GETTERS = ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMigDeviceHandleByIndex")
"""Functions whose result is a device handle, named after its index (and MIG slot)."""

_sessions = itertools.count(1)


def _number(value: float) -> float | str:
    """A float as JSON can hold it: NaN and the infinities as strings."""
    return value if math.isfinite(value) else repr(value)


class NvmlRecorder:
    """Appends one query session's calls to a recording file; thread-safe (the probe reads NVML in a worker)."""

    def __init__(self, path: str, module: Any) -> None:
        self.path = path
        self.session = f"{os.getpid()}-{next(_sessions)}"
        self._lock = threading.Lock()
        self._calls = 0
        self._handles: list[tuple[Any, str]] = []
        """Handles seen so far and their names; kept alive here so an id is never reused."""
        binding = getattr(module, "__version__", None) or _package_version("nvidia-ml-py")
        self._write({"session": self.session, "format": FORMAT, "version": VERSION, "pid": os.getpid(),
                     "argv": sys.argv[1:], "module": getattr(module, "__name__", type(module).__name__),
                     "binding": binding})

    def record(self, function: str, args: Sequence[Any], result: Any = None, error: BaseException | None = None,
               reason: str | None = None, seconds: float = 0.0) -> None:
        """Append one call: its arguments and its result, or its error code and reason."""
        try:
            with self._lock:
                self._calls += 1
                line: dict[str, Any] = {"session": self.session, "call": self._calls, "function": function,
                                        "args": [self.encode(arg) for arg in args]}
                if error is None:
                    if function in HANDLE_GETTERS and result is not None:
                        self._name_handle(function, args, result)
                    line["result"] = self.encode(result)
                else:
                    code = getattr(error, "value", None)
                    line["error"] = code if isinstance(code, int) else None
                    line["reason"] = reason or type(error).__name__
                line["ms"] = round(seconds * 1e3, 4)
                self._write(line)
        except Exception as exc:  # the recording is an aid: it never breaks the probe
            self._write({"session": self.session, "function": function, "encode_error": f"{type(exc).__name__}: {exc}"})

    def _name_handle(self, function: str, args: Sequence[Any], handle: Any) -> None:
        if function == "nvmlDeviceGetHandleByIndex":
            name = f"gpu{int(args[0])}"
        else:
            parent = self._handle_name(args[0]) or "gpu?"
            name = f"{parent}m{int(args[1])}"
        self._handles.append((handle, name))

    def _handle_name(self, value: Any) -> str | None:
        for handle, name in self._handles:
            if value is handle or _same_pointer(value, handle):
                return name
        return None

    def encode(self, value: Any) -> Any:
        """`value` as JSON data (see the module docstring)."""
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return _number(value)
        if isinstance(value, (bytes, bytearray)):
            return _bytes(bytes(value))
        name = self._handle_name(value)
        if name is not None:
            return {"handle": name}
        if type(value).__name__ == "CArgObject":  # ctypes.byref(...): the structure the call filled
            return {"byref": self.encode(getattr(value, "_obj", None))}
        if isinstance(value, ctypes.Array):
            if getattr(value, "_type_", None) in (ctypes.c_char, ctypes.c_ubyte):
                return _bytes(bytes(value))
            return [self.encode(item) for item in value]
        if isinstance(value, ctypes.Union):
            return {"union": type(value).__name__,
                    "fields": {field[0]: self.encode(getattr(value, field[0])) for field in value._fields_}}
        if isinstance(value, ctypes.Structure):
            return {"struct": type(value).__name__,
                    "fields": {field[0]: self.encode(getattr(value, field[0])) for field in value._fields_}}
        if isinstance(value, ctypes._SimpleCData):
            return self.encode(value.value)
        if isinstance(value, (list, tuple)):
            return [self.encode(item) for item in value]
        if isinstance(value, ctypes._Pointer) or type(value).__name__.startswith("LP_"):
            return {"pointer": type(value).__name__}
        attributes = getattr(value, "__dict__", None)
        if attributes:
            return {"object": type(value).__name__,
                    "fields": {key: self.encode(item) for key, item in attributes.items() if not key.startswith("_")}}
        return {"repr": repr(value)[:200]}

    def _write(self, line: dict[str, Any]) -> None:
        text = json_text(line, compact=True) + "\n"
        # one write per line on a file opened for append: lines of several processes do not interleave
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, text.encode("ascii"))
        finally:
            os.close(descriptor)


def _bytes(value: bytes) -> dict[str, str]:
    """Bytes as hex, with the text beside it for a reader when they are printable ASCII (up to NULs)."""
    encoded = {"bytes": value.hex()}
    text = value.split(b"\0", 1)[0]
    if text and all(32 <= byte < 127 for byte in text):
        encoded["text"] = text.decode("ascii")
    return encoded


def _same_pointer(a: Any, b: Any) -> bool:
    """Whether two ctypes pointers point at the same address (pynvml hands out a new object per call)."""
    if not isinstance(a, ctypes._Pointer) or not isinstance(b, ctypes._Pointer):
        return False
    return bool(ctypes.cast(a, ctypes.c_void_p).value == ctypes.cast(b, ctypes.c_void_p).value)


def _package_version(name: str) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python 3.10+ has it
        return None
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def recorder_from_environment(module: Any) -> NvmlRecorder | None:
    """A recorder appending to `$LINKSCOPE_NVML_RECORD`, or None when the variable is unset or empty."""
    path = os.environ.get(RECORD_VARIABLE)
    if not path:
        return None
    try:
        return NvmlRecorder(path, module)
    except OSError as exc:
        say(f"linkscope: note: cannot write the NVML recording {path!r}: {exc.strerror}", stderr=True)
        return None


def read_recording(text: str) -> list[dict[str, Any]]:
    """The lines of a recording, in order (blank lines skipped); InputError names a line that is not a JSON object."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:  # not read_json: NVML answers 64-bit words (20 digits), more than its bound on integers
            item = json.loads(line, parse_constant=lambda word: None)
        except ValueError as exc:
            raise InputError(f"NVML recording line {number}: not valid JSON ({exc})") from None
        if not isinstance(item, dict):
            raise InputError(f"NVML recording line {number}: not a JSON object")
        lines.append(item)
    return lines


def sessions(lines: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(header, calls) per session, in the order the sessions started."""
    found: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for line in lines:
        session = str(line.get("session"))
        if line.get("format") == FORMAT:
            found[session] = (line, [])
        elif session in found and "function" in line:
            found[session][1].append(line)
    return list(found.values())


def nvml_facts_json(facts: Any, gaps: Sequence[Any]) -> dict[str, Any]:
    """An `NvmlFacts` and its gaps as JSON data, without the timings (no replay reproduces them): what a
    replay of a recording is compared with (`benchmarks/gpu/nvml_facts.py` writes it on the machine)."""
    data = dataclasses.asdict(facts)
    data.pop("init_s", None)
    for gpu in data["gpus"]:
        gpu.pop("read_s", None)
    data["ancestors"] = sorted([a, b, str(getattr(kind, "value", kind))] for (a, b), kind in facts.ancestors.items())
    data["p2p"] = sorted([a, b, dataclasses.asdict(status)] for (a, b), status in facts.p2p.items())
    return {"facts": data, "gaps": [dataclasses.asdict(gap) for gap in gaps]}
