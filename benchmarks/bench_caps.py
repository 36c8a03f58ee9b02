"""Time the largest input each cap of topo/common/limits.py accepts, and the refusal of one more.

Everything below a cap is linear, so the time at the cap is the worst a real input can cost; one
past it must be refused before anything of that size is built (milliseconds).

    python benchmarks/bench_caps.py
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from linkscope.topo.common.errors import InputError  # noqa: E402
from support.caps import CAP_CASES  # noqa: E402


def seconds(call: object, size: int) -> tuple[float, str]:
    """Wall time of `call(size)` and whether it was accepted or refused."""
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            call(size)  # type: ignore[operator]
        verdict = "accepted"
    except InputError:
        verdict = "refused"
    return time.perf_counter() - started, verdict


def main() -> int:
    print(f"{'cap':40} {'value':>22} {'at the cap':>17} {'one past':>17}")
    for case in CAP_CASES:
        at_s, at = seconds(case.call, case.cap)
        past_s, past = seconds(case.call, case.cap + 1)
        print(f"{case.name:40} {case.cap:>22,} {at_s * 1000:>10.1f} ms {at[:3]} {past_s * 1000:>10.1f} ms {past[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
