"""Software facts for communication: torch and NCCL versions, torch symmetric memory.

The default path never imports torch (that costs seconds): it reads `torch/version.py` and
package metadata from disk. `with_torch=True` imports torch and asks it directly, which also
gives the NCCL version a CUDA build of torch links. Kernel-side facts (`nvidia_peermem`, IOMMU)
come from :mod:`probes.sysfs`; the NVSwitch fabric state from :mod:`probes.nvml`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import Gap

NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
"""pip packages that ship the NCCL library torch loads."""

_ASSIGNMENT = re.compile(r"^(__version__|cuda)\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", re.MULTILINE)


@frozen
class SoftwareFacts:
    """Versions and capabilities of the Python communication stack."""

    torch: str | None = None
    torch_cuda: str | None = None
    """CUDA version torch was built with; None for a CPU build."""
    nccl: str | None = None
    torch_symmetric_memory: bool | None = None
    """True when torch ships `torch.distributed._symmetric_memory` and is a CUDA build."""
    gaps: tuple[Gap, ...] = ()


def _torch_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_torch_version_file(torch_dir: Path) -> tuple[str | None, str | None]:
    """(`__version__`, `cuda`) assigned in `torch/version.py`, read as text."""
    try:
        text = (torch_dir / "version.py").read_text(errors="replace")
    except OSError:
        return None, None
    values: dict[str, str | None] = {}
    for match in _ASSIGNMENT.finditer(text):
        values[match.group(1)] = match.group(2) or match.group(3) or None
    return values.get("__version__"), values.get("cuda")


def _nccl_from_metadata() -> str | None:
    for name in NCCL_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def read_software(with_torch: bool = False) -> SoftwareFacts:
    """torch / NCCL versions and symmetric memory; imports torch only when `with_torch` is set."""
    if with_torch:
        return _read_software_with_torch()
    torch_dir = _torch_dir()
    if torch_dir is None:
        return SoftwareFacts(nccl=_nccl_from_metadata())
    version, cuda = read_torch_version_file(torch_dir)
    has_symmetric = (torch_dir / "distributed" / "_symmetric_memory" / "__init__.py").is_file()
    return SoftwareFacts(
        torch=version,
        torch_cuda=cuda,
        nccl=_nccl_from_metadata(),
        torch_symmetric_memory=has_symmetric and cuda is not None,
    )


def _read_software_with_torch() -> SoftwareFacts:
    try:
        import torch
    except Exception as exc:  # a broken torch install is a gap, not a crash
        return SoftwareFacts(gaps=(Gap("import torch", f"{type(exc).__name__}: {exc}"),), nccl=_nccl_from_metadata())
    gaps: list[Gap] = []
    nccl: str | None = None
    cuda = torch.version.cuda
    if cuda is None:
        gaps.append(Gap("torch.cuda.nccl.version()", "torch is a CPU build: no NCCL"))
    else:
        try:
            raw = torch.cuda.nccl.version()
            nccl = ".".join(str(part) for part in raw) if isinstance(raw, tuple) else str(raw)
        except Exception as exc:
            gaps.append(Gap("torch.cuda.nccl.version()", f"{type(exc).__name__}: {exc}"))
    if nccl is None:
        nccl = _nccl_from_metadata()
    symmetric = False
    try:
        import torch.distributed._symmetric_memory

        symmetric = torch.distributed.is_available() and cuda is not None
    except Exception:
        symmetric = False
    return SoftwareFacts(torch=str(torch.__version__), torch_cuda=cuda, nccl=nccl, torch_symmetric_memory=symmetric,
                        gaps=tuple(gaps))
