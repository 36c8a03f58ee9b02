"""`linkscope check`, `--suggest` and `plan`: the layout rules over a placed, priced layout.

:mod:`~topo.checks.check` runs them (`check_layout`); each rule reads a :class:`~topo.checks.context.LayoutContext`
and lives with its kind: :mod:`~topo.checks.layout_rules`, :mod:`~topo.checks.link_rules`,
:mod:`~topo.checks.health_rules`. :mod:`~topo.checks.suggest` searches a better layout, :mod:`~topo.checks.plan`
designs one."""
