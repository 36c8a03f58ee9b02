"""Which NUMA node a buffer's pages sit on, asked of the kernel with move_pages(2) in query mode.

Query mode (no target nodes) moves nothing and needs no privilege for the calling process's own
pages. Used to confirm that a host buffer meant for one NUMA node really landed there: a memory
policy (`numactl --membind`, a cpuset's mems) can override first-touch placement.
"""

from __future__ import annotations

import ctypes
import os
import platform

MOVE_PAGES_SYSCALL: dict[str, int] = {"x86_64": 279, "aarch64": 239, "ppc64le": 301}
"""move_pages(2) system call number per architecture (glibc has no wrapper; libnuma does)."""
PROBES_PER_BUFFER = 16
"""Pages asked about per buffer, spread evenly over it."""


def page_nodes(address: int, length_bytes: int) -> set[int] | None:
    """NUMA nodes of up to PROBES_PER_BUFFER pages spread over `length_bytes` at `address`, or None
    when the kernel cannot say (not Linux, unknown architecture, no NUMA support, pages not present)."""
    number = MOVE_PAGES_SYSCALL.get(platform.machine())
    if number is None or length_bytes <= 0:
        return None
    page_bytes = os.sysconf("SC_PAGE_SIZE")
    first = address - address % page_bytes
    last = address + length_bytes - 1
    pages = sorted({first + (last - first) * k // max(PROBES_PER_BUFFER - 1, 1) // page_bytes * page_bytes
                    for k in range(PROBES_PER_BUFFER)})
    count = len(pages)
    addresses = (ctypes.c_void_p * count)(*pages)
    status = (ctypes.c_int * count)(*([-1] * count))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.syscall(ctypes.c_long(number), ctypes.c_int(0), ctypes.c_ulong(count), addresses, None, status,
                              ctypes.c_int(0))
    except (OSError, AttributeError):
        return None
    if result != 0:
        return None
    nodes = {int(value) for value in status}
    if any(node < 0 for node in nodes):  # -ENOENT (not present), -EFAULT...
        return None
    return nodes
