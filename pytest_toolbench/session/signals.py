"""Ctrl-C (SIGINT), SIGTERM (CI cancelling a job) and SIGHUP (the terminal gone: an SSH session
dropped, a terminal window closed) in the controller.

The first one ends the run like Ctrl-C: pytest unwinds the test loop, and the session end still
writes the summary and every report, marked partial (exit status 2). A second one must not break
that: raised as a ``KeyboardInterrupt`` inside the session end (plotting, a report half written)
it left a traceback, exit status 130 and no JUnit file. So from the first signal on, and from the
session end on whether or not one came, a signal is only noted: one line says the reports are
being finished. The third signal of the run, whenever the first came, stops the process at once
(exit 2, the reports not all written), for a session end that would not finish; counted from the
session end's first one instead, two signals there 0.1 s apart (a CI runner's SIGTERM and its
tool's own) stopped the reports that the README promises a second signal does not cut short.

A signal that first comes in the session end does not change how the run ended: the test loop
was over, so the session end had already decided the run's story (complete or not, its gates,
its exit status) and may have written part of it (the run folder, the JSON report); the JUnit
file is written last. Making only the exit status (and the terminal) say "interrupted" left
every report disagreeing with it; so the reports are finished as decided and the run exits with
the status they record.

Nor does the first one cut the session start short: pytest skips the session end of a session
whose start was interrupted, so a signal while xdist started its workers or the controller read
the selection's data left no report at all, and an earlier run's ``--toolbench-json`` or
``--junitxml`` at that path stood as this run's. There it is held
(:meth:`Interrupts.held_to_the_session_end`: the session start goes on to its end, seconds) and
raised as the collection begins (:meth:`Interrupts.raise_held`), from where pytest runs the
session end (session/controller.py; not while a managed vLLM server is prepared, which may take
minutes). A Ctrl-C at a terminal reaches the whole process group, the workers too: one that
xdist was still setting up dies of it and xdist's setup fails; that failure, with the signal
held, is the interruption itself, and the start goes on without it (session/controller.py
``pytest_sessionstart_workers``). Such a run, or one under xdist that a signal stops before any
worker reported its node ids, has collected nothing: its session end collects the selection then
(running no case), so its reports name every case it left and JUnit has a testcase for each, as
with ``-n 0``.

The first one does not cut into a test report either: while the controller takes one in (its
journal line, JUnit's testcase), it waits for the end of that report (:meth:`Interrupts.holding`);
raised half-way, it left an unnamed testcase and the case's result out of the JUnit file.

A SIGTERM sent to the controller alone (``kill PID``, ``docker stop``) reached no worker: they ran
on, sent more requests and journalled results after the session end had read their journals, so
the report named as missing cases whose results lay in a worker's journal. The first SIGTERM is
passed on to the run's local workers as the SIGINT Ctrl-C gives them, so they stop as after
Ctrl-C (a SIGTERM to the whole group kills them at once), and the first SIGHUP as a SIGHUP (a
login shell passes a hang-up on to the whole group, but a run that leads its session, as
``ssh -t host pytest ...`` can make it, gets it alone).

SIGHUP is handled only where it would kill the process (``nohup`` sets it ignored, and a run so
started keeps running). A hang-up leaves the terminal's descriptors failing every write with EIO,
and pytest keeps copies of them (its output capture): each one still open on the hung-up terminal
is pointed at ``/dev/null`` first, so the session end writes its reports instead of failing on its
first terminal line. A SIGHUP sent while the terminal still works leaves the terminal alone. xdist's
workers share the controller's process group, so they get a hang-up too, as they get Ctrl-C: they
detach from the terminal the same way and stop as Ctrl-C stops them, once: the SIGHUP the
controller passes on after the shell's is only a detach.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import stat
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Callable

import pytest

from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.session.state import STATE_KEY

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The signal, counted over the whole run, that no longer waits for the reports.
STOP_AT_ONCE = 3
INTERRUPTS_KEY = pytest.StashKey["Interrupts"]()


class Interrupts:
    """The controller's SIGINT/SIGTERM/SIGHUP handler (see the module docstring)."""

    def __init__(self, config: pytest.Config, write: Callable[[str], None] | None = None) -> None:
        self.config = config
        #: From the first signal or the session end on: signals are noted, not raised.
        self.deferring = False
        #: How many signals came in all (the :data:`STOP_AT_ONCE`-th stops the process).
        self.count = 0
        #: Nesting depth of :meth:`holding`, the first signal held back by it or by
        #: :meth:`held_to_the_session_end`, and whether the latter's block is running.
        self._holding = 0
        self._pending: str | None = None
        self._starting = False
        #: The signal :meth:`held_to_the_session_end` held, to pass on when it is raised.
        self._pending_signum: int | None = None
        self._previous: dict[int, object] = {}
        self._write = write or _write_stderr
        #: The terminals this process writes to, for a hang-up (:func:`detach_hung_up_terminal`).
        self.terminals = terminal_devices()
        #: The pids of the run's local xdist workers, by worker id (:func:`note_worker`).
        self.workers: dict[str, int] = {}

    def install(self) -> None:
        for signum in _SIGNALS:
            previous = signal.getsignal(signum)
            if signum == signal.SIGHUP and previous is not signal.SIG_DFL:
                continue  # nohup's SIG_IGN (or someone's own handler): theirs to keep
            self._previous[signum] = previous
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

    @contextlib.contextmanager
    def held_to_the_session_end(self) -> Iterator[None]:
        """Inside (the session start), the first signal is noted and raised only by
        :meth:`raise_held`, where pytest runs the session end (see the module docstring)."""
        self._starting = True
        try:
            yield
        finally:
            self._starting = False

    def start_cut_short(self) -> str | None:
        """The signal :meth:`held_to_the_session_end` is holding, if one came (its name)."""
        return self._pending if self._starting else None

    def note(self, line: str) -> None:
        """One line on stderr (the handler's own way of writing)."""
        self._write(line)

    def raise_held(self) -> None:
        """Raise the first signal :meth:`held_to_the_session_end` held, if one came, passing it
        on to the workers first."""
        if self._pending is not None and not self._holding:
            name, self._pending = self._pending, None
            if self._pending_signum is not None:
                self._pass_on(self._pending_signum)
                self._pending_signum = None
            raise KeyboardInterrupt(name)

    def _pass_on(self, signum: int) -> None:
        """A first SIGTERM or SIGHUP to the local workers (see the module docstring)."""
        if signum in (signal.SIGTERM, signal.SIGHUP):
            self._stop_workers(signal.SIGINT if signum == signal.SIGTERM else signal.SIGHUP)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.count += 1
        if signum == signal.SIGHUP:
            detach_hung_up_terminal(self.terminals)
        if not self.deferring:
            self.deferring = True
            st = self.config.stash.get(STATE_KEY, None)
            if st is not None and st.interrupted_by is None:
                st.interrupted_by = name
            if self._starting:
                # passed on to the workers only when raised: xdist is still setting them up,
                # and one stopped now failed its setup with an INTERNALERROR (no session end)
                self._pending, self._pending_signum = name, signum
                return
            self._pass_on(signum)
            if self._holding:
                self._pending = name
                return
            raise KeyboardInterrupt(name)
        if self.count < STOP_AT_ONCE:
            self._write(f"pytest-toolbench: {name}: finishing the reports first, then "
                        f"{self._exit_words()} (a third signal stops at once, without them)")
            return
        self._write(f"pytest-toolbench: {name} again: stopping at once, the reports may be "
                    f"incomplete (exit status {int(ToolbenchExit.INTERRUPTED)})")
        _exit_now(int(ToolbenchExit.INTERRUPTED))

    def _exit_words(self) -> str:
        """The exit status a noted signal leaves the run with: 2 if it was interrupted before its
        session end, else the one its reports record (see the module docstring)."""
        st = self.config.stash.get(STATE_KEY, None)
        if st is not None and st.interrupted_by is not None:
            return f"exit status {int(ToolbenchExit.INTERRUPTED)}"
        return "the exit status they record: the run had ended before the signal"

    def _stop_workers(self, signum: int) -> None:
        """``signum`` to each worker still a child of this process (a pid that ended and was
        reused since is not)."""
        for pid in self.workers.values():
            if _parent_of(pid) == os.getpid():
                with contextlib.suppress(OSError):  # ended meanwhile
                    os.kill(pid, signum)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat_line = fh.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and ")", so split after its last ")"
    return int(stat_line[stat_line.rindex(b")") + 2:].split()[1])


def note_worker(config: pytest.Config, node: Any) -> None:
    """At an xdist worker's start (``pytest_configure_node``): keep its pid when it runs on this
    machine. execnet's process information is read from the cache xdist fills just before this
    hook (pytest-cov reads it the same way); asking the worker for it would wait on the worker's
    busy main thread. Without it, a SIGTERM reaches the workers as before: not at all."""
    interrupts = interrupts_of(config)
    gateway = getattr(node, "gateway", None)
    spec = getattr(gateway, "spec", None)
    if interrupts is None or spec is None or not spec.popen or spec.via:
        return
    pid = getattr(getattr(gateway, "_cache_rinfo", None), "pid", None)
    if isinstance(pid, int):
        interrupts.workers[str(gateway.id)] = pid


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


def terminal_devices() -> frozenset[int]:
    """The device numbers of the terminals on stdin, stdout and stderr (none: an empty set)."""
    devices = set()
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                devices.add(os.fstat(fd).st_rdev)
    return frozenset(devices)


def detach_hung_up_terminal(terminals: frozenset[int]) -> None:
    """Point every descriptor of this process still open on one of ``terminals``, now hung up
    (``isatty`` is false on a terminal that hung up), at ``/dev/null``: stdout and stderr, and the
    copies pytest's capture keeps to restore them. A terminal still working is left alone."""
    if not terminals:
        return
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:  # no /proc: writes to the terminal fail, as they would have
        return
    try:
        for fd in fds:
            try:
                st = os.fstat(fd)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev in terminals and not os.isatty(fd):
                    os.dup2(devnull, fd, inheritable=os.get_inheritable(fd))
            except OSError:  # closed meanwhile (listdir's own descriptor among them)
                continue
    finally:
        os.close(devnull)


def install_worker_hangup() -> None:
    """In an xdist worker: a hang-up detaches it from the terminal, then stops it as Ctrl-C
    does (which reaches the workers too, as Python's ``KeyboardInterrupt``). Left as it is when
    SIGHUP would not kill the worker."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL):
        terminals = terminal_devices()
        raised = False

        def hang_up(signum: int, frame: FrameType | None) -> None:
            nonlocal raised
            detach_hung_up_terminal(terminals)
            if not raised:  # once: a second would cut into the worker's own session end
                raised = True
                raise KeyboardInterrupt(signal.Signals(signum).name)

        signal.signal(signal.SIGHUP, hang_up)


@contextlib.contextmanager
def worker_interrupts_held() -> Iterator[None]:
    """Inside, in an xdist worker's main thread, a SIGINT or SIGHUP is noted and handed to its
    handler (Python's ``KeyboardInterrupt``, :func:`install_worker_hangup`'s) only at the
    block's end. Guards what must be written together or not at all: a case's line in the
    worker's journal and its Allure note (session/fixtures.py ``case_result``). Stopped between
    the two, the case counted as run (its line is read by the run's end, so no "not run" result)
    while Allure dropped the bare result of its cut-short test (not yet known as run): the case
    had no Allure result at all. Elsewhere (another thread, no Python handler) it holds nothing."""
    held: dict[int, Callable[[int, FrameType | None], Any]] = {}
    came: list[int] = []
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGHUP):
            handler = signal.getsignal(signum)
            if callable(handler):
                held[signum] = handler
                signal.signal(signum, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        if came:  # the first one, as it would have come: its handler raises what it raises
            held[came[0]](came[0], None)


def interrupts_held(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Inside, a first signal waits for the block's end: the controller's (:meth:`Interrupts.
    holding`; ``-n 0`` runs its cases there) or an xdist worker's (:func:`worker_interrupts_held`)."""
    interrupts = interrupts_of(config)
    return interrupts.holding() if interrupts is not None else worker_interrupts_held()


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
