"""Suite-wide settings: in CI, the torch-backed benchmark tests must run, not skip."""

from __future__ import annotations

import importlib.util
import os

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to run in CI without torch, so tests that need it cannot silently skip."""
    if os.environ.get("CI") and importlib.util.find_spec("torch") is None:
        pytest.exit("CI=true but torch is not installed: run `pip install torch==2.13.0` first", returncode=2)
