"""Run scenarios over the real pynvml and the C stand-in; print one JSON result per scenario.

Usage (LD_LIBRARY_PATH must name the directory of the built stand-in, so that pynvml loads it):
    python -m support.fakes.nvml_standin.drive SCENARIOS.json WORKDIR
SCENARIOS.json holds a list of :class:`~support.fakes.nvml_standin.scenario.Scenario` as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pynvml

from support.fakes.fake_nvml import FakeNvml
from support.fakes.nvml_standin.describe import write_description
from support.fakes.nvml_standin.scenario import Scenario, run

DESCRIPTION_VARIABLE = "LINKSCOPE_NVML_DESCRIPTION"


def main(argv: list[str]) -> int:
    scenarios = [Scenario.from_json(item) for item in json.loads(Path(argv[0]).read_text())]
    workdir = Path(argv[1])
    results = []
    for number, scenario in enumerate(scenarios):
        description = workdir / f"machine-{number}.txt"

        def changed(fake: FakeNvml, path: Path = description) -> None:
            write_description(fake, path)

        fake = scenario.fake()
        changed(fake)
        os.environ[DESCRIPTION_VARIABLE] = str(description)
        results.append(run(scenario, fake, pynvml, changed, workdir))
    json.dump(results, sys.stdout)
    sys.stdout.flush()
    os._exit(0)  # a call hung inside the stand-in must not hold the interpreter's exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
