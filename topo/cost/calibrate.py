"""Fit the cost model to what was measured on the box.

Peer copies set the bandwidth (and latency) of the GPU pairs they measured. Large all_reduce
results then scale the link class that limits their ring (the network, for a result over more
ranks than one host has), so that the model's prediction for that call, by the same pricing
every figure uses (NVLS or a tree included), matches the measured busbw (copy-engine copies run a
little faster than NCCL rings).
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.topo.cost.collectives import collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.layout.placement import Placement
from linkscope.topo.model.host import Host
from linkscope.topo.model.measurements import Measurements

CALIBRATION_MIN_BYTES = 64 * 1024 * 1024
"""Only collectives at least this large calibrate bandwidth (smaller ones are latency-bound)."""

CALIBRATION_ROUNDS = 8
"""Rescaling rounds per result: a scaled link can change which algorithm is cheapest."""


def calibrate(model: CostModel, measurements: Measurements, host: Host) -> CostModel:
    """A copy of `model` fitted to `measurements` taken on (a host like) `host`."""
    position = {gpu.index: pos for pos, gpu in enumerate(host.gpus)}
    pair_gbps = dict(model.pair_gbps)
    pair_alpha = dict(model.pair_alpha_us)
    for copy in measurements.link_copies():
        if copy.src not in position or copy.dst not in position or copy.src == copy.dst:
            continue
        a, b = sorted((position[copy.src], position[copy.dst]))
        if copy.unidir_gbps:
            pair_gbps[(a, b)] = min(pair_gbps.get((a, b), copy.unidir_gbps), copy.unidir_gbps)
        if copy.latency_us:
            pair_alpha[(a, b)] = copy.latency_us
    fitted = replace(model, pair_gbps=pair_gbps, pair_alpha_us=pair_alpha)
    scale = dict(model.class_scale)
    best: dict[int, tuple[int, float, tuple[int, ...]]] = {}
    for result in measurements.collectives:
        if result.op != "all_reduce" or result.size_bytes < CALIBRATION_MIN_BYTES or result.busbw_gbps <= 0:
            continue
        if result.nranks is None or result.nranks < 2:
            continue
        previous = best.get(result.nranks)
        if previous is None or result.size_bytes > previous[0]:
            best[result.nranks] = (result.size_bytes, result.busbw_gbps, result.ranks)
    gpus = len(host.gpus)
    for nranks, (size_bytes, busbw, ranks) in sorted(best.items()):
        if nranks <= gpus:
            positions = tuple(position.get(rank, rank) for rank in ranks) if ranks else tuple(range(nranks))
            placement = Placement((host,), (0,), (0,) * nranks, positions, "calibration")
        else:
            nodes = -(-nranks // gpus)
            placement = Placement((host,) * nodes, (0,) * nodes, tuple(r // gpus for r in range(nranks)),
                                  tuple(r % gpus for r in range(nranks)), "calibration")
        link_class = None
        for _ in range(CALIBRATION_ROUNDS):
            links = GroupPricer(placement, replace(fitted, class_scale=scale)).links(range(nranks))
            link_class = link_class or ("NET" if nranks > gpus else links.bottleneck_class)
            predicted = collective_cost("all_reduce", links, size_bytes).busbw_gbps
            if predicted <= 0 or predicted == float("inf") or abs(predicted / busbw - 1) < 1e-3:
                break
            scale[link_class] = scale.get(link_class, 1.0) * busbw / predicted
    note = f"calibrated from {measurements.source}"
    return replace(fitted, class_scale=scale, sources=(*model.sources, note))
