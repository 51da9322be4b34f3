"""The case scheduler runs its event loop on the thread that waits (runtime/scheduler.py): no
loop thread beside pytest's, run-ahead cases progress while one is awaited, and closing cancels
what is left whatever stopped the wait."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.runtime.scheduler import CaseScheduler


def case(i: int) -> Case:
    return Case(id=f"c{i}", benchmark="toolhop", scenario="direct", sample_id=str(i))


def passed(c: Case) -> CaseResult:
    return CaseResult(case_id=c.id, benchmark=c.benchmark, scenario=c.scenario, outcome=Outcome.PASSED)


def gated_jobs(started: list[str], gate: asyncio.Event):
    """``job(case, wait)``: a case job that notes its start in ``started`` and, with ``wait``,
    finishes only once ``gate`` is set."""
    def job(c: Case, wait: bool):
        async def run() -> CaseResult:
            started.append(c.id)
            if wait:
                await gate.wait()
            return passed(c)
        return run
    return job


def test_no_thread_of_its_own_and_run_ahead_progresses_while_one_case_is_awaited():
    before = threading.active_count()
    scheduler = CaseScheduler(concurrency=4)
    started: list[str] = []
    gate = asyncio.Event()
    job = gated_jobs(started, gate)
    try:
        assert threading.active_count() == before  # the loop runs on this (pytest's) thread
        first = scheduler.submit(case(0), job(case(0), wait=False))
        for i in range(1, 6):
            scheduler.submit(case(i), job(case(i), wait=True))
        assert started == []  # nothing runs until someone waits
        assert scheduler.submit(case(0), job(case(0), wait=False)) is first  # idempotent
        assert scheduler.result("c0").case_id == "c0"
        # While c0 was awaited, the next cases took the window's places in order (FIFO), c0's
        # too once it finished: c5 waits for one of c1-c4 to finish.
        assert started == ["c0", "c1", "c2", "c3", "c4"]
        scheduler._loop.call_soon(gate.set)
        assert scheduler.result("c5").outcome is Outcome.PASSED
        assert started == [f"c{i}" for i in range(6)]
    finally:
        scheduler.close()


def test_waiting_from_another_thread_is_refused_with_a_clear_error():
    scheduler = CaseScheduler(concurrency=1)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            scheduler.submit(case(0), lambda: asyncio.sleep(0))  # type: ignore[arg-type,return-value]
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    scheduler.close()
    assert len(errors) == 1 and "thread that built the case runtime" in str(errors[0])


def test_a_runner_that_raises_is_an_internal_error_not_a_crash():
    scheduler = CaseScheduler(concurrency=1)

    async def broken() -> CaseResult:
        raise ValueError("harness bug")

    try:
        scheduler.submit(case(0), broken)
        result = scheduler.result("c0")
    finally:
        scheduler.close()
    assert result.outcome is Outcome.ERROR and result.error is not None
    assert result.error.kind == "internal_error" and "harness bug" in result.error.message


def test_an_internal_error_is_explained_as_the_runners_exception_not_only_the_harness():
    """A benchmark's runner that raises (an installed benchmark's bug, a KeyError on its own
    record) is an ``internal_error``: its summary line must not blame the harness alone, and
    points at the traceback, which names the file and line."""
    from pytest_toolbench.models.errors import kind_hint

    cause, option = kind_hint("internal_error")
    assert "runner raised" in cause and "benchmark" in cause
    assert "traceback" in option


def test_close_after_an_interrupted_wait_cancels_the_rest_and_runs_the_finalizer():
    scheduler = CaseScheduler(concurrency=3)
    cancelled: list[str] = []
    finalized: list[bool] = []

    def slow(c: Case):
        async def run() -> CaseResult:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(c.id)
                raise
            return passed(c)
        return run

    async def interrupt() -> CaseResult:
        await asyncio.sleep(0.01)
        raise KeyboardInterrupt  # as Ctrl-C's handler raises it inside the running loop

    scheduler.submit(case(1), slow(case(1)))
    scheduler.submit(case(2), slow(case(2)))
    scheduler.submit(case(0), interrupt)
    with pytest.raises(KeyboardInterrupt):
        scheduler.result("c0")

    async def finalizer() -> None:
        finalized.append(True)

    scheduler.close(finalizer=finalizer)
    assert sorted(cancelled) == ["c1", "c2"] and finalized == [True]
    assert scheduler._loop.is_closed()
    scheduler.close()  # a second close is harmless


def test_close_gives_up_on_a_task_that_ignores_its_cancellation(monkeypatch):
    """Closing is bounded (CLOSE_TIMEOUT_S, 30 s in use): a case that swallows its cancellation
    must not hang the end of the run; the finalizer still runs and the loop is closed."""
    from pytest_toolbench.runtime import scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "CLOSE_TIMEOUT_S", 0.2)
    finalized: list[bool] = []

    async def finalizer() -> None:
        finalized.append(True)

    scheduler = CaseScheduler(concurrency=1)
    stop = asyncio.Event()

    async def stubborn() -> CaseResult:
        while not stop.is_set():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                continue  # ignores every cancellation
        return passed(case(0))

    async def quick() -> CaseResult:
        return passed(case(1))

    scheduler.submit(case(0), stubborn)
    scheduler.submit(case(1), quick)
    scheduler._loop.run_until_complete(asyncio.sleep(0.01))  # stubborn is now sleeping
    started = time.monotonic()
    scheduler.close(finalizer=finalizer)
    assert time.monotonic() - started < 5
    assert finalized == [True] and scheduler._loop.is_closed()
    stop.set()


def test_asking_for_a_finished_case_lets_the_queued_ones_move():
    """pytest runs the tests whose results are in without waiting; each must still give the
    queued cases a pass of the loop, or the places finished cases freed stay empty until some
    test has to wait (a window of tests later: perf/README.md, fifteenth pass)."""
    scheduler = CaseScheduler(concurrency=1)
    started: list[str] = []

    def job(c: Case):
        async def run() -> CaseResult:
            started.append(c.id)
            return passed(c)
        return run

    try:
        scheduler.submit(case(0), job(case(0)))
        assert scheduler.result("c0").case_id == "c0"
        scheduler.submit(case(1), job(case(1)))
        assert started == ["c0"]
        # c0's result is in: no wait, but c1 takes the free place and runs in that pass.
        assert scheduler.result("c0").case_id == "c0"
        assert started == ["c0", "c1"]
    finally:
        scheduler.close()
    # After closing, a finished case is still read back (no pass on a closed loop).
    assert scheduler.result("c1").case_id == "c1"


@pytest.mark.parametrize("ready", [0, 2])
def test_ready_cases_run_beyond_the_concurrency(ready):
    """``ready`` more cases than ``concurrency`` run at once (their requests wait at the model's
    own limit); without it, no more than ``concurrency``."""
    scheduler = CaseScheduler(2, ready)
    running, most = [0], [0]

    def job(c: Case):
        async def go() -> CaseResult:
            running[0] += 1
            most[0] = max(most[0], running[0])
            await asyncio.sleep(0.05)
            running[0] -= 1
            return passed(c)
        return go

    cases = [case(i) for i in range(8)]
    for c in cases:
        scheduler.submit(c, job(c))
    assert [scheduler.result(c.id).outcome for c in cases] == [Outcome.PASSED] * 8
    assert most[0] == 2 + ready
    scheduler.close()


def test_ready_cases_are_a_quarter_of_the_concurrency():
    from pytest_toolbench.runtime.scheduler import ready_cases

    assert [ready_cases(n) for n in (1, 4, 8, 64, 256)] == [1, 1, 2, 16, 64]


def test_abandoning_a_case_cancels_it_unless_it_finished():
    """A test stopped from outside while it waited (pytest-timeout): the case's task is
    cancelled, freeing its place; one that finished meanwhile gives its result."""
    scheduler = CaseScheduler(concurrency=1)
    ran: list[str] = []
    job = gated_jobs(ran, asyncio.Event())
    try:
        scheduler.submit(case(1), job(case(1), wait=True))
        scheduler.submit(case(2), job(case(2), wait=False))
        scheduler.submit(case(3), job(case(3), wait=False))
        assert scheduler.abandon("c1") is None  # not started yet: cancelled
        assert scheduler.result("c2").outcome is Outcome.PASSED
        assert scheduler.abandon("c2").case_id == "c2"  # finished: its result
        assert scheduler.abandon("c1") is None and scheduler.abandon("unknown") is None
        assert scheduler.result("c3").outcome is Outcome.PASSED and ran == ["c2", "c3"]
    finally:
        scheduler.close()


class _Alarm(BaseException):
    """What pytest-timeout's signal handler raises (its Failed is a BaseException too)."""


def test_an_alarm_handler_s_exception_reaches_the_wait_not_a_running_case():
    """pytest-timeout's SIGALRM handler raises in whatever code runs: in a case's step (here one
    busy 0.3 s without awaiting), that case took the exception as its outcome and the awaited
    test waited on. It is raised from the wait, once the loop stopped; the busy case finishes."""
    import signal

    scheduler = CaseScheduler(concurrency=2)
    gate = asyncio.Event()

    def raise_alarm(signum, frame):
        raise _Alarm("Timeout (>0.1s) from pytest-timeout.")

    def busy(c: Case):
        async def run() -> CaseResult:
            end = time.monotonic() + 0.3
            while time.monotonic() < end:  # no await: the signal comes in this step
                pass
            return passed(c)
        return run

    previous = signal.signal(signal.SIGALRM, raise_alarm)
    try:
        scheduler.submit(case(1), gated_jobs([], gate)(case(1), wait=True))
        scheduler.submit(case(2), busy(case(2)))
        scheduler._loop.call_later(2.0, gate.set)  # (without the fix: c1 ends, nothing raised)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(_Alarm, match="pytest-timeout"):
            scheduler.result("c1")
        assert signal.getsignal(signal.SIGALRM) is raise_alarm  # its handler back in place
        assert scheduler.result("c2").outcome is Outcome.PASSED
        assert scheduler.result("c1").outcome is Outcome.PASSED
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        scheduler.close()
