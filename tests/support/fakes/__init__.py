"""Test doubles for the probes: a fake NVML module and fake sysfs trees, both built from a Snapshot.

Import as `from fakes import FakeNvml, build_sysfs` (pytest puts `tests/` on the path).
"""

from .fake_nvml import DriverQuirks, FakeNvml, NVMLError
from .fake_sysfs import build_sysfs

__all__ = ["DriverQuirks", "FakeNvml", "NVMLError", "build_sysfs"]
