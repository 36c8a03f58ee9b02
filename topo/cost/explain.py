"""The cost model run backwards: which links and placement explain an observed collective time.

"This 1 GiB 8-way all_reduce takes 150 ms - is the algorithm broken?" Each candidate placement
(all ranks in one node on the intra-node link, 4 per node, ..., one per node over the network; one
node over PCIe instead of NVLink) is priced with :func:`topo.cost.collective_cost`, and the one whose
prediction is nearest the observed time explains it. For any priced group the bandwidth its slowest
link would need to reproduce the time exactly is found by bisection on the same model, so a layout
that should be fast but is not points at the link that is slow.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps, format_seconds
from linkscope.topo.cost.collectives import Cost, GroupLinks, collective_cost, uniform_links
from linkscope.topo.cost.expect import SLOW_FRACTION, Verdict, limited_by, limiting_part, link_path, verdict
from linkscope.topo.model.busbw import bus_factor

_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs|ns)?\s*\Z")
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration_s(text: str, field: str) -> float:
    """`150ms`, `150 ms`, `0.15s`, `6280us` as seconds (a bare number is seconds); InputError otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise InputError(f"{field}: {text!r} is not a duration (examples: 150ms, 6.3ms, 0.15s, 40us)")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if not seconds > 0 or not math.isfinite(seconds):
        raise InputError(f"{field}: {text!r} must be a positive duration")
    return seconds


@frozen
class Scenario:
    """One way the ranks could sit: its links for the cost model and words for people."""

    name: str
    """`8 per node (1 node) on the intra link`, `1 per node (8 nodes) over the network`."""
    links: GroupLinks


@frozen
class Fit:
    """A scenario priced against the observed time."""

    scenario: Scenario
    cost: Cost
    observed_s: float
    implied_gbps: float | None
    """Bandwidth the scenario's slowest link would need to take exactly the observed time; None when even
    unbounded bandwidth is slower (the latencies alone exceed it)."""

    @property
    def bottleneck_gbps(self) -> float:
        """The slowest link's bandwidth in the scenario as priced."""
        return _bottleneck_gbps(self.scenario.links)

    @property
    def speed_ratio(self) -> float:
        """Predicted / observed time: 1 fits, below 1 the observed call is slower than the model says."""
        return self.cost.time_s / self.observed_s

    @property
    def verdict(self) -> Verdict | None:
        """The shared verdict (:func:`topo.cost.expect.verdict`) of the observed speed against this scenario's."""
        return verdict(self.speed_ratio)

    @property
    def fits(self) -> bool:
        """True when the observed time is within the shared threshold of the prediction, either way (a call much
        faster than its links allow does not fit either: the ranks sit elsewhere, the timing stopped early, or the
        machine's links are faster than the source describes)."""
        return SLOW_FRACTION <= self.speed_ratio <= 1 / SLOW_FRACTION

    @property
    def distance(self) -> float:
        """How far the prediction is from the observed time (|log ratio|): the smallest explains it best."""
        return abs(math.log(self.speed_ratio))

    def to_json(self) -> dict[str, Any]:
        """The JSON form of `explain --json`."""
        return {"scenario": self.scenario.name, "link": link_name(self.scenario.links), "algo": self.cost.algo,
                "predicted_s": self.cost.time_s, "speed_ratio": self.speed_ratio, "verdict": self.verdict, "fits": self.fits,
                "bottleneck_gbps": self.bottleneck_gbps, "implied_gbps": self.implied_gbps,
                "limited_by": limited_by(self.scenario.links), "path": list(link_path(self.scenario.links)),
                "limiting_part": limiting_part(self.scenario.links) or None}


def _bottleneck_gbps(links: GroupLinks) -> float:
    return links.node_net_gbps if links.bottleneck_class == "NET" else links.intra_gbps


def _scaled(links: GroupLinks, factor: float) -> GroupLinks:
    """`links` with the bandwidth of its slowest link class multiplied by `factor`."""
    if links.bottleneck_class == "NET":
        return dataclasses.replace(links, node_net_gbps=links.node_net_gbps * factor,
                                   rank_net_gbps=links.rank_net_gbps * factor)
    return dataclasses.replace(links, intra_gbps=links.intra_gbps * factor, nvls_gbps=links.nvls_gbps * factor,
                               pair_min_gbps=links.pair_min_gbps * factor, egress_gbps=links.egress_gbps * factor)


def implied_gbps(op: str, links: GroupLinks, size_bytes: int, observed_s: float, algo: str = "auto") -> float | None:
    """The bottleneck bandwidth at which `op` over `links` takes `observed_s` (latencies kept); None when even
    a million times the bandwidth is slower than that."""
    base = _bottleneck_gbps(links)
    if not math.isfinite(base) or base <= 0:
        return None

    def time_s(log_factor: float) -> float:
        return collective_cost(op, _scaled(links, math.exp(log_factor)), size_bytes, algo).time_s

    low, high = math.log(1e-6), math.log(1e6)
    if time_s(high) > observed_s:
        return None
    if time_s(low) < observed_s:
        return base * 1e-6
    for _ in range(100):
        middle = (low + high) / 2
        if time_s(middle) > observed_s:
            low = middle
        else:
            high = middle
    return base * math.exp(high)


def what_if_scenarios(ranks: int, intra: tuple[float, float], inter: tuple[float, float],
                      pcie: tuple[float, float]) -> list[Scenario]:
    """All ranks in one node on the intra link, then fewer per node down to one per node over the network
    (every divisor of `ranks`), and one node whose GPUs talk over PCIe instead."""
    found = []
    for per_node in sorted((d for d in range(1, ranks + 1) if ranks % d == 0), reverse=True):
        nodes = ranks // per_node
        where = "in one node" if nodes == 1 else f"{per_node} per node on {nodes} nodes"
        link = (f"intra-node link ({_link_words(intra)})" if nodes == 1 else
                f"network ({_link_words(inter)} per GPU)" if per_node == 1 else
                f"intra-node link and network ({_link_words(intra)}; {_link_words(inter)} per GPU)")
        found.append(Scenario(f"ranks {where} over the {link}", uniform_links(ranks, nodes, intra, inter)))
    if ranks > 1:
        found.append(Scenario(f"ranks in one node over PCIe ({_link_words(pcie)}: no NVLink or no P2P)",
                              uniform_links(ranks, 1, pcie, inter)))
    return found


def _link_words(alpha_beta: tuple[float, float]) -> str:
    return f"{alpha_beta[0]:g} us, {format_gbps(alpha_beta[1], 'g')}"


def fit(op: str, scenario: Scenario, size_bytes: int, observed_s: float, algo: str = "auto") -> Fit:
    """Price `scenario` and find the bandwidth that would explain `observed_s` on it: the bandwidth of the
    slowest hop of a ring (the classic alpha-beta reading) unless an algorithm is forced."""
    cost = collective_cost(op, scenario.links, size_bytes, algo)
    implied_algo = "ring" if algo == "auto" else algo
    return Fit(scenario, cost, observed_s, implied_gbps(op, scenario.links, size_bytes, observed_s, implied_algo))


def explain(op: str, size_bytes: int, ranks: int, observed_s: float, scenarios: list[Scenario],
            algo: str = "auto") -> list[Fit]:
    """Every scenario priced against the observed time, the best explanation first."""
    fits = [fit(op, scenario, size_bytes, observed_s, algo) for scenario in scenarios]
    return sorted(fits, key=lambda each: each.distance)


def observed_busbw_gbps(op: str, size_bytes: int, ranks: int, observed_s: float) -> float:
    """nccl-tests busbw of the observed call."""
    return size_bytes / observed_s / 1e9 * bus_factor(op, ranks)


def link_name(links: GroupLinks) -> str:
    """The slowest link of a group for people: its label (`NV18`, `mlx5_0 400 Gb/s`) or, for what-if links,
    `the network` / `the intra-node link`."""
    if links.intra_label == "intra" or links.net_label == "inter":
        return "the network" if links.bottleneck_class == "NET" else "the intra-node link"
    return links.bottleneck_label or "its slowest link"


def describe_fit(each: Fit) -> str:
    """`ring predicts 150.4 ms; the observed time means 12.5 GB/s on the network (model: 12.5 GB/s)`."""
    implied = (f"is shorter than it allows even with unbounded bandwidth on {link_name(each.scenario.links)} "
               "(its other links and latencies alone take longer)" if each.implied_gbps is None
               else f"means {_gbps(each.implied_gbps)} on {link_name(each.scenario.links)}")
    return (f"{each.cost.algo} predicts {format_seconds(each.cost.time_s)}; the observed time {implied} "
            f"(model: {_gbps(each.bottleneck_gbps)})")


def _gbps(value: float) -> str:
    return format_gbps(value, ".3g") if math.isfinite(value) and value >= 10 else format_gbps(value)
