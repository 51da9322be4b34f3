"""Outputs that are written through their path, never replaced by a new file.

Every report is written atomically (fileio.py: a temporary file beside it, then ``os.replace``),
which is right for a file and wrong for what a user may also name as an output: a device, a FIFO
or one of the process's own streams (``--toolbench-json /dev/null``, ``--toolbench-md
/dev/stdout``). The rename made /dev/null, as root, a regular file holding a report; a summary
sent to /dev/stdout in a log file was overwritten by the next line the run printed. No harness
import: fileio.py and output_paths.py (the check at configure) both read it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import Iterable


def writes_in_place(path: str | os.PathLike[str]) -> bool:
    """Whether an output at ``path`` is written through it rather than replaced by a new file:
    one of this process's own streams (``/dev/stdout`` to a terminal, a pipe or a log file), or
    an existing device, FIFO or socket. Replacing it (``os.replace``) made, as root, /dev/null a
    regular file holding a report, and /dev/stdout one that no later output reached. A plain
    file stays a plain file wherever it is (/dev/shm included)."""
    target = os.fspath(path)
    if _own_stream(target) is not None:
        return True
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def can_write_through(path: str | os.PathLike[str]) -> bool:
    """Whether this process may write through ``path`` (see :func:`writes_in_place`): its own
    stream is open for writing (``os.access`` asks of the pipe or terminal behind it, which
    another user may own: refused under ``runuser`` though the descriptor writes), any other
    path passes ``os.access``."""
    own = _own_stream(os.fspath(path))
    if own is None:
        return os.access(path, os.W_OK)
    try:
        flags = fcntl.fcntl(own, fcntl.F_GETFL)
    except OSError:  # not open
        return False
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


def _own_stream(path: str) -> int | None:
    """The descriptor of this process's that ``path`` names (/dev/stdout, /dev/stderr,
    /dev/fd/N, /proc/self/fd/N), None for any other path."""
    target = os.path.abspath(path)
    named = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}.get(target)
    if named is not None:
        return named
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if target.startswith(prefix) and target[len(prefix):].isdigit():
            return int(target[len(prefix):])
    return None


def write_in_place(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` through ``path`` (see :func:`writes_in_place`). A path naming one of this
    process's own streams (/dev/stdout) is written on that descriptor, after what Python has
    buffered for it, so it lands where the process prints: opened anew, it had an offset of its
    own, and a log file that a shell's ``>`` made had it overwritten by the next line printed.
    Any other path is opened for appending."""
    own = _own_stream(os.fspath(path))
    if own is not None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or replaced stream: nothing to flush
                stream.flush()
        fd = os.dup(own)
    else:
        fd = os.open(os.fspath(path), os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)


__all__ = ["can_write_through", "write_in_place", "writes_in_place"]
