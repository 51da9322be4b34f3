"""Run cases ahead of pytest's order, up to ``--concurrency`` at a time, in one process.

pytest runs one test at a time. A model call takes seconds, so a process that waited for each test
in turn would leave the endpoint idle. Each process therefore owns one asyncio event loop in a
background thread; a test submits its own case *and the cases pytest will run next in this process*
(see :func:`upcoming_items`), then blocks only on its own result. The loop keeps at most
``concurrency`` cases in flight (FIFO, so the case pytest is waiting for is never starved by
later ones), and the backends share its connection pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.result_builders import base_fields, error_result
from pytest_toolbench.results.case_result import CaseResult, InfraError

CaseJob = Callable[[], Awaitable[CaseResult]]


class CaseScheduler:
    def __init__(self, concurrency: int):
        self.concurrency = max(1, concurrency)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="toolbench-scheduler", daemon=True
        )
        self._thread.start()
        self._futures: dict[str, concurrent.futures.Future[CaseResult]] = {}
        self._lock = threading.Lock()
        self._semaphore: asyncio.Semaphore | None = None

    # -- submitting and waiting
    def future_of(self, case_id: str) -> concurrent.futures.Future[CaseResult] | None:
        """The future of a case already queued, else None."""
        with self._lock:
            return self._futures.get(case_id)

    def submit(self, case: Case, job: CaseJob) -> concurrent.futures.Future[CaseResult]:
        """Queue ``case`` unless it is already queued; returns its future."""
        with self._lock:
            future = self._futures.get(case.id)
            if future is None:
                future = asyncio.run_coroutine_threadsafe(self._guarded(case, job), self._loop)
                self._futures[case.id] = future
            return future

    async def _guarded(self, case: Case, job: CaseJob) -> CaseResult:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        async with self._semaphore:
            try:
                return await job()
            except Exception as exc:  # a harness bug must not take the run down with it
                return internal_error_result(case, exc)

    def close(self, finalizer: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Cancel what has not finished (e.g. on Ctrl-C), run ``finalizer`` (closing the model's
        connections) inside the loop, then stop the loop thread."""

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if finalizer is not None:
                await finalizer()

        if self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=30)
            except Exception:  # closing must never mask the run's own outcome
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()


def internal_error_result(case: Case, exc: BaseException) -> CaseResult:
    """A case whose runner raised: an error (not a wrong answer), traceback kept for the report."""
    return error_result(base_fields(case), InfraError(
        kind="internal_error",
        message="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    ))
