"""Which collective and how many ranks an nccl-tests table is, when the log does not say.

nccl-tests prints per row the `redop` and `root` columns, `count` elements of the data type for
`size` bytes (per rank for all_gather, reduce_scatter and all_to_all: size = count x type x ranks),
busbw = algbw x the op's factor for the rank count, and a check of each half (`#wrong`, or N/A where
it did not check: all_to_all and sendrecv never check their in-place half). Until late 2022 each test
printed its own header, with `redop` and `root` only where the test has them (all_to_all printed an
empty redop). Together they pin the op down, except where two ops print alike (all_gather and
all_to_all without validation; all_reduce and sendrecv on two ranks without validation), which is then
said as both (`all_gather|all_to_all`). The printed busbw is the truth: it is cross-checked against the
factor within the rounding of the printed numbers, never rewritten.
"""

from __future__ import annotations

import math

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_WORLD_RANKS
from linkscope.topo.model.busbw import bus_factor

BYTES_PER_ELEMENT: dict[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
    "double": 8, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
}
"""nccl-tests' type names and their element sizes."""


@frozen
class Signature:
    """What an op prints: a reduction or not, a root or not, per-rank counts or not, an in-place check or not,
    and which of `redop` / `root` its own header had in the per-test headers of 2017-2022."""

    reduces: bool
    rooted: bool
    per_rank_count: bool
    checks_in_place: bool = True
    old_columns: tuple[bool, bool] = (True, False)
    """(redop, root) columns of the test's own header, before nccl-tests printed one header for all (late 2022)."""


SIGNATURES: dict[str, Signature] = {
    "all_reduce": Signature(reduces=True, rooted=False, per_rank_count=False),
    "reduce_scatter": Signature(reduces=True, rooted=False, per_rank_count=True),
    "all_gather": Signature(reduces=False, rooted=False, per_rank_count=True, old_columns=(False, False)),
    "all_to_all": Signature(reduces=False, rooted=False, per_rank_count=True, checks_in_place=False),
    "broadcast": Signature(reduces=False, rooted=True, per_rank_count=False, old_columns=(False, True)),
    "reduce": Signature(reduces=True, rooted=True, per_rank_count=False, old_columns=(True, True)),
    "send_recv": Signature(reduces=True, rooted=False, per_rank_count=False, checks_in_place=False,
                           old_columns=(False, False)),
}
"""Ops whose rows can be recognised (send_recv prints `sum -1`, like all_reduce)."""

ONE_TO_ONE = frozenset({"broadcast", "reduce", "send_recv"})
"""Ops whose busbw is algbw on any rank count (so busbw/algbw says nothing of the rank count)."""


@frozen
class RowFacts:
    """What one measured half of a row says, for inference."""

    redop: str | None
    """None when the table has no redop column; `""` where nccl-tests printed an empty name."""
    root: int | None
    """None when the table has no root column."""
    elements_per_count: float
    """size / (count x element size): 1 for whole-buffer ops, the rank count for per-rank ops; NaN when unknown."""
    algbw_gbps: float
    busbw_gbps: float
    algbw_error: float = 0.005
    busbw_error: float = 0.005
    """Half a unit of the last printed digit of algbw and busbw."""


@frozen
class TableFacts:
    """What a whole table says, for inference."""

    rows: tuple[RowFacts, ...]
    columns: tuple[bool, bool]
    """Whether the header has a redop and a root column."""
    old_header: bool
    """The per-test header of 2017-2022 (an `error` column instead of `#wrong`)."""
    in_place_checked: bool | None
    """True when some in-place half was checked, False when none was while some out-of-place half was,
    None when the table says nothing (no validation, or no in-place half)."""


def factor_fits(op: str, nranks: int, row: RowFacts) -> bool:
    """Whether printed busbw is printed algbw x the op's factor, within the rounding of both printed numbers."""
    factor = bus_factor(op, nranks)
    return abs(row.algbw_gbps * factor - row.busbw_gbps) <= row.algbw_error * factor + row.busbw_error + 1e-9


def ranks_from_ratio(op: str, rows: tuple[RowFacts, ...] | list[RowFacts]) -> int | None:
    """The one rank count whose factor turns algbw into busbw on every row within the printed rounding (on the
    most rows, when a row disagrees); None when the ratio cannot tell (factor-1 ops, bandwidths too small to
    read, or several counts fit alike)."""
    first = op.split("|", 1)[0]
    if first in ONE_TO_ONE or first not in SIGNATURES:
        return None
    per_link = 2.0 if first == "all_reduce" else 1.0
    low, high = 0.0, per_link
    for row in rows:
        if row.algbw_gbps - row.algbw_error <= 0:
            continue
        low = max(low, (row.busbw_gbps - row.busbw_error) / (row.algbw_gbps + row.algbw_error))
        high = min(high, (row.busbw_gbps + row.busbw_error) / (row.algbw_gbps - row.algbw_error))
    if low > high:
        return _most_fitting(op, rows, per_link)
    fitting = _counts_between(low, high, per_link)
    return fitting[0] if len(fitting) == 1 else None


def _counts_between(low: float, high: float, per_link: float) -> list[int]:
    """The rank counts n >= 2 whose factor per_link x (n-1)/n lies in [low, high] (at most a few; none when too many)."""
    if high >= per_link:
        return []
    smallest = max(2, math.ceil(per_link / (per_link - max(low, 0.0)) - 1e-9))
    largest = math.floor(per_link / (per_link - high) + 1e-9)
    if largest - smallest > 3 or largest > MAX_WORLD_RANKS:
        return []
    return list(range(smallest, largest + 1))


def _most_fitting(op: str, rows: tuple[RowFacts, ...] | list[RowFacts], per_link: float) -> int | None:
    """When no count fits every row: the count the best-resolved rows agree on, if it fits most rows."""
    best = max(rows, key=lambda row: row.algbw_gbps, default=None)
    if best is None or best.algbw_gbps - best.algbw_error <= 0:
        return None
    low = (best.busbw_gbps - best.busbw_error) / (best.algbw_gbps + best.algbw_error)
    high = (best.busbw_gbps + best.busbw_error) / (best.algbw_gbps - best.algbw_error)
    counts = _counts_between(low, min(high, per_link - 1e-12), per_link)
    scored = sorted(((sum(factor_fits(op, n, row) for row in rows), n) for n in counts), reverse=True)
    if not scored or (len(scored) > 1 and scored[0][0] == scored[1][0]) or scored[0][0] * 2 <= len(rows):
        return None
    return scored[0][1]


def candidate_ops(table: TableFacts, nranks: int | None) -> list[str]:
    """Ops whose columns, counts, checks and busbw factor fit the table (the rank count when known). When the
    factor rules every op out, the ops the other evidence allows (busbw is then checked, and said, row by row)."""
    shaped = [op for op, signature in SIGNATURES.items() if _shape_fits(table, signature, op, nranks)]
    fitting = [op for op in shaped if _factor_fits_table(table, op, nranks)]
    return fitting or shaped


def _shape_fits(table: TableFacts, signature: Signature, op: str, nranks: int | None) -> bool:
    rows = table.rows
    first = rows[0]
    if table.old_header and table.columns != signature.old_columns:
        return False
    if first.redop is not None:
        if first.redop == "":
            if op != "all_to_all":
                return False
        elif (first.redop != "none") != signature.reduces or (op == "send_recv" and first.redop != "sum"):
            return False
    if first.root is not None and (first.root >= 0) != signature.rooted:
        return False
    if table.in_place_checked is not None and table.in_place_checked != signature.checks_in_place:
        return False
    return _counts_fit(rows, signature, nranks)


def _factor_fits_table(table: TableFacts, op: str, nranks: int | None) -> bool:
    rows = table.rows
    ranks = nranks if nranks is not None else _ranks_of_counts(rows, SIGNATURES[op])
    if ranks is None:
        ranks = ranks_from_ratio(op, rows)
    if ranks is not None:
        return all(factor_fits(op, ranks, row) for row in rows)
    if op in ONE_TO_ONE:
        return all(factor_fits(op, 1, row) for row in rows)
    limit = bus_factor(op, MAX_WORLD_RANKS)  # the ratio cannot name the count: busbw must stay below the factor's limit
    return all(row.busbw_gbps - row.busbw_error <= (row.algbw_gbps + row.algbw_error) * limit for row in rows)


def _counts_fit(rows: tuple[RowFacts, ...], signature: Signature, nranks: int | None) -> bool:
    for row in rows:
        ratio = row.elements_per_count
        if ratio != ratio:
            continue
        if not signature.per_rank_count and abs(ratio - 1) > 1e-9:
            return False
        if signature.per_rank_count and nranks is not None and abs(ratio - nranks) > 1e-9:
            return False
        if signature.per_rank_count and nranks is None and ratio < 2 - 1e-9:
            return False
    return True


def ranks_of_counts(rows: tuple[RowFacts, ...] | list[RowFacts], op: str) -> int | None:
    """The rank count per-rank ops print through size / count (None when rows disagree or say 1)."""
    signature = SIGNATURES.get(op.split("|", 1)[0])
    return _ranks_of_counts(rows, signature) if signature is not None else None


def _ranks_of_counts(rows: tuple[RowFacts, ...] | list[RowFacts], signature: Signature) -> int | None:
    if not signature.per_rank_count:
        return None
    ratios = {round(row.elements_per_count) for row in rows if row.elements_per_count >= 1}
    if len(ratios) != 1:
        return None
    ranks = ratios.pop()
    return ranks if ranks > 1 and all(abs(row.elements_per_count - ranks) < 1e-9 for row in rows
                                      if row.elements_per_count == row.elements_per_count) else None
