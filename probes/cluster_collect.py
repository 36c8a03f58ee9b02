"""`linkscope collect`: every node probes itself, rank 0 gets all the snapshots over a gloo group.

Started once per node by torchrun (rank, world size and the rendezvous store come from its
environment) or by `srun` (SLURM_PROCID / SLURM_NTASKS, with MASTER_ADDR / MASTER_PORT naming
rank 0's node). The probe (:func:`probes.host.probe_host`, the same as `linkscope probe`) runs in a
thread while the process group forms; each node then sends its snapshot as JSON bytes in a uint8
entry of the rendezvous store (JSON bytes: no pickle), and rank 0 reads each node's entry with a deadline.
A probe that fails or misses its deadline is sent as a gap naming the host, and a node that dies after
the rendezvous (killed, out of memory, its machine lost) is a gap too, named by the host it announced
on joining: what did arrive is written, so one bad node never hangs or loses the collection; the
rendezvous has a deadline too.

Network exposure: under Slurm, rank 0 opens the store on MASTER_ADDR only (a socket bound to
that address); gloo's own sockets are pinned to the interface that reaches MASTER_ADDR unless
GLOO_SOCKET_IFNAME says otherwise. Everything is closed when the collection ends.

Test knobs, so several "nodes" can run on one machine: LINKSCOPE_NODE_NAME replaces the host name
this node reports (here and in `bench collectives`); LINKSCOPE_COLLECT_FAKE=`sample:NAME` makes the
probe return sample NAME (under that host name), `hang` a probe that never returns, `fail` one that raises, `kill` a node that
is killed (SIGKILL) after the rendezvous, before it sends anything.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.jsonio import json_text, read_json
from linkscope.topo.common.limits import MAX_WORLD_RANKS
from linkscope.topo.common.numbers import parse_int
from linkscope.topo.machine.cluster import combine_hosts
from linkscope.topo.model.codec import from_jsonable, to_jsonable
from linkscope.topo.model.host import Gap
from linkscope.topo.model.snapshot import Snapshot

FAKE_ENV = "LINKSCOPE_COLLECT_FAKE"
NAME_ENV = "LINKSCOPE_NODE_NAME"
DEFAULT_PROBE_TIMEOUT_S = 60.0
DEFAULT_RENDEZVOUS_TIMEOUT_S = 120.0
DEFAULT_MASTER_PORT = 29500
GATHER_GRACE_S = 15.0
"""How long past the probe deadline rank 0 waits for a node's entry (sending a snapshot takes well under a
second), at most the probe timeout again: a node still silent then has died or hung after the rendezvous."""
POLL_S = 0.05
_KEY = "linkscope-collect"


@frozen
class Launch:
    """Who this process is in the collection, and where rank 0 waits."""

    launcher: str
    """`torchrun` or `slurm`."""
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int


def _int_env(env: Mapping[str, str], name: str) -> int:
    return parse_int(env[name].strip(), f"{name}:", 0, MAX_WORLD_RANKS)


def launch_from_env(env: Mapping[str, str] | None = None) -> Launch:
    """Read torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or Slurm's variables."""
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher, rank, world = "torchrun", _int_env(env, "RANK"), _int_env(env, "WORLD_SIZE")
        local = _int_env(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        launcher, rank, world = "slurm", _int_env(env, "SLURM_PROCID"), _int_env(env, "SLURM_NTASKS")
        local = _int_env(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
    else:
        raise InputError("collect: start it on every node with torchrun (--nproc-per-node 1) or srun "
                         "(one task per node); see `linkscope collect --help`")
    addr = env.get("MASTER_ADDR")
    if not addr:
        raise InputError("collect: MASTER_ADDR is not set (the address of the node that runs rank 0)")
    port = _int_env(env, "MASTER_PORT") if env.get("MASTER_PORT") else DEFAULT_MASTER_PORT
    if not 0 <= rank < world:
        raise InputError(f"collect: rank {rank} is outside a world of {world}")
    return Launch(launcher, rank, world, local, addr, port)


def _fake_probe(spec: str) -> Snapshot:
    if spec == "hang":
        while True:
            time.sleep(3600)
    if spec == "fail":
        raise RuntimeError(f"injected failure ({FAKE_ENV})")
    if not spec.startswith("sample:"):
        raise InputError(f"{FAKE_ENV}={spec!r}: expected sample:NAME, hang or fail")
    from linkscope.topo.samples import load_sample

    sample = load_sample(spec[len("sample:") :])
    return replace(sample, hosts=tuple(replace(item, hostname=node_name()) for item in sample.hosts[:1]))


def node_name() -> str:
    """This node's host name as collections and benchmarks report it (LINKSCOPE_NODE_NAME may replace it)."""
    return os.environ.get(NAME_ENV) or socket.gethostname()


class ProbeRun:
    """This node's probe in a daemon thread, so it overlaps the rendezvous and can be abandoned."""

    def __init__(self) -> None:
        self.started_s = time.monotonic()
        self.snapshot: Snapshot | None = None
        self.error: str | None = None
        self.duration_s: float | None = None
        """How long the probe itself took; None while it runs."""
        self._thread = threading.Thread(target=self._run, name="linkscope-collect-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            spec = os.environ.get(FAKE_ENV)
            if spec:
                self.snapshot = _fake_probe(spec)
            else:
                from linkscope.probes.host import probe_host

                self.snapshot = probe_host()
        except Exception as exc:  # any failure is this node's gap, not the collection's end
            self.error = f"probe failed: {type(exc).__name__}: {exc}"
        self.duration_s = time.monotonic() - self.started_s

    def payload(self, timeout_s: float) -> dict[str, Any]:
        """What this node sends: its snapshot, or the reason it has none (waiting `timeout_s` from the start)."""
        if os.environ.get(FAKE_ENV) == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        self._thread.join(max(0.0, self.started_s + timeout_s - time.monotonic()))
        host = node_name()
        if self._thread.is_alive():
            return {"host": host, "error": f"probe did not finish within {timeout_s:g} s"}
        if self.snapshot is None:
            return {"host": host, "error": self.error or "probe returned nothing"}
        return {"host": host, "snapshot": to_jsonable(self.snapshot)}


def interface_towards(address: str) -> str | None:
    """The name of the local network interface whose address routes to `address` (None if unknown)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9))  # UDP connect sends nothing; it only picks the route
            local = probe.getsockname()[0]
        import psutil

        for name, addresses in psutil.net_if_addrs().items():
            if any(item.address == local for item in addresses):
                return name
    except OSError:
        return None
    return None


def _init_group(launch: Launch, timeout_s: float) -> Any:
    """Join the gloo group before the deadline; return the store this process made (None under torchrun)."""
    import torch.distributed as dist

    if "GLOO_SOCKET_IFNAME" not in os.environ:
        interface = interface_towards(launch.master_addr)
        if interface:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    timeout = datetime.timedelta(seconds=timeout_s)
    if launch.launcher == "torchrun":
        dist.init_process_group("gloo", init_method="env://", rank=launch.rank, world_size=launch.world_size,
                                timeout=timeout)
        return None
    listen_fd = None
    if launch.rank == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((launch.master_addr, launch.master_port))  # only the address the user named
            listener.listen(max(64, launch.world_size))
            listen_fd = listener.detach()  # the store owns the socket from here on, and closes it
    store = dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, launch.rank == 0, timeout,
                          master_listen_fd=listen_fd)
    dist.init_process_group("gloo", store=store, rank=launch.rank, world_size=launch.world_size, timeout=timeout)
    return store


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _read_parts(entries: Any, world_size: int, deadline_s: float) -> list[Any]:
    """Every rank's entry from the store, waiting for each until `deadline_s` (monotonic); a rank with none
    by then is `{"lost": True, "host": <the name it announced, or None>}`, so the others are kept."""
    waiting = set(range(world_size))
    parts: list[Any] = [None] * world_size
    while waiting:
        for rank in sorted(waiting):
            if entries.check([f"{_KEY}/part/{rank}"]):
                parts[rank] = read_json(entries.get(f"{_KEY}/part/{rank}").decode("utf-8", "replace"), f"rank {rank}")
                waiting.discard(rank)
        if not waiting or time.monotonic() >= deadline_s:
            break
        time.sleep(POLL_S)
    for rank in waiting:
        announced = entries.check([f"{_KEY}/host/{rank}"])
        host = entries.get(f"{_KEY}/host/{rank}").decode("utf-8", "replace") if announced else None
        parts[rank] = {"lost": True, "host": host} if host != "" else None  # "": a node's second task, which sends none
    return parts


@frozen
class CollectResult:
    """Rank 0's outcome: the cluster snapshot and what people should hear about it."""

    snapshot: Snapshot
    reported: int
    """Nodes that sent a snapshot."""
    nodes: int
    duplicates: tuple[str, ...]
    timings_s: tuple[tuple[str, float], ...]
    """(phase, seconds) on rank 0: `rendezvous` (until every node joined, from this process's start of the
    collection), `probe` (this node's probe, which runs meanwhile), `gather` (after this node's probe)."""


def collect_cluster(launch: Launch, probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                    rendezvous_timeout_s: float = DEFAULT_RENDEZVOUS_TIMEOUT_S) -> CollectResult | None:
    """Probe this node, gather every node's snapshot; rank 0 returns the cluster, the others None.

    Ranks other than a node's first (LOCAL_RANK > 0) take part but send nothing. Raises InputError
    when the group cannot form before `rendezvous_timeout_s` or falls apart during the gather.
    """
    try:
        import torch.distributed as dist
    except ImportError:
        raise InputError("collect: needs torch (pip install 'linkscope[bench]')") from None

    started = time.monotonic()
    probe = ProbeRun() if launch.local_rank == 0 else None
    try:
        store = _init_group(launch, rendezvous_timeout_s)
    except Exception as exc:
        raise InputError(f"collect: the rendezvous at {launch.master_addr}:{launch.master_port} did not complete "
                         f"within {rendezvous_timeout_s:g} s ({_one_line(exc)})") from None
    joined = time.monotonic()
    try:
        entries = store if store is not None else dist.distributed_c10d._get_default_store()
        entries.set(f"{_KEY}/host/{launch.rank}", node_name() if probe is not None else "")
        payload = probe.payload(probe_timeout_s) if probe is not None else None
        probed = time.monotonic()
        entries.set(f"{_KEY}/part/{launch.rank}", json_text(payload, indent=None))
        grace_s = min(GATHER_GRACE_S, probe_timeout_s)
        deadline_s = (probe.started_s if probe is not None else started) + probe_timeout_s + grace_s
        parts = _read_parts(entries, launch.world_size, deadline_s) if launch.rank == 0 else []
    except Exception as exc:
        raise InputError(f"collect: the gather failed ({_one_line(exc)})") from None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        del store  # the last reference: a store served by this process stops listening
    gathered = time.monotonic()
    if launch.rank != 0:
        return None
    snapshots: list[Snapshot] = []
    failed: list[Gap] = []
    for rank, part in enumerate(parts):
        if part is None:
            continue
        if "lost" in part:
            failed.append(Gap(f"collect (rank {rank})", "sent nothing by the probe deadline: "
                              "the node died or hung after the rendezvous", part.get("host") or f"rank {rank}"))
        elif "snapshot" in part:
            snapshots.append(from_jsonable(Snapshot, part["snapshot"], f"rank {rank}"))
        else:
            failed.append(Gap(f"collect (rank {rank})", str(part.get("error")), str(part.get("host"))))
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    meta = (("collected", f"{len(snapshots)} of {len(snapshots) + len(failed)} nodes by linkscope collect "
             f"({launch.launcher}, {launch.world_size} ranks)"),)
    combined = combine_hosts(snapshots, "collect", failed, created, meta)
    probe_s = probe.duration_s if probe is not None and probe.duration_s is not None else probed - started
    timings = (("rendezvous", joined - started), ("probe", probe_s), ("gather", gathered - probed))
    return CollectResult(combined.snapshot, len(snapshots), len(snapshots) + len(failed), combined.duplicates, timings)

