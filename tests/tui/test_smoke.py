"""Smoke test: the real `linkscope open` executable in a real terminal (tmux), read back from the screen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

EXECUTABLE = Path(sys.executable).with_name("linkscope")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Run tmux commands on a private server (socket in tmp_path); kill it afterwards."""
    socket = str(tmp_path / "tmux.sock")

    def run(*args: str) -> str:
        return subprocess.run(["tmux", "-S", socket, *args], check=True, capture_output=True, text=True, timeout=10).stdout

    yield run
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, timeout=10)


def wait_for(read: Callable[[], str], needle: str, timeout_s: float = 20.0) -> str:
    """Poll the screen until `needle` shows up; fail with the last screen."""
    deadline = time.monotonic() + timeout_s
    screen = ""
    while time.monotonic() < deadline:
        screen = read()
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} did not appear; the screen was:\n{screen}")


def test_open_sample_in_tmux_and_quit(tmux: Callable[..., str]) -> None:
    """The app paints the link grid, switches tabs by key, and quits back to the shell."""
    linkscope = str(EXECUTABLE) if EXECUTABLE.exists() else "linkscope"
    command = f"{linkscope} open sample:dgx-h100; echo linkscope-exit=$?; sleep 30"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    tmux("new-session", "-d", "-s", "smoke", "-x", "100", "-y", "30", "-e", "TERM=xterm-256color", command)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "smoke")

    first = wait_for(screen, "NV18")
    assert "dgx-h100" in first and "GPU7" in first
    tmux("send-keys", "-t", "smoke", "3")
    wait_for(screen, "ranks on 1 node")
    tmux("send-keys", "-t", "smoke", "q")
    last = wait_for(screen, "linkscope-exit=")
    assert "linkscope-exit=0" in last
    assert "NV18" not in last, "the app's screen should be gone after quitting (alternate screen restored)"


def test_quick_tab_switches_settle_without_spinning(tmux: Callable[..., str]) -> None:
    """A burst of keys that switches tabs twice leaves the app idle (no focus ping-pong between tabs)."""
    import psutil

    linkscope = str(EXECUTABLE) if EXECUTABLE.exists() else "linkscope"
    tmux("new-session", "-d", "-s", "burst", "-x", "120", "-y", "40", "-e", "TERM=xterm-256color",
         f"{linkscope} open sample:dgx-h100 --tab ranks")

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "burst")

    wait_for(screen, "ranks on 1 node")
    pid = int(tmux("list-panes", "-t", "burst", "-F", "#{pane_pid}").strip())
    process = psutil.Process(pid)
    time.sleep(1.0)
    tmux("send-keys", "-t", "burst", "BSpace", "4")
    wait_for(screen, "benchmark")  # the Bench tab's form
    time.sleep(1.0)
    tmux("send-keys", "-t", "burst", "Tab", "Tab", "Tab", "Tab", "Tab", "BSpace", "2")
    time.sleep(2.0)
    busy_before = sum(process.cpu_times()[:2])
    time.sleep(2.0)
    busy_s = sum(process.cpu_times()[:2]) - busy_before
    assert busy_s < 0.5, f"the app used {busy_s:.2f} s of CPU in 2 s while idle"


def test_dumb_terminal_without_colour_at_80x24(tmux: Callable[..., str]) -> None:
    """With TERM=dumb and NO_COLOR at 80x24 the grid still paints, tabs switch, and q quits cleanly."""
    linkscope = str(EXECUTABLE) if EXECUTABLE.exists() else "linkscope"
    command = f"env TERM=dumb NO_COLOR=1 {linkscope} open sample:dgx1-v100; echo linkscope-exit=$?; sleep 30"
    tmux("new-session", "-d", "-s", "dumb", "-x", "80", "-y", "24", command)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "dumb")

    first = wait_for(screen, "NV2")
    assert "SYS" in first and "GPU7" in first
    tmux("send-keys", "-t", "dumb", "2")
    wait_for(screen, "NUMA 0")
    tmux("send-keys", "-t", "dumb", "q")
    assert "linkscope-exit=0" in wait_for(screen, "linkscope-exit=")


def test_a_finding_shows_whole_at_80x24(tmux: Callable[..., str]) -> None:
    """At 80x24 the Ranks tab shows the finding under the cursor whole: its message and its fix."""
    linkscope = str(EXECUTABLE) if EXECUTABLE.exists() else "linkscope"
    tmux("new-session", "-d", "-s", "finding", "-x", "80", "-y", "24", "-e", "TERM=xterm-256color",
         f"{linkscope} open sample:a100-pcie-nvbridge-4 --tab ranks")

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "finding")

    shown = wait_for(screen, "fix:")
    words = " ".join(line.split("│")[-1].strip() for line in shown.splitlines()).split()
    text = " ".join(words)
    assert "tp-slow-link" in text and "TP 4 must shrink" in text
    assert "use --tp 2 (or less) on this machine; every 4-GPU ring here crosses a slow link" in text
    assert "q Quit" in shown


def test_without_a_terminal_the_app_says_so_and_exits_2(tmux: Callable[..., str], tmp_path: Path) -> None:
    """`linkscope SOURCE > file` (and a pipe) prints one line naming the text command, writes no screen
    codes and exits 2 instead of hanging."""
    linkscope = str(EXECUTABLE) if EXECUTABLE.exists() else "linkscope"
    out = tmp_path / "out.txt"
    tmux("new-session", "-d", "-s", "redirect", "-x", "200", "-y", "20", "-e", "TERM=xterm-256color",
         f"{linkscope} sample:dgx-h100 > {out}; echo redirect-exit=$?; {linkscope} sample:dgx-h100 | cat; "
         "echo pipe-exit=${PIPESTATUS[0]}; sleep 30")

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "redirect")

    shown = wait_for(screen, "pipe-exit=")
    assert "redirect-exit=2" in shown and "pipe-exit=2" in shown
    assert shown.count("the app needs a terminal") == 2 and "linkscope show sample:dgx-h100" in shown
    assert out.read_text() == ""
