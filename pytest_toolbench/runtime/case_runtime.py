"""Per-process runtime: the model under test, the scheduler, and each benchmark's runner.

Each case runs under ``--case-timeout`` (a timed-out case is an infrastructure error of kind
``case_timeout``) with its own call log, whose retries and lost turns land in ``details``.

Fixtures build one of these per pytest process (controller with ``-n 0``, else each xdist worker).
A benchmark's runner is built the first time one of its cases runs (``runner_factory``, the
process's environment: benchmarks/base.py ``make_runner(env)``), so a run pays only for the
environments of the benchmarks it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from pytest_toolbench.benchmarks.base import Case, CaseRunner
from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import CallContext, ChatModel, ChatRequest, ChatResponse, limits_its_requests, model_layers
from pytest_toolbench.models.call_log import CURRENT_CALL_LOG, CaseCallLog, current_call_log
from pytest_toolbench.benchmarks.result_builders import base_fields, error_result
from pytest_toolbench.results.case_result import CaseResult, InfraError
from pytest_toolbench.utf8_safe import make_model_utf8_safe
from pytest_toolbench.results.journal import ResultJournal
from pytest_toolbench.models.recording import RecordingModel
from pytest_toolbench.models.repeat import CURRENT_REPEAT
from pytest_toolbench.runtime.logger_registry import guard_logger_registry
from pytest_toolbench.runtime.scheduler import CaseScheduler, ready_cases


class CaseRuntime:
    def __init__(self, settings: RunSettings, model: ChatModel):
        # Before any case hands work to another thread (a sandbox call, a FAISS search).
        guard_logger_registry()
        self.settings = settings
        logged = ReplyLogModel(model)  # every runner's replies: finish_reason in the case result
        self.model: ChatModel = (
            RecordingModel(logged, settings.record_path) if settings.record_path else logged
        )
        ready = ready_cases(settings.concurrency) if limits_its_requests(model) else 0
        self.scheduler = CaseScheduler(settings.concurrency, ready)
        connect_early(model, self.scheduler.loop)
        self.runners: dict[str, CaseRunner] = {}
        #: Under xdist, each worker also journals its results (the controller's backstop).
        self.worker_journal: ResultJournal | None = None
        #: Benchmark name -> its runner (the process's ``RunEnvironment.runner``).
        self.runner_factory: Callable[[str], CaseRunner] = _no_factory

    def register_runner(self, benchmark: str, runner: CaseRunner) -> None:
        self.runners.setdefault(benchmark, runner)

    def ensure_runner(self, benchmark: str) -> None:
        """Build and register the benchmark's runner unless it has one."""
        if benchmark not in self.runners:
            self.register_runner(benchmark, self.runner_factory(benchmark))

    def can_run(self, case: Case) -> bool:
        return case.benchmark in self.runners

    def submit(self, case: Case) -> asyncio.Task[CaseResult]:
        queued = self.scheduler.future_of(case.id)
        if queued is not None:  # submitting is idempotent; the run-ahead window resubmits
            return queued
        runner = self.runners[case.benchmark]
        model = self.model
        timeout = self.settings.case_timeout_s

        async def job() -> CaseResult:
            started = time.monotonic()  # the case's start, not its submission: it may queue
            started_at = round(time.time(), 3)
            # This job runs in its own task, so the log is this case's alone (call_log.py).
            log = CaseCallLog()
            CURRENT_CALL_LOG.set(log)
            CURRENT_REPEAT.set(case.repeat)  # the cache keys repeats apart (runtime/repeat.py)
            # Unpacked once per case, however often the runner reads it, and only when the case
            # starts: the first test submits twice --concurrency cases, and unpacking them all
            # there (~0.2 ms each) held back every first request (0.1-0.15 s at 256 in flight).
            try:
                unpacked = case.with_sample_unpacked()
            except DatasetError as exc:  # its data file changed or went away since collection
                result = data_error_result(case, exc)
                result.wall_s, result.started_at = round(time.monotonic() - started, 6), started_at
                return result
            try:
                result = await asyncio.wait_for(runner.run(unpacked, model), timeout)
            except asyncio.TimeoutError:
                result = case_timeout_result(case, timeout or 0.0)
            result.model = model.name
            result.repeat = case.repeat
            result.details.update(log.details())
            if isinstance(model, RecordingModel):
                model.finish_case(case.id)
            result.wall_s, result.started_at = round(time.monotonic() - started, 6), started_at
            # A tool's output or a model's text decoded from JSON may hold a lone surrogate,
            # which no journal, report or xdist worker's transport can write (utf8_safe.py).
            make_model_utf8_safe(result)
            return result

        return self.scheduler.submit(case, job)

    def result(self, case: Case) -> CaseResult:
        """Wait for ``case`` (submitting is idempotent, so this also works if it was not queued)."""
        self.submit(case)
        return self.scheduler.result(case.id)

    def stopped_while_waiting(self, case: Case, stop: BaseException) -> CaseResult:
        """``case`` when a timer outside the harness (pytest-timeout's SIGALRM) raised ``stop``
        in its test's wait: its result if it was in, else an infrastructure error of kind
        ``test_timeout``, its task cancelled. The test ended in a traceback through the
        harness's event loop and the case had no result: the run read "PARTIAL RESULTS ...
        never reported: a worker lost, the run stopped early, or the transport failed"."""
        finished = self.scheduler.abandon(case.id)
        if finished is not None:
            return finished
        return error_result(base_fields(case, self.model), InfraError(
            kind="test_timeout",
            message=f"case {case.id} stopped while it waited: "
                    f"{str(stop).strip() or type(stop).__name__}"))

    def close(self) -> None:
        """Close, in the loop that used them, the model and whatever a runner owns (a runner
        with an ``aclose``, e.g. FamilyTool's second model for extraction)."""

        async def finalize() -> None:
            for runner in self.runners.values():
                closer = getattr(runner, "aclose", None)
                if closer is not None:
                    with contextlib.suppress(Exception):  # one failure must not skip the rest
                        await closer()
            await self.model.aclose()

        self.scheduler.close(finalizer=finalize)


class ReplyLogModel:
    """The model as runners get it: each reply's ``finish_reason`` goes into the case's call log,
    hence ``details.finish_reasons`` (and ``details.cut_replies`` for a reply cut by ``length`` or
    ``content_filter``) of every benchmark's result, whichever backend, cache or replay answered.
    Recording only: no runner's scoring sees it."""

    def __init__(self, inner: ChatModel):
        self.inner = inner
        self.name = inner.name

    async def complete(self, request: ChatRequest, ctx: CallContext) -> ChatResponse:
        response = await self.inner.complete(request, ctx)
        log = current_call_log()
        if log is not None:
            log.reply(ctx.turn, response.finish_reason)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def __getattr__(self, item: str) -> Any:  # stats, cache counters... of the wrapped model
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)


def connect_early(model: Any, loop: asyncio.AbstractEventLoop) -> None:
    """The model's connection to the run's SDK process, started before any case
    (models/sdk_process/client.py says why). Not through a managed server's ``template``: its
    URL is not known until the server has started."""
    for layer in model_layers(model):
        connect_soon = getattr(type(layer), "connect_soon", None)
        if connect_soon is not None:
            connect_soon(layer, loop)
            return


def _no_factory(benchmark: str) -> CaseRunner:
    raise LookupError(f"no runner registered for {benchmark!r} and no runner_factory to build one")


def case_timeout_result(case: Case, timeout_s: float) -> CaseResult:
    """A case past ``--case-timeout``: an infrastructure error (the endpoint or a tool was too
    slow), never a wrong answer. Its transcript is lost with the cancelled runner."""
    return error_result(base_fields(case), InfraError(
        kind="case_timeout",
        message=f"case {case.id} did not finish within --case-timeout {timeout_s:g}s",
    ))


def data_error_result(case: Case, exc: DatasetError) -> CaseResult:
    """A case whose record could not be read back when it started (its data file changed or went
    away since the run read it, benchmarks/packed.py): an error naming the file, never a score."""
    return error_result(base_fields(case), InfraError(kind="data_error", message=str(exc)))
