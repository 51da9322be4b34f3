"""Records kept out of Python objects until a case runs, and JSON arrays read one record at a time.

Why (memory per case): a parsed record costs 3-4x its JSON text in Python objects, a
case holds its record from collection to the end of the run, and every xdist worker collects
every case: on a large run the records are most of each process's memory per case. So a case
holds a :class:`KeptRecord` and rebuilds the record when it starts (perf/run.py measures both):

* :class:`FileSpanRecord`: where the record's JSON lies in its data file (path, byte range and
  CRC-32 of those bytes): a few dozen bytes a record, and nothing to compress at load time
  (zlib cost a first run ~60 us a record, a third of parsing a file); a case reads its bytes
  back when it starts. A file changed or removed since it was read fails that case with an
  error naming the file (the CRC), never scores another record;
* :class:`PackedRecord`: the record's JSON zlib-compressed, for records without a usable place
  in a file (one built in code; a file whose ``\r`` newlines text-mode reading translates, so
  text offsets are not byte offsets).

Exactness: either way the bytes are the record's own text from the file (``json.loads`` of it
gives back exactly what parsing the file gave: key order, big integers, ``NaN``, ``-0.0`` and
escapes included), so nothing is re-encoded at load time. The
loader validated the record before keeping it, so :meth:`KeptRecord.unpack` does not validate
again: it uses ``model_construct``, which is only right for records whose fields are plain JSON
values (no nested models); both kinds refuse any other model.

:func:`iter_json_array` keeps a whole file's records from existing at once: parsing a 100,000-case
file with one ``json.loads`` would build every record's objects before the first was kept.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Generic, NoReturn, TypeVar, get_args, get_origin

from pydantic import BaseModel

from pytest_toolbench.benchmarks.dataset_errors import DatasetError

M = TypeVar("M", bound=BaseModel)

#: zlib level 1: most of the saving (code and prose compress ~3x) at a fifth of level 6's time.
_LEVEL = 1
_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # the JSON whitespace json.loads skips


@cache
def _is_flat(model: type[BaseModel]) -> bool:
    """Whether every field holds plain JSON values, so ``model_construct`` rebuilds it exactly."""

    def plain(annotation: Any) -> bool:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return False
        return all(plain(arg) for arg in get_args(annotation)) if get_origin(annotation) else True

    return all(plain(field.annotation) for field in model.model_fields.values())


class KeptRecord(Generic[M]):
    """A validated record as a case keeps it; :meth:`unpack` rebuilds it."""

    __slots__ = ()

    def unpack(self) -> M:
        raise NotImplementedError


def _construct(model: type[M], data: bytes) -> M:
    """The record ``data`` (its JSON) holds, rebuilt without validating it again (the loader did)."""
    return model.model_construct(**json.loads(data))


def _check_flat(model: type[BaseModel]) -> None:
    if not _is_flat(model):
        raise TypeError(f"{model.__name__} has nested models; unpack could not rebuild it")


@dataclass(frozen=True, slots=True)
class PackedRecord(KeptRecord[M]):
    """One validated record as compressed JSON."""

    model: type[M]
    blob: bytes

    @classmethod
    def pack(cls, model: type[M], source: str) -> PackedRecord[M]:
        """Pack ``source``, the JSON text of an object ``model`` was validated from."""
        _check_flat(model)
        # surrogatepass: a record at hand may hold a lone surrogate; json.loads(bytes) reads it.
        return cls(model, zlib.compress(source.encode("utf-8", "surrogatepass"), _LEVEL))

    @classmethod
    def of_value(cls, model: type[M], raw: dict[str, Any]) -> PackedRecord[M]:
        """Pack a JSON object at hand (no source text: a record built in code)."""
        return cls.pack(model, json.dumps(raw, ensure_ascii=False, separators=(",", ":")))

    def unpack(self) -> M:
        return _construct(self.model, zlib.decompress(self.blob))


@dataclass(frozen=True, slots=True)
class FileSpanRecord(KeptRecord[M]):
    """One validated record as where its JSON lies in its data file; made by :class:`FileSpans`."""

    model: type[M]
    path: str  # absolute: a process with another working folder reads the same file
    start: int  # in bytes
    size: int
    crc: int  # CRC-32 of those bytes when the file was parsed

    def unpack(self) -> M:
        return _construct(self.model, self.read())

    def read(self) -> bytes:
        """The record's bytes, as they were when the file was parsed. A file that changed or went
        away since raises a :class:`DatasetError` naming it: the case reports an error, and no
        other text is ever scored as this record."""
        try:
            # O_NONBLOCK: a file swapped for a FIFO fails at the read, it does not hang the run.
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            try:
                data = os.pread(fd, self.size, self.start)
            finally:
                os.close(fd)
        except OSError as exc:
            raise DatasetError(self.path, f"cannot be read again since the run parsed it "
                                          f"({exc.strerror or exc}); run again to read it afresh"
                               ) from None
        if len(data) != self.size or zlib.crc32(data) != self.crc:
            raise DatasetError(self.path, f"changed since the run parsed it (bytes {self.start}-"
                                          f"{self.start + self.size} differ); run again to read "
                                          "it afresh")
        return data


class FileSpans:
    """Makes the kept records of one data file from where the loader found them in its text.

    ``text`` is ``raw`` decoded (and its newlines translated, as text-mode reading does); a
    record's place in it is a byte offset in ``raw`` only where no translation happened (no
    ``\\r`` in the file) and after counting the UTF-8 bytes of every character before it. Where
    that does not hold, or a record's bytes are not what encoding its text gives (a check that
    cannot fail for the reasons above; it keeps a surprise from ever costing exactness), the record
    is packed instead. Records must be kept in the order of their places in the text."""

    def __init__(self, path: str | Path, raw: bytes, text: str):
        self._path = os.path.abspath(path)
        self._raw = raw
        self._text = text
        self._usable = b"\r" not in raw
        self._ascii = text.isascii()  # constant time: then characters are bytes
        self._at = (0, 0)  # (character, byte) at the end of the last record kept

    def keep(self, model: type[M], source: str, start: int) -> KeptRecord[M]:
        """The record ``model`` was validated from ``source``, found at ``text[start:]``."""
        if not self._usable:
            return PackedRecord.pack(model, source)
        _check_flat(model)
        if self._ascii:
            offset, size = start, len(source)
        else:
            char, byte = self._at
            if start < char:
                raise ValueError("records are kept in the order of their places in the file")
            offset = byte + len(self._text[char:start].encode("utf-8"))
            encoded = source.encode("utf-8")
            size = len(encoded)
            self._at = (start + len(source), offset + size)
            if self._raw[offset:offset + size] != encoded:  # pragma: no cover - see the docstring
                return PackedRecord.pack(model, source)
        return FileSpanRecord(model, self._path, offset, size,
                              zlib.crc32(memoryview(self._raw)[offset:offset + size]))


def unpacked(sample: Any) -> Any:
    """A case's sample as its runner wants it: a kept record unpacked, anything else as it is."""
    return sample.unpack() if isinstance(sample, KeptRecord) else sample


class NotAJsonArray(ValueError):
    """The document is valid JSON, but not an array; ``found`` names its JSON type."""

    def __init__(self, found: str):
        self.found = found
        super().__init__(f"expected a JSON array, got {found}")


def iter_json_array(text: str) -> Iterator[tuple[Any, str]]:
    """The items of the JSON array ``text``, parsed one at a time, each with its own source text.

    Gives the same items as ``json.loads(text)``. Whatever is wrong with the document, the error is
    ``json.loads``'s own (message, line and column): on any surprise the whole text is handed to it.
    Raises :class:`NotAJsonArray` when the document is valid JSON but not an array.
    """
    for item, source, _ in iter_json_array_at(text):
        yield item, source


def iter_json_array_at(text: str) -> Iterator[tuple[Any, str, int]]:
    """:func:`iter_json_array`, each item also with where its source starts in ``text`` (so a
    loader can name the line of a bad record)."""
    end = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if not text.startswith("[", end):
        raise NotAJsonArray(type(json.loads(text)).__name__)
    end = _WHITESPACE.match(text, end + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", end):
        _expect_end(text, end + 1)
        return
    while True:
        start = end
        try:
            item, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            _fail(text)
        yield item, text[start:end], start
        end = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
        if text.startswith(",", end):
            end = _WHITESPACE.match(text, end + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", end):
            _expect_end(text, end + 1)
            return
        else:
            _fail(text)


def _expect_end(text: str, end: int) -> None:
    if _WHITESPACE.match(text, end).end() != len(text):  # type: ignore[union-attr]
        _fail(text)


def _fail(text: str) -> NoReturn:
    """Raise ``json.loads``'s error for ``text`` (the scan above found one)."""
    json.loads(text)
    raise AssertionError("iter_json_array found an error json.loads does not")  # pragma: no cover
