"""NVLink health: links missing against identical peers, ports down, error counters that grow, the NVSwitch fabric."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines, gpu_label, index_list
from linkscope.topo.model.host import Host, LinkKind

FABRIC_READY = "Completed"
"""The NVSwitch fabric state (`nvidia-smi -q`, Fabric) of a GPU the fabric manager has registered."""


def active_nvlinks(host: Host, position: int) -> int:
    """NVLinks up on GPU `position`: its ports when NVML listed them, else the largest `NV<n>` of its pairs
    (what an `nvidia-smi topo -m` text gives: on NVSwitch boxes every pair shows the GPU's full count)."""
    gpu = host.gpus[position]
    if gpu.nvlinks:
        return gpu.nvlink_active_count
    counts = [host.link(position, other).nvlink_count for other in range(len(host.gpus)) if other != position]
    return max(counts, default=0)


def _peer_norm(counts: list[int]) -> int:
    """The link count most identical GPUs have (ties: the larger, since a GPU cannot gain links)."""
    tally = Counter(counts)
    return max(tally, key=lambda count: (tally[count], count))


def _down_ports(host: Host, position: int) -> list[int]:
    return [port.link for port in host.gpus[position].nvlinks if not port.active]


def nvlink_fewer_links(context: HealthContext) -> Iterator[HealthFinding]:
    """A GPU with fewer NVLinks up than the other GPUs of its model on the host (NV16 among NV18): only among GPUs
    known to be identical (a model named by NVML or the snapshot). A GPU with no NVLink at all and no port listed
    down beside bridged peers is a layout (`nvlink-unbridged`, info); GPUs whose model is not known (a topology
    text) are not judged, and `nvlink-not-judged` says so where their counts differ."""
    for host in context.snapshot.hosts:
        by_model: dict[str, list[int]] = {}
        for position, gpu in enumerate(host.gpus):
            by_model.setdefault(gpu.name, []).append(position)
        for model, positions in by_model.items():
            if len(positions) < 2:
                continue
            counts = {position: active_nvlinks(host, position) for position in positions}
            norm = _peer_norm(list(counts.values()))
            short = [position for position in positions if counts[position] < norm]
            if not short or norm == 0:
                continue
            if not model:
                yield _not_judged(host, counts)
                continue
            unbridged = [position for position in short if counts[position] == 0 and not _down_ports(host, position)]
            if unbridged:
                yield _unbridged(host, unbridged, counts)
            short = [position for position in short if position not in unbridged]
            if not short:
                continue
            evidence = []
            for position in short:
                line = f"{gpu_label(host.gpus[position])}: {counts[position]} of {norm} NVLinks up"
                down = _down_ports(host, position)
                if down:
                    line += f" (ports {', '.join(map(str, down))} down)"
                pairs = sorted({host.link(position, other).token for other in range(len(host.gpus)) if other != position
                                and host.link(position, other).kind is LinkKind.NVLINK})
                if pairs:
                    line += f"; its pairs show {', '.join(pairs)}"
                evidence.append(line)
            others = len(positions) - len(short)
            evidence.append(f"the other {others} {host.gpus[positions[0]].name or 'GPUs'}: {norm} NVLinks up each")
            indices = tuple(host.gpus[position].index for position in short)
            yield HealthFinding(
                "nvlink-fewer-links", "error", host.hostname, indices,
                f"{index_list(indices)} {'has' if len(short) == 1 else 'have'} fewer NVLinks up than the identical "
                f"GPUs beside {'it' if len(short) == 1 else 'them'} ({min(counts[p] for p in short)} instead of {norm}): "
                "every ring through it runs at the reduced bandwidth",
                evidence_lines(evidence),
                "check `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` on that GPU; reseat or replace the board "
                "(a link that does not train after a reboot is a hardware fault)",
            )


def _count_lines(host: Host, counts: dict[int, int]) -> list[str]:
    """`GPU0, GPU1: 4 NVLinks` per distinct count."""
    by_count: dict[int, list[int]] = {}
    for position, count in counts.items():
        by_count.setdefault(count, []).append(host.gpus[position].index)
    return [f"{index_list(tuple(indices))}: {count} NVLink(s)" for count, indices in sorted(by_count.items(), reverse=True)]


def _unbridged(host: Host, positions: list[int], counts: dict[int, int]) -> HealthFinding:
    indices = tuple(host.gpus[position].index for position in positions)
    return HealthFinding(
        "nvlink-unbridged", "info", host.hostname, indices,
        f"{index_list(indices)} {'has' if len(indices) == 1 else 'have'} no NVLink while other GPUs of the host are "
        "bridged: a layout, not a fault (no port is listed down); rings through it ride PCIe",
        evidence_lines(_count_lines(host, counts)),
        "nothing to repair; place tensor-parallel groups on the bridged GPUs (linkscope check), or fit a bridge",
    )


def _not_judged(host: Host, counts: dict[int, int]) -> HealthFinding:
    """Different NVLink counts among GPUs of unknown model: info where a GPU has none (a bridge layout is likely),
    a warning where one has fewer but some (a partial bond, NV16 among NV18, is rarely a layout)."""
    partial = min(counts.values()) > 0
    return HealthFinding(
        "nvlink-not-judged", "warning" if partial else "info", host.hostname, (),
        "GPUs with different NVLink counts, but their model is not known (a topology text names none), so "
        "whether one lost links is not judged" + ("; a partial bond like this is rarely a layout" if partial else ""),
        evidence_lines(_count_lines(host, counts)),
        "run `linkscope doctor` on the machine (or give a snapshot from `linkscope probe`) to judge NVLinks by model",
    )


def nvlink_links_down(context: HealthContext) -> Iterator[HealthFinding]:
    """Ports NVML lists as down on a GPU that has others up, where its identical peers are no better off
    (those are `nvlink-fewer-links`)."""
    for host in context.snapshot.hosts:
        counts = [active_nvlinks(host, position) for position in range(len(host.gpus))]
        for position, gpu in enumerate(host.gpus):
            down = _down_ports(host, position)
            if not down or counts[position] == 0:
                continue
            peers = [counts[other] for other, peer in enumerate(host.gpus) if other != position and peer.name == gpu.name]
            if peers and counts[position] < _peer_norm([*peers, counts[position]]):
                continue
            yield HealthFinding(
                "nvlink-links-down", "warning", host.hostname, (gpu.index,),
                f"{gpu_label(gpu)} has {len(down)} of its {len(gpu.nvlinks)} NVLink ports down",
                (f"{gpu_label(gpu)}: ports {', '.join(map(str, down))} inactive, {counts[position]} active",),
                "a port the product has but that does not train costs bandwidth: check `nvidia-smi nvlink -s` "
                "and the NVLink bridge or baseboard",
            )


def nvlink_errors_growing(context: HealthContext) -> Iterator[HealthFinding]:
    """NVLink error counters (CRC, replay, recovery) that grew during a recording."""
    recording = context.snapshot.recording
    if recording is None or len(recording.samples) < 2:
        return
    first = {gpu.index: dict(gpu.nvlink_errors) for gpu in recording.samples[0].gpus}
    last = {gpu.index: dict(gpu.nvlink_errors) for gpu in recording.samples[-1].gpus}
    seconds = recording.duration_s
    evidence = []
    grown: list[int] = []
    for index in sorted(first.keys() & last.keys()):
        deltas = {kind: last[index][kind] - first[index][kind] for kind in first[index].keys() & last[index].keys()
                  if last[index][kind] > first[index][kind]}
        if not deltas:
            continue
        grown.append(index)
        counted = ", ".join(f"{kind} +{delta}" for kind, delta in sorted(deltas.items()))
        evidence.append(f"GPU{index}: {counted} in {seconds:g} s")
    if not grown:
        return
    yield HealthFinding(
        "nvlink-errors-growing", "warning", recording.hostname, tuple(grown),
        f"NVLink error counters grew on {index_list(grown)} while recording: retransmissions slow every transfer "
        "on those links",
        evidence_lines(evidence),
        "watch `nvidia-smi nvlink -e`; counters that keep growing under load point at a bad link or board (RMA)",
    )


def nvlink_fabric_incomplete(context: HealthContext) -> Iterator[HealthFinding]:
    """An NVSwitch system whose fabric manager has not (or not cleanly) registered the GPUs."""
    for host in context.snapshot.hosts:
        state = host.capabilities.nvlink_fabric
        if state is None or state == FABRIC_READY:
            continue
        indices = tuple(gpu.index for gpu in host.gpus)
        yield HealthFinding(
            "nvlink-fabric-incomplete", "error", host.hostname, indices,
            f"the NVSwitch fabric is not ready ({state}): CUDA and NCCL cannot use NVLink between these GPUs until it is",
            (f"NVML fabric state: {state}",),
            "start or fix the fabric manager (`systemctl status nvidia-fabricmanager`, its log), then re-run doctor",
        )
