"""Small synthetic profiler traces, shaped like torch.profiler's Chrome-trace export, for edge cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


class TraceBuilder:
    """Events of one rank: CPU ops on thread 1, launches with correlation ids, kernels on GPU streams."""

    def __init__(self, rank: int, world_size: int, host: str = "node-a", groups: list[list[int]] | None = None) -> None:
        self.rank, self.world_size, self.host = rank, world_size, host
        self.groups = groups or [list(range(world_size))]
        self.events: list[dict[str, Any]] = []
        self._correlation = 1000

    def step(self, number: int, start_us: float, duration_us: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 1, "tid": 1,
                            "ts": start_us, "dur": duration_us, "args": {}})

    def compute_kernel(self, launch_us: float, start_us: float, duration_us: float, stream: int = 7) -> None:
        correlation = self._launch(launch_us)
        self.events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": stream,
                            "ts": start_us, "dur": duration_us, "args": {"correlation": correlation, "device": self.rank,
                                                                         "stream": stream}})

    def collective(self, op: str, nelems: int, launch_us: float, start_us: float, duration_us: float,
                   group: int = 0, metadata_on_kernel: bool = True, stream: int = 20) -> None:
        """An NCCL collective: record_param_comms around the launch, the kernel on a comm stream."""
        correlation = self._launch(launch_us)
        ranks = self.groups[group]
        metadata = {"Collective name": op, "In msg nelems": nelems, "Out msg nelems": nelems, "dtype": "Float",
                    "Group size": len(ranks), "Process Group Name": str(group),
                    "Process Group Ranks": "[" + ", ".join(map(str, ranks)) + "]"}
        self.events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                            "ts": launch_us - 2, "dur": 10, "args": metadata})
        kernel_args: dict[str, Any] = {"correlation": correlation, "device": self.rank, "stream": stream}
        if metadata_on_kernel:
            kernel_args |= metadata
        name = f"ncclDevKernel_{op.title()}_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start_us,
                            "dur": duration_us, "args": kernel_args})

    def _launch(self, launch_us: float) -> int:
        self._correlation += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                            "ts": launch_us, "dur": 3, "args": {"correlation": self._correlation}})
        return self._correlation

    def document(self) -> dict[str, Any]:
        config = [{"pg_name": str(i), "pg_size": len(r), "ranks": r} for i, r in enumerate(self.groups)]
        return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": self.world_size,
                                                        "pg_config": config, "nccl_version": "2.21.5"},
                "host_name": self.host, "traceEvents": self.events}

    def write(self, path: Path, compressed: bool = False) -> Path:
        text = json.dumps(self.document())
        if compressed:
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        return path
