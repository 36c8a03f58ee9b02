"""A machine plus its driver's behaviour, as plain data, and what the probes make of it.

A :class:`Scenario` builds the same :class:`~support.fakes.fake_nvml.FakeNvml` in the test process and in
the subprocess that loads the real pynvml over the C stand-in; :func:`run` drives the probe, the
live sampler or the benchmark preflight over whichever NVML module it is given and returns the
result as JSON, so the two can be compared field by field.
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linkscope.probes.bench.preflight import read_gpu_states
from linkscope.probes.capabilities import SoftwareFacts
from linkscope.probes.host import probe_host
from linkscope.probes.live import LiveSampler
from linkscope.topo.model.codec import to_jsonable
from linkscope.topo.model.host import Host, MigDevice, NvLinkPort
from linkscope.topo.samples import load_sample
from support.fakes.fake_nvml import DriverQuirks, FakeNvml
from support.fakes.fake_sysfs import build_sysfs


def with_mig(host: Host) -> Host:
    """GPU 0 in MIG mode with two MIG devices (a 3g and a 4g slice)."""
    gpu = host.gpus[0]
    total = gpu.memory_total_bytes or 0
    devices = (
        MigDevice(f"MIG-{uuid.uuid5(uuid.NAMESPACE_OID, f'{gpu.uuid}/{instance}')}", instance, 0, total * size // 8)
        for instance, size in ((1, 4), (2, 3))
    )
    migrated = dataclasses.replace(gpu, mig_enabled=True, mig_devices=tuple(devices))
    return dataclasses.replace(host, gpus=(migrated, *host.gpus[1:]))


def with_36_links(host: Host) -> Host:
    """Every GPU with 36 NVLinks into NVSwitches (the most current bindings describe), NVLink 5."""
    gpus = []
    for gpu in host.gpus:
        switch = next((port.remote_pci_bus_id for port in gpu.nvlinks if port.remote_type == "switch"), None)
        ports = tuple(NvLinkPort(link, True, 5, switch, "switch") for link in range(36))
        gpus.append(dataclasses.replace(gpu, nvlinks=ports, compute_capability="10.0"))
    links = tuple(dataclasses.replace(link, nvlink_count=36, nvlink_gen=5) if link.nvlink_count else link
                  for link in host.links)
    return dataclasses.replace(host, gpus=tuple(gpus), links=links)


def with_two_partitions(host: Host) -> Host:
    """The NVSwitch fabric split in two (GPUs 0-3 and 4-7): P2P over NVLink answers NS across the split."""
    half = len(host.gpus) // 2
    links = tuple(
        dataclasses.replace(link, p2p=dataclasses.replace(link.p2p, nvlink="NS"))
        if link.p2p is not None and (link.a < half) != (link.b < half) else link
        for link in host.links
    )
    return dataclasses.replace(host, links=links)


VARIANTS: dict[str, Callable[[Host], Host]] = {"mig": with_mig, "links36": with_36_links, "partitioned": with_two_partitions}


@dataclass(frozen=True)
class Scenario:
    """One sample machine, its driver quirks and faults, and what to run on it."""

    sample: str
    run: str = "probe"
    """`probe`, `live` or `preflight`."""
    variant: str | None = None
    quirks: dict[str, Any] = field(default_factory=dict)
    fail: tuple[tuple[str, int, int | None], ...] = ()
    """(pynvml function, NVML error code, GPU index or None for every GPU)."""
    lost: tuple[int, ...] = ()
    init_error: int | None = None
    hang: tuple[tuple[str, int | None], ...] = ()
    slow_init_s: float = 0.0
    first_touch_s: float = 0.0
    processes: tuple[tuple[int, int], ...] = ()
    memory_used_bytes: tuple[tuple[int, int], ...] = ()
    budget_s: float = 5.0
    per_link: bool = True

    def host(self) -> Host:
        """The machine this scenario runs on."""
        host = load_sample(self.sample).host
        return VARIANTS[self.variant](host) if self.variant else host

    def fake(self) -> FakeNvml:
        """The Python fake NVML of this scenario, faults and all."""
        fake = FakeNvml(self.host(), DriverQuirks(**self.quirks))
        for function, code, gpu in self.fail:
            fake.fail(function, code, gpu)
        for gpu in self.lost:
            fake.lose_gpu(gpu)
        if self.init_error is not None:
            fake.fail_init(self.init_error)
        for function, hung_gpu in self.hang:
            fake.hang(function, hung_gpu)
        fake.slow_init_s = self.slow_init_s
        fake.first_touch_s = self.first_touch_s
        fake.processes.update(dict(self.processes))
        fake.memory_used_bytes.update(dict(self.memory_used_bytes))
        return fake

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (for the subprocess)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scenario:
        """The inverse of :meth:`to_json`."""
        tuples = {"fail", "lost", "hang", "processes", "memory_used_bytes"}
        fields: dict[str, Any] = {
            key: tuple(tuple(v) if isinstance(v, list) else v for v in value) if key in tuples else value
            for key, value in data.items()
        }
        return cls(**fields)


class _Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def _software(host: Host) -> SoftwareFacts:
    return SoftwareFacts(torch=host.versions.torch, nccl=host.versions.nccl,
                         torch_symmetric_memory=host.capabilities.torch_symmetric_memory)


def _sysfs_root(scenario: Scenario, host: Host, workdir: Path) -> Path:
    """The fake sysfs tree of the scenario's sample, written once per work directory (no variant touches PCI)."""
    root = workdir / f"sysfs-{scenario.sample}"
    if not root.exists():
        staging = Path(tempfile.mkdtemp(dir=workdir))
        build_sysfs(staging, host)
        staging.rename(root)
    return root


def run(scenario: Scenario, fake: FakeNvml, module: Any, changed: Callable[[FakeNvml], None], workdir: Path) -> Any:
    """Run `scenario` over NVML `module` (the fake itself, or the real pynvml over the C stand-in).

    `changed(fake)` is called whenever the fake's state moves on (live counters), so the C stand-in's
    description can be rewritten; `workdir` keeps the fake sysfs trees. Returns the result as JSON.
    """
    host = fake.host
    if scenario.run == "probe":
        root = _sysfs_root(scenario, host, workdir)
        snapshot = probe_host(nvml=module, sysfs_root=str(root), hostname=host.hostname,
                              budget_s=scenario.budget_s, software=_software(host))
        result = to_jsonable(snapshot)
        result.pop("created")
        return result
    if scenario.run == "live":
        clock = _Clock()
        sampler = LiveSampler(module, clock=clock, per_link=scenario.per_link)
        readings = [sampler.read()]
        fake.advance(2.0, nvlink_gbps=10.0, errors=3)
        changed(fake)
        clock.now_s += 2.0
        readings.append(sampler.read())
        sampler.close()
        return to_jsonable(readings)
    if scenario.run == "preflight":
        return to_jsonable(read_gpu_states(module))
    raise ValueError(f"unknown run {scenario.run!r}")
