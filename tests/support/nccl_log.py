"""NCCL logs written for the tests."""

from __future__ import annotations

H100_SHM = "\n".join(
    [f"dgx-h100:1{rank}:1{rank} [{rank}] NCCL INFO ncclCommInitRank comm 0x{rank + 1} rank {rank} nranks 8 "
     f"cudaDev {rank} nvmlDev {rank} busId {bus} commId 0xfeed - Init START"
     for rank, bus in enumerate(("1b000", "20000", "3d000", "42000", "9d000", "a2000", "bd000", "c2000"))]
    + ["dgx-h100:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
       "dgx-h100:11:11 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM/read"]) + "\n"
"""Eight ranks of one DGX H100 whose first hop NCCL connected through SHM although NVLink joins the GPUs."""
