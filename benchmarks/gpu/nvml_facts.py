"""What linkscope's NVML reader makes of this machine, as JSON: the facts the replay test compares.

Run with `LINKSCOPE_NVML_RECORD` set, it leaves a recording of every NVML call it made; replaying that
recording through the fakes must give exactly the facts printed here (tests/test_gpu_recordings.py).

    LINKSCOPE_NVML_RECORD=nvml.jsonl python3 nvml_facts.py > nvml-facts.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any


def facts_as_json(facts: Any, gaps: Any) -> dict[str, Any]:
    """NvmlFacts and gaps as JSON data, without the timings (which no replay reproduces)."""
    data = dataclasses.asdict(facts)
    data.pop("init_s", None)
    for gpu in data["gpus"]:
        gpu.pop("read_s", None)
    data["ancestors"] = sorted([a, b, str(kind.value if hasattr(kind, "value") else kind)]
                               for (a, b), kind in facts.ancestors.items())
    data["p2p"] = sorted([a, b, dataclasses.asdict(status)] for (a, b), status in facts.p2p.items())
    return {"facts": data, "gaps": [dataclasses.asdict(gap) for gap in gaps]}


def main() -> int:
    from linkscope.probes.nvml import NvmlFacts, collect, load_pynvml
    from linkscope.probes.nvml_query import NvmlQuery

    module = load_pynvml()
    if module is None:
        print(json.dumps({"error": "nvidia-ml-py is not installed"}))
        return 2
    facts = NvmlFacts()
    query = NvmlQuery(module)
    collect(query, facts)
    print(json.dumps(facts_as_json(facts, query.gaps), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
