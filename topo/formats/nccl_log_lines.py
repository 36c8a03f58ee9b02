"""What one NCCL line says: the anchored, bounded patterns of NCCL's INFO and WARN lines, and their pieces.

Every pattern is anchored or bounded, so a long adversarial line costs linear time.
"""

from __future__ import annotations

import functools
import re

from linkscope.topo.common.limits import MAX_NCCL_RANK
from linkscope.topo.formats.nccl_log_model import TRANSPORTS

UNREADABLE = "\x00"
"""Marks a raw line that could not be decoded or was too long (NUL never survives the binary check)."""

MARKER = re.compile(r"NCCL (INFO|WARN) ?")
PREFIX = re.compile(
    r"(?:(?P<host>[\w.<>-]{1,255}):(?P<pid>\d{1,10}):\d{1,10} )?\[(?P<dev>\d{1,4})\] (?:[\w./+-]{1,120}:\d{1,7} )?\Z"
)
SIZE_KEY = " ranks"
"""A communicator whose commId the log never shows is keyed by its size, e.g. `16 ranks`."""
SEPARATORS = "|]>):"
"""What may stand right before NCCL's prefix besides whitespace (log viewers' and launchers' separators)."""
PREFIX_WINDOW = 400
"""How far before `NCCL INFO` NCCL's own prefix is looked for (keeps the search linear on long lines)."""
LEADING = re.compile(r"([\w.<>-]{1,255}):(\d{1,10}):\d{1,10} \[(\d{1,4})\] (?:[\w./+-]{1,120}:\d{1,7} )?NCCL (INFO|WARN) ?")
VERSION = re.compile(r"NCCL version (\d{1,3}\.\d{1,3}\.\d{1,4}(?:[+\w.-]{0,40}))")
INIT = re.compile(
    r"comm (?P<ptr>0x[0-9a-fA-F]{1,16}) rank (?P<rank>\d{1,7}) nranks (?P<nranks>\d{1,7}) cudaDev (?P<cuda>\d{1,4})"
    r"(?: nvmlDev (?P<nvml>\d{1,4}))?"
)
INIT_END = re.compile(r" - (?:Init|Destroy|Abort) (?:START|COMPLETE)")
"""How a whole init, destroy or abort line ends."""
BUS_ID = re.compile(r" busId ([0-9a-fA-F]{1,16})\b")
COMM_ID = re.compile(r" commId (0x[0-9a-fA-F]{1,16})\b")
"""The communicator's hash, the same on every rank (ncclCommSplit prints parent, color and key before it)."""
COMM = re.compile(
    r"comm (?P<ptr>0x[0-9a-fA-F]{1,16}) rank (?P<rank>\d{1,7}) nRanks (?P<nranks>\d{1,7}) nNodes (?P<nnodes>\d{1,7})"
)
_CONNECTION_CHANNEL = r"(?:Channel|Ring) (?P<ch>\d{1,4})(?:/\d{1,2})?"
_CONNECTION_ENDS = (
    r"(?P<src>\d{1,7})(?:\[(?P<sb>[0-9a-fA-F]{1,16})\])? -> (?P<dst>\d{1,7})(?:\[(?P<db>[0-9a-fA-F]{1,16})\])?"
    r"(?: \[(?P<side>send|receive)\])? via "
)
CONNECTION = re.compile(_CONNECTION_CHANNEL + " : " + _CONNECTION_ENDS + r"(?P<detail>\S[^\t]{0,200})\Z")
CLEAN_PREFIX = re.compile(r"([A-Za-z0-9][\w.<>-]{0,254}):(\d{1,10}):\d{1,10} \[(\d{1,4})\]", re.ASCII)
"""NCCL's INFO prefix before ` NCCL INFO `, whole (host, pid, dev): a line that starts with it reads as :data:`LEADING`
reads it (no source location, nothing a launcher put before it)."""
CLEAN_CHANNEL = re.compile(_CONNECTION_CHANNEL, re.ASCII)
"""A connection message's channel, whole, up to ` : ` (`Channel 00/0`, `Ring 03`)."""
CLEAN_ENDS = re.compile(_CONNECTION_ENDS + r"(?P<detail>[\w/().-]{1,201})", re.ASCII)
"""A connection message after ` : `, whole, with a one-word detail (`0[0] -> 1[1] via P2P/CUMEM/read`).

A raw line `CLEAN_PREFIX NCCL INFO CLEAN_CHANNEL : CLEAN_ENDS`, each piece whole, is NCCL's INFO prefix and one
:data:`CONNECTION` with nothing to clean: ASCII, no escape, carriage return, tab or trailing space, one process's
line. No piece holds the separator after it, so the first ` NCCL INFO ` and the first ` : ` after it are where the
pieces end; most of a large log's distinct lines are these, and their pieces recur (a process writes one prefix, a
pair of ranks the same ends on every channel)."""
COLLNET = re.compile(
    r"Coll(?:Net)? (?P<ch>\d{1,4})(?:/\d{1,2})? : (?P<rank>\d{1,7}) \[(?P<side>send|receive)\] via (?P<detail>\S[^\t]{0,200})\Z"
)
RING_ORDER = re.compile(r"(?:Channel|Ring) (?P<ch>\d{1,4})(?:/\d{1,4})? :(?P<order>(?: +\d{1,7}){1,65536})\Z")
TREES = re.compile(r"Trees((?: \[\d{1,4}\] -?\d{1,7}/-?\d{1,7}/-?\d{1,7}->\d{1,7}->-?\d{1,7}){1,1024})\Z")
TREE_ITEM = re.compile(r"\[(\d{1,4})\] (-?\d{1,7})/(-?\d{1,7})/(-?\d{1,7})->(\d{1,7})->(-?\d{1,7})")
ENV = re.compile(r"(NCCL_[A-Z0-9_]{1,64}) set (?:by environment )?to (.{0,200}?)\.?\Z")
ERROR_TRACE = re.compile(r"[\w./-]{1,120}\.(?:cc|h|cu|c):\d{1,7} -> \d{1,4}")
CUT_PREFIX = re.compile(r"\[\d{1,4}\] NCCL(?! INFO| WARN)")
"""NCCL's prefix followed by neither level: the line was cut there or overwritten by another process."""
CONNECTION_START = re.compile(r"(?:Channel|Ring|CollNet|Coll)(?: \d|\Z)")
COMM_SUFFIX = re.compile(r" comm (0x[0-9a-fA-F]{1,16}) nRanks (\d{1,7})(?: busId ([0-9a-fA-F]{1,16}))?\Z")
"""What newer versions append to connection and Trees lines: the communicator they belong to."""
CHANNEL_COUNTS = re.compile(
    r"(\d{1,4}) coll channels, (?:(\d{1,4}) collnet channels, )?(?:(\d{1,4}) nvls channels, ?)?(?:\d{1,4} p2p channels)?"
)
RING_NEIGHBOURS = re.compile(r"Ring \d{1,4} : (-?\d{1,7}) -> (\d{1,7}) -> (-?\d{1,7})\Z")
"""`Ring 00 : 15 -> 0 -> 1` (NCCL 2.5-2.12): previous -> this rank -> next on one ring."""
TREE_NEIGHBOURS = re.compile(r"Tree \d{1,4} : (-?\d{1,7}) -> (\d{1,7}) -> (-?\d{1,7}(?:/-?\d{1,7}){0,2})\Z")
"""`Tree 0 : -1 -> 0 -> 1/8/-1` (NCCL 2.5-2.12): parent -> this rank -> children."""
NVLS_COMM = re.compile(r"NVLS comm (0x[0-9a-fA-F]{1,16}) headRank (-?\d{1,7}) nHeads (\d{1,4})\b")
NVLS_MULTICAST = re.compile(r"NVLS multicast support is (not )?available on dev (\d{1,4})")
TEST_RANK = re.compile(r"#?[ \t]*Rank[ \t]+(\d{1,7})[ \t]+(?:Group[ \t]+\d{1,9}[ \t]+)?Pid[ \t]+\d{1,10}[ \t]+on[ \t]+"
                       r"([\w.<>-]{1,255})[ \t]+device[ \t]+\d{1,6}")
"""nccl-tests' `#  Rank  1 Group  0 Pid  26 on HOST device  1 [0x64] NVIDIA H100`: the host of each rank of its run."""


def matters_without_nccl(raw: str) -> bool:
    """Whether a raw line without `NCCL` in it can still matter to the reader: an unreadable line (counted as
    skipped) or nccl-tests' `#  Rank  1 Group  0 Pid  26 on HOST device  1` (the host of a rank)."""
    return raw == UNREADABLE or (" Pid " in raw and "Rank" in raw)


def worth_reading(raw: str) -> bool:
    """Whether a raw line may matter to the reader at all: it names NCCL, or :func:`matters_without_nccl`."""
    return "NCCL" in raw or matters_without_nccl(raw)


Fact = tuple[str, object]
"""What a connection line's bracket says of its rank: ("device_index", 3) or ("bus_id", "1b000")."""
Connection = tuple[int, int, int, str | None, str, Fact | None, Fact | None]
"""(src, dst, channel, side, detail, what src's bracket says, what dst's says) of a connection line."""


def parse_connection(message: str) -> Connection | tuple[()]:
    """The :data:`Connection` a message states, or () when it is none."""
    match = CONNECTION.match(message)
    if match is None:
        return ()
    channel, *ends = match.groups()
    stated = ends_of(*ends)
    if not stated:
        return ()
    src, dst, side, detail, src_fact, dst_fact = stated
    return (src, dst, int(channel), side, detail, src_fact, dst_fact)


Ends = tuple[int, int, str | None, str, Fact | None, Fact | None]
"""(src, dst, side, detail, what src's bracket says, what dst's says): a :data:`Connection` but its channel."""


def ends_of(src_text: str, src_bracket: str | None, dst_text: str, dst_bracket: str | None, side: str | None,
            detail: str) -> Ends | tuple[()]:
    """The :data:`Ends` the groups of :data:`CONNECTION` after its channel (those of :data:`CLEAN_ENDS`) state, or
    () when they state none."""
    src, dst = int(src_text), int(dst_text)
    ends = _connection_ends(src_bracket, dst_bracket, detail)
    if (src if src > dst else dst) > MAX_NCCL_RANK or ends is None:
        return ()
    return (src, dst, side, *ends)


@functools.lru_cache(maxsize=4096)
def _connection_ends(src_bracket: str | None, dst_bracket: str | None,
                     detail: str) -> tuple[str, Fact | None, Fact | None] | None:
    """A connection's detail and what its two brackets say; None when the detail names no transport NCCL prints
    (a log repeats these few pieces on every channel of every rank)."""
    if transport_class(detail) is None:
        return None
    return (detail.rstrip(), bracket_fact(src_bracket) if src_bracket is not None else None,
            bracket_fact(dst_bracket) if dst_bracket is not None else None)


@functools.lru_cache(maxsize=4096)
def tree_links(child_a: str, child_b: str, child_c: str, parent: str) -> tuple[tuple[int, ...], int]:
    """A `Trees` item's children (those not -1) and parent, from the groups of :data:`TREE_ITEM` (a log repeats
    these on every channel of every rank)."""
    return tuple(int(child) for child in (child_a, child_b, child_c) if child != "-1"), int(parent)


def channel_triple(counts: tuple[int | None, ...]) -> tuple[int | None, int | None, int | None]:
    padded = (*counts, None, None, None)
    return padded[0], padded[1], padded[2]


def bracket_fact(bracket: str) -> Fact:
    """A connection line's bracket: up to two decimal digits is a device index, anything else a hex bus id."""
    if len(bracket) <= 2 and bracket.isascii() and bracket.isdecimal():
        return "device_index", int(bracket)
    return "bus_id", bracket.lower()


@functools.lru_cache(maxsize=4096)
def transport_class(detail: str) -> str | None:
    """The transport class a detail names (`P2P/IPC/read` -> P2P), or None for a word NCCL does not print."""
    word = detail.split("/", 1)[0].strip().upper()
    return word if word in TRANSPORTS else None
