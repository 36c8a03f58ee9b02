"""No terminal escape from a file reaches the terminal: show, check, plan, import, the error lines and the app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.cli import main
from support.hostile import PAYLOADS, control_characters, hostile_snapshot_file, terminal_controls
from support.paths import FIXTURES, ROOT
from support.tui import async_test, settle

ALL_PAYLOADS = "".join(PAYLOADS.values())


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
@pytest.mark.parametrize(
    "command",
    [["show", "{file}"], ["check", "{file}", "--tp", "8", "--nodes", "1"], ["plan", "{file}", "--gpus", "8"]],
    ids=["show", "check", "plan"],
)
def test_no_control_character_reaches_the_terminal(
    payload: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hostile_snapshot_file(tmp_path, payload)
    status, out, err = _run([part.format(file=path) for part in command], capsys)
    assert status in (0, 1, 2), err
    assert "Traceback" not in err
    assert control_characters(out) == [] and control_characters(err) == []
    if status != 2:
        assert out.strip(), "the command printed nothing"


def test_the_payload_text_stays_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Escape sequences go, their visible words stay, and other controls are shown as \\xNN."""
    path = hostile_snapshot_file(tmp_path, "evil\x1fname\x1b[2Jgone")
    status, out, _ = _run(["show", str(path)], capsys)
    assert status == 0
    assert "evil\\x1fnamegone" in out


def test_json_output_escapes_what_it_carries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = hostile_snapshot_file(tmp_path, ALL_PAYLOADS)
    status, out, _ = _run(["show", str(path), "--json"], capsys)
    assert status == 0 and control_characters(out) == []
    assert PAYLOADS["window-title"] in json.loads(out)["hostname"]  # escaped in JSON, not removed


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_error_lines_naming_a_hostile_file_are_printable(payload: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / f"no{payload}such.json"
    status, _out, err = _run(["show", str(missing)], capsys)
    assert status == 2 and ("no such file" in err or "NUL" in err)
    assert control_characters(err) == [] and err.count("\n") == 1


def test_a_refused_value_quoted_in_an_error_is_printable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": "\x1b]0;x\x07", "hosts": []}))
    status, _, err = _run(["show", str(path)], capsys)
    assert status == 2 and control_characters(err) == []


def test_hostile_host_names_in_a_rank_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rank_map = tmp_path / "ranks.csv"
    rank_map.write_text("".join(f"{rank},node{rank // 8}{ALL_PAYLOADS},{rank % 8}\n" for rank in range(16)))
    status, out, err = _run(["check", "sample:dgx-h100", "--tp", "8", "--nodes", "2", "--rank-map", str(rank_map)], capsys)
    assert status in (0, 1, 2)
    assert control_characters(out) == [] and control_characters(err) == []


def test_hostile_measurements_through_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "measured.json"
    measurements = {
        "source": f"nccl-tests{ALL_PAYLOADS}",
        "collectives": [{"op": f"all_reduce{ALL_PAYLOADS}", "size_bytes": 1024, "dtype": f"float{ALL_PAYLOADS}",
                         "time_us": 10.0, "algbw_gbps": 0.1, "busbw_gbps": 0.2, "nranks": 2}],
        "notes": [ALL_PAYLOADS],
    }
    path.write_text(json.dumps({"schema": 1, "measurements": measurements}))
    status, out, err = _run(["import", str(path)], capsys)
    assert status == 0, err
    assert control_characters(out) == [] and "all_reduce" in out


@async_test
async def test_the_app_shows_no_control_character(tmp_path: Path) -> None:
    """Every tab of the app on a snapshot whose every name carries every payload: the screen (SVG) and
    the terminal stream hold no control character but Textual's own colour and cursor sequences."""
    import dataclasses

    from linkscope.topo.formats.source import load_source
    from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
    from linkscope.tui.app import TABS, build_app

    snapshot = load_source(str(hostile_snapshot_file(tmp_path, ALL_PAYLOADS)))
    measured = Measurements(
        f"nccl-tests{ALL_PAYLOADS}",
        peer_copies=(PeerCopy(0, 1, 1 << 28, 390.0, host=f"host{ALL_PAYLOADS}"),),
        collectives=(CollectiveResult(f"all_reduce{ALL_PAYLOADS}", 1 << 20, f"float{ALL_PAYLOADS}", 20.0, 52.0, 91.0, 8,
                                      group=f"tp0{ALL_PAYLOADS}", backend=ALL_PAYLOADS),),
        notes=(ALL_PAYLOADS,),
    )
    snapshot = dataclasses.replace(snapshot, measurements=measured)
    app = build_app(snapshot=snapshot)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(app)
        for tab_id, _title in TABS:
            app.action_show_tab(tab_id)
            await settle(app)
            await pilot.pause()
            svg = app.export_screenshot()
            assert control_characters(svg) == [], tab_id
            stream = app.screen._compositor.render_full_update().render_segments(app.console)
            assert terminal_controls(stream) == [], tab_id
        assert "pwned" not in str(app.title)


TOPO_WITH_FAR_NIC = FIXTURES / "real" / "topo" / "l40s-8gpu-pcie-node-sys-1nic-pass-case.txt"


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
@pytest.mark.parametrize(
    ("command", "shows_nic"),
    [(["show", "{file}"], True), (["check", "{file}", "--tp", "8", "--nodes", "2"], True),
     (["plan", "{file}", "--gpus", "16"], False), (["plan", "{file}", "--gpus", "16", "--markdown"], False)],
    ids=["show", "check", "plan", "plan-markdown"],
)
def test_a_crafted_topology_text_cannot_reach_the_terminal(
    payload: str, command: list[str], shows_nic: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NIC name in an `nvidia-smi topo -m` legend carries the payload; `check` quotes it in its
    nic-far-from-gpu finding (the NIC is SYS to every GPU)."""
    path = tmp_path / "topo.txt"
    path.write_text(TOPO_WITH_FAR_NIC.read_text() + f"\nNIC Legend:\n\n  NIC0: mlx5_0{payload}\n")
    status, out, err = _run([part.format(file=path) for part in command], capsys)
    assert status in (0, 1, 2) and "Traceback" not in err
    assert control_characters(out) == [] and control_characters(err) == []
    one_word = not any(char.isspace() or char in "\x00\x1c\x1d\x1e" for char in payload)
    if shows_nic and one_word:  # the legend names the NIC with the payload: it reached the output
        assert status != 2 and "mlx5_0" in out


def test_a_newline_in_a_name_cannot_forge_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "forged.json"
    data = json.loads((ROOT / "topo" / "samples" / "dgx-h100.json").read_text())
    data["hosts"][0]["hostname"] = "node1\nlinkscope: error: forged"
    data["hosts"][0]["nics"][0]["name"] = "mlx5_0\r\nALL GOOD"
    path.write_text(json.dumps(data))
    status, out, _ = _run(["show", str(path)], capsys)
    assert status == 0
    assert not any(line.startswith(("linkscope: error: forged", "ALL GOOD")) for line in out.splitlines())
    assert "node1\\x0alinkscope" in out
