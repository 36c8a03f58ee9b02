"""The real-world corpus: every reader over every real file in tests/fixtures/real/, and the facts checked by hand
in each file's sidecar (`<file>.facts.json`) hold: what must be read, what must be refused and at which line,
which gaps must be reported. The facts were read off the raw files, never obtained by running linkscope."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from support.corpus import GAP_RULES, READERS, RealFile, real_files, run
from support.paths import REAL

FILES = real_files()
SOURCE_LINE_KINDS = ("nccl_tests", "nccl_log", "topo", "p2p")
"""Kinds whose files are text: each starts with its `# source:` line (JSON and gzip files are in SOURCES.md)."""


@pytest.mark.parametrize("real", FILES, ids=lambda real: real.id)
def test_real_file_reads_as_its_facts_say(real: RealFile) -> None:
    if real.kind not in READERS:
        pytest.skip(f"no reader of {real.kind} in topo/formats yet (NCCL XML: issue 25)")
    outcome = run(real)
    assert not outcome.failed, f"{real.id}: " + "; ".join(outcome.failed)
    assert outcome.held, f"{real.id}: no fact was checked"


def test_the_corpus_holds_at_least_150_real_files_of_every_kind() -> None:
    kinds = Counter(real.kind for real in FILES)
    assert len(FILES) >= 150, kinds
    assert kinds["nccl_tests"] >= 60 and kinds["nccl_log"] >= 40 and kinds["topo"] >= 40 and kinds["p2p"] >= 25, kinds
    assert kinds["trace"] >= 10 and kinds["nccl_topo_xml"] >= 16 and kinds["nccl_graph_xml"] >= 4, kinds


@pytest.mark.parametrize("real", FILES, ids=lambda real: real.id)
def test_every_real_file_says_where_it_came_from(real: RealFile) -> None:
    """A text file starts with its `# source:` line, an XML file with a `<!-- source:` comment, and a file that cannot
    carry one (JSON, gzip) has its entry in its folder's SOURCES.md."""
    if real.path.suffix in (".json", ".gz"):
        assert real.path.name in (real.path.parent / "SOURCES.md").read_text(encoding="utf-8")
    elif real.path.suffix == ".xml":
        assert "<!-- source:" in real.path.read_text(encoding="utf-8")[:2000]
    else:
        assert real.kind in SOURCE_LINE_KINDS
        assert real.path.read_text(encoding="utf-8").startswith("# source: ")
    assert set(real.facts) == {"kind", "read", "refuse", "gaps", "checked"} and real.facts["checked"]


def test_a_wrong_fact_fails() -> None:
    """The check is not vacuous: one fact changed in a sidecar, and the file no longer holds its facts."""
    real = next(real for real in FILES if real.id == "nccl_tests/h200-2node-16gpu-baremetal-all_reduce.txt")
    assert not run(real).failed
    for key, wrong in (("op", "all_gather"), ("nranks", 8), ("rows", 7), ("peak_busbw_gbps", 488.8),
                       ("hosts", ["fs-207"]), ("sizes", [1073741824, 9663676417])):
        facts = copy.deepcopy(real.facts)
        facts["read"][key] = wrong
        assert run(RealFile(real.path, facts)).failed, key


def test_a_refusal_must_name_its_line_and_a_read_file_must_not_be_refused() -> None:
    refused = next(real for real in FILES if real.facts["refuse"] and real.kind == "nccl_tests")
    facts = copy.deepcopy(refused.facts)
    facts["refuse"]["line"] += 1
    assert run(RealFile(refused.path, facts)).failed
    read = next(real for real in FILES if real.id == "topo/v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt")
    facts = copy.deepcopy(read.facts)
    facts["refuse"] = {"why": "made up", "line": 5}
    assert run(RealFile(read.path, facts)).failed


def test_every_refusal_is_one_line_naming_the_file() -> None:
    refusals = [(real, run(real).error) for real in FILES if real.facts["refuse"] and real.kind in READERS]
    assert len(refusals) >= 9
    for real, error in refusals:
        assert error is not None and "\n" not in error and error.startswith(real.path.name), (real.id, error)


def test_gap_rules_are_used() -> None:
    """Every rule for reported gaps matches some sidecar gap (a rule nothing exercises is no check)."""
    gaps = [(real.kind, gap) for real in FILES for gap in real.facts["gaps"] or ()]
    for rule in GAP_RULES:
        assert any(kind in rule.kinds and rule.wording.search(gap) for kind, gap in gaps), rule.where


def test_sidecars_are_json_objects_with_their_file_beside_them() -> None:
    for sidecar in REAL.glob("*/*.facts.json"):
        facts = json.loads(sidecar.read_text(encoding="utf-8"))
        assert isinstance(facts, dict) and (sidecar.parent / sidecar.name.removesuffix(".facts.json")).exists()
