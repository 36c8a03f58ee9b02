"""A C stand-in for libnvidia-ml.so.1, loaded by the real pynvml, serving a fake machine's answers.

`build(directory)` compiles `standin.c` with the system C compiler into `directory/libnvidia-ml.so.1`;
`python -m support.fakes.nvml_standin.drive` (run with that directory on LD_LIBRARY_PATH) drives the probes
over the real pynvml and prints their results as JSON. See `describe.py` for the description format.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("standin.c")
LIBRARY = "libnvidia-ml.so.1"


def compiler() -> str | None:
    """The system C compiler (`cc`, else `gcc`), or None when there is none."""
    return shutil.which("cc") or shutil.which("gcc")


def build(directory: Path, old_driver: bool = False) -> Path:
    """Compile the stand-in into `directory/libnvidia-ml.so.1` (soname set) and return `directory`.

    `old_driver` leaves out the functions an older driver lacks (`nvmlSystemGetCudaDriverVersion_v2`,
    `nvmlDeviceGetNumaNodeId`, `nvmlDeviceGetGpuFabricInfoV`).
    """
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    command = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", f"-Wl,-soname,{LIBRARY}",
               "-o", str(directory / LIBRARY), str(SOURCE), "-lpthread"]
    if old_driver:
        command.insert(1, "-DLINKSCOPE_OLD_DRIVER")
    subprocess.run(command, check=True, capture_output=True, text=True)
    return directory
