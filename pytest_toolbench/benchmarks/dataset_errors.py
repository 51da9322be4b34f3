"""Errors and warnings for malformed benchmark data files, shared by every benchmark loader.

A bad dataset must fail loudly and point at the exact place to fix (file plus record index/id or
line/column), instead of surfacing later as a confusing KeyError deep inside a runner.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError


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
            parts.append(f"(id={self.record_id})")
        if self.line is not None:
            parts.append(f"line {self.line}")
            if self.column is not None:
                parts.append(f"column {self.column}")
        return " ".join(parts)

    def _render(self) -> str:
        where = f"{self.path} {self.location}".rstrip()
        return f"{where}: {self.message}"


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
        lines.append(f"... and {len(errors) - cap} more bad record(s) in {errors[cap].path}")
    return lines


def raise_collected(errors: list[DatasetError]) -> None:
    """Raise the collected errors (one: itself, several: :class:`DatasetErrors`), if any."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DatasetErrors(errors)


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
    file; nesting too deep for the decoder (a ``RecursionError``) included."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"invalid JSON: {exc.msg}", line=exc.lineno if line is None else line,
                           column=exc.colno) from None
    except RecursionError:
        raise DatasetError(path, "invalid JSON: nested too deeply", line=line) from None


def describe_validation_error(exc: ValidationError, string_fields: tuple[str, ...] = ()) -> str:
    """pydantic's errors as one line: ``loc: msg; loc: msg`` (``string_fields`` read "must be a
    string" instead of pydantic's wording)."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = "must be a string" if err["type"] == "string_type" and loc in string_fields else err["msg"]
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
