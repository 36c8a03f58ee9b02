"""`linkscope merge`: host snapshots gathered any other way become one cluster snapshot."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from linkscope.cli import main
from linkscope.topo.formats.source import load_source
from linkscope.topo.model.codec import snapshot_to_json
from linkscope.topo.model.host import Gap
from linkscope.topo.samples import load_sample


def _write_host(path: Path, sample: str, hostname: str, gaps: tuple[Gap, ...] = ()) -> Path:
    snapshot = load_sample(sample)
    host = dataclasses.replace(snapshot.host, hostname=hostname)
    path.write_text(snapshot_to_json(dataclasses.replace(snapshot, hosts=(host,), gaps=gaps)))
    return path


def test_merge_joins_hosts_and_keeps_each_gaps_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [_write_host(tmp_path / "host-a.json", "dgx-h100", "gpu-a", (Gap("nvmlDeviceGetP2PStatus", "NotSupported"),)),
             _write_host(tmp_path / "host-b.json", "dgx-h100-degraded", "gpu-b")]
    output = tmp_path / "cluster.json"
    assert main(["merge", *map(str, files), "-o", str(output), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {"output": str(output), "hosts": ["gpu-a", "gpu-b"], "gpus": 16, "files": 2}
    cluster = load_source(str(output))
    assert [host.hostname for host in cluster.hosts] == ["gpu-a", "gpu-b"]
    assert cluster.hosts[1].gpus[3].nvlink_active_count == 16
    assert [(gap.host, gap.reason) for gap in cluster.gaps] == [("gpu-a", "NotSupported")]
    assert main(["show", str(output), "--json"]) == 0
    assert [host["hostname"] for host in json.loads(capsys.readouterr().out)["hosts"]] == ["gpu-a", "gpu-b"]


def test_merged_cluster_feeds_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [_write_host(tmp_path / f"host-{i}.json", "dgx-h100", f"gpu-{i}") for i in range(2)]
    output = tmp_path / "cluster.json"
    assert main(["merge", *map(str, files), "-o", str(output)]) == 0
    assert "2 hosts, 16 GPUs from 2 file(s)" in capsys.readouterr().out
    assert main(["check", str(output), "--tp", "16", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert next(finding["code"] for finding in report["findings"]) == "tp-crosses-node"


def test_duplicate_host_names_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [_write_host(tmp_path / "a.json", "dgx-h100", "gpu-a"), _write_host(tmp_path / "b.json", "dgx-a100", "gpu-a")]
    assert main(["merge", *map(str, files), "-o", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert f"{files[1]}: host 'gpu-a' is also in {files[0]}" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_mixed_schema_versions_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write_host(tmp_path / "a.json", "dgx-h100", "gpu-a")
    newer = tmp_path / "b.json"
    data = json.loads(_write_host(newer, "dgx-h100", "gpu-b").read_text())
    data["schema"] = 2
    newer.write_text(json.dumps(data))
    assert main(["merge", str(good), str(newer), "-o", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "mixed snapshot schema versions (schema 2: " in err and str(newer) in err and "1 file(s) of schema 1" in err


@pytest.mark.parametrize(("content", "message"), [
    ("GPU0 X\n", "not a snapshot JSON file"),
    ('{"schema": 1, "hosts": [{"hostname": 3}]}', "$.hosts[0].hostname: expected str"),
    ("", "empty"),
])
def test_bad_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = _write_host(tmp_path / "a.json", "dgx-h100", "gpu-a")
    code = main(["merge", str(good), str(bad), "-o", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert message in err or (message == "empty" and str(bad) in err)


def test_merge_of_1024_synthetic_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A thousand-node cluster merges into one file that opens as a SOURCE with every host."""
    template = load_sample("dgx-h100")
    files = []
    for number in range(1024):
        host = dataclasses.replace(template.host, hostname=f"gpu{number:04d}")
        path = tmp_path / f"host-{number:04d}.json"
        path.write_text(snapshot_to_json(dataclasses.replace(template, hosts=(host,)), indent=None))
        files.append(str(path))
    output = tmp_path / "cluster.json"
    assert main(["merge", *files, "-o", str(output)]) == 0
    assert "1024 hosts, 8192 GPUs from 1024 file(s)" in capsys.readouterr().out
    cluster = load_source(str(output))
    assert len(cluster.hosts) == 1024 and cluster.hosts[1023].hostname == "gpu1023"
    assert cluster.hosts[5] == dataclasses.replace(template.host, hostname="gpu0005")


def test_measurements_of_a_host_file_are_named_not_silently_dropped(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from linkscope.topo.model.measurements import Measurements

    measured = tmp_path / "a.json"
    snapshot = dataclasses.replace(load_sample("dgx-h100"), measurements=Measurements(source="nvbandwidth"))
    measured.write_text(snapshot_to_json(snapshot))
    other = _write_host(tmp_path / "b.json", "dgx-h100", "gpu-b")
    assert main(["merge", str(measured), str(other), "-o", str(tmp_path / "c.json")]) == 0
    assert f"the measurements in {measured} are not carried" in capsys.readouterr().err
    assert load_source(str(tmp_path / "c.json")).measurements is None
