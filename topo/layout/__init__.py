"""A training job's parallel layout: the flags resolved (:mod:`~topo.layout.spec`), the process groups as
Megatron-LM and DeviceMesh build them (:mod:`~topo.layout.groups`), ranks placed on GPUs
(:mod:`~topo.layout.placement`) and the bytes each dimension moves per step (:mod:`~topo.layout.volumes`)."""
