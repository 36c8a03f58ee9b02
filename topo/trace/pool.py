"""Read many ranks' profiler traces at once, in worker processes that hand their results back as JSON.

Decoding a trace's JSON is what reading it costs (about 0.4 s per 20 MB on one core here) and
Python threads do not decode in parallel, so for many large traces each worker process reads whole
files, one at a time, as the caller's process would. The pipes carry JSON lines, never pickle:

    parent -> worker   one path per line, as a JSON string
    worker -> parent   one line per path: {"trace": ...} (topo.trace.codec), {"error": "<one line>"}
                       for a file that is not a readable trace, or {"internal": "<what failed>"}

`python -m linkscope.topo.trace.pool` is the worker. It ignores SIGINT (the parent decides what an
interrupt ends, and stops its workers) and ends when its input ends, so a parent that dies takes
its workers with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text, read_json
from linkscope.topo.common.limits import MAX_JOBS
from linkscope.topo.common.text import say
from linkscope.topo.formats.trace_events import RankTrace
from linkscope.topo.trace.codec import rank_trace_from_json, rank_trace_to_json
from linkscope.topo.trace.files import read_trace_file

PARALLEL_MIN_BYTES = 64 << 20
"""Below this many bytes of traces in all, starting workers (about 0.2 s each) costs more than it saves."""

PARALLEL_MIN_FILE_BYTES = 16 << 20
"""Below this many bytes per file on average, handing each result back costs more than reading the file here:
800 files of 0.7 MB took 42 s with workers against 34 s in one process on 2 CPUs."""

PARALLEL_MIN_IDLE_CPUS = 2
"""Workers need CPUs nobody else is using: on 2 idle CPUs 64 files of 20 MB took 16.8 s with two workers against
27.8 s in one process (16 files: 5.5 s against 10.0 s), but with the same 2 CPUs under a load average of 9, 8 such
files took 24-31 s with two workers against 23-25 s in one process."""

OnRead = Callable[[int], None]
"""Called with the number of traces read so far, on the caller's thread."""


def default_jobs(paths: Sequence[str], idle_cpus: Callable[[], int]) -> int:
    """Worker processes worth starting for `paths`: one per CPU idle now (at most MAX_JOBS and one per file) when
    the traces, and each file on average, are large enough to repay the start and the hand-back and at least two
    CPUs are idle; 1 (read here) otherwise. `idle_cpus` (which watches the CPUs for a moment) is asked only for
    traces that large."""
    total_bytes = 0
    for path in paths:
        with contextlib.suppress(OSError):  # reading the file says what is wrong with it, in order
            total_bytes += os.stat(path).st_size
    if len(paths) < 2 or total_bytes < PARALLEL_MIN_BYTES or total_bytes < PARALLEL_MIN_FILE_BYTES * len(paths):
        return 1
    idle = idle_cpus()
    return 1 if idle < PARALLEL_MIN_IDLE_CPUS else min(len(paths), idle, MAX_JOBS)


def read_traces(paths: Sequence[str], jobs: int, on_read: OnRead | None = None) -> list[RankTrace]:
    """Every trace in `paths`, in that order; `jobs` processes read them (1: this one; see :func:`default_jobs`).

    A file that is not a readable trace is an InputError naming it (with several, the first in
    `paths` order among those read); no file after the first failure is started.
    """
    jobs = min(jobs, len(paths))
    if jobs <= 1:
        traces = []
        for path in paths:
            traces.append(read_trace_file(path))
            if on_read is not None:
                on_read(len(traces))
        return traces
    return _read_in_workers(paths, jobs, on_read)


class _Pool:
    """Workers fed from one list of file indexes; each serving thread talks to one worker process and
    reports to the caller's thread through `replies` (index, trace or None, error line or None), ending
    with None."""

    def __init__(self, paths: Sequence[str], jobs: int) -> None:
        self.paths = paths
        self.next_index = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.replies: queue.SimpleQueue[tuple[int, RankTrace | None, str | None] | None] = queue.SimpleQueue()
        self.processes = [_start_worker() for _ in range(jobs)]

    def take(self) -> int | None:
        with self.lock:
            if self.stopped.is_set() or self.next_index >= len(self.paths):
                return None
            self.next_index += 1
            return self.next_index - 1

    def serve(self, process: subprocess.Popen[str]) -> None:
        index: int | None = None
        try:
            while (index := self.take()) is not None:
                self.replies.put(_ask(process, self.paths[index], index))
        except Exception as exc:  # a broken pipe or a bad reply: this worker's file is reported, the rest stop
            self.replies.put((index if index is not None else -1, None, f"internal: {type(exc).__name__}: {exc}"))
        finally:
            self.replies.put(None)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):  # a dead worker's stdin may hold an unsent line
                        pipe.close()


def _read_in_workers(paths: Sequence[str], jobs: int, on_read: OnRead | None) -> list[RankTrace]:
    traces: list[RankTrace | None] = [None] * len(paths)
    errors: dict[int, str] = {}
    pool = _Pool(paths, jobs)
    try:
        threads = [threading.Thread(target=pool.serve, args=(process,), daemon=True) for process in pool.processes]
        for thread in threads:
            thread.start()
        running, read = len(threads), 0
        while running:
            reply = pool.replies.get()
            if reply is None:
                running -= 1
                continue
            index, trace, error = reply
            if error is not None:
                errors[index] = error
                pool.stopped.set()
                continue
            traces[index] = trace
            read += 1
            if on_read is not None:
                on_read(read)
        for thread in threads:
            thread.join()
    finally:
        pool.stopped.set()
        pool.close()
    if errors:
        index = min(errors)
        if errors[index].startswith("internal: "):
            raise RuntimeError(f"reading {paths[index] if index >= 0 else 'the traces'} failed in a worker: "
                               f"{errors[index].removeprefix('internal: ')}")
        raise InputError(errors[index])
    return [trace for trace in traces if trace is not None]


def _start_worker() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "linkscope.topo.trace.pool"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")


def _ask(process: subprocess.Popen[str], path: str, index: int) -> tuple[int, RankTrace | None, str | None]:
    """Have `process` read `path`: (index, the trace, None) or (index, None, the error line)."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(json_text(_path_as_text(path), indent=None) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
    except BrokenPipeError:
        line = ""
    if not line:
        status = process.wait()
        last = (process.stderr.read().strip().splitlines() or ["no message"])[-1][:200]
        return index, None, (f"{path}: the worker process reading it ended (exit status {status}: {last}); "
                             "--jobs 1 reads the traces in linkscope's own process")
    reply: Any = read_json(line, "a trace worker's reply")
    if "trace" in reply:
        return index, dataclasses.replace(rank_trace_from_json(reply["trace"]), name=path), None
    if "error" in reply:
        return index, None, str(reply["error"])
    return index, None, f"internal: {reply.get('internal')}"


def _path_as_text(path: str) -> str:
    """A path as a JSON-safe string: its bytes as Latin-1 (a name that is not UTF-8 holds lone surrogates)."""
    return os.fsencode(path).decode("latin-1")


def _path_from_text(text: str) -> str:
    return os.fsdecode(text.encode("latin-1"))


def worker_main() -> int:
    """The worker: read the trace at each path given on stdin, write one reply line for each."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for line in sys.stdin:
        path = _path_from_text(str(read_json(line, "a trace path")))
        reply: dict[str, Any]
        try:
            reply = {"trace": rank_trace_to_json(dataclasses.replace(read_trace_file(path), name=""))}
        except InputError as exc:
            reply = {"error": str(exc).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")}
        except Exception as exc:  # reported to the parent, which raises it as the bug it is
            reply = {"internal": f"{type(exc).__name__}: {exc}"}
        say(json_text(reply, indent=None), block=True)  # one line: the JSON is ASCII with no newline
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
