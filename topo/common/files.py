"""The one writer of output files, and the one opener of input files.

Every `-o` (and the benchmark worker's) writes through :func:`write_text_file`: a file is written whole
or not at all, never through a symbolic link nor onto a FIFO or device, with the mode the file it
replaces had (or what the umask gives a new one), and a failed write leaves no temporary file behind.
Every reader opens a named file with :func:`open_input`: only a regular file (a FIFO would block forever,
a device never end; `-` reads stdin).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import BinaryIO

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.text import printable


def write_text_file(path: str, text: str) -> None:
    """Write `text` (plus a final newline) to `path` whole or not at all.

    The text goes to a temporary file in the same directory, which then replaces `path` in one
    step: a write cut short (disk full, a file-size limit, a signal) leaves the previous file as
    it was. A symlink at `path` is refused rather than followed. The new file gets the mode the
    old one had, or 0666 less the umask, like a file the shell creates.
    """
    check_writable(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise InputError(f"{printable(path)}: cannot write ({exc.strerror})") from None
    import tempfile  # written files only: a command that only reads does not pay its import

    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=".linkscope-", suffix=".tmp", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise InputError(f"{printable(path)}: cannot write ({exc.strerror}); the previous file is unchanged") from None
    finally:
        if temporary is not None:
            _remove_quietly(temporary)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def open_input(path: str) -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file; InputError in one line otherwise.

    The file is opened without blocking and checked on the open descriptor, so a FIFO (which would
    block until a writer came) or a device is refused, and nothing can swap it between check and read.
    """
    if "\x00" in path:
        raise InputError(f"{path!r}: a file name cannot hold a NUL character")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, device or socket; to read a pipe, use - for stdin)")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def check_writable(path: str) -> None:
    """InputError now, before a long run, when `path` could not be written later: a symlink, a directory,
    or anything but a regular file (a FIFO or device node is refused rather than replaced by a file)."""
    if "\x00" in path:
        raise InputError(f"{path!r}: a file name cannot hold a NUL character")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.islink(path):
        raise InputError(f"{printable(path)}: is a symbolic link; linkscope does not write through links (name the target)")
    if os.path.isdir(path):
        raise InputError(f"{path}: cannot write (it is a directory)")
    if os.path.exists(path) and not os.path.isfile(path):
        raise InputError(f"{path}: not a regular file (a FIFO, device or socket): -o writes files only; write to a "
                         "file and copy it there")
    if not os.path.isdir(parent):
        raise InputError(f"{path}: cannot write (no directory {parent})")
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        raise InputError(f"{path}: cannot write (permission denied)")
