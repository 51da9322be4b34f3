"""Atomic file writes: readers (other xdist workers, a later run) never see half a file; and
:class:`PathLock`, a lock between processes that leaves no file behind.

A write is one temporary file in the target's folder, then ``os.replace``. Some writers write
many small files (FamilyTool's extraction memo; the response cache did, one per model call, until
it moved to pack files), so the path is kept to bare syscalls: folders known to exist are
remembered (``mkdir`` per write was the largest cost of a cache write), and the temporary name is
this process's pid and a counter, opened with ``O_EXCL`` (``tempfile.mkstemp`` draws random names
and retries).
"""

from __future__ import annotations

import fcntl
import itertools
import os
import threading
from collections.abc import Iterable
from typing import Any

from pytest_toolbench.output_streams import write_in_place, writes_in_place

_known_folders: set[str] = set()
_counter = itertools.count()
_counter_lock = threading.Lock()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then ``os.replace`` it into
    place.

    ``durable=False`` skips the fsync: for caches, where a power cut may at worst leave an
    unreadable entry (read back as a miss), and an fsync per entry (milliseconds each) would
    dominate a run's cost. Readers still never see half a
    file: the rename is atomic either way."""
    atomic_write_chunks(path, (data,), durable=durable)


def atomic_write_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes], *,
                        durable: bool = True) -> None:
    """:func:`atomic_write_bytes` of ``b"".join(chunks)``, written as they come: a document
    larger than memory allows (a report holding every case inline) is never whole in memory.
    Should ``chunks`` raise, the temporary file goes and ``path`` keeps what it held. A path
    that is no plain file to replace (:func:`writes_in_place`) is written through instead."""
    target = os.fspath(path)
    if writes_in_place(target):
        write_in_place(target, chunks)
        return
    folder = os.path.dirname(target) or "."
    fd, tmp = _open_temporary(folder, os.path.basename(target))
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _open_temporary(folder: str, name: str) -> tuple[int, str]:
    """A new, exclusively created file in ``folder`` (created if missing) and its path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        with _counter_lock:
            n = next(_counter)
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{n}.tmp")
        if folder not in _known_folders:
            os.makedirs(folder, exist_ok=True)
            _known_folders.add(folder)
        try:
            return os.open(tmp, flags, 0o644), tmp
        except FileNotFoundError:  # the folder was removed under us (a prune): make it again
            _known_folders.discard(folder)
        except FileExistsError:  # left by a killed process whose pid came back: next number
            continue
    raise OSError(f"could not create a temporary file in {folder}")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def file_version(path: str | os.PathLike[str]) -> tuple[str, int, int, int, int, int]:
    """(resolved path, mtime, ctime, size, inode, device): what tells one version of a file from
    another, for work done once per file version (parsing, checksums, in a process or kept between
    runs). The ctime because no tool can set it back: a rewrite that keeps mtime, size and inode
    is still seen. OSError if it cannot be stat'ed."""
    st = os.stat(path)
    return (os.path.realpath(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino,
            st.st_dev)


def indented_json(obj: Any) -> bytes:
    """``json.dumps(obj, indent=2, ensure_ascii=False) + "\\n"`` as UTF-8, by pydantic-core's
    encoder: with ``indent`` the stdlib falls back to its pure-Python encoder, which is slow on a
    large report, and each copy of the report pays it again. The text is the same but
    for the exponent of tiny floats (``1e-7``, not ``1e-07``); NaN/Infinity are kept as the stdlib
    writes them."""
    import pydantic_core

    return pydantic_core.to_json(obj, indent=2, inf_nan_mode="constants") + b"\n"


def names_open_file(path: str | os.PathLike[str], fd: int) -> bool:
    """Whether ``path`` still names the file open at ``fd``: a file locked through a descriptor
    may have been removed or renamed aside by its previous holder, and a lock on that file then
    guards nothing (PathLock, the results journal)."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    ours = os.fstat(fd)
    return (now.st_ino, now.st_dev) == (ours.st_ino, ours.st_dev)


class PathLock:
    """An exclusive lock between processes, named by ``path``, that leaves no file behind.

    A lock file kept after use (as ``filelock``'s Unix lock keeps it) leaves one empty file per
    key in the folder it guards: 937 in a FamilyTool run's extraction memo. Here the holder
    removes the file while it still holds the ``flock``, and whoever locks a file checks that it
    is still the one at ``path`` (else the holder before it removed it: it locks the new one),
    so at any time at most one process holds the lock of the file the path names. A process
    killed while holding it leaves the file, whose ``flock`` the kernel has released: the next
    holder takes it and removes it. ``acquire`` blocks (an event loop polls ``try_acquire``);
    ``release`` may run on another thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd = -1

    def acquire(self) -> None:
        self._take(fcntl.LOCK_EX)

    def try_acquire(self) -> bool:
        """``acquire`` without waiting: False while another holder has the lock. An event loop
        polls this rather than waiting on a thread, which a cancelled task cannot take back: it
        acquired later anyway, and nothing released the lock."""
        return self._take(fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _take(self, operation: int) -> bool:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, operation)
                if names_open_file(self.path, fd):
                    self._fd = fd
                    return True
            except BlockingIOError:  # held by another (only with LOCK_NB)
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # the holder before us removed it on release: lock the new one

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)  # closing the descriptor releases the flock
