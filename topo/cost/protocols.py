"""NCCL's tuner constants for collectives inside one NVLink domain: its protocols (LL, LL128, Simple) and how NVLS
streams a buffer through the switch, each from NCCL's source (src/graph/tuning.cc, src/transport/nvls.cc,
src/enqueue.cc) or fitted on real nccl-tests files where NCCL's model has no figure (said beside it)."""

from __future__ import annotations

NVLS_CHANNELS: dict[int, int] = {4: 16, 5: 24}
"""NVLS channels NCCL runs inside one NVLink domain, by NVLink generation (src/transport/nvls.cc:
NVLS_NCHANNELS_SM90 16, NVLS_NCHANNELS_SM100_NVL 24)."""

NVLS_TREE_CHANNELS: dict[int, int] = {4: 16, 5: 32}
"""NVLS channels of NVLS-tree across nodes (nvls.cc: SM90 16, NVLS_NCHANNELS_SM100 32)."""

NVLS_CHUNK_BYTES = 128 * 1024
"""NCCL's NVLS chunk (NCCL_NVLS_CHUNKSIZE default, nvls.cc); smaller buffers get smaller chunks (enqueue.cc)."""

NVLS_CHUNK_OVERHEAD_BYTES = 16 * 1024
"""Per-chunk synchronisation of an NVLS channel, as the bytes it could have moved in that time: a chunk of c bytes
runs at c / (c + this) of the channel's rate. Fitted on 8 GB200 GPUs over MNNVL (OCI, real file
gb200-nvl72-2node-8gpu-mnnvl): the size-to-time slope gives algbw ~485 GB/s with 128 KiB chunks (2-32 GiB), ~437 with
64 KiB (128 MiB-1 GiB) and ~317 with 32 KiB (16-64 MiB); 16 KiB fits the first two within 1%. The published NVLS
figures (:data:`NVLS_ALLREDUCE_FRACTION`) are at full 128 KiB chunks."""

NVLS_FILL_ROUNDS = 2
"""Rounds of (channels x GPUs x chunk) bytes an NVLS all_reduce spends filling and draining its pipeline (reduce, then
multicast); fits the same file's intercepts (87-129 us with 8 GPUs) and the 72-GPU rack's (~570 us with 64 KiB
chunks: real file gb200-nvl72-full-rack-72rank)."""


NCCL_PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""NCCL's protocols: LL (8-byte lines, half of them flags), LL128 (128-byte lines, 8 bytes of flags), Simple."""

RING_BASE_LATENCY_US: dict[str, float] = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
"""Fixed cost of a ring collective per protocol (NCCL src/graph/tuning.cc, baseLatencies, Ring)."""

NVLINK_RING_STEP_LATENCY_US: dict[str, float] = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}
"""Cost of each ring step over NVLink per protocol (tuning.cc, hwLatencies NVLINK, Ring). A ring all_reduce over 8
NVLink GPUs: 15 us with LL (DOMAIN's ~15 us tiny all_reduce), 41 us with LL128, 56 us with Simple."""

RING_PROTOCOL_BANDWIDTH_SHARE: dict[str, float] = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}
"""Share of the ring's bandwidth each protocol carries (tuning.cc: LL busBw x .5, LL128 x 0.92 = 120/128)."""

TREE_BASE_LATENCY_US: dict[str, float] = {"LL": 6.8, "LL128": 14.0, "Simple": 8.4}
"""Fixed cost of a tree all_reduce per protocol (tuning.cc, baseLatencies, Tree)."""

NVLINK_TREE_STEP_LATENCY_US: dict[str, float] = {"LL": 0.6, "LL128": 1.25, "Simple": 4.0}
"""Cost of each tree (chain) step over NVLink per protocol (tuning.cc, hwLatencies NVLINK, Tree)."""

TREE_PROTOCOL_BANDWIDTH_SHARE: dict[str, float] = {"LL": 0.92 / 3.8, "LL128": 0.92 * 7 / 9, "Simple": 0.92}
"""Share of the ring's busbw a tree all_reduce inside one node carries per protocol (tuning.cc: tree all_reduce x .92,
then LL x 1/3.8, LL128 x 7/9 on one node)."""

LL_MAX_BUSBW_GBPS: dict[int, float] = {2: 39.0, 3: 87.7, 4: 141.0, 5: 282.0}
"""Most busbw NCCL's LL protocol reaches inside one node, by NVLink generation (tuning.cc llMaxBws, N1 column:
Volta, Ampere, Hopper, Blackwell)."""
