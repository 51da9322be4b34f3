"""Plain-text tables that never lose a column, whatever the terminal width.

rich shrinks a table that is wider than the console by cutting cells (``…``) and, past a point,
by dropping whole columns to zero width (a 5-metric breakdown at 80 columns printed ``|||``
where its label columns were). :func:`render_table` instead tries, in order:

1. a Markdown-style pipe table on one header line (pasteable into GitHub as is);
2. the same table with headers wrapped between words and the text columns marked ``wrap``
   wrapped onto several lines (numbers never wrap);
3. a vertical layout, one block per row (``header: value`` lines), which fits any width.

Every cell's text is always shown in full (a word longer than the width stays on its line).
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.word_wrap import wrap_words

#: A wrapped text column never gets narrower than this (unless its longest word is shorter).
MIN_WRAP = 12

#: The width of text written anywhere but a terminal (a CI log, a file, a pipe into less).
DEFAULT_WIDTH = 80


def output_width(stream: object = None) -> int:
    """The terminal's width when ``stream`` (default stdout) is a terminal, else 80: a table
    sized for a wide terminal would be cut or wrapped mid-cell in a CI log or a pasted issue."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


@dataclass
class TextTable:
    columns: list[str]
    rows: list[list[str]]
    #: Per column: "l" or "r" (default: first column left, the others right).
    align: list[str] = field(default_factory=list)
    #: Columns whose cells may wrap between words (free text: gate reasons, labels).
    wrap: set[int] = field(default_factory=set)
    #: Always wrap headers between words (a paper's table: columns as narrow as their numbers).
    narrow_headers: bool = False

    def __post_init__(self) -> None:
        if not self.align:
            self.align = ["l"] + ["r"] * (len(self.columns) - 1)
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"row has {len(row)} cells, header {len(self.columns)}: {row!r}")
        # Cells hold data (labels, groups, gate reasons quoting an error): escaped before the
        # widths are measured, so a control sequence can neither act nor shift a column.
        self.columns = [safe_text(str(c)) for c in self.columns]
        self.rows = [[safe_text(str(c)) for c in row] for row in self.rows]


def table_width(widths: Sequence[int]) -> int:
    """``| a | b |``: each column is padded by one space on each side, plus the pipes."""
    return sum(widths) + 3 * len(widths) + 1


def render_table(t: TextTable, width: int) -> list[str]:
    """The table's lines, none longer than ``width`` unless a single word is."""
    return pipe_table(t, width) or render_vertical(t, width)


def pipe_table(t: TextTable, width: int) -> list[str] | None:
    """Steps 1 and 2 of the module docstring: the pipe table, or None if it cannot fit."""
    cells = [[str(c) for c in row] for row in t.rows]
    natural = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(t.columns)]
    if table_width(natural) <= width and not t.narrow_headers:
        return _pipe_table(t, cells, natural)
    widths = _wrapped_widths(t, cells, width)
    return None if widths is None else _pipe_table(t, cells, widths)


#: Inside a word too wide for its column (a model or scenario name), a line may end after these.
_BREAK_AFTER = re.compile(r"(?<=[-/_])(?=\S)")


def _units(text: str) -> list[tuple[str, bool]]:
    """The pieces a cell can wrap between, each with whether a space comes before it."""
    return [(part, i > 0 and j == 0)
            for i, word in enumerate(text.split())
            for j, part in enumerate(_BREAK_AFTER.split(word))]


def _longest_word(text: str) -> int:
    """The narrowest a wrapped cell can be: its longest piece that :func:`_wrap` cannot break."""
    return max((len(p) for p, _ in _units(text)), default=0)


def _wrapped_widths(t: TextTable, cells: list[list[str]], width: int) -> list[int] | None:
    """Column widths with wrapped headers (and wrapped ``wrap`` columns), or None if even
    that is wider than ``width``. A wrapped column keeps ``MIN_WRAP`` characters if it can."""
    for floor in (MIN_WRAP, 0):
        widths = _shares(t, cells, width, floor)
        if widths is not None:
            return widths
    return None


def _shares(t: TextTable, cells: list[list[str]], width: int, floor: int) -> list[int] | None:
    widths = []
    for i, header in enumerate(t.columns):
        header_min = max((len(w) for w in header.split()), default=0)  # headers keep words whole
        if i in t.wrap:
            longest = max([header_min, *(_longest_word(r[i]) for r in cells)])
            widths.append(max(longest, min(floor, max([len(header), *(len(r[i]) for r in cells)]))))
        else:
            widths.append(max([header_min, *(len(r[i]) for r in cells)]))
    spare = width - table_width(widths)
    if spare < 0:
        return None
    # Share the spare room among the wrapped columns in proportion to what each lacks of its
    # natural width (so a long gate name does not squeeze its reason into a sliver).
    lacking = {i: max([len(t.columns[i]), *(len(r[i]) for r in cells)]) - widths[i]
               for i in t.wrap}
    total = sum(lacking.values())
    if total:
        for i, lack in lacking.items():
            grow = min(lack, spare * lack // total)
            widths[i] += grow
        left = width - table_width(widths)
        for i in sorted(t.wrap, key=lambda k: -lacking[k]):  # what rounding left over
            natural = max([len(t.columns[i]), *(len(r[i]) for r in cells)])
            extra = min(left, natural - widths[i])
            if extra > 0:
                widths[i] += extra
                left -= extra
    return widths


def _wrap(text: str, width: int) -> list[str]:
    """Between words; inside a word (after ``-``, ``/`` or ``_``) only when some word is wider
    than the column: a name may break there, a sentence's ``--max-retries`` does not."""
    if len(text) <= width:
        return [text]
    if all(len(w) <= width for w in text.split()):
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    lines, line = [], ""
    for piece, spaced in _units(text):
        add = (" " if spaced and line else "") + piece
        if line and len(line) + len(add) > width:
            lines.append(line)
            line = piece
        else:
            line += add
    return lines + [line]


def _pipe_table(t: TextTable, cells: list[list[str]], widths: list[int]) -> list[str]:
    def line(parts: Sequence[str]) -> str:
        padded = [p.rjust(w) if a == "r" else p.ljust(w) for p, w, a in zip(parts, widths, t.align)]
        return ("| " + " | ".join(padded) + " |").rstrip()

    def block(row: Sequence[str], *, bottom: bool) -> list[str]:
        wrapped = [_wrap(c, w) for c, w in zip(row, widths)]
        height = max(len(w) for w in wrapped)
        if bottom:  # headers: the last line of each is on the same line (as rich draws them)
            wrapped = [[""] * (height - len(w)) + w for w in wrapped]
        else:
            wrapped = [w + [""] * (height - len(w)) for w in wrapped]
        return [line([w[k] for w in wrapped]) for k in range(height)]

    out = block(t.columns, bottom=True)
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        out += block(row, bottom=False)
    return out


def render_vertical(t: TextTable, width: int) -> list[str]:
    """One block per row: ``* <first header>: <first cell>``, then ``  <header>: <cell>``
    lines, values aligned and wrapped under themselves."""
    out: list[str] = []
    keys = t.columns[1:]
    key_width = max((len(k) for k in keys), default=0)
    for row in t.rows:
        out += _wrap_hanging(f"* {t.columns[0]}: {row[0]}" if t.columns[0] else f"* {row[0]}",
                             width, 4)
        for key, value in zip(keys, row[1:]):
            head = f"    {(key + ':').ljust(key_width + 1)} "
            out += _wrap_hanging(head + str(value), width, len(head))
    return out


def _wrap_hanging(text: str, width: int, indent: int) -> list[str]:
    return wrap_words(text, width, " " * min(indent, width // 2))
