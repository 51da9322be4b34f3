"""Errors and warnings for malformed benchmark data files, shared by every benchmark loader.

A bad dataset must fail loudly and point at the exact place to fix (file plus record index/id or
line/column), instead of surfacing later as a confusing KeyError deep inside a runner.
"""

from __future__ import annotations

from pathlib import Path


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
