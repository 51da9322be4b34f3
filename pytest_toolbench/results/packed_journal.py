"""The compressed part of a results journal: ``<journal>.gz``, one gzip member per compacted block.

A journal is written plain, one line per result (results/journal.py), because a line must be in
the kernel when ``append`` returns and a gzip stream cannot be appended to line by line without
giving up most of its ratio (each line compressed alone: 4.6x; as a stream: 18x). The journal's
group-commit thread therefore renames a full plain file aside (``<journal>.<time>.<pid>.pending``)
and :meth:`PackedJournal.append_block` stores it here as one gzip member: long texts interned
(results/text_interning.py), compressed at zlib's default level, fsynced; only then is the
pending file removed. Concatenated gzip members are one valid gzip stream (``gzip -dc`` reads the
file), so a block is only ever appended.

A member's payload starts with a source line, ``\\x03<pending name> <start> <end>``: the byte
range of the pending file it holds. A crash between the member's fsync and the pending file's
removal leaves both; the reader then skips that range of the pending file instead of reading its
results twice. A crash while a member is being written leaves a torn last member: the reader
skips it with a warning (its lines are still in the pending file), and the next writer cuts it
off before appending. Anything else that does not decompress is corruption, reported with the
file and the member's offset.
"""

from __future__ import annotations

import fcntl
import os
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_toolbench.results import text_interning

#: First byte of a member's source line (the marker bytes 1 and 2 are text_interning's).
SOURCE = b"\x03"
#: zlib's default: 3.1 MB for a FamilyTool run's 72 MB of interned lines, against 4.9 MB at
#: level 3 and 3.0 MB at level 9 (0.9 s, 0.4 s and 1.2 s of CPU).
LEVEL = 6
_GZIP = 31  # zlib's wbits for a gzip header and trailer


class PackedJournalError(ValueError):
    """A member other than a torn last one does not decompress (message: file and offset)."""


@dataclass(frozen=True)
class Block:
    """One member as read back: where its lines came from and the lines, texts expanded."""

    source: str
    start: int
    end: int
    lines: bytes


def _members(size: int, read: Callable[[int, int], bytes],
             where: str) -> Iterator[tuple[int, int, bytes | None]]:
    """``(offset, end, payload)`` per member of the ``size`` bytes ``read(offset, n)`` gives; a
    torn last member gives payload None. The decoder is fed ``_FEED`` bytes at a time: fed the
    rest of the file, each member copied it (and its unused tail) again, 24 MB held at once to
    read an 8 MB journal; read a piece at a time, a reader holds one member, not the file."""
    offset = 0
    while offset < size:
        decoder = zlib.decompressobj(_GZIP)
        parts, at = [], offset
        try:
            while not decoder.eof and at < size:
                piece = read(at, _FEED)
                if not piece:  # cut shorter since its size was taken: torn
                    break
                parts.append(decoder.decompress(piece))
                at += len(piece)
        except zlib.error as exc:
            raise PackedJournalError(f"{where}: the gzip member at byte {offset} is corrupt "
                                     f"({exc})") from None
        if not decoder.eof:
            yield offset, size, None
            return
        end = at - len(decoder.unused_data)
        yield offset, end, b"".join(parts)
        offset = end


#: Compressed bytes handed to the decoder at a time (:func:`_members`).
_FEED = 1 << 16


def _reader(data: bytes) -> Callable[[int, int], bytes]:
    """``read(offset, n)`` over bytes already read, without copying them."""
    view = memoryview(data)
    return lambda at, n: view[at:at + n]


def _source_of(payload: bytes, where: str, offset: int) -> tuple[str, int, int, bytes]:
    head, _, rest = payload.partition(b"\n")
    try:
        name, start, end = head[1:].decode("utf-8").rsplit(" ", 2)
        if not head.startswith(SOURCE):
            raise ValueError
        return name, int(start), int(end), rest
    except ValueError:
        raise PackedJournalError(f"{where}: the gzip member at byte {offset} has no source "
                                 "line (not written by this journal)") from None


def read_blocks(path: Path) -> list[Block]:
    """Every complete member of ``path`` in order, texts expanded; [] if there is no file. A torn
    last member is skipped with a warning; a corrupt one raises :class:`PackedJournalError`."""
    return list(iter_blocks(path))


def iter_blocks(path: Path) -> Iterator[Block]:
    """:func:`read_blocks` one member at a time, each let go once the next is read: a reader of
    a long journal holds one member's lines (and the texts defined so far), not every line."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        yield from _blocks(os.fstat(f.fileno()).st_size, path,
                           lambda at, n: os.pread(f.fileno(), n, at))


def _blocks(size: int, path: Path, read: Callable[[int, int], bytes]) -> Iterator[Block]:
    texts: dict[bytes, bytes] = {}
    for offset, end, payload in _members(size, read, str(path)):
        if payload is None:
            warnings.warn(f"{path}: skipping a torn last block at byte {offset} "
                          f"({end - offset} bytes; the run was interrupted while writing it, "
                          "its results are still in the pending file)", stacklevel=3)
            return
        name, start, stop, rest = _source_of(payload, str(path), offset)
        new, stored = text_interning.split_definitions(rest)
        texts.update(new)
        try:
            lines = text_interning.expand(stored, texts, f"{path} (member at byte {offset})")
        except KeyError as exc:
            raise PackedJournalError(str(exc.args[0])) from None
        yield Block(name, start, stop, lines)


class PackedJournal:
    """Appends blocks to ``path``; any number of processes, one block at a time (``flock``)."""

    def __init__(self, path: Path, *, level: int = LEVEL, intern: bool = True) -> None:
        self.path = Path(path)
        self.level = level
        #: False: each member stands alone (no text defined in one and read in another), so a
        #: reader holds one member at a time whatever the journal's size; larger on disk.
        self.intern = intern
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        #: Keys of the texts the file defines, so each is stored once per journal.
        self._known: set[bytes] = set()
        self._seen_size = -1  # the file's size when _known was last brought up to date

    def _catch_up(self) -> None:
        """Under the lock: cut a torn last member, and learn the texts defined so far (another
        process may have appended since this one last did). Only reads what is new."""
        size = os.fstat(self._fd).st_size
        if size == self._seen_size:
            return
        if size < self._seen_size:  # cut by another writer: learn the file again
            self._seen_size = -1
            self._known.clear()
        start = max(self._seen_size, 0)
        data = os.pread(self._fd, size - start, start)
        where = str(self.path)
        keep = start
        for offset, end, payload in _members(len(data), _reader(data), where):
            if payload is None:
                break
            keep = start + end
            _, _, _, rest = _source_of(payload, where, start + offset)
            self._known.update(text_interning.split_definitions(rest)[0])
        if keep < size:  # a torn member from a killed writer: its lines are in a pending file
            os.ftruncate(self._fd, keep)
            os.fsync(self._fd)
        self._seen_size = keep

    def append_block(self, lines: bytes, source: str, start: int, end: int) -> None:
        """Store ``lines`` (whole JSON lines, bytes ``start:end`` of the pending file ``source``)
        as one member, durably (fsync) before returning. A write that fails is cut back and
        raises ``OSError``: the pending file still holds the lines."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self._catch_up()
            if self.intern:
                definitions, stored = text_interning.intern_lines(lines, self._known)
            else:  # still refused where a reader would take a raw marker byte for a reference
                text_interning.check_plain(lines)
                definitions, stored = [], lines
            head = SOURCE + f"{source} {start} {end}\n".encode("utf-8")
            encoder = zlib.compressobj(self.level, zlib.DEFLATED, _GZIP)
            member = encoder.compress(head + b"".join(definitions) + stored) + encoder.flush()
            before = self._seen_size
            try:
                view = memoryview(member)
                while view:
                    view = view[os.write(self._fd, view):]
                os.fsync(self._fd)
            except OSError:
                try:
                    os.ftruncate(self._fd, before)
                except OSError:
                    self._seen_size = -1  # left torn: the next append cuts it (_catch_up)
                raise
            self._known.update(text_interning.keys_of(definitions))
            self._seen_size = before + len(member)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)
