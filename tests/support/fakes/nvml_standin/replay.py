"""A recording of a real driver (probes/nvml_recording.py) as the C stand-in's machine description.

`description_from_calls(calls)` writes, for every recorded call, the line the stand-in answers it
with (the value encodings of `describe.py`, keyed by the C symbol pynvml resolves); an error is
written as its code. Run as `python -m support.fakes.nvml_standin.replay RECORDING SESSION DESCRIPTION` with
the stand-in on LD_LIBRARY_PATH, it writes the description, loads the real pynvml over the stand-in,
reads NVML as the probe does and prints the facts as JSON (`nvml_facts_json`), so a test can compare
them with what the probe read on the machine.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from linkscope.probes.nvml_recording import read_recording, sessions
from support.fakes.nvml_standin.describe import c_symbol

DESCRIPTION_VARIABLE = "LINKSCOPE_NVML_DESCRIPTION"
DEVICE_FUNCTIONS_WITH_SUFFIX = {
    "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetClockInfo", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetMigDeviceHandleByIndex",
}
"""Functions whose integer argument after the device becomes a key suffix (`.1`)."""
PAIR_FUNCTIONS = {"nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetP2PStatus"}


def _device(arg: Any) -> str | None:
    """A recorded handle (`gpu3`, `gpu3m1`) as the stand-in names the device (`3`, `3m1`)."""
    if isinstance(arg, dict) and isinstance(arg.get("handle"), str) and arg["handle"].startswith("gpu"):
        return arg["handle"][3:]
    return None


def _fields(value: Any) -> dict[str, Any]:
    return value.get("fields", {}) if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    if isinstance(value, dict) and "bytes" in value:
        return bytes.fromhex(value["bytes"]).split(b"\0", 1)[0].decode("utf-8", "replace")
    return str(value)


def _words(value: Any) -> str:
    return ":".join(str(int(word)) for word in value)


def _fabric(args: list[Any]) -> str:
    fields = _fields(args[1].get("byref") if len(args) > 1 and isinstance(args[1], dict) else None)
    raw_uuid = fields.get("clusterUuid")
    uuid_hex = raw_uuid["bytes"] if isinstance(raw_uuid, dict) and "bytes" in raw_uuid else "0" * 32
    return f"{int(fields.get('state', 0)) & 0xFF}:{int(fields.get('status', 0))}:{int(fields.get('cliqueId', 0))}:{uuid_hex}"


ENCODERS: dict[str, Callable[[Any, list[Any]], str]] = {
    "nvmlDeviceGetPciInfo": lambda value, _: _text(_fields(value).get("busId")),
    "nvmlDeviceGetNvLinkRemotePciInfo": lambda value, _: _text(_fields(value).get("busId")),
    "nvmlDeviceGetMemoryInfo": lambda value, _: ":".join(str(int(_fields(value).get(key, 0)))
                                                         for key in ("total", "free", "used")),
    "nvmlDeviceGetCudaComputeCapability": lambda value, _: _words(value),
    "nvmlDeviceGetMigMode": lambda value, _: _words(value),
    "nvmlDeviceGetCpuAffinity": lambda value, _: _words(value),
    "nvmlDeviceGetMemoryAffinity": lambda value, _: _words(value),
    "nvmlDeviceGetGpuFabricInfoV": lambda _, args: _fabric(args),
    "nvmlDeviceGetComputeRunningProcesses": lambda value, _: str(len(value)),
    "nvmlDeviceGetMigDeviceHandleByIndex": lambda _value, _args: "1",
}
"""How a recorded answer is written for the stand-in (the rest: the value as text)."""


def _field_lines(call: dict[str, Any], device: str) -> list[str]:
    lines = []
    for value in call.get("result") or []:
        fields = _fields(value)
        key = f"nvmlDeviceGetFieldValues.{device}.{fields.get('fieldId')}.{fields.get('scopeId')}"
        code = int(fields.get("nvmlReturn", 0))
        if code:
            lines.append(f"{key} !{code}")
            continue
        union = _fields(fields.get("value"))
        number = union.get("ullVal")
        if int(fields.get("valueType", 3)) == 1:
            number = union.get("uiVal")
        lines.append(f"{key} ={int(number or 0)}")
    return lines


def description_from_calls(calls: list[dict[str, Any]]) -> str:
    """The stand-in's description answering every recorded call as the recorded driver did (first answer wins)."""
    lines: dict[str, str] = {}
    count = 0
    for call in calls:
        function, args = call["function"], call.get("args", [])
        if call.get("reason") == "FunctionNotFound" and call.get("error") is None:
            continue  # missing from the binding: never reaches the library
        if function in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetHandleByIndex"):
            continue
        if function == "nvmlDeviceGetFieldValues":
            device = _device(args[0]) if args else None
            for line in _field_lines(call, device or "?") if device is not None and "result" in call else ():
                lines.setdefault(line.split(" ", 1)[0], line)
            continue
        symbol = c_symbol(function)
        devices = [name for name in map(_device, args) if name is not None]
        numbers = [str(int(arg)) for arg in args if isinstance(arg, int) and not isinstance(arg, bool)]
        if function in PAIR_FUNCTIONS:
            key = ".".join([symbol, *devices, *numbers[-1:]] if function == "nvmlDeviceGetP2PStatus" else [symbol, *devices])
        elif devices:
            suffix = numbers[-1:] if function in DEVICE_FUNCTIONS_WITH_SUFFIX else []
            key = ".".join([symbol, devices[0], *suffix])
        else:
            key = symbol
        if "error" in call:
            line = f"{key} !{int(call['error']) if call['error'] is not None else 999}"
        else:
            encode = ENCODERS.get(function)
            value = encode(call["result"], args) if encode else _text(call["result"])
            line = f"{key} ={value}"
            if function == "nvmlDeviceGetCount":
                count = int(call["result"])
        lines.setdefault(key, line)
    return "\n".join([*lines.values(), f"count {count}"]) + "\n"


def main(argv: list[str]) -> int:
    recording, session, description = Path(argv[0]), int(argv[1]), Path(argv[2])
    calls = sessions(read_recording(recording.read_text(encoding="utf-8")))[session][1]
    description.write_text(description_from_calls(calls), encoding="utf-8")
    os.environ[DESCRIPTION_VARIABLE] = str(description)
    import pynvml

    from linkscope.probes.nvml import NvmlFacts, collect
    from linkscope.probes.nvml_query import NvmlQuery
    from linkscope.probes.nvml_recording import nvml_facts_json

    facts = NvmlFacts()
    query = NvmlQuery(pynvml)
    collect(query, facts)
    json.dump(nvml_facts_json(facts, query.gaps), sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
