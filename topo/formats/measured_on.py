"""What machine a results text was measured on, from the device lines its tool prints.

- nccl-tests: `#  Rank  0 Group  0 Pid   6287 on     fs-207 device  0 [0x18] NVIDIA H200` (one per rank;
  the bracket holds the bus id, `0x18` or `0000:b4:00`; builds before 2022 print no `Group`) and, in newer
  builds, `# nccl-tests version 2.13.8 ...`; where no rank line survives, the hosts of the NCCL_DEBUG lines
  (`host:pid:tid [dev] NCCL INFO ...`) in the order they first appear;
- nvbandwidth: `nvbandwidth Version: v0.4` and `Device 0: NVIDIA H100 80GB HBM3` (newer builds add the
  bus id in brackets or parentheses);
- p2pBandwidthLatencyTest: `Device: 0, NVIDIA H100 PCIe, pciBusID: c2, pciDeviceID: 0, pciDomainID:0`.

A text that lists no device yields an identity with only the tool: unknown is said, never guessed.
"""

from __future__ import annotations

import re

from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.lines import clean_lines
from linkscope.topo.formats.nccl_log_lines import LEADING
from linkscope.topo.model.measurements import MeasuredOn

_NCCL_RANK = re.compile(
    r"^#?\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+"
    r"\[(?P<bus>[^\]]*)\]\s+(?P<name>.+?)\s*$"
)
_NCCL_VERSION = re.compile(r"^#?\s*nccl-tests version\s+(\S+)")
_NVB_VERSION = re.compile(r"^nvbandwidth Version:\s*(\S+)")
_NVB_DEVICE = re.compile(r"^Device\s+(?P<device>\d+):\s+(?P<name>.+?)\s*(?:[(\[](?P<bus>[0-9A-Fa-f:.]+)[)\]])?\s*$")
_P2P_DEVICE = re.compile(
    r"^Device:\s*(?P<device>\d+),\s*(?P<name>.+?),\s*pciBusID:\s*(?P<bus>[0-9A-Fa-f]+),\s*"
    r"pciDeviceID:\s*(?P<dev>[0-9A-Fa-f]+),\s*pciDomainID:\s*(?P<domain>[0-9A-Fa-f]+)"
)


@frozen
class _Device:
    host: str | None
    device: int
    name: str
    bus_id: str | None


def measured_on(text: str, tool: str) -> MeasuredOn:
    """The identity `text` states: GPU model and count per host, host names, bus ids, tool and version."""
    devices: dict[tuple[str | None, int], _Device] = {}
    version: str | None = None
    log_hosts: dict[str, None] = {}
    for line in clean_lines(text):
        stripped = line.text.strip()
        if tool == "nccl-tests" and (leading := LEADING.match(stripped)):
            log_hosts.setdefault(leading.group(1))
        elif match := _NCCL_RANK.match(stripped):
            bus = match.group("bus").strip() or None
            key = (match.group("host"), int(match.group("device")))
            devices.setdefault(key, _Device(key[0], key[1], match.group("name"), bus))
        elif match := _P2P_DEVICE.match(stripped):
            bus_id = f"{int(match.group('domain'), 16):04x}:{match.group('bus').lower():0>2}:{match.group('dev').lower():0>2}"
            devices.setdefault((None, int(match.group("device"))),
                               _Device(None, int(match.group("device")), match.group("name"), bus_id))
        elif tool == "nvbandwidth" and (match := _NVB_DEVICE.match(stripped)):
            devices.setdefault((None, int(match.group("device"))),
                               _Device(None, int(match.group("device")), match.group("name"), match.group("bus")))
        elif (found := _NCCL_VERSION.match(stripped) or _NVB_VERSION.match(stripped)) and version is None:
            version = found.group(1)
    if not devices:
        return MeasuredOn(tool=tool, tool_version=version, hosts=tuple(log_hosts))
    hosts = tuple(dict.fromkeys(device.host for device in devices.values() if device.host is not None))
    per_host: dict[str | None, list[_Device]] = {}
    for device in devices.values():
        per_host.setdefault(device.host, []).append(device)
    names = {device.name for device in devices.values()}
    first = sorted(next(iter(per_host.values())), key=lambda device: device.device)
    bus_ids = tuple(device.bus_id for device in first if device.bus_id is not None)
    return MeasuredOn(
        gpu_model=names.pop() if len(names) == 1 else " / ".join(sorted(names)),
        gpu_count=max(len(group) for group in per_host.values()),
        hosts=hosts,
        pci_bus_ids=bus_ids if len(bus_ids) == len(first) else (),
        tool=tool,
        tool_version=version,
    )
