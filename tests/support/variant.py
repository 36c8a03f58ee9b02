"""Synthetic variants of real outputs, the way launchers, terminals and pastes change them:
every prefix style, colours, lines of several ranks interleaved, a row cut short, a log line fused
into a row. The tests apply them to the real fixtures and expect the readers to read the same."""

from __future__ import annotations

import random
from collections.abc import Callable

PREFIX_STYLES: dict[str, Callable[[int, str], str]] = {
    "open-mpi": lambda rank, host: f"[1,{rank}]<stdout>:",
    "srun": lambda rank, host: f"{rank:>2}: ",
    "torchrun": lambda rank, host: f"[default{rank}]:",
    "mpich": lambda rank, host: f"[{rank}] ",
    "ray": lambda rank, host: f"({host}, rank={rank}, pid=38{rank:02d}) ",
    "pdsh": lambda rank, host: f"{host}: ",
    "kubectl": lambda rank, host: f"[pod/{host}/trainer] ",
    "python-logging": lambda rank, host: "2025-11-12 20:42:20,261 - INFO - ",
    "logger-name": lambda rank, host: "2025-11-12 20:42:20,261 - train.comm - WARNING - ",
    "iso-utc": lambda rank, host: "2025-11-12T20:42:20.261234567Z ",
    "bracketed": lambda rank, host: "[2025-11-12 20:42:20] ",
    "bracketed-short": lambda rank, host: "[20:42:20.261] ",
    "quote": lambda rank, host: "> ",
}
"""Launcher and logging prefixes, as each tool writes them."""

RANK_STYLES = ("open-mpi", "srun", "torchrun", "mpich", "ray")
"""The styles that name a rank (so interleaved output of several ranks can be told apart)."""


def clash(style: str, name: str, lines: list[str]) -> str:
    """Why a prefix style cannot be told from a file's own text, or "": the file already carries that launcher's
    labels, or its lines begin with what the prefix would be read with."""
    if style == "srun" and "srun-label" in name:
        return "srun does not run under srun: no nested labels"
    if style == "open-mpi" and any(line.startswith("[1,") and "]<std" in line for line in lines):
        return "the file is already Open MPI --tag-output; a second tag of another job does not happen"
    if style == "mpich" and any(line.startswith("NCCL INFO") for line in lines):
        return "`[3] NCCL INFO` is NCCL's own [cudaDev] prefix too (the poster cut host:pid:tid)"
    if style in ("iso-utc", "python-logging", "logger-name") and any(
            line.split(":", 1)[0] in ("WARNING", "INFO", "ERROR", "DEBUG", "CRITICAL") for line in lines):
        return "a line that starts with a log level reads as that level after a timestamp"
    return ""


def prefixed(text: str, styles: list[str], rank: int = 3, host: str = "gpu-node-07") -> str:
    """`text` with every line prefixed by `styles` (outermost first), like a launcher writes it."""
    head = "".join(PREFIX_STYLES[style](rank, host) for style in styles)
    return "\n".join(head + line for line in text.split("\n"))


def coloured(text: str, seed: int = 0) -> str:
    """`text` as a colour terminal capture: some words wrapped in SGR sequences, some lines underlined."""
    chooser = random.Random(seed)
    lines = []
    for line in text.split("\n"):
        words = line.split(" ")
        words = [f"\x1b[{chooser.choice((1, 4, 32, 36))}m{word}\x1b[0m" if word and chooser.random() < 0.3 else word
                 for word in words]
        lines.append(" ".join(words))
    return "\n".join(lines)


def interleaved(texts: dict[int, str], style: str) -> str:
    """The lines of several ranks' outputs interleaved one by one, each with its rank's prefix."""
    per_rank = {rank: [PREFIX_STYLES[style](rank, f"node{rank}") + line for line in text.split("\n")]
                for rank, text in texts.items()}
    out: list[str] = []
    for position in range(max(len(lines) for lines in per_rank.values())):
        out.extend(lines[position] for lines in per_rank.values() if position < len(lines))
    return "\n".join(out)


def cut_after_word(text: str, line_index: int, words_kept: int) -> str:
    """`text` ending inside line `line_index`, after `words_kept` of its words (a process killed mid-write)."""
    lines = text.split("\n")
    kept = lines[line_index].split()[:words_kept]
    return "\n".join([*lines[:line_index], "   " + "   ".join(kept)])


def fused_with_log(text: str, line_index: int, words_kept: int) -> str:
    """`text` with an NCCL INFO line written into the middle of row `line_index` by another thread,
    the rest of the row following on a line of its own (what two processes writing at once leave)."""
    lines = text.split("\n")
    words = lines[line_index].split()
    head, tail = "   ".join(words[:words_kept]), "   ".join(words[words_kept:])
    log = "h100-worker-1:497888:497888 [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 25.874907"
    return "\n".join([*lines[:line_index], head + "  " + log, log, "   " + tail, *lines[line_index + 1:]])
