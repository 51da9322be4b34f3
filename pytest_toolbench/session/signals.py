"""Ctrl-C (SIGINT) and SIGTERM (CI cancelling a job) in the controller.

The first one ends the run like Ctrl-C: pytest unwinds the test loop, and the session end still
writes the summary and every report, marked partial (exit status 2). A second one must not break
that: raised as a ``KeyboardInterrupt`` inside the session end (plotting, a report half written)
it left a traceback, exit status 130 and no JUnit file. So from the first signal on, and from the
session end on whether or not one came, a signal is only noted: one line says the reports are
being finished, and the run exits 2 once they are. A further one after that stops the process
at once (exit 2, the reports not all written), for a session end that would not finish.

The first one does not cut into a test report either: while the controller takes one in (its
journal line, JUnit's testcase), it waits for the end of that report (:meth:`Interrupts.holding`);
raised half-way, it left an unnamed testcase and the case's result out of the JUnit file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Callable

import pytest

from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.session.state import STATE_KEY

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTS_KEY = pytest.StashKey["Interrupts"]()


class Interrupts:
    """The controller's SIGINT/SIGTERM handler (see the module docstring)."""

    def __init__(self, config: pytest.Config, write: Callable[[str], None] | None = None) -> None:
        self.config = config
        #: From the first signal or the session end on: signals are noted, not raised.
        self.deferring = False
        #: The signal noted while deferring (None: none came), and how many came.
        self.late: str | None = None
        self.late_count = 0
        #: Nesting depth of :meth:`holding`, and the first signal held back by it.
        self._holding = 0
        self._pending: str | None = None
        self._previous: dict[int, object] = {}
        self._write = write or _write_stderr

    def install(self) -> None:
        for signum in _SIGNALS:
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self.handle)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()

    def finishing(self) -> None:
        """The session end has begun: from now on a signal cannot cut a report in half."""
        self.deferring = True

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Inside, the first signal is raised only at the block's end (see the module docstring)."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding and self._pending is not None:
                name, self._pending = self._pending, None
                raise KeyboardInterrupt(name)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self.deferring:
            self.deferring = True
            st = self.config.stash.get(STATE_KEY, None)
            if st is not None and st.interrupted_by is None:
                st.interrupted_by = name
            if self._holding:
                self._pending = name
                return
            raise KeyboardInterrupt(name)
        self.late_count += 1
        if self.late_count == 1:
            self.late = name
            self._write(f"pytest-toolbench: {name}: finishing the reports first, then exit status "
                        f"{int(ToolbenchExit.INTERRUPTED)} ({name} once more stops at once, "
                        "without them)")
            return
        self._write(f"pytest-toolbench: {name} again: stopping at once, the reports may be "
                    f"incomplete (exit status {int(ToolbenchExit.INTERRUPTED)})")
        _exit_now(int(ToolbenchExit.INTERRUPTED))


#: How long the exit hooks (stopping a vLLM server, the SDK process) get before a forced exit.
EXIT_HOOKS_S = 10.0


def _exit_now(status: int) -> None:
    """Exit without unwinding the session end that would not finish: the interpreter's exit
    hooks still stop the run's servers (on a thread, with a deadline: the main thread may hold a
    lock one of them needs), then the process ends."""
    hooks = threading.Thread(target=atexit._run_exitfuncs, name="toolbench-exit-hooks",
                             daemon=True)
    hooks.start()
    hooks.join(EXIT_HOOKS_S)
    os._exit(status)


def _write_stderr(line: str) -> None:
    """One line on stderr from a signal handler: a raw write, since the handler may have stopped
    the main thread inside a write to ``sys.stderr``, which must not be entered again."""
    try:
        os.write(2, f"\n{line}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def install_interrupts(config: pytest.Config) -> Interrupts | None:
    """Install the handler in the controller (main thread only); the previous handlers come
    back at the end of the session."""
    if threading.current_thread() is not threading.main_thread():
        return None
    interrupts = Interrupts(config)
    interrupts.install()
    config.stash[INTERRUPTS_KEY] = interrupts
    config.add_cleanup(interrupts.restore)
    return interrupts


def interrupts_of(config: pytest.Config) -> Interrupts | None:
    return config.stash.get(INTERRUPTS_KEY, None)
