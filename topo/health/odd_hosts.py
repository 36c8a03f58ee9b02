"""The odd node out, fact by fact: each host of a cluster against what most hosts have (:mod:`topo.health.cluster`
is the rule that runs these, and loads this module only for a snapshot of several hosts).

GPU count, active NVLinks and PCIe width per GPU, driver, compute NICs and their rates, the NIC each GPU sends
through, and membership of the multi-node NVLink domain; what "most hosts have" is
:func:`topo.machine.compare.usual_value`, the engine `diff --odd-one-out` uses too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from linkscope.topo.health.finding import HealthFinding
from linkscope.topo.machine.cluster import fabric_key, gpu_rails
from linkscope.topo.machine.compare import below_usual_per_gpu, usual_value
from linkscope.topo.model.host import Host


def odd_hosts(hosts: Sequence[Host]) -> list[HealthFinding]:
    """Every finding about a host unlike most of `hosts`, rule by rule (not yet sorted by severity)."""
    findings = _gpu_count(hosts)
    findings += _per_gpu(hosts, "host-fewer-nvlinks", "has fewer active NVLinks",
                         lambda host, position: host.gpus[position].nvlink_active_count or None,
                         "an NVLink is down: check `nvidia-smi nvlink -s`; reset or service the GPU/baseboard")
    findings += _per_gpu(hosts, "host-pcie-narrower", "runs a narrower PCIe link",
                         lambda host, position: host.gpus[position].pcie_width_current,
                         "the GPU trained at a reduced PCIe width: reseat it or check the riser/slot")
    findings += _driver(hosts)
    findings += _nics(hosts)
    findings += _rails(hosts)
    findings += _nvlink_domain(hosts)
    return findings


def _gpu_count(hosts: Sequence[Host]) -> list[HealthFinding]:
    most, count = usual_value([len(host.gpus) for host in hosts])
    return [HealthFinding("host-missing-gpus", "error", host.hostname, (),
                           f"{host.hostname} shows {len(host.gpus)} GPUs where most hosts have {most}",
                           (f"{len(host.gpus)} GPUs; {most} on {count} of {len(hosts)} hosts",),
                           "check `nvidia-smi` on the host: a GPU fell off the bus or its driver did not load; "
                           "drain the node before a job lands on it")
            for host in hosts if len(host.gpus) < most]


def _per_gpu(hosts: Sequence[Host], code: str, what: str, value: Callable[[Host, int], int | None],
             fix: str) -> list[HealthFinding]:
    """Hosts where a GPU position has less of `value` than that position has on most hosts."""
    return [HealthFinding(code, "warning", hostname, tuple(gpu for gpu, _, _ in items),
                           f"{hostname}: GPU {', '.join(str(gpu) for gpu, _, _ in items)} {what} than on most hosts",
                           tuple(f"GPU {gpu}: {got} against {usual} on most hosts" for gpu, got, usual in items), fix)
            for hostname, items in below_usual_per_gpu(hosts, value).items()]


def _driver(hosts: Sequence[Host]) -> list[HealthFinding]:
    drivers = [host.versions.driver for host in hosts]
    if len(set(drivers)) < 2:
        return []
    usual, count = usual_value(drivers)
    most = "most hosts" if count * 2 > len(hosts) else "the others"
    evidence = tuple(f"{driver or 'unknown'} on {number} host(s)" for driver, number in Counter(drivers).most_common())
    return [HealthFinding("host-driver-differs", "warning", host.hostname, (),
                           f"{host.hostname} runs NVIDIA driver {driver or 'unknown'}, {most} {usual or 'unknown'}",
                           evidence, "install the same driver (and CUDA, NCCL) on every node of a job")
            for host, driver in zip(hosts, drivers, strict=True) if driver != usual]


def _compute_nics(host: Host) -> dict[str, float | None]:
    """The NICs some GPU of the host sends through (its rails), by name, with their rates."""
    by_name = {nic.name: nic for nic in host.nics}
    return {rail.nic: by_name[rail.nic].rate_gbit_per_s for rail in gpu_rails(host) if rail.nic is not None}


def _nics(hosts: Sequence[Host]) -> list[HealthFinding]:
    per_host = [_compute_nics(host) for host in hosts]
    name_sets = [tuple(sorted(nics)) for nics in per_host]
    usual_names, _ = usual_value(name_sets)
    findings = []
    for host, names in zip(hosts, name_sets, strict=True):
        missing = sorted(set(usual_names) - set(names))
        if missing or len(names) < len(usual_names):
            findings.append(HealthFinding(
                "host-nic-missing", "warning", host.hostname, (),
                f"{host.hostname}: {len(names)} NICs carry GPU traffic where most hosts have {len(usual_names)}"
                + (f" ({', '.join(missing)} missing)" if missing else ""),
                (f"rails {', '.join(names) or 'none'}", f"most hosts: {', '.join(usual_names)}"),
                "check the NIC (`ibstat`, link up, driver loaded); until then GPUs share another NIC and the "
                "node's network bandwidth drops"))
    rates: dict[str, list[float]] = {}
    for nics in per_host:
        for name, rate in nics.items():
            if rate is not None:
                rates.setdefault(name, []).append(rate)
    usual_rate = {name: usual_value(values)[0] for name, values in rates.items()}
    for host, nics in zip(hosts, per_host, strict=True):
        slow = [(name, rate) for name, rate in nics.items() if rate is not None and rate < usual_rate[name]]
        if slow:
            findings.append(HealthFinding(
                "host-nic-slower", "warning", host.hostname, (),
                f"{host.hostname}: {', '.join(name for name, _ in slow)} trained to a lower rate than on most hosts",
                tuple(f"{name} {rate:g} Gb/s against {usual_rate[name]:g}" for name, rate in slow),
                "reseat or replace the cable or transceiver; check the switch port"))
    return findings


def _rails(hosts: Sequence[Host]) -> list[HealthFinding]:
    """GPUs whose NIC differs from the one the same GPU uses on most hosts: DP traffic leaves the rail."""
    rails = [{rail.gpu: rail.nic for rail in gpu_rails(host)} for host in hosts]
    usual = {}
    for gpu in sorted({gpu for per_host in rails for gpu in per_host}):
        known = [per_host[gpu] for per_host in rails if per_host.get(gpu) is not None]
        if known:
            usual[gpu] = usual_value(known)[0]
    findings = []
    for host, per_host in zip(hosts, rails, strict=True):
        off = [(gpu, nic) for gpu, nic in per_host.items() if gpu in usual and nic != usual[gpu]]
        if off:
            findings.append(HealthFinding(
                "host-off-rail", "info", host.hostname, tuple(gpu for gpu, _ in off),
                f"{host.hostname}: GPU {', '.join(str(gpu) for gpu, _ in off)} send{'s' if len(off) == 1 else ''} "
                "through another NIC than on most hosts, so data-parallel traffic crosses rails",
                tuple(f"GPU {gpu} -> {nic or 'no NIC'} (most hosts: {usual[gpu]})" for gpu, nic in off),
                "restore the missing or down NIC; rail-optimised fabrics need each local rank on the same NIC "
                "index everywhere"))
    return findings


def _nvlink_domain(hosts: Sequence[Host]) -> list[HealthFinding]:
    keys = [fabric_key(host) for host in hosts]
    if all(key is None for key in keys):
        return []
    usual, _ = usual_value([key for key in keys if key is not None])
    return [HealthFinding("host-outside-nvlink-domain", "error", host.hostname, (),
                           f"{host.hostname}: its GPUs report no (or mixed) NVLink fabric clique while the other "
                           "hosts share one", (f"most hosts: clique {usual}",),
                           "check the fabric manager / IMEX service and `nvidia-smi -q` Fabric state")
            for host, key in zip(hosts, keys, strict=True) if key is None]
