"""Results of other tools (nccl-tests, nvbandwidth, p2pBandwidthLatencyTest): detect which one wrote a text."""

from __future__ import annotations

import dataclasses

from linkscope.topo.common.errors import InputError
from linkscope.topo.model.measurements import Measurements

FORMATS = ("nccl-tests", "nvbandwidth", "p2pBandwidthLatencyTest")
"""The tools whose output `read_measurements` reads (nvbandwidth as text or as its `-j` JSON)."""


def read_measurements(text: str, name: str, op: str | None = None) -> Measurements:
    """Detect which tool wrote `text` and parse it, with the machine its device lines name; InputError when
    it is none of them."""
    from linkscope.topo.formats.measured_on import measured_on

    measurements, tool = _read(text, name, op)
    if measurements.identity is not None:  # a format that states it in its own fields (nvbandwidth JSON)
        return measurements
    return dataclasses.replace(measurements, identity=measured_on(text, tool))


def _read(text: str, name: str, op: str | None) -> tuple[Measurements, str]:
    from linkscope.topo.formats.nccl_tests import known_op, looks_like_nccl_tests, read_nccl_tests
    from linkscope.topo.formats.p2p_matrices import (
        looks_like_nvbandwidth,
        looks_like_p2p_bandwidth_latency_test,
        read_nvbandwidth,
        read_p2p_bandwidth_latency_test,
    )

    if op is not None:
        known_op(op)
    if not text.strip():
        raise InputError(f"{name}: empty input")
    from linkscope.topo.formats.nvbandwidth_json import looks_like_nvbandwidth_json, read_nvbandwidth_json

    if looks_like_nvbandwidth_json(text):
        return read_nvbandwidth_json(text, name), "nvbandwidth"
    if looks_like_nccl_tests(text):
        return read_nccl_tests(text, name, op), "nccl-tests"
    if looks_like_p2p_bandwidth_latency_test(text):
        return read_p2p_bandwidth_latency_test(text, name), "p2pBandwidthLatencyTest"
    if looks_like_nvbandwidth(text):
        return read_nvbandwidth(text, name), "nvbandwidth"
    from linkscope.topo.formats.lines import clean_lines

    first = next(((line.number, line.text) for line in clean_lines(text)
                  if line.text.strip() and not line.text.lstrip().startswith("#")), None)
    where = f"{name}:{first[0]}" if first is not None else name
    said = f": it starts {first[1].strip()[:60]!r}" if first is not None else ""
    raise InputError(f"{where}: not output of {', '.join(FORMATS)} (no result table found){said}")
