"""A signal at an instruction without a line number (session/traceback_lines.py): pytest's
report of the interruption crashed on its traceback (exit 1, not 2)."""

from __future__ import annotations

import dis
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pytest_toolbench.session.traceback_lines import number_traceback_lines

REPO = Path(__file__).resolve().parents[1]

#: A test whose KeyboardInterrupt carries, below the test's own frame, an entry stopped at a
#: line-less instruction of a finished frame: an exception handler's entry (PUSH_EXC_INFO), where
#: a signal handler's KeyboardInterrupt can land.
STOPPED = '''
import dis
import sys
import types


def handler_entry():
    try:
        return sys._getframe()
    except ValueError:
        pass


def lineless(frame):
    return next(i.offset for i in dis.get_instructions(frame.f_code) if i.positions.lineno is None)


def test_stopped_at_a_line_less_instruction():
    frame = handler_entry()
    entry = types.TracebackType(None, frame, lineless(frame), -1)
    assert entry.tb_lineno in (None, -1)  # (Python 3.11.3 on / 3.11.2)
    raise KeyboardInterrupt().with_traceback(entry)
'''


def _handler_entry() -> types.FrameType:
    try:
        return sys._getframe()
    except ValueError:
        raise


def _lineless_entry() -> types.TracebackType:
    frame = _handler_entry()
    offset = next(i.offset for i in dis.get_instructions(frame.f_code)
                  if i.positions is not None and i.positions.lineno is None)
    entry = types.TracebackType(None, frame, offset, -1)
    assert entry.tb_lineno in (None, -1)  # no line: Python 3.11.3 on says None, 3.11.2 -1
    return entry


def test_every_entry_gets_a_line_and_pytest_prints_the_interruption():
    cause = ValueError("inner").with_traceback(_lineless_entry())
    interrupt = KeyboardInterrupt()
    interrupt.__context__ = cause
    excinfo = pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, interrupt, _lineless_entry()))
    if excinfo.tb.tb_lineno is None:  # pytest's own report of it, unmended (3.11.2: line -2)
        with pytest.raises(TypeError):
            excinfo.getrepr(funcargs=True)

    number_traceback_lines(excinfo)
    first = _handler_entry.__code__.co_firstlineno
    assert excinfo.tb.tb_lineno is not None and first <= excinfo.tb.tb_lineno <= first + 4
    assert cause.__traceback__ is not None and cause.__traceback__.tb_lineno > 0
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))


def test_a_traceback_with_every_line_is_left_as_it_is():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        excinfo = pytest.ExceptionInfo.from_current()
    raw = excinfo.tb
    number_traceback_lines(excinfo)
    assert excinfo.tb is raw


def test_a_run_so_interrupted_ends_as_interrupted_not_as_pytests_crash(tmp_path):
    (tmp_path / "test_stopped.py").write_text(textwrap.dedent(STOPPED))
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_stopped.py"),
                           "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "KeyboardInterrupt" in proc.stdout and "TypeError" not in proc.stdout + proc.stderr
