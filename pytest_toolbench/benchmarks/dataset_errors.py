"""Errors and warnings for malformed benchmark data files, shared by every benchmark loader.

A bad dataset must fail loudly and point at the exact place to fix (file plus record index/id or
line/column), instead of surfacing later as a confusing KeyError deep inside a runner.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_toolbench.counting import counted


class DatasetError(ValueError):
    """A dataset file that cannot be used as it is.

    ``str()`` reads like ``ToolHop.json record #12 (id=117): answer must be a string`` or
    ``ToolHop.json line 3 column 7: Expecting ',' delimiter``.
    """

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        index: int | None = None,
        record_id: object = None,
        line: int | None = None,
        column: int | None = None,
    ):
        self.path = Path(path)
        self.message = message
        self.index = index
        self.record_id = record_id
        self.line = line
        self.column = column
        super().__init__(self._render())

    @property
    def location(self) -> str:
        """Where in the file the problem is ("record #12 (id=117)", "line 3 column 7", or "")."""
        parts: list[str] = []
        if self.index is not None:
            parts.append(f"record #{self.index}")
        if self.record_id is not None:
            parts.append(f"(id={_shown(self.record_id)})")
        if self.line is not None:
            parts.append(f"line {self.line}")
            if self.column is not None:
                parts.append(f"column {self.column}")
        return " ".join(parts)

    def _render(self) -> str:
        where = f"{self.path} {self.location}".rstrip()
        return f"{where}: {self.message}"


def _shown(value: object, limit: int = 60) -> str:
    """A value from the data as an error line shows it: as it is when short and printable,
    else its repr cut to ``limit`` (an id of megabytes, a control character, a lone surrogate
    the terminal could not even encode)."""
    text = str(value)
    if len(text) <= limit and text.isprintable() and not _SURROGATE.search(text):
        return text
    return _quoted(text, limit)


def _quoted(text: str, limit: int) -> str:
    """``text`` quoted, escaped to ASCII, cut after ``limit`` characters (``...`` says so)."""
    shown = repr(text[:limit]).encode("ascii", "backslashreplace").decode("ascii")
    return shown + ("..." if len(text) > limit else "")


class DatasetWarning(UserWarning):
    """Something suspicious but tolerated in a dataset (e.g. duplicate tool names in ToolHop)."""


#: How many bad records a run lists before it says "... and N more".
MAX_REPORTED_ERRORS = 50


class DatasetErrors(DatasetError):
    """Every bad record of a file at once, so one run shows the whole list to fix.

    ``str()`` has one line per record (up to ``MAX_REPORTED_ERRORS``, then a count of the rest).
    """

    def __init__(self, errors: list[DatasetError]):
        if not errors:
            raise ValueError("DatasetErrors needs at least one error")
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.path, first.message, index=first.index, record_id=first.record_id,
                         line=first.line, column=first.column)
        self.args = ("\n".join(error_lines(self)),)

    def __str__(self) -> str:
        return self.args[0]


def error_lines(exc: DatasetError, cap: int = MAX_REPORTED_ERRORS) -> list[str]:
    """One line per bad record (a single error gives one line), at most ``cap`` then a count."""
    errors = exc.errors if isinstance(exc, DatasetErrors) else [exc]
    lines = [DatasetError._render(e) for e in errors[:cap]]
    if len(errors) > cap:
        more = counted(len(errors) - cap, "more bad record")
        lines.append(f"... and {more} in {errors[cap].path}")
    return lines


def raise_collected(errors: list[DatasetError]) -> None:
    """Raise the collected errors (one: itself, several: :class:`DatasetErrors`), if any."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DatasetErrors(errors)


def data_text(path: Path, empty: str) -> str:
    """The whole text of a UTF-8 data file. Bytes that are not UTF-8 raise a one-line
    :class:`DatasetError` naming the file, the line and the byte in it (not a
    ``UnicodeDecodeError`` from the middle of a run); a file of nothing but whitespace raises
    one saying ``empty``."""
    return data_bytes_and_text(path, empty)[1]


def data_bytes_and_text(path: Path, empty: str) -> tuple[bytes, str]:
    """:func:`data_text` with the bytes it was decoded from (a loader that keeps records as byte
    ranges of the file, benchmarks/packed.py). The text is what text-mode reading gives: newlines
    ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, byte = _line_of_byte(raw, exc.start)
        raise DatasetError(path, f"not UTF-8 text ({exc.reason} at byte {byte} of the line)",
                           line=line) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise DatasetError(path, empty)
    return raw, text


def _line_of_byte(raw: bytes, offset: int) -> tuple[int, int]:
    """``(line number, byte within the line)`` of ``raw[offset]``, lines split as
    :func:`text_lines` splits them: a user fixing a JSON document of one line per record (ToolHop,
    Meta-Bench's pool) opens it at a line, not at a byte offset into megabytes."""
    before = raw[:offset].splitlines(keepends=True)
    if not before or before[-1].endswith((b"\n", b"\r")):
        return len(before) + 1, 0
    return len(before), len(before[-1])


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line of a UTF-8 text file, split as text-mode reading
    splits (``\\n``, ``\\r\\n``, ``\\r``); a line that is not UTF-8 raises a one-line
    :class:`DatasetError` naming file and line, not a ``UnicodeDecodeError`` from the middle of
    a run."""
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)",
                               line=number) from None


def json_value(path: Path, text: str, line: int | None = None) -> Any:
    """``json.loads(text)`` with a failure as one :class:`DatasetError` naming the place: JSON's
    own line and column for a whole document, ``line`` (and the column) for one line of a JSONL
    file; nesting too deep for the decoder (a ``RecursionError``) and a number too long for
    Python's int conversion included.

    The value is then held to :func:`check_record_texts`: one line of a JSONL file is one record,
    each item of a document that is an array is one (``record #i``), any other document is one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"invalid JSON: {exc.msg}", line=exc.lineno if line is None else line,
                           column=exc.colno) from None
    except RecursionError:
        raise DatasetError(path, "invalid JSON: nested too deeply", line=line) from None
    except ValueError:  # int's digit limit: a ValueError that is no JSONDecodeError
        raise too_long_number(path, text, line) from None
    if line is None and isinstance(value, list):
        if not source_passes_text_checks(text):  # else every item passes, being part of it
            for index, item in enumerate(value):
                check_record_texts(path, item, index=index)
    else:
        check_record_texts(path, value, line=line, source=text)
    return value


def is_int_digits_error(exc: ValueError) -> bool:
    """Whether ``exc`` is Python's refusal to convert a number with too many digits."""
    return "integer string conversion" in str(exc)


def too_long_number(path: Path, text: str, line: int | None = None) -> DatasetError:
    """The error for a number longer than Python converts to an int (``json.loads`` raises a bare
    ValueError for it), on the line of ``text`` where the first such number is."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()  # Python 3.10.7 and later
    found = re.search(rf"(?<=[\[,:\s])-?\d{{{limit + 1},}}", text)
    if line is None and found is not None:
        line = text.count("\n", 0, found.start()) + 1
    return DatasetError(path, f"invalid JSON: a number with more than {limit} digits", line=line)


# --- sizes and encodability of a record's texts --------------------------------------------------

#: The most characters one text of a record (a value or a key) may hold. The longest field of the
#: four upstream datasets is a few thousand characters; beyond 2 million a question or a tool
#: source cannot fit any model's context, and a case would send it, cache it and report it whole
#: (a 200 MB question was sent and written three times).
MAX_FIELD_CHARS = 2_000_000
#: The most one record may hold: the characters of all its texts plus one per value.
MAX_RECORD_CHARS = 16_000_000
#: A lone surrogate (``"\\ud800"`` in JSON) decodes, but no UTF-8 encoder takes it: the cache
#: key, the request and every report would fail on it, case after case.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON escape that may decode to a surrogate (``\\ud800`` to ``\\udfff``, hex digits of either
#: case): besides a surrogate in the text itself, the only way JSON can yield one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


#: Where a text is in a record: ``(parent, key)`` pairs, unrolled into a name only for an error
#: (a path tuple per value would cost the depth at every value: quadratic on a deep record).
_Where = tuple[Any, str | int] | None
#: Parts of a field name shown at each end of a deep path.
_SHOWN_PARTS = 4


def _field_name(where: _Where) -> str:
    """``functions[2]``, ``tools.'What is the ... ?'.name``: where a text is in a record."""
    parts: list[str | int] = []
    while where is not None:
        where, key = where
        parts.append(key)
    parts.reverse()
    if len(parts) > 2 * _SHOWN_PARTS:  # a deep path: its ends, and how deep
        depth = len(parts)
        return (_field_name_of(parts[:_SHOWN_PARTS]) + "..." +
                _field_name_of(parts[-_SHOWN_PARTS:], nested=True) + f" ({depth} levels deep)")
    return _field_name_of(parts)


def _field_name_of(parts: list[str | int], nested: bool = False) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            shown = part if part.isidentifier() and len(part) <= 40 else _quoted(part, 40)
            out += f".{shown}" if out or nested else shown
    return out


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_FIELD_CHARS:
        return f"{len(text):,} characters, more than the {MAX_FIELD_CHARS:,} one text may hold"
    if not text.isascii():
        bad = _SURROGATE.search(text)
        if bad is not None:
            return (f"text that cannot be encoded as UTF-8 (a lone surrogate "
                    f"U+{ord(bad.group()):04X} at character {bad.start()})")
    return None


def source_passes_text_checks(source: str) -> bool:
    """Whether every value parsed from the JSON text ``source`` passes :func:`check_record_texts`,
    decided from the text alone in C-speed scans.

    A decoded text is never longer than its JSON spelling, and a record's size as counted there
    (one per value plus the characters of its texts and keys) never exceeds its JSON text's
    length; so a text of at most :data:`MAX_FIELD_CHARS` characters (below
    :data:`MAX_RECORD_CHARS`) holds no text and no record over either bound, and with neither a
    surrogate nor a surrogate escape in it, no lone surrogate. False means only "walk it"."""
    return (len(source) <= MAX_FIELD_CHARS
            and ("\\u" not in source or _SURROGATE_ESCAPE.search(source) is None)
            and (source.isascii() or _SURROGATE.search(source) is None))


def check_record_texts(path: str | Path, record: Any, *, index: int | None = None,
                       record_id: object = None, line: int | None = None,
                       source: str | None = None) -> None:
    """Refuse a record whose texts would fail or flood every case: a text (value or key) over
    :data:`MAX_FIELD_CHARS`, a record over :data:`MAX_RECORD_CHARS`, a lone surrogate. One
    :class:`DatasetError` naming the file, the record (index, id or line) and the field.

    Shared by every benchmark's loader (``json_value``, ToolHop's array reader, FamilyTool's KG),
    so the four datasets meet the same bounds. Walks the record without recursion (a record is
    as deep as the JSON decoder allowed). ``source``: the JSON text the record was parsed from,
    if at hand; a record whose text cannot fail (:func:`source_passes_text_checks`)
    is not walked, since walking every value of every record was most of a large file's check
    time before the first model call; any other is walked, so its error names the field."""
    if source is not None and source_passes_text_checks(source):
        return
    size = 0
    stack: list[tuple[_Where, Any]] = [(None, record)]
    while stack:
        where, value = stack.pop()
        size += 1
        problem = None
        if isinstance(value, str):
            size += len(value)
            problem = _text_problem(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                key_problem = _text_problem(key) if isinstance(key, str) else None
                if key_problem is not None:
                    problem = f"a key: {key_problem}"
                    break
                size += len(key) if isinstance(key, str) else 0
                stack.append(((where, key), item))
        elif isinstance(value, list):
            stack.extend(((where, i), item) for i, item in enumerate(value))
        if problem is not None:
            field = f"field {_field_name(where)}: " if where is not None else ""
            raise DatasetError(path, f"{field}{problem}", index=index, record_id=record_id, line=line)
    if size > MAX_RECORD_CHARS:
        raise DatasetError(path, f"the record holds {size:,} characters, more than the "
                                 f"{MAX_RECORD_CHARS:,} one record may hold",
                           index=index, record_id=record_id, line=line)


def describe_validation_error(exc: ValidationError, string_fields: tuple[str, ...] = ()) -> str:
    """pydantic's errors as one line: ``loc: msg; loc: msg`` (``string_fields`` read "must be a
    string" instead of pydantic's wording)."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = "must be a string" if err["type"] == "string_type" and loc in string_fields else err["msg"]
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
