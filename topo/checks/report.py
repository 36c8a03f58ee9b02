"""What a check says: its findings and the report with groups, placement, costs and a suggestion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

from linkscope.topo.checks.suggest import Suggestion
from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.step import DimensionCost
from linkscope.topo.layout.groups import order_needs
from linkscope.topo.layout.spec import Layout
from linkscope.topo.model.findings import Finding, Severity, reaches, worst_severity


@frozen
class LayoutFinding(Finding):
    """One problem of the layout on this machine, with the link, the cost and the fix."""

    dim: str
    ranks: tuple[int, ...]
    message: str
    link: str = ""
    """The link it crosses, e.g. `SYS`, `mlx5_0 400 Gb/s`."""
    cost_s: float | None = None
    """Predicted communication time per step of the dimension as laid out."""
    best_cost_s: float | None = None
    """The same with the best alternative (None when there is none)."""
    fix: str = ""


@frozen
class CheckReport:
    """The result of a check: groups, placement, findings, predicted costs and a suggestion."""

    groups: dict[str, list[list[int]]]
    placement: tuple[tuple[int, int], ...]
    """rank -> (node index, GPU position on that host)."""
    findings: tuple[LayoutFinding, ...]
    suggestion: Suggestion | None
    layout: Layout | None = None
    costs: tuple[DimensionCost, ...] = ()
    placement_description: str = ""
    hostnames: tuple[str, ...] = ()
    """Per node."""
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    ring_order: Callable[[Sequence[int]], tuple[int, ...]] | None = field(default=None, compare=False, repr=False)
    """A group's ranks in the order of the ring the costs were priced on (the pricer's); asked per group drawn,
    since ordering every group of 8,192 ranks would cost more than the check itself."""

    def ring(self, dim: str, number: int) -> tuple[int, ...]:
        """The ranks of group `number` of `dim` in the order of its priced ring (rank order when not priced)."""
        members = self.groups[dim][number]
        return self.ring_order(members) if self.ring_order is not None else tuple(members)

    def worst_severity(self) -> Severity | None:
        """The most severe finding's severity, or None without findings."""
        return worst_severity(finding.severity for finding in self.findings)

    def fails(self, fail_on: Severity) -> bool:
        """True when a finding is at or above `fail_on` (error | warning | info)."""
        return reaches((finding.severity for finding in self.findings), fail_on)

    @property
    def step_time_s(self) -> float:
        """Predicted communication time per step (all dimensions, no overlap)."""
        return sum(cost.time_s for cost in self.costs)

    def to_json(self) -> dict[str, Any]:
        """One JSON object: `groups` and `findings` per the contract, plus layout, placement, costs."""
        layout = None
        if self.layout is not None:
            layout = {
                "sizes": {**dict(self.layout.sizes), "edp": self.layout.size("edp")},
                "vpp": self.layout.vpp,
                "optimizer_instances": self.layout.optimizer_instances,
                "world_size": self.layout.world_size,
                "order": "-".join(self.layout.order) if self.layout.order else None,
                "mesh": self.layout.order_string if self.layout.mesh else None,
                "mesh_roles": {dim.name: dim.role for dim in self.layout.mesh} if self.layout.mesh else None,
                "gradient_groups": [group.dim for group in self.layout.gradient_groups()],
                "started_by": order_needs(self.layout),
            }
        suggestion = None
        if self.suggestion is not None:
            suggestion = {
                "order": self.suggestion.order,
                "distribution": self.suggestion.distribution,
                "visible_devices": list(self.suggestion.visible_devices) if self.suggestion.visible_devices else None,
                "flags": list(self.suggestion.flags),
                "env": dict(self.suggestion.env),
                "time_s": self.suggestion.time_s,
                "current_time_s": self.suggestion.current_time_s,
                "speedup": self.suggestion.speedup,
                "needs": self.suggestion.needs,
                "one_flag": None if self.suggestion.one_flag is None else {
                    "flags": list(self.suggestion.one_flag.flags), "time_s": self.suggestion.one_flag.time_s,
                    "speedup": self.suggestion.one_flag.speedup},
            }
        return {
            "layout": layout,
            "placement": {
                "description": self.placement_description,
                "hosts": list(self.hostnames),
                "ranks": [list(pair) for pair in self.placement],
            },
            "groups": self.groups,
            "findings": [finding.to_json() for finding in self.findings],
            "costs": [
                {
                    "dim": cost.dim,
                    "time_s": cost.time_s,
                    "link": cost.link_label,
                    "link_class": cost.link_class,
                    "slowest_ranks": list(cost.slowest_ranks),
                    "ops": [
                        {"op": op.op, "size_bytes": op.size_bytes, "calls_per_step": op.calls_per_step, "algo": op.algo,
                         "time_per_call_s": op.time_per_call_s, "time_per_step_s": op.time_per_step_s}
                        for op in cost.ops
                    ],
                }
                for cost in self.costs
            ],
            "step_time_s": self.step_time_s,
            "suggestion": suggestion,
            "assumptions": list(self.assumptions),
        }
