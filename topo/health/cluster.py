"""Cross-host rules: which node of a cluster is not like the others ("the odd node out").

Pure functions over a multi-host :class:`~topo.model.snapshot.Snapshot` (what `linkscope collect` or
`merge` writes). Each host is compared with what most hosts have: GPU count, active NVLinks and
PCIe width per GPU, driver, compute NICs and their rates, the NIC each GPU sends through, and
membership of the multi-node NVLink domain. Nodes that failed to collect (gaps with a host) are
findings too. Each finding is about one host and carries the fields of `doctor`'s findings, so the
doctor can list them after its per-host rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.machine.cluster import fabric_key, gpu_rails, nvlink_domains
from linkscope.topo.machine.compare import below_usual_per_gpu, usual_value
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot


def _not_collected(snapshot: Snapshot) -> list[HealthFinding]:
    present = {host.hostname for host in snapshot.hosts}
    return [HealthFinding("host-not-collected", "error", gap.host, (), f"{gap.host} did not report: {gap.reason}",
                           (f"{gap.subject}: {gap.reason}",),
                           f"look at {gap.host} (is it up, can it reach the rendezvous?) and collect again")
            for gap in snapshot.gaps if gap.host is not None and gap.host not in present]


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


def cross_host(context: HealthContext) -> tuple[HealthFinding, ...]:
    """The cluster rules as one health rule: the odd nodes of a snapshot of several hosts (or with nodes missing)."""
    snapshot = context.snapshot
    if len(snapshot.hosts) < 2 and not any(gap.host for gap in snapshot.gaps):
        return ()
    return cluster_findings(snapshot)


def cluster_findings(snapshot: Snapshot) -> tuple[HealthFinding, ...]:
    """Every cross-host finding of a cluster snapshot, errors first (none for a single host)."""
    findings = _not_collected(snapshot)
    hosts = snapshot.hosts
    if len(hosts) > 1:
        findings += _gpu_count(hosts)
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
    order = ("error", "warning", "info")
    return tuple(sorted(findings, key=lambda finding: order.index(finding.severity)))


@dataclass(frozen=True)
class HostSummary:
    """One host of a cluster in a line: what the hosts table of `show` and the app's Topology tab list."""

    hostname: str
    gpus: int
    nvlinks: str
    """Active NVLinks per GPU: `18`, or the range `16-18` when they differ."""
    pcie_width: str
    """The narrowest current PCIe width, e.g. `x8`; `-` when not read."""
    rails: int
    """NICs that carry GPU traffic."""
    driver: str
    domain: str
    """`NVL<n>` for the host's multi-node NVLink domain, `-` without one."""
    findings: tuple[str, ...]
    """Codes of the cross-host findings that name the host."""


def host_summaries(snapshot: Snapshot, findings: Sequence[HealthFinding]) -> tuple[HostSummary, ...]:
    """A HostSummary per host of `snapshot`, then one per node that did not report (from its gap)."""
    domain_of: dict[int, str] = {}
    for number, domain in enumerate(nvlink_domains(snapshot)):
        for position in domain.hosts:
            domain_of[position] = f"NVL{number}" if domain.key is not None else "-"
    codes: dict[str, list[str]] = {}
    for finding in findings:
        codes.setdefault(finding.host, []).append(finding.code)
    rows = []
    for position, host in enumerate(snapshot.hosts):
        links = [gpu.nvlink_active_count for gpu in host.gpus]
        widths = [gpu.pcie_width_current for gpu in host.gpus if gpu.pcie_width_current is not None]
        nvlinks = "-" if not links else str(links[0]) if min(links) == max(links) else f"{min(links)}-{max(links)}"
        rails = len({rail.nic for rail in gpu_rails(host) if rail.nic is not None})
        rows.append(HostSummary(host.hostname, len(host.gpus), nvlinks, f"x{min(widths)}" if widths else "-", rails,
                                host.versions.driver or "-", domain_of.get(position, "-"),
                                tuple(codes.get(host.hostname, ()))))
    for finding in findings:
        if finding.code == "host-not-collected":
            rows.append(HostSummary(finding.host, 0, "-", "-", 0, "-", "-", (finding.code,)))
    return tuple(rows)
