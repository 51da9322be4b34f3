"""A Ctrl-C or SIGTERM whose traceback pytest can print.

Python (3.11 on) gives a traceback entry no line number (``tb_lineno`` None) when the frame was
stopped at an instruction that has none: a signal handler's ``KeyboardInterrupt`` raised while a
frame runs such an instruction (a ``with`` block's exit, an exception handler's clean-up). pytest's
terminal reporter then fails on the interruption it reports (``TracebackEntry.lineno``:
``None - 1``, a TypeError inside ``pytest_keyboard_interrupt``): the run ended with exit 1 instead
of 2, its session end took it for a finished run (an ``-n 0`` run's stopped case was named
"not run" beside its own Allure result) and the terminal showed pytest's crash. The same happens
to plain pytest (pytest-dev/pytest-xdist#1196); here a signal comes at any instruction of the case
loop, so about one interrupted run in several hit it on a busy machine.
"""

from __future__ import annotations

import contextlib
from types import TracebackType

import pytest


def _has_line(tb: TracebackType) -> bool:
    """Python 3.11.3 on says None for an entry with no line; 3.11.2 said -1 (pytest then
    printed line -2 of the file)."""
    return tb.tb_lineno is not None and tb.tb_lineno > 0


def _line_of(tb: TracebackType) -> int:
    """The entry's line, else that of the nearest instruction before it that has one (the
    statement whose clean-up it is), else its code's first line."""
    if _has_line(tb):
        return int(tb.tb_lineno)
    code = tb.tb_frame.f_code
    line = code.co_firstlineno
    for start, _end, at in code.co_lines():
        if start > tb.tb_lasti:
            break
        if at is not None:
            line = at
    return line


def _numbered(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` itself where every entry has a line number, else the same entries, each with one."""
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    if all(_has_line(entry) for entry in entries):
        return entries[0] if entries else None
    mended: TracebackType | None = None
    for entry in reversed(entries):
        mended = TracebackType(mended, entry.tb_frame, entry.tb_lasti, _line_of(entry))
    return mended


def number_traceback_lines(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Give every entry of ``excinfo``'s traceback, and of the exceptions chained to it, a line
    number (in place), so that pytest can print it. Reaches into ``ExceptionInfo``'s private
    ``_excinfo`` (no public setter): where that is gone, nothing is changed."""
    seen: set[int] = set()
    exc: BaseException | None = excinfo.value
    while exc is not None and id(exc) not in seen:  # __cause__/__context__, as pytest prints
        seen.add(id(exc))
        tb = _numbered(exc.__traceback__)
        if tb is not exc.__traceback__:
            exc.__traceback__ = tb
        exc = exc.__cause__ or exc.__context__
    raw = excinfo.tb
    tb = _numbered(raw)
    if tb is not raw and tb is not None:
        with contextlib.suppress(AttributeError):  # another pytest's ExceptionInfo: left as is
            excinfo._excinfo = (excinfo.type, excinfo.value, tb)  # type: ignore[attr-defined]
            excinfo._traceback = None  # type: ignore[attr-defined]  # built again from tb
