"""Environment variables that change which paths NCCL takes, read from the environment or an env file.

NCCL's meanings (NCCL environment variable documentation): `NCCL_P2P_DISABLE=1` turns off direct GPU
peer copies (NVLink or PCIe), `NCCL_SHM_DISABLE=1` shared-memory transport between processes,
`NCCL_IB_DISABLE=1` InfiniBand/RoCE (falling back to sockets), `NCCL_P2P_LEVEL` the farthest path class
where P2P is still used, `NCCL_NET_GDR_LEVEL` the farthest GPU-NIC path class where GPUDirect RDMA is
used, `NCCL_SOCKET_IFNAME` / `NCCL_IB_HCA` which interfaces and HCAs may be used (`^` excludes, `=` exact).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from linkscope.topo.common.errors import InputError
from linkscope.topo.health.finding import HealthContext, HealthFinding, index_list
from linkscope.topo.health.platform import is_rdma_nic
from linkscope.topo.machine.links import nearest_nics
from linkscope.topo.model.findings import Severity
from linkscope.topo.model.host import Host, LinkKind

PATH_LEVELS: tuple[str, ...] = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
"""NCCL path levels, nearest first (NODE is spelt PHB in older releases and counts as between PHB and SYS)."""
LEVEL_OF_KIND: dict[LinkKind, int] = {LinkKind.NVLINK: 1, LinkKind.PIX: 2, LinkKind.PXB: 3, LinkKind.PHB: 4,
                                      LinkKind.NODE: 4, LinkKind.SYS: 5}
"""The NCCL level a link class needs (NODE sits with PHB)."""
NUMERIC_LEVELS: dict[str, int] = {"0": 0, "1": 2, "2": 3, "3": 4, "4": 5, "5": 5}
"""The old integer spelling of the levels (0 LOC ... 4 SYS)."""

_ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z")


def parse_env_file(text: str, name: str) -> dict[str, str]:
    """`KEY=VALUE` lines (optionally `export`, quoted values, `#` comments) as a mapping; InputError at file:line."""
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ASSIGNMENT.match(line)
        if match is None:
            raise InputError(f"{name}:{number}: expected KEY=VALUE, got {line[:60]!r}")
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif value.startswith(("'", '"')):
            raise InputError(f"{name}:{number}: unterminated quote in {match.group(1)}")
        env[match.group(1)] = value
    return env


def _level(value: str) -> int | None:
    text = value.strip().upper()
    if text in NUMERIC_LEVELS:
        return NUMERIC_LEVELS[text]
    if text == "NODE":
        return PATH_LEVELS.index("PHB")
    return PATH_LEVELS.index(text) if text in PATH_LEVELS else None


def _selected(spec: str, names: list[str]) -> list[str]:
    """The names an NCCL interface/HCA list keeps: prefixes, `=` exact, `^` exclusion; `:port` suffixes ignored."""
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    wanted = [item.split(":", 1)[0] for item in text.split(",") if item]
    matches = {name for name in names for item in wanted if (name == item if exact else name.startswith(item))}
    return [name for name in names if (name not in matches) == exclude]


def _finding(host: Host, code: str, severity: Severity, variable: str, value: str, message: str, fix: str,
             gpus: tuple[int, ...] = (), evidence: tuple[str, ...] = ()) -> HealthFinding:
    return HealthFinding(code, severity, host.hostname, gpus, message, (f"{variable}={value}", *evidence), fix)


def _enabled(value: str) -> bool:
    return value.strip() not in ("", "0")


def nccl_environment(context: HealthContext) -> Iterator[HealthFinding]:
    """One finding per NCCL variable that takes a transport or path away from what this host offers."""
    env = context.env
    if not env or not context.snapshot.hosts:
        return
    host = context.snapshot.host
    peers = [link for link in host.links if link.p2p is None or link.p2p.any_ok]
    rdma = [nic.name for nic in host.nics if is_rdma_nic(nic)]
    if _enabled(env.get("NCCL_P2P_DISABLE", "")) and peers:
        yield _finding(host, "env-p2p-disabled", "warning", "NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"],
                       "NCCL_P2P_DISABLE turns off peer copies: GPUs that share NVLink or a PCIe switch talk through "
                       "host memory", "unset NCCL_P2P_DISABLE (it is a workaround for broken P2P, not a tuning knob)")
    if _enabled(env.get("NCCL_SHM_DISABLE", "")):
        yield _finding(host, "env-shm-disabled", "warning", "NCCL_SHM_DISABLE", env["NCCL_SHM_DISABLE"],
                       "NCCL_SHM_DISABLE turns off the shared-memory transport: pairs without P2P fall back to the "
                       "network stack inside the box", "unset NCCL_SHM_DISABLE")
    if _enabled(env.get("NCCL_IB_DISABLE", "")):
        severity: Severity = "warning" if rdma else "info"
        yield _finding(host, "env-ib-disabled", severity, "NCCL_IB_DISABLE", env["NCCL_IB_DISABLE"],
                       "NCCL_IB_DISABLE turns off InfiniBand/RoCE: traffic between nodes goes over TCP sockets"
                       + (f" although RDMA NICs are here ({', '.join(rdma)})" if rdma else ""),
                       "unset NCCL_IB_DISABLE on hosts with working RDMA NICs")
    yield from _p2p_level(context, host)
    yield from _gdr_level(host, env)
    yield from _name_lists(host, env)


def _p2p_level(context: HealthContext, host: Host) -> Iterator[HealthFinding]:
    value = context.env.get("NCCL_P2P_LEVEL")
    if value is None:
        return
    level = _level(value)
    if level is None:
        yield _finding(host, "env-p2p-level", "warning", "NCCL_P2P_LEVEL", value,
                       f"NCCL_P2P_LEVEL={value!r} is not a level NCCL knows ({', '.join(PATH_LEVELS)})",
                       "use one of LOC, NVL, PIX, PXB, PHB, SYS, or unset it")
        return
    lost = [link for link in host.links if (link.p2p is None or link.p2p.any_ok) and LEVEL_OF_KIND[link.kind] > level]
    if not lost:
        return
    indices = tuple(sorted({host.gpus[p].index for link in lost for p in (link.a, link.b)}))
    kinds = sorted({link.token for link in lost})
    yield _finding(host, "env-p2p-level", "warning" if any(link.kind is LinkKind.NVLINK for link in lost) else "info",
                   "NCCL_P2P_LEVEL", value,
                   f"NCCL_P2P_LEVEL={value} stops peer copies over {', '.join(kinds)} for {len(lost)} GPU pair(s) "
                   f"that support them ({index_list(indices)})",
                   "unset NCCL_P2P_LEVEL unless P2P over those paths is known to be broken here", indices)


def _gdr_level(host: Host, env: Mapping[str, str]) -> Iterator[HealthFinding]:
    value = env.get("NCCL_NET_GDR_LEVEL")
    if value is None:
        return
    level = _level(value)
    if level is None:
        yield _finding(host, "env-net-gdr-level", "warning", "NCCL_NET_GDR_LEVEL", value,
                       f"NCCL_NET_GDR_LEVEL={value!r} is not a level NCCL knows ({', '.join(PATH_LEVELS)})",
                       "use one of LOC, PIX, PXB, PHB, SYS, or unset it")
        return
    below = []
    for position, gpu in enumerate(host.gpus):
        _, token = nearest_nics(host, position)
        if token is not None and LEVEL_OF_KIND[LinkKind(token)] > level:
            below.append(gpu.index)
    if not below:
        return
    yield _finding(host, "env-net-gdr-level", "info", "NCCL_NET_GDR_LEVEL", value,
                   f"NCCL_NET_GDR_LEVEL={value} leaves {index_list(below)} without GPUDirect RDMA: their nearest NIC "
                   "is farther than that level, so network data is staged through host memory",
                   "unset NCCL_NET_GDR_LEVEL unless GPUDirect RDMA over those paths is known to be slow here",
                   tuple(below))


def _name_lists(host: Host, env: Mapping[str, str]) -> Iterator[HealthFinding]:
    for variable, names, what in (
        ("NCCL_SOCKET_IFNAME", [nic.netdev for nic in host.nics if nic.netdev], "network interfaces"),
        ("NCCL_IB_HCA", [nic.name for nic in host.nics if is_rdma_nic(nic)], "RDMA NICs"),
    ):
        value = env.get(variable)
        if value is None or not names:
            continue
        kept = _selected(value, names)
        code = "env-socket-ifname" if variable == "NCCL_SOCKET_IFNAME" else "env-ib-hca"
        if not kept:
            yield _finding(host, code, "warning", variable,
                           value, f"{variable}={value} matches none of this host's {what} ({', '.join(names)})",
                           f"name {what} this host has, or unset {variable}")
        elif len(kept) < len(names):
            yield _finding(host, code, "info", variable,
                           value, f"{variable}={value} keeps NCCL to {len(kept)} of {len(names)} {what}: "
                           f"{', '.join(kept)}", f"make sure the excluded ones ({', '.join(sorted(set(names) - set(kept)))}) "
                           "are meant to be unused")


def cuda_visible_reordered(context: HealthContext) -> Iterator[HealthFinding]:
    """CUDA_VISIBLE_DEVICES (or CUDA_DEVICE_ORDER) that numbers GPUs in another order than NVML: rank N is not GPU N."""
    order = context.cuda_order
    if order is None or not context.snapshot.hosts or list(order) == sorted(order):
        return
    host = context.snapshot.host
    value = context.env.get("CUDA_VISIBLE_DEVICES", "")
    yield HealthFinding(
        "env-cuda-visible-reordered", "info", host.hostname, tuple(order),
        "CUDA numbers the GPUs in another order than nvidia-smi: local rank N runs on the GPU at position N of "
        f"{', '.join(map(str, order))}, so which ranks share a link or a NIC is not what nvidia-smi's numbering suggests",
        (f"CUDA_VISIBLE_DEVICES={value}", f"CUDA_DEVICE_ORDER={context.env.get('CUDA_DEVICE_ORDER', '(unset)')}",
         f"cuda:0..{len(order) - 1} = NVML GPUs {', '.join(map(str, order))}"),
        "fine when chosen on purpose (e.g. from `linkscope check --suggest`); otherwise list GPUs in NVML order and "
        "set CUDA_DEVICE_ORDER=PCI_BUS_ID",
    )
