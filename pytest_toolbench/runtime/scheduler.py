"""Run cases ahead of pytest's order, up to ``--concurrency`` at a time, in one process.

pytest runs one test at a time. A model call takes seconds, so a process that waited for each test
in turn would leave the endpoint idle. Each process therefore owns one asyncio event loop; a test
submits its own case *and the cases pytest will run next in this process* (see
:func:`~pytest_toolbench.runtime.upcoming.new_upcoming_items`), then runs the loop until its own
result is in. The loop keeps at most ``concurrency`` cases in flight (FIFO, so the case pytest is
waiting for is never starved by later ones), and the backends share its connection pool. Where
the model holds its requests to ``concurrency`` itself (``limits_its_requests``: the openai backend,
the shared SDK process) a few more cases run (:func:`ready_cases`): their requests wait at the
model's limit, so a place freed at the endpoint is taken at once, not after the reply has crossed
to this process and a new case has been started and its request built and sent over.

The loop runs on the thread that waits (pytest's main thread), not in a thread of its own. While
pytest works between two cases (reports, the next test's set-up) the loop is paused and replies
wait in their socket or pipe, which costs them a millisecond or two against an endpoint's tens to
thousands, provided every test gives the loop a pass, one whose result is already in too
(:meth:`CaseScheduler._one_pass`). A loop thread beside pytest's cost far more: every case
crossed threads twice (the loop thread ran it while pytest worked, then pytest blocked on its
future and was woken), and the runner's work and pytest's took the GIL from each other at a fine
grain; pytest's own per-test code took 2.2x its floor's time, 1.46x with the loop here
(perf/README.md, "A loop thread in the pytest process"). The run-ahead does not suffer: a test
waits only for a case submitted before the ones after it, and every loop pass serves them all.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import base_fields, error_result
from pytest_toolbench.results.case_result import CaseResult, InfraError

CaseJob = Callable[[], Awaitable[CaseResult]]

#: How long closing waits for the cancelled cases, then for the finalizer (each).
CLOSE_TIMEOUT_S = 30.0


def ready_cases(concurrency: int) -> int:
    """Cases started beyond ``concurrency`` when the model holds its requests to it itself: a
    quarter of it (one at least). At 64 and 256 in flight perf/run.py's endpoint saw each freed
    place taken 12-13 and ~35 ms after its reply left, against 20-30 and 60-70 ms with none
    (perf/README.md, sixteenth pass)."""
    return max(1, concurrency // 4)


class CaseScheduler:
    def __init__(self, concurrency: int, ready: int = 0):
        """``ready``: cases run beyond ``concurrency`` (:func:`ready_cases`), only for a model
        that keeps its requests within ``concurrency`` itself: the endpoint never sees more."""
        self.concurrency = max(1, concurrency)
        self.ready = max(0, ready)
        self._loop = asyncio.new_event_loop()
        #: The loop belongs to the thread that made it: only that thread submits and waits.
        self._owner = threading.get_ident()
        self._tasks: dict[str, asyncio.Task[CaseResult]] = {}
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the cases run in (it runs only while a test waits, on the owner's thread)."""
        return self._loop

    # -- submitting and waiting
    def future_of(self, case_id: str) -> asyncio.Task[CaseResult] | None:
        """The task of a case already queued, else None."""
        return self._tasks.get(case_id)

    def submit(self, case: Case, job: CaseJob) -> asyncio.Task[CaseResult]:
        """Queue ``case`` unless it is already queued; returns its task (it runs while a
        :meth:`result` call drives the loop)."""
        self._check_thread()
        task = self._tasks.get(case.id)
        if task is None:
            task = self._loop.create_task(self._guarded(case, job))
            self._tasks[case.id] = task
        return task

    def result(self, case_id: str) -> CaseResult:
        """Run the loop (every queued case makes progress) until ``case_id``'s result is in."""
        self._check_thread()
        task = self._tasks[case_id]
        if not task.done():
            self._alarms_at_a_safe_point(lambda: self._loop.run_until_complete(task))
        elif not (self._loop.is_running() or self._loop.is_closed()):
            self._alarms_at_a_safe_point(self._one_pass)
        return task.result()

    def _alarms_at_a_safe_point(self, run: Callable[[], Any]) -> None:
        """``run`` the loop with a SIGALRM handler of Python's (pytest-timeout's signal method,
        which raises its ``Failed`` in whatever code the signal interrupts) called here, once
        the loop has stopped: its exception came in whichever step the loop was running, a
        case's task took it as that case's outcome (the awaited test went on waiting, the
        other case's test failed with the timeout), or a task the run needs for every call
        (the SDK process's reader) died. The signal now stops the loop; the handler runs after."""
        alarm = getattr(signal, "SIGALRM", None)
        handler = signal.getsignal(alarm) if alarm is not None else None
        if not callable(handler) or threading.current_thread() is not threading.main_thread():
            run()
            return
        fired: list[tuple[int, Any]] = []

        def stop_the_loop(signum: int, frame: Any) -> None:
            fired.append((signum, frame))
            self._loop.call_soon_threadsafe(self._loop.stop)  # wakes a select() waiting on I/O

        signal.signal(alarm, stop_the_loop)
        try:
            run()
        except RuntimeError:  # "Event loop stopped before Future completed."
            if not fired:
                raise
        finally:
            signal.signal(alarm, handler)
        if fired:
            handler(*fired[0])  # its exception (pytest-timeout's Failed) is the waiting test's

    def abandon(self, case_id: str) -> CaseResult | None:
        """Stop waiting for ``case_id``: its result if it finished after all, else None and its
        task cancelled (no further model call or tool for a case its test reported already)."""
        task = self._tasks.get(case_id)
        if task is None:
            return None
        if task.done():
            return None if task.cancelled() else task.result()
        task.cancel()
        return None

    def _one_pass(self) -> None:
        """One pass of the loop, polling its sockets without waiting (asyncio's documented
        ``stop()`` then ``run_forever()``). A test whose result is already in does not need the
        loop, but the cases queued behind it do: the wait that finished a case stops the loop
        as soon as that case is done, before the cases its place (and its neighbours') went to
        have sent their requests, and replies read in that pass finish more cases without
        freeing their places either. With no pass until some test had to wait, the places
        were refilled a window of tests (~0.7 ms of pytest's work each) later: at 64 and 256 in
        flight perf/run.py's endpoint saw a request arrive 36 and 159 ms on average after the
        reply whose place it took (25 and 84 ms with this pass), and the busy span's
        efficiency fell 0.90 -> 0.83 -> 0.68 at 64 -> 128 -> 256 in flight (0.92, 0.90, 0.86
        with it; perf/README.md, fifteenth pass)."""
        self._loop.stop()
        self._loop.run_forever()

    def _check_thread(self) -> None:
        if threading.get_ident() != self._owner:
            raise RuntimeError("pytest-toolbench: cases are submitted and awaited on the thread "
                               "that built the case runtime (pytest's)")

    async def _guarded(self, case: Case, job: CaseJob) -> CaseResult:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency + self.ready)
        async with self._semaphore:
            try:
                return await job()
            except Exception as exc:  # a harness bug must not take the run down with it
                return internal_error_result(case, exc)

    def close(self, finalizer: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Cancel what has not finished (e.g. on Ctrl-C), run ``finalizer`` (closing the model's
        connections) in the loop, then close it."""
        if self._loop.is_closed() or self._loop.is_running():
            return
        pending = [task for task in asyncio.all_tasks(self._loop) if not task.done()]
        for task in pending:
            task.cancel()

        async def shutdown() -> None:
            # Bounded, and by asyncio.wait, which does not wait out a cancellation as wait_for
            # does: a task that ignores its cancellation must not hang the end of the run.
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_TIMEOUT_S)
            if finalizer is not None:
                await asyncio.wait_for(finalizer(), CLOSE_TIMEOUT_S)

        try:
            self._loop.run_until_complete(shutdown())
        except (Exception, asyncio.CancelledError):  # closing must never mask the run's outcome
            pass
        finally:
            self._loop.close()


def internal_error_result(case: Case, exc: BaseException) -> CaseResult:
    """A case whose runner raised: an error (not a wrong answer), traceback kept for the report."""
    return error_result(base_fields(case), InfraError(
        kind="internal_error",
        message="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    ))
