"""Where things are: the repository, the test fixtures, and the real-world corpus among them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root folder."""
TESTS = ROOT / "tests"
"""The tests' folder: on the path (pyproject's pytest `pythonpath`), so helpers import as `support.*`."""
FIXTURES = TESTS / "fixtures"
REAL = FIXTURES / "real"
"""Outputs recorded on real machines (see each folder's SOURCES.md)."""
