"""Analyses of an NCCL log (read by :mod:`topo.formats.nccl_log`): findings about the transports NCCL chose,
and each connection placed on the machine's links."""
