"""NVLink ports of one GPU as NVML reports them (`nvidia-smi nvlink -s`, `-R`), read the way real drivers answer.

The generation comes from the GPU's architecture, not from `nvmlDeviceGetNvLinkVersion`'s number
(drivers number it differently from the documented enum); remote PCI bus ids of links into an
NVSwitch are a sentinel that names no device; a GPU has up to 36 links.
"""

from __future__ import annotations

from typing import Any

from linkscope.probes.nvml_query import NvmlQuery, decode, field_value, int_or_none
from linkscope.topo.model.host import Gap, NvLinkPort

REMOTE_TYPES: dict[int, str] = {0: "gpu", 1: "ibmc", 2: "switch"}
"""`nvmlIntNvLinkDeviceType_t` as NvLinkPort.remote_type words."""

NVLINK_STATE_UP: dict[int, bool] = {0: False, 1: True, 2: True, 3: False}
"""A link state as NVLink-up or not. `nvmlDeviceGetNvLinkState` answers `nvmlEnableState_t` (0/1);
the field `NVML_FI_DEV_NVLINK_GET_STATE` answers `NVML_NVLINK_STATE_*`: INACTIVE 0, ACTIVE 1,
SLEEP 2 (a trained link in its low-power state: still a connection) and ACTIVE_TRAFFIC_DISABLED 3
(up, but carries no traffic: not a usable NVLink). Unknown values count as down."""

NVLINK_VERSION_GENERATIONS: dict[int, int] = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
"""`nvmlNvlinkVersion_t` (1_0, 2_0, 2_2, 3_0, 3_1, 4_0, 5_0, 6_0) as NVLink generations."""

GENERATION_BY_CC_MAJOR: dict[int, int] = {6: 1, 7: 2, 8: 3, 9: 4, 10: 5}
"""NVLink generation of each GPU architecture (compute capability major): P100, V100, A100, H100, B200."""

FI_NVLINK_LINK_COUNT = 91
FI_NVSWITCH_CONNECTED_LINK_COUNT = 147
FI_NVLINK_GET_STATE = 165
FI_NVLINK_GET_VERSION = 166
NVML_NVLINK_MAX_LINKS = 36
"""`NVML_NVLINK_MAX_LINKS` of current bindings: links asked for in the batched field queries."""
SWITCH_REMOTE_SENTINEL = "FFFFFFFF:FF:FF.0"
"""The remote PCI bus id drivers report for an NVLink into an NVSwitch (or a masked peer): no device."""
def nvlink_up(state: int | float | None) -> bool:
    """True when an NVLink state answer (either encoding, see :data:`NVLINK_STATE_UP`) means a usable link."""
    return state is not None and NVLINK_STATE_UP.get(int(state), False)


def _architecture_generation(compute_capability: str | None) -> int | None:
    try:
        return GENERATION_BY_CC_MAJOR.get(int((compute_capability or "").split(".")[0]))
    except ValueError:
        return None


def nvlink_generation(raw: int | None, compute_capability: str | None) -> int | None:
    """The NVLink generation of a link whose `nvmlDeviceGetNvLinkVersion` answer is `raw`.

    The answer is an `nvmlNvlinkVersion_t`, not a generation, and drivers are reported to number it
    differently from the documented enum (A100 5 = 3.1, H100 7 where the enum says 6, B200 8 where it
    says 7). So the GPU's architecture (compute capability major) decides whenever it is known, and
    the NVML number only otherwise: a healthy H100 must never be priced as NVLink 5.
    """
    if raw is None:
        return None
    from_architecture = _architecture_generation(compute_capability)
    return from_architecture if from_architecture is not None else NVLINK_VERSION_GENERATIONS.get(raw)


def nvlink_version_disagreement(raw: int | None, compute_capability: str | None) -> str | None:
    """Why NVML's version answer and the architecture disagree (a gap reason), or None when they agree."""
    from_architecture = _architecture_generation(compute_capability)
    if raw is None or from_architecture is None:
        return None
    from_enum = NVLINK_VERSION_GENERATIONS.get(raw)
    if from_enum == from_architecture:
        return None
    said = f"NVLink {from_enum} by nvmlNvlinkVersion_t" if from_enum is not None else "not in nvmlNvlinkVersion_t"
    return (f"NVML answers version {raw} ({said}); compute capability {compute_capability} has NVLink "
            f"{from_architecture}, which is used")


def read_nvlinks(
    query: NvmlQuery, index: int, handle: Any, compute_capability: str | None
) -> tuple[tuple[NvLinkPort, ...], int | None]:
    """Every NVLink of a GPU and its NVSwitch link count: one batched field query for count, switch
    links, state and version, then the remote end of each active link."""
    subject = f"gpu {index}"
    fields = [(FI_NVLINK_LINK_COUNT, 0), (FI_NVSWITCH_CONNECTED_LINK_COUNT, 0)]
    for link in range(NVML_NVLINK_MAX_LINKS):
        fields += [(FI_NVLINK_GET_STATE, link), (FI_NVLINK_GET_VERSION, link)]
    values = query("nvmlDeviceGetFieldValues", handle, fields, subject=subject, gpu=index, expected=("NotSupported",))
    count: int | None = None
    batched: dict[tuple[int, int], int | float | None] = {}
    if values is not None:
        for (field_id, scope), value in zip(fields, values, strict=False):
            batched[(field_id, scope)] = field_value(value)
        raw_count = batched.get((FI_NVLINK_LINK_COUNT, 0))
        count = int(raw_count) if raw_count is not None else None
    switch_links = int_or_none(batched.get((FI_NVSWITCH_CONNECTED_LINK_COUNT, 0)))
    limit = count if count is not None else getattr(query.nvml, "NVML_NVLINK_MAX_LINKS", NVML_NVLINK_MAX_LINKS)
    ports: list[NvLinkPort] = []
    disagreement: str | None = None
    for link in range(limit):
        link_subject = f"gpu {index}, link {link}"
        state = batched.get((FI_NVLINK_GET_STATE, link))
        if state is None:
            state = query("nvmlDeviceGetNvLinkState", handle, link, subject=link_subject, gpu=index,
                          expected=("NotSupported", "InvalidArgument") if count is None else ())
            if state is None:
                if count is None and query.last_reason in ("NotSupported", "InvalidArgument"):
                    break
                continue
        version = batched.get((FI_NVLINK_GET_VERSION, link))
        if version is None:
            version = query("nvmlDeviceGetNvLinkVersion", handle, link, subject=link_subject, gpu=index,
                            expected=("NotSupported",))
        active = nvlink_up(state)
        remote_bus = remote_type = None
        if active:
            remote = query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link, subject=link_subject, gpu=index)
            remote_bus = decode(remote.busId) if remote is not None else None
            if remote_bus is not None and remote_bus.upper() == SWITCH_REMOTE_SENTINEL:
                remote_bus = None  # an NVSwitch (or a masked peer): not a PCI device to match GPUs by
            kind = query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link, subject=link_subject, gpu=index)
            remote_type = REMOTE_TYPES.get(int(kind)) if kind is not None else None
        disagreement = disagreement or nvlink_version_disagreement(int_or_none(version), compute_capability)
        generation = nvlink_generation(int_or_none(version), compute_capability)
        ports.append(NvLinkPort(link, active, generation, remote_bus, remote_type))
    if disagreement is not None:
        query.gaps.append(Gap(f"nvmlDeviceGetNvLinkVersion({subject})", disagreement))
    return tuple(ports), switch_links
