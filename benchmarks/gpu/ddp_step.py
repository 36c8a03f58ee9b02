"""A small DDP training loop profiled with torch.profiler, one trace per rank, for `linkscope trace`.

One process (world size 1) on NCCL with a GPU, on gloo without one. Prints one JSON object with
what the kit checks the trace reader against, counted here from the trace file itself: ProfilerStep
windows, GPU kernels, NCCL kernels and `nccl:*` / `gloo:*` CPU ops.

    python3 ddp_step.py --out DIR --steps 8
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import socket
import sys


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def count_trace(path: str) -> dict[str, int]:
    """Events of a Chrome trace, counted by kind (independently of linkscope's reader)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        events = json.load(handle)
    events = events.get("traceEvents", []) if isinstance(events, dict) else events
    complete = [event for event in events if isinstance(event, dict) and event.get("ph") == "X"]
    kernels = [event for event in complete if event.get("cat") == "kernel"]
    return {
        # a step appears once on the CPU and, with CUDA profiled, again as a GPU-side annotation: count numbers
        "profiler_steps": len({event["name"] for event in complete if str(event.get("name", "")).startswith("ProfilerStep#")}),
        "gpu_kernels": len(kernels),
        "nccl_kernels": sum(1 for event in kernels if "nccl" in str(event.get("name", "")).lower()),
        "collective_cpu_ops": sum(1 for event in complete if str(event.get("name", "")).startswith(("nccl:", "gloo:"))),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory for the trace")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    cuda = torch.cuda.is_available()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 2048)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    batch = torch.randn(64, 2048, device=device)
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    os.makedirs(args.out, exist_ok=True)
    active = max(1, args.steps - 2)
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=active),
                 on_trace_ready=tensorboard_trace_handler(args.out)) as profiler:
        for _ in range(args.steps):
            loss = ddp(batch).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            profiler.step()
    if cuda:
        torch.cuda.synchronize()
    dist.destroy_process_group()
    traces = sorted(glob.glob(os.path.join(args.out, "*.pt.trace.json*")))
    counted = count_trace(traces[-1]) if traces else {}
    print(json.dumps({"backend": "nccl" if cuda else "gloo", "world_size": 1, "traces": traces,
                      "active_steps": active, **counted}))
    return 0 if traces else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
