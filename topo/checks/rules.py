"""The layout rules `linkscope check` runs, in the order their findings are listed (before sorting by severity).

A rule is a function `LayoutContext -> list[LayoutFinding]` (:mod:`topo.checks.context`); a new one goes in the module
of its kind (layout_rules, link_rules, health_rules) and in RULES.

| code | severity | when |
|---|---|---|
| `layout-mismatch` | error | the layout and the machine disagree (a GPU the host lacks, two ranks on one GPU) |
| `layout-rejected-by-megatron` | error | Megatron-Core refuses the layout at start-up (`megatron_refusal`) |
| `tp-crosses-node` | error | a tensor-parallel group spans nodes |
| `tp-slow-link` | warning | a TP group's best ring crosses PCIe on an NVLink box, SYS, or a far slower link than the best |
| `ep-crosses-node` | warning | an expert-parallel group spans nodes |
| `group-imbalance` | warning | groups of one dimension ride different links, so one group straggles |
| `nic-far-from-gpu` | warning | a GPU with cross-node traffic reaches its nearest NIC through the CPU |
| `dp-not-rail-aligned` | info | a DP group uses different local GPUs on different nodes, so its traffic changes rails |
| `layout-underfills` | warning | the layout uses fewer GPUs than the cluster has: the others sit idle |
| `layers-not-divisible` | warning | a named model's layers do not split evenly over pp (or over vpp chunks) |

plus the health findings of :mod:`topo.health` on the GPUs the layout places ranks on (`health_on_ranks`).
`layout-mismatch` is found while placing the ranks, before any rule runs.
"""

from __future__ import annotations

from collections.abc import Callable

from linkscope.topo.checks.context import LayoutContext
from linkscope.topo.checks.health_rules import health_on_ranks
from linkscope.topo.checks.layout_rules import layers_not_divisible, rejected_by_megatron, underfills
from linkscope.topo.checks.link_rules import (
    dp_not_rail_aligned,
    ep_crosses_node,
    group_imbalance,
    nic_far_from_gpu,
    tp_crosses_node,
    tp_slow_link,
)
from linkscope.topo.checks.report import LayoutFinding

FINDING_CODES: tuple[str, ...] = (
    "layout-mismatch",
    "layout-rejected-by-megatron",
    "tp-crosses-node",
    "tp-slow-link",
    "ep-crosses-node",
    "group-imbalance",
    "nic-far-from-gpu",
    "dp-not-rail-aligned",
    "layout-underfills",
    "layers-not-divisible",
)
"""Every code a check can report, `layout-mismatch` (found while placing the ranks) included."""

Rule = Callable[[LayoutContext], list[LayoutFinding]]
"""A layout rule: reads the context, returns its findings."""

RULES: tuple[Rule, ...] = (
    rejected_by_megatron,
    layers_not_divisible,
    tp_crosses_node,
    tp_slow_link,
    ep_crosses_node,
    group_imbalance,
    nic_far_from_gpu,
    dp_not_rail_aligned,
    underfills,
    health_on_ranks,
)
"""Every layout rule, in the order their findings are listed (before sorting by severity)."""
