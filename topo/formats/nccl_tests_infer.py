"""Which collective and how many ranks an nccl-tests table is, when the log does not say.

nccl-tests prints per row the `redop` and `root` columns, `count` elements of the data type for
`size` bytes (per rank for all_gather, reduce_scatter and all_to_all: size = count x type x ranks),
and busbw = algbw x the op's factor for the rank count. Together they pin the op down, except
where two ops print alike: all_gather and all_to_all (both say both), and, on two ranks, all_reduce
and send_recv. The printed busbw is the truth: it is cross-checked against the factor, never rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.topo.common.limits import MAX_WORLD_RANKS
from linkscope.topo.model.busbw import bus_factor

BYTES_PER_ELEMENT: dict[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
    "double": 8, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
}
"""nccl-tests' type names and their element sizes."""



@dataclass(frozen=True)
class Signature:
    """What an op prints: a reduction or not, a root or not, per-rank counts or not."""

    reduces: bool
    rooted: bool
    per_rank_count: bool


SIGNATURES: dict[str, Signature] = {
    "all_reduce": Signature(reduces=True, rooted=False, per_rank_count=False),
    "reduce_scatter": Signature(reduces=True, rooted=False, per_rank_count=True),
    "all_gather": Signature(reduces=False, rooted=False, per_rank_count=True),
    "all_to_all": Signature(reduces=False, rooted=False, per_rank_count=True),
    "broadcast": Signature(reduces=False, rooted=True, per_rank_count=False),
    "reduce": Signature(reduces=True, rooted=True, per_rank_count=False),
    "send_recv": Signature(reduces=True, rooted=False, per_rank_count=False),
}
"""Ops whose rows can be recognised (send_recv prints `sum -1`, like all_reduce)."""

ONE_TO_ONE = frozenset({"broadcast", "reduce", "send_recv"})
"""Ops whose busbw is algbw on any rank count (so busbw/algbw says nothing of the rank count)."""


@dataclass(frozen=True)
class RowFacts:
    """What one row says, for inference."""

    redop: str | None
    """None when the table has no redop column (old formats)."""
    root: int | None
    """None when the table has no root column."""
    elements_per_count: float
    """size / (count x element size): 1 for whole-buffer ops, the rank count for per-rank ops; NaN for count 0."""
    algbw_gbps: float
    busbw_gbps: float


def busbw_fits(op: str, nranks: int, algbw: float, busbw: float) -> bool:
    """Whether printed `busbw` is `algbw` x the op's factor within the rounding of two printed decimals."""
    expected = algbw * bus_factor(op, nranks)
    return abs(expected - busbw) <= 0.016 + 0.002 * max(expected, busbw)


def ranks_from_ratio(op: str, rows: list[RowFacts]) -> int | None:
    """The one rank count whose factor turns every row's algbw into its busbw; None when the ratio
    cannot tell (factor-1 ops, bandwidths too small to read, or several counts fit)."""
    if op.split("|", 1)[0] in ONE_TO_ONE:
        return None
    best = max(rows, key=lambda row: row.algbw_gbps, default=None)
    if best is None or best.algbw_gbps < 1.0:
        return None
    ratio = best.busbw_gbps / best.algbw_gbps
    per_link = 2.0 if op.split("|", 1)[0] == "all_reduce" else 1.0
    if not 0 <= ratio < per_link:
        return None
    guess = round(per_link / (per_link - ratio))
    fitting = [n for n in (guess - 1, guess, guess + 1) if 1 <= n <= MAX_WORLD_RANKS
               and busbw_fits(op, n, best.algbw_gbps, best.busbw_gbps)]
    if len(fitting) != 1:
        return None
    nranks = fitting[0]
    if all(busbw_fits(op, nranks, row.algbw_gbps, row.busbw_gbps) for row in rows):
        return nranks
    return None


def candidate_ops(rows: list[RowFacts], nranks: int | None) -> list[str]:
    """Ops whose columns, counts and busbw factor fit every row (the rank count when known)."""
    first = rows[0]
    candidates: list[str] = []
    for op, signature in SIGNATURES.items():
        if first.redop is not None:
            if (first.redop != "none") != signature.reduces:
                continue
            if op == "send_recv" and first.redop != "sum":
                continue
        if first.root is not None and (first.root >= 0) != signature.rooted:
            continue
        if not _counts_fit(rows, signature, nranks):
            continue
        ranks = nranks if nranks is not None else _ranks_of_counts(rows, signature)
        if ranks is None:
            ranks = ranks_from_ratio(op, rows)
        if ranks is not None:
            fits = all(busbw_fits(op, ranks, row.algbw_gbps, row.busbw_gbps) for row in rows)
        elif op in ONE_TO_ONE:
            fits = all(busbw_fits(op, 1, row.algbw_gbps, row.busbw_gbps) for row in rows)
        else:  # the ratio cannot name the count: busbw must at least stay below the factor's limit
            fits = all(row.busbw_gbps <= row.algbw_gbps * bus_factor(op, MAX_WORLD_RANKS) + 0.016 for row in rows)
        if fits:
            candidates.append(op)
    return candidates


def _counts_fit(rows: list[RowFacts], signature: Signature, nranks: int | None) -> bool:
    for row in rows:
        ratio = row.elements_per_count
        if ratio != ratio:
            continue
        if not signature.per_rank_count and abs(ratio - 1) > 1e-9:
            return False
        if signature.per_rank_count and nranks is not None and abs(ratio - nranks) > 1e-9:
            return False
    return True


def _ranks_of_counts(rows: list[RowFacts], signature: Signature) -> int | None:
    """The rank count per-rank ops print through size / count (None when rows disagree or it is 1)."""
    if not signature.per_rank_count:
        return None
    ratios = {round(row.elements_per_count) for row in rows if row.elements_per_count >= 1}
    if len(ratios) != 1:
        return None
    ranks = ratios.pop()
    return ranks if ranks > 1 and all(abs(row.elements_per_count - ranks) < 1e-9 for row in rows) else None
