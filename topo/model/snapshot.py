"""The snapshot: one immutable description of one or more GPU hosts, the currency of the tool.

Probes produce a :class:`Snapshot`, benchmarks produce :class:`~topo.model.measurements.Measurements`, and every
consumer (checks, the app, JSON output) reads only these. Everything here is a frozen
dataclass that round-trips through JSON (see :mod:`topo.model.codec`).
"""

from __future__ import annotations

from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import Gap, Host
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.recording import Recording

SCHEMA_VERSION = 1
"""Version of the snapshot JSON layout; the loader refuses any other value. Fields added later carry
defaults (e.g. `Measurements.identity`), so files written before them stay readable."""


P2P_STATUS_TOKENS = ("OK", "CNS", "GNS", "TNS", "NS", "DR", "U")
"""`nvidia-smi topo -p2p` status words: ok, chipset / GPU / topology not supported, not
supported, disabled by regkey, unknown."""


@frozen
class Snapshot:
    """Everything linkscope knows about a machine (or cluster): the currency of the tool."""

    hosts: tuple[Host, ...]
    source: str = ""
    """Where it came from: `probe`, `sample:dgx-h100`, a file name."""
    created: str | None = None
    """ISO 8601 time of the probe, when known."""
    meta: tuple[tuple[str, str], ...] = ()
    """Free-form key/value facts, e.g. a sample's description and its public sources."""
    gaps: tuple[Gap, ...] = ()
    measurements: Measurements | None = None
    recording: Recording | None = None
    """Live counters recorded on the first host (`linkscope record`), when any."""
    schema: int = SCHEMA_VERSION

    @property
    def host(self) -> Host:
        """The first (usually the only) host."""
        return self.hosts[0]

    def meta_value(self, key: str) -> str | None:
        """The meta value for `key`, or None."""
        for name, value in self.meta:
            if name == key:
                return value
        return None
