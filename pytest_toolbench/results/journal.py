"""Append-only JSONL journal of case results, so an interrupted run loses at most one line.

Each result is one line, written with one ``write()`` to an ``O_APPEND`` descriptor under an
``flock`` on that descriptor (several processes may share the file; a lock on the open file costs
two system calls, where a lock *file* per result cost far more of the main thread's time per
case) before ``append`` returns: from then on it is in the
kernel and survives Ctrl-C, SIGTERM and the harness process being killed. ``fsync`` (which only
matters if the *machine* goes down) is a group commit on a background thread: one fsync covers
every line written since the previous one, so the main thread never waits on the disk (an fsync
per result would). ``close()`` (and interpreter exit) waits for the last
fsync. A crash mid-write leaves a truncated last line: the reader skips it, and the next writer
cuts it off before appending so it cannot fuse with a new record.

A write that fails (a full disk: ENOSPC, EFBIG past a file-size limit, EDQUOT; EIO) may have
written part of its line first: ``append`` cuts the file back to its size before the write and
raises :class:`JournalWriteError` (an ``OSError`` naming the file), so the journal never ends in a
torn line a reader would take for an interruption. If even the cut fails, the next ``append`` of
this journal (or the next writer to open the file) cuts the torn tail first.
"""

from __future__ import annotations

import atexit
import fcntl
import os
from contextlib import contextmanager
import threading
import warnings
from pathlib import Path
from collections.abc import Iterator
from types import TracebackType

from pydantic import ValidationError

from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.safe_text import safe_json_bytes


class JournalError(ValueError):
    """A journal line other than the last one is not a valid CaseResult."""


class JournalWriteError(OSError):
    """A line could not be appended (its partial write was rolled back); ``filename`` is the
    journal, ``errno``/``strerror`` the write's error."""


@contextmanager
def _locked(fd: int) -> Iterator[None]:
    """Exclusive ``flock`` on the journal's own descriptor, for one write or one tail repair."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _cut_partial_tail(fd: int) -> None:
    """Drop bytes after the last newline (a record a crash left half-written)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    # Walk back in chunks to the last newline.
    pos, keep, chunk = size, 0, 65536
    while pos > 0:
        start = max(0, pos - chunk)
        block = os.pread(fd, pos - start, start)
        i = block.rfind(b"\n")
        if i >= 0:
            keep = start + i + 1
            break
        pos = start
    os.ftruncate(fd, keep)
    os.fsync(fd)


class ResultJournal:
    """``with ResultJournal(path) as j: j.append(result)``; safe across processes and threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        with _locked(self._fd):
            _cut_partial_tail(self._fd)
        self._cond = threading.Condition()
        self._written = 0  # lines written (in the kernel)
        self._synced = 0  # lines covered by an fsync
        self._closed = False
        self._syncer: threading.Thread | None = None
        #: A failed write whose rollback failed too may have left part of a line behind.
        self._maybe_torn = False
        atexit.register(self.close)

    def append(self, result: CaseResult) -> None:
        # DEL, C1 and bidi controls as JSON escapes, as in the JSON report (results/safe_text.py)
        data = safe_json_bytes((result.model_dump_json() + "\n").encode("utf-8"))
        with self._cond:
            if self._closed:
                raise ValueError(f"{self.path}: journal is closed")
            with _locked(self._fd):
                self._write_line(data)
            self._written += 1
            if self._syncer is None:
                self._syncer = threading.Thread(
                    target=self._sync_loop, name="toolbench-journal-fsync", daemon=True
                )
                self._syncer.start()
            self._cond.notify_all()

    def _write_line(self, data: bytes) -> None:
        """One whole line or nothing: a write that fails part-way is cut back (lock held)."""
        if self._maybe_torn:
            _cut_partial_tail(self._fd)
            self._maybe_torn = False
        before = os.fstat(self._fd).st_size  # O_APPEND under the lock: where this line starts
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            try:
                os.ftruncate(self._fd, before)
            except OSError:
                self._maybe_torn = True
            raise JournalWriteError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc

    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                while self._synced == self._written and not self._closed:
                    self._cond.wait()
                if self._synced == self._written and self._closed:
                    return
                target, fd = self._written, self._fd
            try:
                os.fsync(fd)
            except OSError:  # closed under us at exit: the lines are in the kernel already
                pass
            with self._cond:
                self._synced = max(self._synced, target)
                self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every appended line is fsynced."""
        with self._cond:
            while self._synced < self._written and self._syncer is not None:
                self._cond.notify_all()
                self._cond.wait(timeout=1.0)

    def close(self) -> None:
        """Fsync what was written and release the descriptor; idempotent."""
        with self._cond:
            if self._closed:
                return
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._syncer is not None:
            self._syncer.join(timeout=10)
        try:
            os.fsync(self._fd)
        except OSError:
            pass
        os.close(self._fd)
        atexit.unregister(self.close)

    def __enter__(self) -> ResultJournal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_journal(path: str | os.PathLike[str]) -> list[CaseResult]:
    """All results in the journal, in write order; a truncated last line is skipped with a warning.

    A bad line anywhere else is corruption, not an interruption: JournalError with file:line.
    """
    p = Path(path)
    if not p.exists():
        return []
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    complete_tail = raw.endswith(b"\n")
    results: list[CaseResult] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_last = lineno == len(lines) and not complete_tail
        try:
            results.append(CaseResult.model_validate_json(line))
        except (ValidationError, ValueError) as exc:
            if is_last:
                warnings.warn(
                    f"{p}:{lineno}: skipping a truncated last journal line "
                    f"({len(line)} bytes; the run was interrupted while writing it)",
                    stacklevel=2,
                )
                continue
            raise JournalError(f"{p}:{lineno}: invalid journal record: {exc}") from exc
    return results


def recover_missing(journals: list[Path], results: dict[str, CaseResult]) -> int:
    """Add to ``results`` every journalled result it lacks; returns how many were recovered.

    The per-worker journals are the backstop of the report channel: a result whose report never
    reached the controller (a worker that crashed right after a test) is still on disk.
    """
    recovered = 0
    for path in sorted(journals):
        for result in read_journal(path):
            if result.case_id not in results:
                results[result.case_id] = result
                recovered += 1
    return recovered
