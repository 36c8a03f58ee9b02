"""A synthetic PCIe load of known volume: host->device copies for a while, then device->host.

Prints `ready` once its buffers are made, then one JSON object: for each phase, when it started and
ended (Unix time, seconds), the bytes copied and the rate the copies achieved (GB/s, 1e9).
`linkscope record` running meanwhile should see about these rates on the GPU's PCIe counters
(receive during h2d, transmit during d2h).

    python3 copy_load.py --seconds 4 --bytes 256M --delay 1.5
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from reference_copies import size_bytes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each phase")
    parser.add_argument("--bytes", default="256M", help="size of one copy")
    parser.add_argument("--delay", type=float, default=1.5, help="seconds to wait before the first phase")
    args = parser.parse_args(argv)
    import torch

    count = size_bytes(args.bytes) // 4
    gpu = torch.ones(count, dtype=torch.int32, device="cuda")
    host = torch.ones(count, dtype=torch.int32, pin_memory=True)
    torch.cuda.synchronize()
    print("ready", flush=True)
    time.sleep(args.delay)
    phases = []
    for name, copy in (("h2d", lambda: gpu.copy_(host, non_blocking=True)),
                       ("d2h", lambda: host.copy_(gpu, non_blocking=True))):
        started = time.time()
        copied = 0
        while time.time() - started < args.seconds:
            copy()
            torch.cuda.synchronize()
            copied += count * 4
        ended = time.time()
        phases.append({"direction": name, "start_unix_s": started, "end_unix_s": ended, "bytes": copied,
                       "gbps": copied / (ended - started) / 1e9})
    print(json.dumps({"phases": phases}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
