"""Per-process runtime: the model under test, the scheduler, and each benchmark's runner.

Fixtures build one of these per pytest process (controller with ``-n 0``, else each xdist worker).
Runners are registered the first time a test of their benchmark asks for one, because they are
built by fixtures (the sandbox, the knowledge graph...) and only a test can request fixtures.
"""

from __future__ import annotations

import concurrent.futures

from pytest_toolbench.benchmarks.base import Case, CaseRunner
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.journal import ResultJournal
from pytest_toolbench.runtime.recording import RecordingModel
from pytest_toolbench.runtime.scheduler import CaseScheduler


class CaseRuntime:
    def __init__(self, settings: RunSettings, model: ChatModel):
        self.settings = settings
        self.model: ChatModel = (
            RecordingModel(model, settings.record_path) if settings.record_path else model
        )
        self.scheduler = CaseScheduler(settings.concurrency)
        self.runners: dict[str, CaseRunner] = {}
        #: Under xdist, each worker also journals its results (the controller's backstop).
        self.worker_journal: ResultJournal | None = None

    def register_runner(self, benchmark: str, runner: CaseRunner) -> None:
        self.runners.setdefault(benchmark, runner)

    def can_run(self, case: Case) -> bool:
        return case.benchmark in self.runners

    def submit(self, case: Case) -> concurrent.futures.Future[CaseResult]:
        runner = self.runners[case.benchmark]
        model = self.model

        async def job() -> CaseResult:
            result = await runner.run(case, model)
            result.model = model.name
            if isinstance(model, RecordingModel):
                model.finish_case(case.id)
            return result

        return self.scheduler.submit(case, job)

    def result(self, case: Case) -> CaseResult:
        """Wait for ``case`` (submitting is idempotent, so this also works if it was not queued)."""
        return self.submit(case).result()

    def close(self) -> None:
        self.scheduler.close(finalizer=self.model.aclose)
