"""How fast `linkscope nccl-log` reads a large NCCL_DEBUG=INFO log, and how much memory it holds.

Goal (issues 10 and 27): a 100 MB log of 1,024 ranks (128 hosts x 8 GPUs) read in under 3 s of CPU, with memory
bounded by the ranks and connections it describes, not by the size of the file. The log is
generated: every rank's init lines, 32 ring channels (P2P inside a host, NET/IB between hosts, each
network hop printed by both sides), tree connections, per-peer send/receive connections, and the
lines that make up most of a real log's bulk (proxy threads, timings, interface lists, the
program's own output). Prints wall and CPU time and the peak RSS of `linkscope nccl-log` before and after a
change (a git revision, default main, against this working tree) in one run, with `grep -c 'via '` over the same
bytes as the floor; exit status 1 when the goal is missed or the two outputs differ.

    python benchmarks/bench_nccl_log.py [--size-mb 100] [--ranks 1024] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator

GOAL_S = 3.0
GPUS_PER_HOST = 8
CHANNELS = 32
P2P_PEERS = 16


def rank_lines(rank: int, nranks: int) -> Iterator[str]:
    """The lines one rank writes during init and connection setup."""
    host_index, local = divmod(rank, GPUS_PER_HOST)
    host = f"node{host_index:04d}"
    pid = 10000 + rank
    prefix = f"{host}:{pid}:{pid + 40} [{local}] NCCL INFO "
    bus = f"{0x1b + 0x20 * local:x}000"
    yield f"{host}:{pid}:{pid} [{local}] NCCL INFO NCCL version 2.21.5+cuda12.4"
    nics = " ".join(f"[{index}]mlx5_{index}:1/IB" for index in range(8))
    yield f"{host}:{pid}:{pid + 40} [{local}] NCCL INFO NET/IB : Using {nics} [RO]; OOB ib0:10.0.{host_index % 250}.1<0>"
    yield (f"{prefix}ncclCommInitRank comm 0x{0x55550000 + rank:x} rank {rank} nranks {nranks} cudaDev {local} "
           f"nvmlDev {local} busId {bus} commId 0x5eed1024 - Init START")
    yield (f"{prefix}comm 0x{0x55550000 + rank:x} rank {rank} nRanks {nranks} nNodes {nranks // GPUS_PER_HOST} "
           f"localRanks {GPUS_PER_HOST} localRank {local} MNNVL 0")
    if rank == 0:
        order = "".join(f"{peer:5d}" for peer in range(nranks))
        for channel in range(CHANNELS):
            yield f"{prefix}Channel {channel:02d}/{CHANNELS} :{order}"
    parent = -1 if rank == 0 else (rank - 1) // 2
    children = [child for child in (2 * rank + 1, 2 * rank + 2) if child < nranks] + [-1, -1]
    yield prefix + "Trees" + "".join(f" [{channel}] {children[0]}/{children[1]}/-1->{rank}->{parent}"
                                     for channel in range(CHANNELS))
    nxt = (rank + 1) % nranks
    prev = (rank - 1) % nranks
    for channel in range(CHANNELS):
        if nxt // GPUS_PER_HOST == host_index:
            yield f"{prefix}Channel {channel:02d}/0 : {rank}[{local}] -> {nxt}[{nxt % GPUS_PER_HOST}] via P2P/CUMEM/read"
        else:
            yield (f"{prefix}Channel {channel:02d}/0 : {rank}[{local}] -> {nxt}[{nxt % GPUS_PER_HOST}] [send] "
                   f"via NET/IB/{local}/GDRDMA")
        if prev // GPUS_PER_HOST != host_index:
            yield (f"{prefix}Channel {channel:02d}/0 : {prev}[{prev % GPUS_PER_HOST}] -> {rank}[{local}] [receive] "
                   f"via NET/IB/{local}/GDRDMA")
        for child in children[:2]:
            if child >= 0:
                via = "P2P/CUMEM/read" if child // GPUS_PER_HOST == host_index else f"NET/IB/{local}/GDRDMA"
                yield f"{prefix}Channel {channel:02d}/0 : {rank}[{local}] -> {child}[{child % GPUS_PER_HOST}] via {via}"
        yield f"{host}:{pid}:{pid + 41} [{local}] NCCL INFO [Proxy Progress] Device {local} CPU core {channel + 8 * local}"
    for offset in range(1, P2P_PEERS + 1):
        peer = (rank + offset * GPUS_PER_HOST) % nranks
        yield (f"{prefix}Channel {offset % CHANNELS:02d}/1 : {rank}[{local}] -> {peer}[{peer % GPUS_PER_HOST}] [send] "
               f"via NET/IB/{local}/GDRDMA/Shared")
    yield (f"{prefix}Init timings - ncclCommInitRank: rank {rank} nranks {nranks} total 0.75 (kernels 0.08, alloc 0.08, "
           "bootstrap 0.01, allgathers 0.01, topo 0.07, graphs 0.00, connections 0.48, rest 0.00)")


def write_log(path: str, size_bytes: int, nranks: int) -> int:
    """Write the generated log; the connection setup of every rank, then runtime chatter up to `size_bytes`."""
    written = 0
    with open(path, "w", encoding="utf-8") as handle:
        for rank in range(nranks):
            block = "\n".join(rank_lines(rank, nranks)) + "\n"
            handle.write(block)
            written += len(block)
        step = 0
        while written < size_bytes:
            rank = step % nranks
            host_index, local = divmod(rank, GPUS_PER_HOST)
            pid = 10000 + rank
            chunk = (f"node{host_index:04d}:{pid}:{pid + 41} [{local}] NCCL INFO [Service thread] Connection closed by "
                     f"localRank {local}\n[rank{rank}]:iteration {step} loss 2.{step % 1000:03d} lr 3.0e-4 "
                     f"tokens/s 412345 grad_norm 1.{step % 97:02d}\n"
                     f"node{host_index:04d}:{pid}:{pid + 40} [{local}] NCCL INFO Channel {step % CHANNELS:02d}/0 : "
                     f"{rank}[{local}] -> {(rank + 1) % nranks}[{(local + 1) % GPUS_PER_HOST}] via P2P/CUMEM/read\n")
            handle.write(chunk)
            written += len(chunk)
            step += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--keep", default=None, metavar="PATH", help="write the log here and keep it")
    parser.add_argument("--baseline", default="main", help="git revision measured as `before` (default main)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from baseline import child_run, env_for, package_tree, revision_name

    directory = tempfile.mkdtemp(prefix="nccl-log-bench-")
    path = args.keep or os.path.join(directory, "nccl.log")
    try:
        size = write_log(path, int(args.size_mb * 1e6), args.ranks)
        tree = package_tree(args.baseline, __import__("pathlib").Path(directory) / "before")
        command = [sys.executable, "-m", "linkscope", "nccl-log", path, "--json"]
        grep = child_run(["grep", "-c", "via ", path], None, None)
        before = child_run(command, env_for(tree), str(tree))
        after = child_run(command, None, None)
        if after[3] not in (0, 1) or before[3] not in (0, 1):
            print(f"nccl-log failed: before {before[3]}, after {after[3]}", file=sys.stderr)
            return 2
        print(f"log {size / 1e6:.1f} MB, {args.ranks} ranks; machine: {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}; before = {revision_name(args.baseline)}, after = this working tree")
        print(f"{'run':34} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13}  goal")
        floor = "floor: grep -c 'via ' (the bytes)"
        print(f"{floor:34} {grep[0]:7.2f} {grep[1]:7.2f} {grep[2]:13.0f}")
        rows = (("nccl-log --json, before", before, ""), ("nccl-log --json, after", after, f"< {GOAL_S:.0f} s CPU"))
        for name, (wall_s, cpu_s, peak_mib, _, _), goal in rows:
            print(f"{name:34} {wall_s:7.2f} {cpu_s:7.2f} {peak_mib:13.0f}  {goal}")
        same = json.loads(after[4]) == json.loads(before[4])  # the same values; spacing may differ between revisions
        print(f"after / before: {after[1] / before[1]:.2f} of the CPU time; JSON output "
              f"{'the same values' if same else 'DIFFERS'} ({len(after[4]) / 1e6:.1f} MB)")
        return 0 if after[1] < GOAL_S and same else 1
    finally:
        if args.keep is None and os.path.exists(path):
            os.remove(path)
        __import__("shutil").rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
