"""Built-in sample machines: `sample:NAME` snapshots of real machine types, shipped as JSON data.

Each `<name>.json` beside this module is a complete snapshot (what a probe of that machine
would record) written by :mod:`topo.samples.build` from public facts; its `meta` holds a
description and the public sources. The loader only reads the data files.
"""

from __future__ import annotations

import os
from functools import cache

from linkscope.topo.common.errors import InputError
from linkscope.topo.model.codec import snapshot_from_json
from linkscope.topo.model.snapshot import Snapshot

SAMPLE_NAMES: tuple[str, ...] = (
    "dgx-h100",
    "dgx-h100-degraded",
    "b200-hgx",
    "dgx-a100",
    "dgx1-v100",
    "pcie-l40s-8",
    "a100-pcie-nvbridge-4",
    "consumer-2gpu",
    "gb200-nvl72",
    "h100-cluster-mixed",
)
"""Names of the built-in samples, in the order `linkscope samples` lists them."""

_SAMPLES_DIR = os.path.dirname(os.path.abspath(__file__))
"""Where the samples' data files lie: beside this module, as the package installs (a plain folder, read with
`open`: `importlib.resources` would cost every start that opens a sample its imports, a few milliseconds)."""


def sample_names() -> list[str]:
    """The names accepted by :func:`load_sample` (and as `sample:NAME` sources)."""
    return list(SAMPLE_NAMES)


def sample_file_name(name: str) -> str:
    """File name of a sample's data file inside this package."""
    return f"{name}.json"


@cache
def load_sample(name: str) -> Snapshot:
    """The snapshot of sample `name`; InputError for a name that is not a built-in sample."""
    if name not in SAMPLE_NAMES:
        import difflib  # a mistyped name only

        close = difflib.get_close_matches(name, SAMPLE_NAMES, n=1)
        guess = f": did you mean {close[0]}?" if close else ""
        raise InputError(f"unknown sample {name!r}{guess} (available: {', '.join(SAMPLE_NAMES)})")
    with open(os.path.join(_SAMPLES_DIR, sample_file_name(name)), encoding="utf-8") as sample_file:
        text = sample_file.read()
    return snapshot_from_json(text, f"sample:{name}")


def sample_description(name: str) -> str:
    """One-line description of sample `name` (from its `meta`)."""
    return load_sample(name).meta_value("description") or ""
