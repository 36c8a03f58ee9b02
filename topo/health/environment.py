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
    """True when an NCCL switch is on (a non-zero number); `0`, empty or not a number leaves NCCL's default."""
    return bool(nccl_switch(value))


PATH_VARIABLES: dict[str, str] = {
    "NCCL_P2P_DISABLE": "turns GPU peer-to-peer (NVLink/PCIe) transfers on or off",
    "NCCL_P2P_LEVEL": "limits which GPU pairs may use P2P",
    "NCCL_SHM_DISABLE": "turns the shared-memory transport on or off",
    "NCCL_IB_DISABLE": "turns InfiniBand/RoCE on or off",
    "NCCL_NET": "forces a network transport",
    "NCCL_NET_PLUGIN": "chooses the network plug-in",
    "NCCL_NET_GDR_LEVEL": "limits GPUDirect RDMA by distance",
    "NCCL_NET_GDR_READ": "changes GPUDirect RDMA reads",
    "NCCL_IB_HCA": "restricts the InfiniBand NICs used",
    "NCCL_SOCKET_IFNAME": "chooses the socket interfaces",
    "NCCL_CROSS_NIC": "decides whether rings may change NICs between nodes",
    "NCCL_PXN_DISABLE": "turns PCI x NVLink relaying on or off",
    "NCCL_NVLS_ENABLE": "switches NVLink SHARP on or off",
    "NCCL_COLLNET_ENABLE": "switches in-network reduction on or off",
    "NCCL_ALGO": "restricts the algorithms",
    "NCCL_PROTO": "restricts the protocols",
    "NCCL_TOPO_FILE": "replaces the detected topology",
    "NCCL_GRAPH_FILE": "replaces the searched rings and trees",
    "NCCL_MIN_NCHANNELS": "changes the channel count",
    "NCCL_MAX_NCHANNELS": "changes the channel count",
    "NCCL_CUMEM_ENABLE": "changes how peer memory is shared",
    "NCCL_P2P_USE_CUDA_MEMCPY": "moves P2P copies to the copy engines",
}
"""Variables that change which path NCCL takes, and what each steers (:func:`setting_meaning` reads the value)."""

_SWITCH_OFF = {
    "NCCL_P2P_DISABLE": ("turns off GPU peer-to-peer (NVLink/PCIe): GPU pairs talk through host memory",
                         "leaves GPU peer-to-peer on (the default)"),
    "NCCL_SHM_DISABLE": ("turns off the shared-memory transport: pairs without P2P fall back to the network",
                         "leaves the shared-memory transport on (the default)"),
    "NCCL_IB_DISABLE": ("turns off InfiniBand/RoCE: traffic between nodes goes over TCP sockets",
                        "leaves InfiniBand/RoCE on (the default)"),
    "NCCL_PXN_DISABLE": ("turns off PXN: a GPU whose NIC sits under another GPU's switch crosses the CPU to reach it",
                         "leaves PXN relaying on (the default)"),
}
_SWITCH_ON = {
    "NCCL_NVLS_ENABLE": ("leaves NVLink SHARP on where NVSwitch supports it (the default)",
                         "turns NVLink SHARP off: all_reduce on NVSwitch boxes loses its switch reduction"),
    "NCCL_COLLNET_ENABLE": ("turns on in-network reduction (CollNet/SHARP) where the fabric offers it",
                            "leaves in-network reduction off (the default)"),
    "NCCL_CUMEM_ENABLE": ("shares peer memory through cuMem (the default since NCCL 2.19)",
                          "turns cuMem sharing off (legacy IPC handles)"),
}


def nccl_switch(value: str) -> bool | None:
    """An NCCL integer switch: True for a non-zero number, False for 0, None for anything else (NCCL's default)."""
    text = value.strip()
    try:
        return int(text, 0) != 0
    except ValueError:
        return None


def setting_meaning(name: str, value: str) -> tuple[str, Severity] | None:
    """What `name=value` does, read from its value per NCCL's environment-variable documentation, and how much it
    weighs (a warning where it takes a transport, P2P path, GPUDirect RDMA or NVLS away; info otherwise); None for
    a variable that does not steer NCCL's paths."""
    if name not in PATH_VARIABLES:
        return None
    upper = value.strip().upper()
    if name in _SWITCH_OFF or name in _SWITCH_ON:
        flag = nccl_switch(value)
        if flag is None:
            return f"{name}={value!r} is not a number NCCL reads: it keeps its default", "warning"
        if name in _SWITCH_OFF:
            off, on = _SWITCH_OFF[name]
            return (off, "warning") if flag else (on, "info")
        on, off = _SWITCH_ON[name]
        return (on, "info") if flag else (off, "warning" if name == "NCCL_NVLS_ENABLE" else "info")
    if name in ("NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL"):
        what = "P2P" if name == "NCCL_P2P_LEVEL" else "GPUDirect RDMA"
        level = _level(value)
        if level is None:
            return f"{value!r} is not a level NCCL knows ({', '.join(PATH_LEVELS)})", "warning"
        if level == 0:
            return f"turns {what} off (LOC: same GPU only)", "warning"
        farthest = PATH_LEVELS[level]
        return f"uses {what} only up to {farthest} paths (NCCL's default is chosen per system)", "info"
    if name == "NCCL_CROSS_NIC":
        meaning = {"0": "keeps every ring on one NIC (rail) per local rank: suits rail-only fabrics",
                   "1": "lets rings change NICs between nodes: traffic crosses rails (slow on rail-only fabrics)",
                   "2": "lets NCCL decide whether rings change NICs (the default)"}.get(value.strip())
        return (meaning, "info") if meaning else (f"{value!r} is not 0, 1 or 2", "warning")
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        kind = "algorithms" if name == "NCCL_ALGO" else "protocols"
        listed = value.strip().lstrip("^")
        if value.strip().startswith("^"):
            return f"excludes the {kind} {listed}: NCCL's tuner picks among the rest", "info"
        return f"restricts NCCL to the {kind} {listed}: its tuner may not pick the fastest for each size", "info"
    if name == "NCCL_NET":
        if "SOCKET" in upper:
            return "forces the socket transport: no RDMA between nodes", "warning"
        return f"forces the network transport {value.strip()}", "info"
    return f"{PATH_VARIABLES[name]} ({value.strip() or 'empty'})", "info"


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
    for name in _READ_AS_SETTING:
        if name in env and (meaning := setting_meaning(name, env[name])) is not None:
            text, severity = meaning
            yield _finding(host, "env-setting", severity, name, env[name], f"{name}={env[name]} {text}",
                           f"unset {name} unless it is set on purpose for this job")


_READ_AS_SETTING = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_CROSS_NIC", "NCCL_NET", "NCCL_PXN_DISABLE",
                    "NCCL_COLLNET_ENABLE")
"""Variables judged by their meaning alone (the rules above judge the rest against the host's links and NICs)."""


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
