"""What linkscope's NVML reader makes of this machine, as JSON: the facts the replay test compares.

Run with `LINKSCOPE_NVML_RECORD` set, it leaves a recording of every NVML call it made; replaying that
recording through the fakes must give exactly the facts printed here (tests/probes/test_gpu_recordings.py).

    LINKSCOPE_NVML_RECORD=nvml.jsonl python3 nvml_facts.py > nvml-facts.json
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from linkscope.probes.nvml import NvmlFacts, collect, load_pynvml
    from linkscope.probes.nvml_query import NvmlQuery
    from linkscope.probes.nvml_recording import nvml_facts_json

    module = load_pynvml()
    if module is None:
        print(json.dumps({"error": "nvidia-ml-py is not installed"}))
        return 2
    facts = NvmlFacts()
    query = NvmlQuery(module)
    collect(query, facts)
    print(json.dumps(nvml_facts_json(facts, query.gaps), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
