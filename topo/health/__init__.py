"""Health rules over a snapshot: degraded links, platform settings and environment that slow collectives.

`run_health(HealthContext(snapshot, ...))` returns :class:`HealthFinding` s; the rules are listed in
:mod:`topo.health.rules`.
"""

from linkscope.topo.health.finding import HealthContext, HealthFinding, Rule
from linkscope.topo.health.rules import RULES, run_health

__all__ = ["RULES", "HealthContext", "HealthFinding", "Rule", "run_health"]
