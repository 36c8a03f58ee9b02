"""Every cap, in one place: the largest inputs linkscope accepts, what its readers keep in memory, how
much work one command does and how much of a long list it shows. Input caps sit far above the largest
real cluster.

Without them a hostlist like `r[0-99999]n[0-99999]` (10^10 hosts), a Slurm count like
`2(x999999999)` or `--gpus 10**12` grows memory until the process is killed. Each cap is checked
before anything of that size is built (from a product or sum computed first), and a value past it
is one :class:`~topo.common.errors.InputError` line naming the cap. Everything below a cap stays linear.
"""

from __future__ import annotations

from linkscope.topo.common.errors import InputError

# What inputs may hold: a value past one of these is refused in one line (exit 2).

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


MAX_SIZE_BYTES = 1 << 50
"""Largest message or buffer size (1 PiB): far above the memory of any GPU or host (a few TB), so a
size past it is a typo; it keeps every size an exact integer in a float too (below 2^53)."""

MAX_PARAMETER_COUNT = 1e15
"""Largest model (10^15 parameters, 1000T): the largest models trained today hold a few 10^12."""

MAX_INTEGER_DIGITS = 18
"""Longest integer read from text: below 2**63, far above any real count or size in bytes."""

MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
"""Largest snapshot file the loader accepts."""

MAX_NVLINKS_PER_PAIR = 64
"""Largest NVLink count between two GPUs or on one GPU (18 on H100/B200 today)."""

MAX_NUMA_NODE = 4_095
"""Highest NUMA node number read (Linux's largest CONFIG_NODES_SHIFT, 10, allows 1,024 nodes)."""

MAX_NVLINK_GEN = 16
"""Highest NVLink generation a snapshot may state (NVLink 5 is the newest today)."""

MAX_PCIE_GEN = 16
"""Highest PCIe generation a snapshot may state (Gen6 is the newest today)."""

MAX_LAYOUT_RANKS = 524_288
"""The largest world size checked: above the largest clusters built so far (a few hundred thousand GPUs)."""

MAX_NCCL_RANK = 10_000_000
"""Largest rank number read from an NCCL log line (a bigger one is a fused or damaged line)."""

MAX_TRACE_CHARS = 1 << 30
"""Largest trace read (characters after decompression): 1 GiB, above the traces of a few profiled steps."""

MAX_STDIN_BYTES = 1024 * 1024 * 1024
"""Standard input is refused past this size (a file is streamed with no limit)."""


# What a reader keeps in memory at once; past these it counts, skips or shares instead of holding more.

MAX_TRACE_VALUE_CHARS = 64 << 20
"""Largest single JSON value (one event, or `deviceProperties`) held in memory at once."""

MAX_NCCL_LOG_LINE_BYTES = 64 * 1024
"""Longer lines are skipped (counted) without being held whole."""

MAX_STACKED_PREFIXES = 6
"""Launcher and logging prefixes stripped from one pasted line (`[1,3]<stdout>: 12: [default0]: ...`)."""

MAX_COMMAND_CHARS = 20_000
"""Longest command line joined from backslash-continued lines."""

MAX_SHARED_VALUES = 65536
"""Distinct small values (NVLink ports, P2P states) the decoder remembers per type, to share them."""

MAX_REMEMBERED_EVENT_NAMES = 65536
"""Distinct event names a trace reader remembers what it does with (past them, it works each out again)."""

MAX_KEPT_MESSAGES = 200
"""Distinct warnings, errors and skipped-line numbers kept; the rest are counted only."""

MAX_MESSAGE_CHARS = 400
"""Longest error text kept from a framework's line."""

MAX_EDGES = 1_000_000
"""Distinct connections kept (an all-to-all of 1,024 ranks is about this many); later ones are counted only."""

MAX_PARSED_LINES = 100_000
"""Distinct connection messages whose parse is remembered."""

MAX_NAMED_ROWS = 3
"""Rows an import note names one by one (an nccl-tests row whose busbw misses its factor); the rest are counted."""


# How much work one command does: worker processes, sweep lengths, benchmark sizes, recording time.

MAX_AUTO_SUGGEST_RANKS = 512
"""The app's Ranks tab searches a better layout after every check up to this many ranks; larger ones on request
(the search costs about a second at 8,192 ranks and would hold the interpreter while the form is edited)."""

MAX_JOBS = 16
"""Most processes `trace` reads with by default: each holds up to a few hundred MB while it reads a large trace."""

MAX_SIZE_STEPS = 64
"""Longest size sweep accepted (8 B to 1 GiB by 2 is 28 steps)."""

MAX_STEP_PARAMETERS = 2_000_000_000
"""Largest model the experiment builds (8 GB of float32 weights): it is a probe, not a training run."""

MAX_COPIES_PER_SAMPLE = 64
"""Most copies per sample: all of them are enqueued while one spin kernel (about 10 ms) holds the stream."""

MAX_RECORD_SECONDS = 24 * 3600.0
"""Longest recording one command takes (a day)."""

MAX_SWEEP_SIZES = 64
"""Most sizes `estimate --sweep` prices."""


# How much output shows: longer lists are cut, and say how many more there were.

MAX_STEP_ROWS = 50
"""Steps `trace` lists one by one in text; more are summarised (first, longest, percentiles) unless --all-steps."""

MAX_FINDING_RANKS = 64
"""A finding lists at most this many ranks (its message gives the full count)."""

MAX_EVIDENCE = 12
"""A finding lists at most this many evidence lines (the last says how many more there were)."""

MAX_FINDING_ROWS = 500
"""Rows the app's findings tables show at most; a huge cluster can raise thousands of findings, the rest are summarised."""

MAX_NCCL_LOG_HOST_ROWS = 64
"""Hosts listed one per row in `nccl-log`'s report; the rest are counted."""

MAX_HOSTS_IN_FULL = 8
"""A cluster larger than this shows in full only its first host and the hosts findings name."""


def check_cap(count: int, cap: int, what: str, where: str) -> int:
    """`count` when it is at most `cap`; InputError `<where>: <what> <count> is above the cap <cap>` otherwise."""
    if count > cap:
        raise InputError(f"{where}: {what} {count:,} is above linkscope's cap of {cap:,} (topo/common/limits.py)")
    return count

MAX_NCCL_XML_BYTES = 16 * 1024 * 1024
"""Largest NCCL topology or graph XML file read (16 MiB). A dump of a 72-GPU NVLink domain with its NICs and
bridges is a few hundred KiB."""

MAX_XML_DEPTH = 64
"""Deepest element nesting in an XML file. NCCL's own files nest system > cpu > pci (a few bridges) > gpu > nvlink:
about a dozen levels."""

MAX_XML_ELEMENTS = 200_000
"""Elements in one XML file; a large dump holds a few thousand."""

MAX_XML_ATTRIBUTE_CHARS = 4_096
"""Characters in one XML attribute value (NCCL itself stops at 255)."""

MAX_NCCL_TREE_NODES = 4 * MAX_GPUS_PER_HOST
"""Nodes kept of one topology tree an NCCL log prints (GPUs, NICs, bridges); a longer tree is a damaged log."""

MAX_NCCL_STR_CHARS = 255
"""`MAX_STR_LEN` of NCCL's own XML reader (src/graph/xml.h): a longer attribute value NCCL refuses, so an exported
topology file never holds one."""

MAX_KEPT_GROUPS = 1 << 16
"""Most groups whose links the pricer keeps by their ranks for one placement before it starts afresh
(:class:`~topo.cost.groups.GroupLinksOfRanks`: a few layouts of 16,384 ranks; the memory a long session of edits
holds stays bounded)."""
