"""Do measurements belong to this machine? Their identity (:class:`topo.model.measurements.MeasuredOn`) against a snapshot.

Numbers from another kind of machine (another GPU model, more GPUs per host than the snapshot has)
would make every expectation and calibration wrong, so commands refuse them unless forced. Another
host of the same kind is worth a note; measurements that do not say what they ran on (files written
before linkscope recorded it, logs without device lines) are a note too.
"""

from __future__ import annotations

import re

from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.measurements import MeasuredOn
from linkscope.topo.model.snapshot import Snapshot

SAME, OTHER_HOST, UNKNOWN, DIFFERENT = "same", "other-host", "unknown", "different"


@frozen
class IdentityCheck:
    """How measurements relate to a snapshot, and what to tell people."""

    relation: str
    """`same` (kind, and host when both name one), `other-host`, `unknown` or `different`."""
    message: str
    """Empty for `same`; a note for `other-host` and `unknown`; the reason for `different`."""

    @property
    def refused(self) -> bool:
        """True when the measurements come from a different kind of machine."""
        return self.relation == DIFFERENT


PLACEHOLDER_GPU_NAMES = frozenset({"graphics device"})
"""What a driver prints for a GPU it does not know by name (early GB200 drivers: `NVIDIA Graphics Device`): no model."""


def _model_key(name: str) -> str:
    words = re.sub(r"\s+", " ", name.strip().casefold()).removeprefix("nvidia ")
    return words.replace("tesla ", "")


def same_gpu_model(a: str, b: str) -> bool:
    """True when two GPU names are one product: equal but for case, spacing and the vendor word, or one a
    word-prefix of the other (`NVIDIA H100` and `NVIDIA H100 80GB HBM3`; not `H100 PCIe`)."""
    key_a, key_b = _model_key(a), _model_key(b)
    short, long = sorted((key_a, key_b), key=len)
    return bool(short) and (long == short or long.startswith(short + " "))


def gpu_names(snapshot: Snapshot) -> tuple[str, ...]:
    """The GPU models of every host of `snapshot`, without repeats."""
    return tuple(dict.fromkeys(gpu.name for host in snapshot.hosts for gpu in host.gpus if gpu.name))


def describe(identity: MeasuredOn | None) -> str:
    """`8x NVIDIA H200 on fs-207, fs-208 (nccl-tests)` for people; `an unknown machine` when nothing is known."""
    if identity is None:
        return "an unknown machine"
    count = f"{identity.gpu_count}x " if identity.gpu_count else ""
    if identity.gpu_model is None:
        hosts = f" on {', '.join(identity.hosts[:4])}" if identity.hosts else ""
        return f"an unstated GPU model{hosts}" + (f" ({identity.tool})" if identity.tool else "")
    hosts = f" on {', '.join(identity.hosts[:4])}" + (" ..." if len(identity.hosts) > 4 else "") if identity.hosts else ""
    tool = " ".join(part for part in (identity.tool, identity.tool_version) if part)
    return f"{count}{identity.gpu_model}{hosts}" + (f" ({tool})" if tool else "")


def check_identity(identity: MeasuredOn | None, snapshot: Snapshot) -> IdentityCheck:
    """Whether measurements with `identity` may be used on `snapshot` (see the module docstring)."""
    name = snapshot.source or "the snapshot"
    if identity is None or identity.gpu_model is None:
        return IdentityCheck(UNKNOWN, f"the measurements do not say what GPUs they ran on ({describe(identity)}); "
                             f"assuming {name}")
    if not snapshot.hosts or not snapshot.host.gpus:
        return IdentityCheck(UNKNOWN, f"{name} describes no GPU to compare the measurements with")
    if _model_key(identity.gpu_model) in PLACEHOLDER_GPU_NAMES:
        return IdentityCheck(UNKNOWN, f"the measurements name their GPUs only {identity.gpu_model!r} (a driver that "
                             f"does not know the product by name); assuming {name}")
    host = snapshot.host
    names = {gpu.name for gpu in host.gpus if gpu.name}
    count = max(len(each.gpus) for each in snapshot.hosts)
    kind = f"{count}x {' / '.join(sorted(names)) or 'GPUs of unrecorded model'}"
    if not names:
        return IdentityCheck(UNKNOWN, f"{name} does not record its GPU model; the measurements are from "
                             f"{describe(identity)}")
    if not any(same_gpu_model(identity.gpu_model, each) for each in names) or (identity.gpu_count or 0) > count:
        return IdentityCheck(DIFFERENT, f"measured on {describe(identity)}, but {name} is {kind}: "
                             "a different kind of machine (--force to use them anyway)")
    hostnames = {each.hostname for each in snapshot.hosts}
    if identity.hosts and not hostnames & set(identity.hosts):
        return IdentityCheck(OTHER_HOST, f"measured on {describe(identity)}, another host of the same kind as "
                             f"{name} ({', '.join(sorted(hostnames))})")
    return IdentityCheck(SAME, "")
