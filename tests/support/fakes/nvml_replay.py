"""A fake pynvml module that answers from a recording of a real driver (probes/nvml_recording.py).

`ReplayNvml(calls)` answers each call with what the recorded driver answered to the same function
and the same arguments, in the order they were recorded (a call asked more often than recorded gets
the last answer again: live counters then stand still). Errors are raised as the recorded NVML error
code (the same `NVMLError(code)` classes as the snapshot fake); a function that was missing from the
recorded binding is missing here too, and a call that was never recorded raises :class:`NotRecorded`
(a gap the probe names), so a probe that asks something new is noticed, not answered by invention.
"""

from __future__ import annotations

import ctypes
import json
from collections import deque
from types import SimpleNamespace
from typing import Any

from linkscope.probes.nvml_recording import FORMAT, read_recording, sessions
from support.fakes.fake_nvml import NVMLError, c_nvmlGpuFabricInfoV_t


class NotRecorded(Exception):
    """The replayed driver was never asked this (function, arguments)."""


class ReplayHandle:
    """A device handle named as the recording names it (`gpu0`, `gpu0m1`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ReplayHandle({self.name})"


def _key(function: str, encoded_args: list[Any]) -> str:
    return function + json.dumps(encoded_args, sort_keys=True)


def _decode(value: Any) -> Any:
    """A recorded value back as what pynvml returns: attributes for structures, bytes for bytes."""
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "handle" in value:
        return ReplayHandle(value["handle"])
    if "bytes" in value:
        return bytes.fromhex(value["bytes"])
    if "fields" in value:
        return SimpleNamespace(**{name: _decode(item) for name, item in value["fields"].items()})
    return value


class ReplayNvml:
    """The recorded driver as a pynvml-like module (see the module docstring)."""

    NVMLError = NVMLError
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfoV_t

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self._answers: dict[str, deque[dict[str, Any]]] = {}
        self._last: dict[str, dict[str, Any]] = {}
        self._missing: set[str] = set()
        self._functions: set[str] = set()
        for call in calls:
            function = call["function"]
            if call.get("reason") == "FunctionNotFound" and call.get("error") is None:
                self._missing.add(function)
                continue
            self._functions.add(function)
            self._answers.setdefault(_key(function, self._argument_key(call["args"])), deque()).append(call)

    @classmethod
    def from_text(cls, text: str, session: int = 0) -> ReplayNvml:
        """The `session`-th session of a recording (0: the first)."""
        found = sessions(read_recording(text))
        if not found:
            raise ValueError(f"no {FORMAT} session in the recording")
        return cls(found[session][1])

    @staticmethod
    def _argument_key(args: list[Any]) -> list[Any]:
        # an argument passed by reference is the call's output: it is not part of what was asked
        return [{"byref": None} if isinstance(arg, dict) and "byref" in arg else arg for arg in args]

    def _encode_arg(self, arg: Any) -> Any:
        if isinstance(arg, ReplayHandle):
            return {"handle": arg.name}
        if type(arg).__name__ == "CArgObject":
            return {"byref": None}
        if isinstance(arg, (list, tuple)):
            return [self._encode_arg(item) for item in arg]
        return arg

    def __getattr__(self, function: str) -> Any:
        if function in self._missing or not function.startswith("nvml"):
            raise AttributeError(function)

        def answer(*args: Any) -> Any:
            key = _key(function, [self._encode_arg(arg) for arg in args])
            queue = self._answers.get(key)
            if queue:
                call = queue.popleft()
                self._last[key] = call
            elif key in self._last:
                call = self._last[key]
            else:
                raise NotRecorded(f"{function} was not recorded with these arguments")
            if "error" in call:
                raise NVMLError(int(call["error"]) if call["error"] is not None else 999)
            for arg, recorded in zip(args, call["args"], strict=False):
                if type(arg).__name__ == "CArgObject" and isinstance(recorded, dict):
                    _fill(arg._obj, recorded.get("byref"))
            return _decode(call["result"])

        return answer


def _fill(target: ctypes.Structure, recorded: Any) -> None:
    """Write a recorded structure's fields into the structure the caller passed by reference."""
    if not isinstance(recorded, dict):
        return
    for name, value in recorded.get("fields", {}).items():
        if not hasattr(target, name):
            continue
        if isinstance(value, dict) and "bytes" in value:
            raw = bytes.fromhex(value["bytes"])
            ctypes.memmove(ctypes.addressof(target) + getattr(type(target), name).offset, raw,
                           min(len(raw), getattr(type(target), name).size))
        elif isinstance(value, list):
            field = getattr(target, name)
            for position, item in enumerate(value[: len(field)]):
                field[position] = item
        elif isinstance(value, int):
            setattr(target, name, value)
