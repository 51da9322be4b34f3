"""Append-only journal of case results, so an interrupted run loses at most one line.

Each result is one line, written with one ``write()`` to an ``O_APPEND`` descriptor under an
``flock`` on that descriptor (several processes may share the file; a lock on the open file costs
two system calls, where a lock *file* per result cost far more of the main thread's time per
case) before ``append`` returns: from then on it is in the
kernel and survives Ctrl-C, SIGTERM and the harness process being killed. ``fsync`` (which only
matters if the *machine* goes down) is a group commit on a background thread: one fsync covers
every line written since the previous one, so the main thread never waits on the disk (an fsync
per result would). The thread fsyncs at most once per :data:`SYNC_INTERVAL_S` and ``append`` wakes
it only when it sleeps with nothing to do: woken for every line, it took the GIL from the main
thread once or twice per case (0.3 ms a case in an xdist worker's profile). A machine that goes
down may so lose up to that interval's lines more; a process that dies loses none. ``flush()``,
``close()`` (and interpreter exit) wait for the last fsync. A crash mid-write leaves a truncated
last line: the reader skips it, and the next writer cuts it off before appending so it cannot
fuse with a new record.

A write that fails (a full disk: ENOSPC, EFBIG past a file-size limit, EDQUOT; EIO) may have
written part of its line first: ``append`` cuts the file back to its size before the write and
raises :class:`JournalWriteError` (an ``OSError`` naming the file), so the journal never ends in a
torn line a reader would take for an interruption. If even the cut fails, the next ``append`` of
this journal (or the next writer to open the file) cuts the torn tail first.

``compact=True`` (the run's own journal, and each xdist worker's) keeps the plain file small:
once ``block_bytes`` have been appended, the group-commit thread renames it aside under the lock
(``<name>.<time>.<pid>.pending``; the next line starts a new plain file) and stores it as gzip
members of ``<name>.gz`` of at most ``block_bytes`` each, with its long texts interned
(results/packed_journal.py; a worker's are not), then removes it; ``close``
does the same with the rest, so a finished journal is the ``.gz`` alone. Nothing is ever
rewritten in place: a crash at any point leaves each result in the plain file, a pending file or
a complete member, and :func:`read_journal` reads all three in write order. A writer that finds
the path renamed by another process's writer (another inode under the lock) reopens it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pydantic_core
from pydantic import ValidationError

from pytest_toolbench.fileio import names_open_file
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.packed_journal import (
    LEVEL,
    Block,
    PackedJournal,
    iter_blocks,
    read_blocks,
)
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


#: The group commit's pace: one fsync per this many seconds at most (see the module docstring).
SYNC_INTERVAL_S = 0.2

#: Plain bytes a compacting journal collects before it stores them as one gzip member: large
#: enough that each member restarts gzip's window rarely, small enough to bound the plain file.
BLOCK_BYTES = 1 << 20
_PENDING = re.compile(r"\.(\d+)\.(\d+)\.pending$")


def packed_path(path: Path) -> Path:
    """Where a journal's compacted blocks go: ``<journal>.gz``."""
    return path.with_name(path.name + ".gz")


def pending_paths(path: Path) -> list[Path]:
    """The journal's plain files renamed aside and not yet compacted (or compacted by a writer
    that was killed before it removed them), oldest first."""
    found = []
    for p in path.parent.glob(glob.escape(path.name) + ".*.pending"):
        m = _PENDING.search(p.name[len(path.name):])
        if m is not None:
            found.append((int(m.group(1)), int(m.group(2)), p))
    return [p for *_, p in sorted(found)]


def journal_files(path: Path) -> list[Path]:
    """Every file that holds part of the journal at ``path`` (plain, pending, compressed)."""
    return [p for p in (packed_path(path), *pending_paths(path), path) if p.exists()]


class ResultJournal:
    """``with ResultJournal(path) as j: j.append(result)``; safe across processes and threads."""

    def __init__(self, path: str | os.PathLike[str], *, compact: bool = False,
                 block_bytes: int = BLOCK_BYTES, level: int = LEVEL, intern: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.compact = compact
        #: How blocks are packed (packed_journal.PackedJournal's ``level`` and ``intern``).
        self.level, self.intern = level, intern
        self.block_bytes = block_bytes
        self._fd = self._open()
        self._cond = threading.Condition()
        self._written = 0  # lines written (in the kernel)
        self._synced = 0  # lines covered by an fsync
        self._closed = False
        self._syncer: threading.Thread | None = None
        #: The fsync thread waits for lines (append wakes it) rather than pacing itself.
        self._syncer_idle = False
        #: Someone waits in flush(): the fsync thread does not pace itself.
        self._flushing = 0
        #: Set by :meth:`sync_soon`: no more pauses between group commits (the run is ending).
        self._hurry = False
        #: A failed write whose rollback failed too may have left part of a line behind.
        self._maybe_torn = False
        #: A write failed: the disk is failing, so nothing is renamed or compacted any more.
        self._failed = False
        self._unpacked = 0  # bytes appended since the plain file was last renamed aside
        self._packed: PackedJournal | None = None
        #: Why the last compaction failed (its pending file was kept, nothing lost); None: none did.
        self.compact_error: str | None = None
        atexit.register(self.close)

    def _open(self) -> int:
        """The plain file's descriptor, with a torn tail a killed writer left cut off."""
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        with _locked(fd):
            _cut_partial_tail(fd)
        return fd

    def _lock_current(self) -> None:
        """``flock`` the plain file at ``path``: if another process's writer renamed it aside
        since this descriptor was opened, the lines go to the new file (caller holds _cond)."""
        while True:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if names_open_file(self.path, self._fd):
                    return
            except BaseException:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                raise
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            old = self._fd
            try:
                self._fd = self._open()
            except OSError as exc:
                raise JournalWriteError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc
            with contextlib.suppress(OSError):  # what went to the renamed file is on disk too
                os.fsync(old)
            os.close(old)

    def append(self, result: CaseResult) -> None:
        self.append_json(result.model_dump_json())

    def append_json(self, text: str) -> None:
        """Append a result as ``CaseResult.model_dump_json`` wrote it (the controller passes on
        an xdist worker's as received: read back, it validates to the very result the controller
        holds, and is not dumped a second time)."""
        # DEL, C1 and bidi controls as JSON escapes, as in the JSON report (results/safe_text.py)
        data = safe_json_bytes((text + "\n").encode("utf-8"))
        with self._cond:
            if self._closed:
                raise ValueError(f"{self.path}: journal is closed")
            self._lock_current()
            try:
                self._write_line(data)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._written += 1
            self._unpacked += len(data)
            if self._syncer is None:
                self._syncer = threading.Thread(
                    target=self._sync_loop, name="toolbench-journal-fsync", daemon=True
                )
                self._syncer.start()
            elif self._syncer_idle:
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
            self._failed = True
            try:
                os.ftruncate(self._fd, before)
            except OSError:
                self._maybe_torn = True
            raise JournalWriteError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc

    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                while self._synced == self._written and not self._closed:
                    self._syncer_idle = True
                    try:
                        self._cond.wait()
                    finally:
                        self._syncer_idle = False
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
                full = self.compact and not self._closed and self._unpacked >= self.block_bytes
            if full:
                self._pack(self._set_aside(reopen=True))
            with self._cond:  # let lines gather: the next fsync covers them all
                if not self._closed and not self._flushing and not self._hurry:
                    self._cond.wait(SYNC_INTERVAL_S)

    def _set_aside(self, *, reopen: bool) -> Path | None:
        """Rename the plain file aside under the lock and return its pending path (None when it
        holds nothing, or the disk failed). ``reopen``: a new plain file takes the next lines;
        else (``close``) none does, and an empty plain file is removed."""
        with self._cond:
            if self._failed or self._fd < 0:
                return None
            try:
                self._lock_current()
            except OSError:
                return None
            old, pending = self._fd, None
            try:
                if self._maybe_torn:
                    _cut_partial_tail(old)
                    self._maybe_torn = False
                if os.fstat(old).st_size > 0:
                    pending = self.path.with_name(
                        f"{self.path.name}.{time.time_ns()}.{os.getpid()}.pending")
                    os.rename(self.path, pending)
                elif reopen:
                    return None
                else:
                    os.unlink(self.path)  # another process's writer would reopen it (_lock_current)
                self._fd = self._open() if reopen else -1
                self._unpacked = 0
            except OSError as exc:
                self.compact_error = f"{self.path}: {exc}"
                return None
            finally:
                fcntl.flock(old, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.fsync(old)
        os.close(old)
        return pending

    def _pack(self, pending: Path | None) -> None:
        """Store a pending file as gzip members and remove it; on any failure it stays as it
        is (a plain file the reader reads) and :attr:`compact_error` says why."""
        if pending is None:
            return
        try:
            if self._packed is None:
                self._packed = PackedJournal(packed_path(self.path), level=self.level,
                                             intern=self.intern)
            _pack_file(self._packed, pending, limit=self.block_bytes)
        except (OSError, ValueError) as exc:
            self.compact_error = f"{pending}: {exc}"

    def sync_soon(self) -> None:
        """Start the group commit of what was appended now, not after the thread's pause, and
        return at once: the fsync (the GIL released) overlaps what the caller does next, and a
        :meth:`flush` or :meth:`close` after that finds it done."""
        with self._cond:
            self._hurry = True
            self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every appended line is fsynced."""
        with self._cond:
            self._flushing += 1
            try:
                while self._synced < self._written and self._syncer is not None:
                    self._cond.notify_all()  # ends the fsync thread's pause, if it is in one
                    self._cond.wait(timeout=1.0)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Fsync what was written and release the descriptor (a compacting journal stores the
        rest as gzip first); idempotent."""
        with self._cond:
            if self._closed:
                return
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._syncer is not None:
            self._syncer.join(timeout=10)
        if self.compact:
            self._pack(self._set_aside(reopen=False))
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1
        if self._packed is not None:
            self._packed.close()
            self._packed = None
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


def pack_leftovers(path: Path) -> int:
    """Store the pending files a killed compaction left beside the journal at ``path`` in its
    ``.gz``, each from the end of what a member already holds (a compaction packs a pending file
    from its start, so what it stored before the kill is a prefix); returns how many. Only for a
    journal whose writers are all gone (``toolbench finish``): a live writer's pending file is
    its own to pack. A failure leaves the file as it was (the reader reads it as it is)."""
    leftovers = pending_paths(path)
    if not leftovers:
        return 0
    held = held_ranges(read_blocks(packed_path(path)))
    packed = PackedJournal(packed_path(path))
    try:
        for pending in leftovers:
            ranges = held.get(pending.name, [])
            _pack_file(packed, pending, start=max((end for _, end in ranges), default=0))
    finally:
        packed.close()
    return len(leftovers)


def held_ranges(blocks: list[Block]) -> dict[str, list[tuple[int, int]]]:
    """Per pending file's name, the byte ranges ``(start, end)`` of it that members hold, in
    order: what a reader skips of a pending file and where :func:`pack_leftovers` goes on from
    (a killed compaction left both the member and the file)."""
    held: dict[str, list[tuple[int, int]]] = {}
    for block in blocks:
        held.setdefault(block.source, []).append((block.start, block.end))
    return {name: sorted(ranges) for name, ranges in held.items()}


def _pack_file(packed: PackedJournal, pending: Path, start: int = 0,
               limit: int = BLOCK_BYTES) -> None:
    """Every whole line of ``pending`` from byte ``start`` into ``packed``, in members of about
    ``limit`` bytes (a longer line is a member of its own), then remove it. A writer that opened
    the plain file before it was renamed may still add a line under its lock: read again until
    nothing new came (a torn line left by a killed writer is dropped with the file). The limit
    bounds what a reader holds at once (:func:`_streamed_lines`): lines appended faster than the
    group commit compacts (a fast oracle run) made one member of all of them."""
    fd = os.open(pending, os.O_RDWR | os.O_CLOEXEC)
    try:
        while True:
            with _locked(fd):
                rest = max(0, os.fstat(fd).st_size - start)
                want = min(rest, max(limit, 1))
                while True:
                    data = os.pread(fd, want, start)
                    whole = data.rfind(b"\n") + 1
                    if whole or want >= rest:
                        break
                    want = min(rest, 2 * want)  # a line longer than the limit
                if whole == 0:
                    os.unlink(pending)
                    return
            packed.append_block(data[:whole], pending.name, start, start + whole)
            start += whole
    finally:
        os.close(fd)


@dataclass
class _Chunk:
    """Lines of one journal file (or one member), and where they sit in write order."""

    order: tuple[int, int, int]
    where: str
    lines: bytes
    plain: bool  # the live plain file: a torn last line is an interruption, not corruption


def _chunks(path: Path) -> list[_Chunk]:
    """The journal's lines by file, in write order: the members of ``<name>.gz`` and the pending
    files (ordered by the time in their names; a member by its source's), then the plain file.
    Ranges of a pending file that a member already holds are left out (a killed compaction)."""
    chunks: list[_Chunk] = []
    gz = packed_path(path)
    blocks = read_blocks(gz)
    covered = held_ranges(blocks)
    chunks += [_block_chunk(block, path) for block in blocks]
    for pending in pending_paths(path):
        chunks.append(_pending_chunk(pending, path, covered))
    try:
        chunks.append(_Chunk((1 << 63, 0, 0), str(path), path.read_bytes(), True))
    except FileNotFoundError:
        pass
    return sorted(chunks, key=lambda c: c.order)


def _block_chunk(block: Block, path: Path) -> _Chunk:
    """The lines of one member of the journal at ``path``, placed in write order."""
    return _Chunk((*_pending_order(block.source, path), block.start),
                  f"{packed_path(path)} ({block.source})", block.lines, False)


def _pending_chunk(pending: Path, path: Path, covered: dict[str, list[tuple[int, int]]]) -> _Chunk:
    """The lines of a pending file of the journal at ``path`` that no member holds, placed in
    write order by their first byte: a compaction killed after packing the first members of a
    file leaves its rest to be read after them, not before."""
    data = pending.read_bytes()
    keep, at, first = [], 0, None
    for start, end in covered.get(pending.name, []):
        if start > at and first is None:
            first = at
        keep.append(data[at:start])
        at = max(at, end)
    keep.append(data[at:])
    return _Chunk((*_pending_order(pending.name, path), at if first is None else first),
                  str(pending), b"".join(keep), False)


def _pending_order(name: str, path: Path) -> tuple[int, int]:
    m = _PENDING.search(name[len(path.name):])
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _whole_lines(chunk: _Chunk) -> bytes:
    """The chunk's complete lines; a truncated last line of the plain file (a run killed
    mid-write) is dropped with a warning, anywhere else it is corruption."""
    data = chunk.lines
    whole = data.rfind(b"\n") + 1
    torn = data[whole:]
    if torn.strip():
        lineno = data.count(b"\n") + 1
        if not chunk.plain:
            raise JournalError(f"{chunk.where}:{lineno}: a line without its newline inside the "
                               "journal")
        _warn_torn(chunk.where, lineno, len(torn), stacklevel=5)
    return data[:whole] if torn else data


def journal_array(path: str | os.PathLike[str]) -> bytes:
    """The journal's complete lines as one JSON array, in write order: what a report reader
    parses at once (results/case_store.py), without a Python object per line."""
    parts = []
    for chunk in _chunks(Path(path)):
        data = _whole_lines(chunk)
        if b"\n\n" in data or data.startswith(b"\n"):  # blank lines: not records
            data = b"\n".join(line for line in data.split(b"\n") if line.strip()) + b"\n"
        if data.strip():
            parts.append(data[:-1].replace(b"\n", b","))
    return b"[" + b",".join(parts) + b"]"


def journal_lines(path: str | os.PathLike[str]) -> list[tuple[str, int, bytes]]:
    """``(file, line number, line)`` for every complete line of the journal, in write order. A
    truncated last line of the plain file (a run killed mid-write) is skipped with a warning."""
    return list(iter_journal_lines(path))


def iter_journal_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, int, bytes]]:
    """:func:`journal_lines` one at a time, each file's or member's text let go once its lines
    are out: a reader that keeps the lines holds the journal's text once, not twice."""
    chunks = _chunks(Path(path))
    chunks.reverse()
    while chunks:
        chunk = chunks.pop()
        lines = _whole_lines(chunk).split(b"\n")
        where, chunk = chunk.where, None  # its text: the lines are copies
        yield from _numbered(where, lines)


def _numbered(where: str, lines: list[bytes]) -> Iterator[tuple[str, int, bytes]]:
    """``(where, line number, line)`` for each of ``lines`` that is not blank."""
    for n, line in enumerate(lines, start=1):
        if line.strip():
            yield where, n, line


#: Told of each unreadable line a lenient reader skips (:func:`read_journal`'s ``on_invalid``):
#: one line, ``<file>:<line>: skipping an unreadable journal line (<why>)``.
InvalidLineNote = Callable[[str], None]


def read_journal(path: str | os.PathLike[str], *,
                 on_invalid: InvalidLineNote | None = None) -> list[CaseResult]:
    """All results in the journal, in write order; a truncated last line is skipped with a warning.

    A bad line anywhere else is corruption, not an interruption: JournalError with file:line;
    or, given ``on_invalid`` (``toolbench finish`` salvaging a killed run's results), skipped
    and named to it, so one bad line does not cost every other result.
    """
    results = (_validated(where, lineno, line, on_invalid)
               for where, lineno, line in journal_lines(path))
    return [r for r in results if r is not None]


def _validated(where: str, lineno: int, line: bytes,
               on_invalid: InvalidLineNote | None = None) -> CaseResult | None:
    """The line's result; a bad one raises JournalError, or with ``on_invalid`` is named to it
    and None."""
    try:
        return CaseResult.model_validate_json(line)
    except (ValidationError, ValueError) as exc:
        if on_invalid is None:
            raise JournalError(f"{where}:{lineno}: invalid journal record: {_why(exc)}") from exc
        on_invalid(f"{where}:{lineno}: skipping an unreadable journal line ({_why(exc)})")
        return None


def _why(exc: ValueError) -> str:
    """Why a line is not a result, on one line: pydantic's message runs over several (the
    error, the input, a documentation link), which a note or a refusal printed as ``\\n``."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False)
        if errors:
            first = errors[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
            return f"{where + ': ' if where else ''}{first.get('msg')}{more}"
    return " ".join(str(exc).split())


def _warn_torn(where: str, lineno: int, size: int, *, stacklevel: int) -> None:
    warnings.warn(f"{where}:{lineno}: skipping a truncated last journal line ({size} bytes; the run "
                  "was interrupted while writing it)", stacklevel=stacklevel)


def recover_missing(journals: list[Path], results: dict[str, CaseResult], *,
                    on_invalid: InvalidLineNote | None = None) -> int:
    """Add to ``results`` every journalled result it lacks; returns how many were recovered.

    The per-worker journals are the backstop of the report channel: a result whose report never
    reached the controller (a worker that crashed right after a test) is still on disk. A bad
    line: as :func:`read_journal` says. A journal that a live writer compacted while it was read
    (an interrupted run's worker that runs on; its plain file renamed aside, a pending file
    packed and removed) is read again: what the first read took is in ``results`` already.
    """
    recovered = 0
    told: set[str] = set()

    def tell_once(note: str) -> None:  # a journal read twice names its bad line once
        if note not in told and on_invalid is not None:
            told.add(note)
            on_invalid(note)

    for path in sorted(journals):
        for attempt in range(READ_TRIES):
            before = _layout(path)
            try:
                recovered += _recover_from(path, results, tell_once if on_invalid else None)
            except FileNotFoundError:
                if attempt == READ_TRIES - 1:
                    raise
                continue
            if _layout(path) == before:
                break
    return recovered


#: Reads of a journal that a live writer keeps compacting before one that saw no compaction.
READ_TRIES = 5


def _layout(path: Path) -> tuple[int, tuple[str, ...], int]:
    """What a compaction changes: the ``.gz``'s size, the pending files, the plain file's inode
    (appends to the plain file change none of them)."""
    def stat(p: Path, field: str) -> int:
        try:
            return getattr(p.stat(), field)
        except FileNotFoundError:
            return -1
    return (stat(packed_path(path), "st_size"), tuple(p.name for p in pending_paths(path)),
            stat(path, "st_ino"))


def _recover_from(path: Path, results: dict[str, CaseResult],
                  on_invalid: InvalidLineNote | None) -> int:
    recovered = 0
    for where, lineno, line in _streamed_lines(path):
        # Only the lines of cases it lacks are validated: the others (all of them, in a run
        # whose reports all arrived) would be every result of the run whole in memory again.
        if _line_case_id(line) in results:
            continue
        result = _validated(where, lineno, line, on_invalid)
        if result is not None and result.case_id not in results:
            results[result.case_id] = result
            recovered += 1
    return recovered


def _streamed_lines(path: Path) -> Iterator[tuple[str, int, bytes]]:
    """:func:`journal_lines` for a worker's journal, which its worker alone writes: its members
    a member at a time, then its pending files, then its plain file a line at a time. A long
    run's worker journals are gigabytes of lines, which the session end's merge must not hold
    in memory at once (:func:`iter_journal_lines` decompresses every member first, to order the
    members of several writers)."""
    spans: list[Block] = []  # each member's source range, its lines let go
    for block in iter_blocks(packed_path(path)):
        spans.append(Block(block.source, block.start, block.end, b""))
        chunk = _block_chunk(block, path)
        yield from _numbered(chunk.where, _whole_lines(chunk).split(b"\n"))
    covered = held_ranges(spans)
    for pending in pending_paths(path):
        chunk = _pending_chunk(pending, path, covered)
        yield from _numbered(chunk.where, _whole_lines(chunk).split(b"\n"))
    try:
        f = open(path, "rb")
    except FileNotFoundError:  # a closed journal; or renamed aside since: the layout tells
        return
    with f:
        for lineno, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):  # the last line, torn: as _whole_lines says it
                if line.strip():
                    _warn_torn(str(path), lineno, len(line), stacklevel=4)
                return
            if line.strip():
                yield str(path), lineno, line[:-1]


#: A journal line as ``CaseResult.model_dump_json`` writes it: the case id first.
_CASE_ID_FIRST = re.compile(rb'\{"case_id":("(?:[^"\\]|\\.)*")[,}]')


def line_case_id(line: bytes) -> str | None:
    """The case id of a journal line: read from its start when written as the journal writes
    it, else from the whole line parsed (ValueError: not JSON)."""
    found = _line_case_id(line)
    if found is not None:
        return found
    value = pydantic_core.from_json(line)
    case_id = value.get("case_id") if isinstance(value, dict) else None
    return case_id if isinstance(case_id, str) else None


def _line_case_id(line: bytes) -> str | None:
    """The case id a journal line starts with; None for a line written otherwise (it is then
    validated whole, as every line was)."""
    found = _CASE_ID_FIRST.match(line)
    if found is None:
        return None
    try:
        return str(pydantic_core.from_json(found.group(1)))
    except ValueError:
        return None
