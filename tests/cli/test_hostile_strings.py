"""No terminal escape from a file reaches the terminal: show, check, plan, import, the error lines and the app."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from linkscope.cli import main
from support.commands import COMMANDS, argv_for, sampled
from support.fuzz import run_cli
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


def _command_payloads() -> list[tuple[str, str]]:
    pairs = [(name, payload) for name in sorted(COMMANDS) for payload in PAYLOADS]
    chosen = sampled(pairs, 2 * len(COMMANDS), "hostile-strings")
    # every command at least once, with the payloads spread over them by the fixed seed
    missing = [(name, "clipboard-osc52") for name in sorted(COMMANDS) if name not in {pair[0] for pair in chosen}]
    return sorted(chosen + missing)


COVERED_COMMANDS = tuple(sorted({name for name, _ in _command_payloads()}))
"""The commands this suite runs on hostile strings (tests/cli/test_suite_coverage.py holds it to `linkscope help`)."""


@pytest.mark.parametrize(("name", "payload_name"), _command_payloads())
def test_every_command_keeps_escapes_off_the_terminal(name: str, payload_name: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command with the payload in its input's free-form strings (host, GPU and file names, log lines) and
    in the name of the file it writes: nothing it prints, on stdout or stderr, notes and summaries included,
    holds a control character, an invisible one or a bidirectional override."""
    case = COMMANDS[name]
    payload = PAYLOADS[payload_name]
    if case.prepare is not None:
        case.prepare(monkeypatch, payload)
    output = tmp_path / f"out{payload.replace('/', '')}.json" if case.writes and "\x00" not in payload else None
    outcome = run_cli(argv_for(case, tmp_path / "in", payload, output), seconds=30)
    assert outcome.status in (0, 1, 2), outcome.err
    assert "Traceback" not in outcome.err
    assert control_characters(outcome.out) == [] and control_characters(outcome.err) == [], (outcome.out, outcome.err)


def _bypasses(path: Path) -> list[str]:
    """Calls in `path` that write to a terminal around the safe path: print(), sys.stdout/sys.stderr .write(),
    and a rich Console() made outside linkscope/render/console.py."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id == "print":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: print()")
        elif (isinstance(function, ast.Attribute) and function.attr in ("write", "writelines")
              and isinstance(function.value, ast.Attribute) and function.value.attr in ("stdout", "stderr")
              and isinstance(function.value.value, ast.Name) and function.value.value.id == "sys"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: sys.{function.value.attr}.{function.attr}()")
        elif isinstance(function, ast.Name) and function.id == "Console" and path.name != "console.py":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: Console()")
    return found


def test_no_line_reaches_the_terminal_around_the_safe_path() -> None:
    """Plain lines go through topo.common.text.say (made printable), rich output through the SafeConsole; a
    print() anywhere in the code fails here (the --force notes and file-name summaries once bypassed both)."""
    writer = ROOT / "topo" / "common" / "text.py"
    offenders = [line for folder in ("linkscope", "probes", "tui", "topo") for path in sorted((ROOT / folder).rglob("*.py"))
                 if path != writer for line in _bypasses(path)]
    assert not offenders, offenders


@pytest.mark.parametrize("payload_name", ["clipboard-osc52", "window-title", "hyperlink-osc8", "c1-csi", "bidi-override",
                                          "invisible"])
def test_forced_notes_and_written_file_names_are_escaped(payload_name: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`show --measurements --force` (the 'different kind of machine' note names the snapshot's GPUs) and merge's
    summary (it names the file written)."""
    payload = PAYLOADS[payload_name]
    snapshot = hostile_snapshot_file(tmp_path, payload)
    measurements = FIXTURES / "real" / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"
    status, out, err = _run(["show", str(snapshot), "--measurements", str(measurements), "--force"], capsys)
    assert status == 0 and "used anyway: --force" in err, err
    assert control_characters(out) == [] and control_characters(err) == []
    hosts = []
    for name in ("a", "b"):
        data = json.loads((ROOT / "topo" / "samples" / "dgx-h100.json").read_text())
        data["hosts"][0]["hostname"] = f"node-{name}{payload}"
        hosts.append(tmp_path / f"{name}.json")
        hosts[-1].write_text(json.dumps(data))
    status, out, err = _run(["merge", *map(str, hosts), "-o", str(tmp_path / f"cluster{payload.replace('/', '')}.json")],
                            capsys)
    assert status == 0, err
    assert control_characters(out) == [] and control_characters(err) == []


def test_hosts_that_differ_only_by_invisible_characters_or_case_are_one_host(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`node01` and `node01<ZWSP>` print alike: merge refuses them as one host given twice, naming it escaped."""
    files = []
    for index, name in enumerate(("node01", "node01\u200b", "NODE01\u2060")):
        data = json.loads((ROOT / "topo" / "samples" / "dgx-h100.json").read_text())
        data["hosts"][0]["hostname"] = name
        files.append(tmp_path / f"{index}.json")
        files[-1].write_text(json.dumps(data))
    for second in files[1:]:
        status, _, err = _run(["merge", str(files[0]), str(second), "-o", str(tmp_path / "c.json")], capsys)
        assert status == 2 and "is also in" in err, err
        assert control_characters(err) == [] and ("\\u200b" in err or "\\u2060" in err)
    assert not (tmp_path / "c.json").exists()


def test_collect_keeps_hosts_that_differ_only_by_invisible_characters_apart() -> None:
    from linkscope.topo.machine.cluster import combine_hosts
    from linkscope.topo.samples import load_sample

    sample = load_sample("dgx-h100")
    parts = [dataclasses.replace(sample, hosts=(dataclasses.replace(sample.hosts[0], hostname=name),))
             for name in ("node01", "node01\ufeff")]
    combined = combine_hosts(parts, "collect")
    assert combined.duplicates == ("node01\ufeff",)
    assert [host.hostname for host in combined.snapshot.hosts] == ["node01", "node01\ufeff#2"]
