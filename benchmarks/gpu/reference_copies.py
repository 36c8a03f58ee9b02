"""A plain torch loop timing the copies `linkscope bench p2p` measures, with CUDA events and nothing else.

It is the yardstick of the harness: the same buffers (int32, the same size), the same copies per
sample and samples, the median sample, but no spin kernel, no worker process, no data check. Prints
one JSON object: GB/s (bytes copied per second, 1e9) per kind.

    python3 reference_copies.py --bytes 256M --copies 4 --samples 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_bytes(text: str) -> int:
    """`256M` -> 268435456."""
    unit = UNITS.get(text[-1].upper(), 1)
    return int(text[:-1] if unit != 1 else text) * unit


def median_gbps(copy: Callable[[], None], nbytes: int, copies: int, samples: int) -> float:
    """Median GB/s of `samples` samples of `copies` back-to-back copies, timed with CUDA events."""
    import torch

    copy()  # warm-up
    torch.cuda.synchronize()
    times_ms = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(copies):
            copy()
        end.record()
        end.synchronize()
        times_ms.append(start.elapsed_time(end))
    return nbytes * copies / (statistics.median(times_ms) * 1e6)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bytes", default="256M")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 2
    count = size_bytes(args.bytes) // 4
    nbytes = count * 4
    torch.cuda.set_device(args.device)
    gpu = torch.ones(count, dtype=torch.int32, device="cuda")
    gpu_other = torch.zeros(count, dtype=torch.int32, device="cuda")
    pinned = torch.ones(count, dtype=torch.int32, pin_memory=True)
    pageable = torch.ones(count, dtype=torch.int32)
    kinds: dict[str, Callable[[], None]] = {
        "pinned_h2d": lambda: gpu.copy_(pinned, non_blocking=True),
        "pinned_d2h": lambda: pinned.copy_(gpu, non_blocking=True),
        "pageable_h2d": lambda: gpu.copy_(pageable, non_blocking=True),
        "pageable_d2h": lambda: pageable.copy_(gpu, non_blocking=True),
        "local_d2d": lambda: gpu_other.copy_(gpu, non_blocking=True),
    }
    result = {name: median_gbps(copy, nbytes, args.copies, args.samples) for name, copy in kinds.items()}
    print(json.dumps({"size_bytes": nbytes, "copies": args.copies, "samples": args.samples, "gbps": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
