"""Output files are written whole or not at all, never through a symlink, with sensible permissions;
inputs that could block (a FIFO with no writer) or are too large on stdin are one line and exit 2."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from support.commands import COMMANDS, argv_for, input_position, sampled
from support.fuzz import REAL, ROOT, Outcome, assert_clean_outcome, run_cli

NCCL_TESTS = REAL / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"


def _import_to(target: Path) -> list[str]:
    return ["import", str(NCCL_TESTS), "-o", str(target)]


def test_import_writes_valid_json_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "measured.json"
    assert run_cli(_import_to(target)).status == 0
    assert json.loads(target.read_text())["schema"] == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["measured.json"]


def test_a_write_past_the_file_size_limit_keeps_the_old_file(tmp_path: Path) -> None:
    """RLIMIT_FSIZE stops the write midway (as a full disk would): one line, exit 2, old file intact."""
    target = tmp_path / "measured.json"
    old = json.dumps({"schema": 1, "measurements": {"source": "the previous run"}})
    target.write_text(old)
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))\n"
        "from linkscope.cli import main\n"
        f"sys.exit(main({_import_to(target)!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "previous file is unchanged" in done.stderr
    assert target.read_text() == old
    assert sorted(path.name for path in tmp_path.iterdir()) == ["measured.json"]


def test_a_symlinked_output_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "measured.json"
    link.symlink_to(victim)
    outcome = run_cli(_import_to(link))
    assert_clean_outcome(outcome, "symlinked -o")
    assert outcome.status == 2 and "symbolic link" in outcome.err
    assert victim.read_text() == "precious\n" and link.is_symlink()


def test_a_symlinked_output_is_refused_by_probe_too(tmp_path: Path) -> None:
    link = tmp_path / "box.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    outcome = run_cli(["probe", "-o", str(link)])
    assert outcome.status == 2 and "symbolic link" in outcome.err
    assert not (tmp_path / "elsewhere.json").exists()


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path: Path) -> None:
    target = tmp_path / "measured.json"
    previous = os.umask(0o027)
    try:
        assert run_cli(_import_to(target)).status == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    target.chmod(0o600)
    assert run_cli(_import_to(target)).status == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for argv in (["show", str(fifo)], ["import", str(fifo)],
                 ["check", "sample:dgx-h100", "--tp", "8", "--rank-map", str(fifo)]):
        outcome = run_cli(argv, seconds=5)
        assert outcome.status == 2 and "not a regular file" in outcome.err, outcome.err


def test_stdin_of_import_has_the_size_limit_of_files() -> None:
    from linkscope.topo.common.limits import MAX_SNAPSHOT_BYTES

    outcome = run_cli(["import", "-"], stdin=NCCL_TESTS.read_text() + "#" * MAX_SNAPSHOT_BYTES)
    assert outcome.status == 2 and "limit" in outcome.err, outcome.err


def test_stdin_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "linkscope", "import", "-"], input=b"\xff\xfe garbage",
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=60)
    assert done.returncode == 2 and b"not UTF-8" in done.stderr and b"Traceback" not in done.stderr


def test_import_from_stdin_still_reads(tmp_path: Path) -> None:
    outcome = run_cli(["import", "-", "--json"], stdin=NCCL_TESTS.read_text())
    assert outcome.status == 0, outcome.err
    assert json.loads(outcome.out)["measurements"]["collectives"]


def _merge_to(target: Path, tmp_path: Path) -> list[str]:
    hosts = []
    for name in ("node-a", "node-b"):
        snapshot = json.loads((ROOT / "topo" / "samples" / "dgx-h100.json").read_text())
        snapshot["hosts"][0]["hostname"] = name
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(snapshot))
        hosts.append(str(path))
    return ["merge", *hosts, "-o", str(target)]


def _probe_to(target: Path, tmp_path: Path) -> list[str]:
    return ["probe", "-o", str(target)]


@pytest.mark.parametrize("argv_for", [_merge_to, _probe_to, lambda target, _: _import_to(target)],
                         ids=["merge", "probe", "import"])
def test_every_command_writes_through_the_one_writer(argv_for: Callable[[Path, Path], list[str]], tmp_path: Path) -> None:
    """merge, probe and import (as bench, record and collect, through the same function) keep the mode of the file
    they replace, give a new one the umask's, leave no temporary file and refuse a symbolic link."""
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "written.json"
    previous = os.umask(0o077)
    try:
        assert run_cli(argv_for(target, tmp_path)).status in (0, 1)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o644)
    assert run_cli(argv_for(target, tmp_path)).status in (0, 1)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(path.name for path in folder.iterdir()) == ["written.json"]
    link = folder / "link.json"
    link.symlink_to(target)
    outcome = run_cli(argv_for(link, tmp_path))
    assert outcome.status == 2 and "symbolic link" in outcome.err


def test_no_command_writes_a_file_its_own_way() -> None:
    """Temporary files and renames over an output belong to topo/common/files.py alone."""
    writer = ROOT / "topo" / "common" / "files.py"
    offenders = [f"{path.relative_to(ROOT)}" for folder in ("topo", "probes", "tui", "linkscope")
                 for path in (ROOT / folder).rglob("*.py")
                 if path != writer and ("os.replace(" in path.read_text() or "mkstemp(" in path.read_text())]
    assert not offenders, offenders


COVERED_COMMANDS = tuple(sorted(COMMANDS))
"""The commands the output-file and special-file suites run (tests/cli/test_suite_coverage.py holds it to
`linkscope help`)."""


def _written(name: str, folder: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    case = COMMANDS[name]
    if case.prepare is not None:
        case.prepare(monkeypatch, "")
    return run_cli(argv_for(case, folder / "in", output=target), seconds=30)


@pytest.mark.parametrize("name", COVERED_COMMANDS)
def test_every_command_writes_only_through_the_one_writer(name: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A command with -o: the umask on a new file, the old file's mode kept, no temporary file left, a symlink,
    a FIFO and a device refused in one line (none replaced), and a full disk leaving the old file whole. A
    command without -o refuses one as a usage error and creates nothing."""
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "written.json"
    if not COMMANDS[name].writes:
        outcome = _written(name, tmp_path, target, monkeypatch)
        assert outcome.status == 2 and "unrecognized arguments" in outcome.err, outcome.err
        assert list(folder.iterdir()) == []
        return
    previous = os.umask(0o077)
    try:
        first = _written(name, tmp_path, target, monkeypatch)
    finally:
        os.umask(previous)
    if name == "bench":  # no GPU here: the run fails after -o was checked, and writes nothing
        assert first.status == 2 and not target.exists(), first.err
        target.write_text("old\n")
        target.chmod(0o640)
    else:
        assert first.status in (0, 1), first.err
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        target.chmod(0o640)
        assert _written(name, tmp_path, target, monkeypatch).status in (0, 1)
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(path.name for path in folder.iterdir()) == ["written.json"]
    link = folder / "link.json"
    link.symlink_to(target)
    outcome = _written(name, tmp_path, link, monkeypatch)
    assert outcome.status == 2 and "symbolic link" in outcome.err and link.is_symlink()
    link.unlink()
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    for special in (fifo, Path("/dev/null")):
        outcome = _written(name, tmp_path, special, monkeypatch)
        assert outcome.status == 2 and "not a regular file" in outcome.err, outcome.err
        assert len(outcome.err.strip().splitlines()) == 1
    assert stat.S_ISFIFO(fifo.stat().st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo.unlink()
    if name != "bench":
        before = target.read_bytes()

        def disk_full(descriptor: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", disk_full)
        outcome = _written(name, tmp_path, target, monkeypatch)
        monkeypatch.undo()
        assert outcome.status == 2 and "No space left on device" in outcome.err, outcome.err
        assert "previous file is unchanged" in outcome.err and target.read_bytes() == before
    assert sorted(path.name for path in folder.iterdir()) == ["written.json"]


@pytest.mark.parametrize("name", COVERED_COMMANDS)
def test_every_command_refuses_special_files_in_one_line(name: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command's input file replaced by a FIFO with no writer, a directory, a device that never ends and a
    file whose read fails: one line and exit 2 at once, never a hang or a traceback. A command that reads no
    named file is given one anyway (as an extra argument) and refuses it as usage, without opening it."""
    case = COMMANDS[name]
    if case.prepare is not None:
        case.prepare(monkeypatch, "")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "in"
    for special in [str(fifo), *sampled([str(tmp_path), "/dev/zero", "/proc/self/mem"], 1, f"special-{name}")]:
        argv = argv_for(case, folder)
        position = input_position(argv)
        if position is None:
            argv.append(special)
        else:
            argv[position] = special
        outcome = run_cli(argv, seconds=10)
        assert_clean_outcome(outcome, f"{name} on {special}")
        assert outcome.status == 2 or (position is None and name == "help"), (special, outcome.err)
