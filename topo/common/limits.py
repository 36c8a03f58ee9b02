"""Global size caps: the largest inputs linkscope accepts, each far above the largest real cluster.

Without them a hostlist like `r[0-99999]n[0-99999]` (10^10 hosts), a Slurm count like
`2(x999999999)` or `--gpus 10**12` grows memory until the process is killed. Each cap is checked
before anything of that size is built (from a product or sum computed first), and a value past it
is one :class:`~topo.common.errors.InputError` line naming the cap. Everything below a cap stays linear.
"""

from __future__ import annotations

from linkscope.topo.common.errors import InputError

MAX_WORLD_RANKS = 1_048_576
"""Ranks (GPUs) in one job, rank map or measurement: 2^20. The largest published training clusters
hold about 100,000-200,000 GPUs, so this leaves a factor of five above them."""

MAX_HOSTS = 131_072
"""Hosts in a hostlist, hostfile or snapshot: 2^17. At 8 GPUs per host that is 1,048,576 GPUs
(MAX_WORLD_RANKS); one GPU per host still passes every real cluster."""

MAX_GPUS_PER_HOST = 1_024
"""GPUs (or slots, or tasks) on one host. The largest single NVLink domains (NVL72, NVL576) are
below it; it also bounds an `nvidia-smi topo -m` matrix to a million cells."""

MAX_HOSTLIST_CHARS = 1_048_576
"""Characters in one hostlist expression (1 MiB); 131,072 names of 8 characters fit."""


def check_cap(count: int, cap: int, what: str, where: str) -> int:
    """`count` when it is at most `cap`; InputError `<where>: <what> <count> is above the cap <cap>` otherwise."""
    if count > cap:
        raise InputError(f"{where}: {what} {count:,} is above linkscope's cap of {cap:,} (topo/common/limits.py)")
    return count

MAX_SIZE_BYTES = 1 << 50
"""Largest message or buffer size (1 PiB): far above the memory of any GPU or host (a few TB), so a
size past it is a typo; it keeps every size an exact integer in a float too (below 2^53)."""

MAX_PARAMETER_COUNT = 1e15
"""Largest model (10^15 parameters, 1000T): the largest models trained today hold a few 10^12."""
