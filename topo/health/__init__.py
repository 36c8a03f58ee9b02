"""Health rules over a snapshot: degraded links, platform settings and environment that slow collectives,
and the odd node of a cluster.

`run_health(HealthContext(snapshot, ...))` (:mod:`topo.health.rules`) returns the findings of every rule in
its RULES registry; a rule is a function `HealthContext -> Iterable[HealthFinding]` (:mod:`topo.health.finding`).
"""
