"""Records kept packed until a case runs, and JSON arrays read one record at a time.

Why (memory per case): a parsed record costs 3-4x its JSON text in Python objects, a
case holds its record from collection to the end of the run, and every xdist worker collects
every case: on a large run the records are most of each process's memory per case.
:class:`PackedRecord` keeps instead the record's own JSON, zlib-compressed (several times smaller
than its text), and rebuilds the record when a case asks for it (perf/run.py measures both).

Exactness: the blob is the record's own text from the file (``json.loads`` of it gives back
exactly what parsing the file gave: key order, big integers, ``NaN``, ``-0.0`` and escapes
included), so nothing is re-encoded at load time. The
loader validated the record before packing it, so :meth:`PackedRecord.unpack` does not validate
again: it uses ``model_construct``, which is only right for records whose fields are plain JSON
values (no nested models); :meth:`PackedRecord.pack` refuses any other model.

:func:`iter_json_array` keeps a whole file's records from existing at once: parsing a 100,000-case
file with one ``json.loads`` would build every record's objects before the first was packed.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, NoReturn, TypeVar, get_args, get_origin

from pydantic import BaseModel

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


@dataclass(frozen=True, slots=True)
class PackedRecord(Generic[M]):
    """One validated record as compressed JSON; :meth:`unpack` rebuilds it."""

    model: type[M]
    blob: bytes

    @classmethod
    def pack(cls, model: type[M], source: str) -> PackedRecord[M]:
        """Pack ``source``, the JSON text of an object ``model`` was validated from."""
        if not _is_flat(model):
            raise TypeError(f"{model.__name__} has nested models; unpack could not rebuild it")
        # surrogatepass: a record at hand may hold a lone surrogate; json.loads(bytes) reads it.
        return cls(model, zlib.compress(source.encode("utf-8", "surrogatepass"), _LEVEL))

    @classmethod
    def of_value(cls, model: type[M], raw: dict[str, Any]) -> PackedRecord[M]:
        """Pack a JSON object at hand (no source text: a record built in code)."""
        return cls.pack(model, json.dumps(raw, ensure_ascii=False, separators=(",", ":")))

    def unpack(self) -> M:
        """The record, rebuilt without validating it again (the loader did)."""
        return self.model.model_construct(**json.loads(zlib.decompress(self.blob)))


def unpacked(sample: Any) -> Any:
    """A case's sample as its runner wants it: a packed record unpacked, anything else as it is."""
    return sample.unpack() if isinstance(sample, PackedRecord) else sample


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
