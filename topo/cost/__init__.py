"""The communication cost model: link parameters, collective algorithms, group pricing, calibration.

- :mod:`topo.cost.params` alpha-beta parameters per link class (defaults with sources, overrides file);
- :mod:`topo.cost.collectives` ring / tree / hierarchical algorithms and `auto`;
- :mod:`topo.cost.groups` what each process group rides on a placed cluster (memoised);
- :mod:`topo.cost.calibrate` fit the parameters to measured peer copies and collectives.
"""

from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.collectives import ALGORITHMS, OPS, Cost, GroupLinks, collective_cost, parse_alpha_beta, uniform_links
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel, Hop, load_cost_overrides

__all__ = [
    "ALGORITHMS",
    "OPS",
    "Cost",
    "CostModel",
    "GroupLinks",
    "GroupPricer",
    "Hop",
    "calibrate",
    "collective_cost",
    "load_cost_overrides",
    "parse_alpha_beta",
    "uniform_links",
]
