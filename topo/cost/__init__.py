"""The communication cost model and what is priced with it.

- :mod:`topo.cost.params` alpha-beta parameters per link class (defaults with sources, overrides file);
- :mod:`topo.cost.protocols` NCCL's tuner constants inside an NVLink domain (protocols, the NVLS pipeline);
- :mod:`topo.cost.collectives` ring / tree / NVLS / hierarchical algorithms and `auto`;
- :mod:`topo.cost.channels` several rings at once over direct NVLink;
- :mod:`topo.cost.groups` what each process group rides on a placed cluster (memoised);
- :mod:`topo.cost.step` per-step time of a placed layout;
- :mod:`topo.cost.calibrate` fit the parameters to measured peer copies and collectives;
  :mod:`topo.cost.calibration_report` what that changed, in words;
- :mod:`topo.cost.expect` expected next to measured: the one ratio and verdict;
- :mod:`topo.cost.explain` the model run backwards from an observed time;
- :mod:`topo.cost.published` published nccl-tests results the model is checked against.
"""
