"""A case result keeps the case's own wall time (``wall_s``), from its start in its process to its
result, and the JUnit testcases written for cases whose test reports never came (an interrupted
xdist worker's, ``toolbench finish --junitxml``) are timed by it instead of 0.

``latency_s`` is not that time: it counts the model's calls only, and a cached reply's time when
it was stored. The end-to-end check (a killed run's JUnit file, each testcase at least the fake
endpoint's delay) is in test_killed_run.py."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _pytest.junitxml import LogXML

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.config import RunSettings
from pytest_toolbench.report.junit_gates import ended_of, write_unreported_testcases
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.runtime import case_runtime
from pytest_toolbench.runtime.case_runtime import CaseRuntime


class Clock:
    """The runtime's clock, moved on by the test's runner only (5 s per case there)."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class Model:
    name = "m"

    async def complete(self, request, ctx):  # pragma: no cover - the runners call no model
        raise AssertionError("no model call expected")

    async def aclose(self) -> None:
        pass


def case(i: int) -> Case:
    return Case(id=f"b-{i}", benchmark="b", scenario="s", sample_id=str(i))


def run_all(runtime: CaseRuntime, cases: list[Case]) -> list[CaseResult]:
    try:
        for c in cases:
            runtime.submit(c)
        return [runtime.result(c) for c in cases]
    finally:
        runtime.close()


def test_each_case_is_timed_from_its_own_start_not_from_its_submission(monkeypatch):
    """With one place, the second case waits out the first (5 s) before it starts: timed from
    its submission it would read 10 s."""
    clock = Clock()
    monkeypatch.setattr(case_runtime, "time", clock)

    class Runner:
        async def run(self, c, model):
            await asyncio.sleep(0)
            clock.now += 5.0
            return CaseResult(case_id=c.id, benchmark=c.benchmark, scenario=c.scenario,
                              outcome=Outcome.PASSED)

    runtime = CaseRuntime(RunSettings(model="m", backend="openai", concurrency=1), Model())
    runtime.register_runner("b", Runner())
    first, second = run_all(runtime, [case(0), case(1)])
    assert (first.wall_s, second.wall_s) == (5.0, 5.0)
    assert first.latency_s == 0.0  # no model call: the model's time is apart


def test_a_case_past_its_timeout_is_timed_too():
    class Stuck:
        async def run(self, c, model):
            await asyncio.Event().wait()

    settings = RunSettings(model="m", backend="openai", concurrency=1, case_timeout_s=0.2)
    runtime = CaseRuntime(settings, Model())
    runtime.register_runner("b", Stuck())
    (result,) = run_all(runtime, [case(0)])
    assert result.error is not None and result.error.kind == "case_timeout"
    assert result.wall_s is not None and result.wall_s >= 0.2


def _result(outcome: Outcome, wall_s: float | None) -> CaseResult:
    error = InfraError(kind="endpoint", message="503") if outcome is Outcome.ERROR else None
    return CaseResult(case_id="c", benchmark="toolhop", scenario="direct", outcome=outcome,
                      error=error, failure_message="wrong" if outcome is Outcome.FAILED else None,
                      wall_s=wall_s)


@pytest.mark.parametrize("gated", [False, True], ids=["no gates", "--gate"])
def test_a_testcase_written_for_an_unreported_case_takes_the_case_s_time(tmp_path: Path, gated):
    """Passed, failed (passed under --gate), an infrastructure error (skipped under --gate): each
    testcase's time is its case's; a result kept before ``wall_s`` existed reads 0, as before."""
    rows = [("t.py::passed", _result(Outcome.PASSED, 1.5)),
            ("t.py::failed", _result(Outcome.FAILED, 2.25)),
            ("t.py::error", _result(Outcome.ERROR, 0.75)),
            ("t.py::old", _result(Outcome.PASSED, None))]
    path = tmp_path / "junit.xml"
    xml = LogXML(str(path), None, family="xunit2")
    xml.pytest_sessionstart()
    assert write_unreported_testcases(xml, [ended_of(n, r, gated=gated) for n, r in rows]) == 4
    xml.pytest_sessionfinish()

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    times = {tc.get("name"): float(tc.get("time", "nan")) for tc in suite.iter("testcase")}
    assert times == {"passed": 1.5, "failed": 2.25, "error": 0.75, "old": 0.0}
    failures, errors, skipped = (int(suite.get(k, "0")) for k in ("failures", "errors", "skipped"))
    assert (failures, errors, skipped) == ((0, 0, 1) if gated else (1, 1, 0))
