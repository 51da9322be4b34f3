"""A case result keeps the case's own wall time (``wall_s``), from its start in its process to its
result; a live run's test reports (JUnit, ``--durations``) are timed by it instead of by the test's
wait for its case (session/case_timing.py), and the JUnit testcases written for cases whose test
reports never came (an interrupted xdist worker's, ``toolbench finish --junitxml``) instead of 0.

``latency_s`` is not that time: it counts the model's calls only, and a cached reply's time when
it was stored. The end-to-end check (a killed run's JUnit file, each testcase at least the fake
endpoint's delay) is in test_killed_run.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from statistics import median
from types import SimpleNamespace

import pytest
from _pytest.junitxml import LogXML

from fake_openai_server import FakeOpenAIServer, delayed, reply

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.config import RunSettings
from pytest_toolbench.report.junit_gates import ended_of, write_unreported_testcases
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.runtime import case_runtime
from pytest_toolbench.runtime.case_runtime import CaseRuntime
from pytest_toolbench.session import case_timing
from pytest_toolbench.session.case_timing import retime, timed_wait
from pytest_toolbench.session.transport import RESULT_KEY

REPO = Path(__file__).resolve().parents[1]


class Clock:
    """The runtime's clock, moved on by the test's runner only (5 s per case there)."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now


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
    assert (first.started_at, second.started_at) == (1.7e9 + 100.0, 1.7e9 + 105.0)
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


def _retimed(monkeypatch, result: CaseResult | None, *, wait: float | None, setup_failed: bool,
             setup_only: bool = False) -> tuple[float, float | None]:
    """The durations ``retime`` leaves on a test's set-up report (pytest measured 3.0 s, ``wait``
    of them blocked on its case; None: it never waited) and on its call report (0.01 s; None when
    the set-up ends the test: it failed, or ``--setup-only`` runs no call)."""
    clock = Clock()
    monkeypatch.setattr(case_timing, "time", clock)
    item = SimpleNamespace(stash=pytest.Stash(),
                           config=SimpleNamespace(option=SimpleNamespace(setuponly=setup_only)))
    if result is not None:
        item.stash[RESULT_KEY] = result
    if wait is not None:
        timed_wait(item, setattr, clock, "now", clock.now + wait)  # the wait moves the clock on
    setup = SimpleNamespace(when="setup", duration=3.0, failed=setup_failed)
    retime(item, setup)  # type: ignore[arg-type]
    if setup_failed or setup_only:
        return setup.duration, None
    call = SimpleNamespace(when="call", duration=0.01, failed=False)
    retime(item, call)  # type: ignore[arg-type]
    return setup.duration, call.duration


def test_a_test_is_timed_by_its_case_not_by_its_wait(monkeypatch):
    """Set-up 3 s, of which 2.5 s waiting for a case that ran 4 s (it started before its test):
    the set-up keeps its own 0.5 s, the call gets the case's 4 s; an infrastructure error ends
    the test in its set-up, which then takes the case's time, as ``--setup-only``'s set-up."""
    assert _retimed(monkeypatch, _result(Outcome.FAILED, 4.0), wait=2.5,
                    setup_failed=False) == pytest.approx((0.5, 4.01))
    assert _retimed(monkeypatch, _result(Outcome.ERROR, 4.0), wait=2.5,
                    setup_failed=True) == pytest.approx((4.5, None))
    assert _retimed(monkeypatch, _result(Outcome.FAILED, 4.0), wait=2.5, setup_failed=False,
                    setup_only=True) == pytest.approx((4.5, None))


@pytest.mark.parametrize(("result", "wait"), [(None, 2.5), (_result(Outcome.PASSED, None), 2.5),
                                              (_result(Outcome.PASSED, 4.0), None)],
                         ids=["no result", "a result without wall_s", "no wait"])
def test_without_a_case_time_or_a_wait_pytest_s_durations_stay(monkeypatch, result, wait):
    assert _retimed(monkeypatch, result, wait=wait, setup_failed=False) == (3.0, 0.01)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_live_run_s_reports_show_each_case_s_own_time(tmp_path: Path, workers):
    """Four cases in flight against a 0.3 s endpoint: each JUnit testcase reads its case's wall
    time (pytest's own set-up and call add a little), where the wait for the case read the whole
    batch on its first test and near 0 on the others; ``--durations`` lists each case's call;
    each Allure result spans its case's own run, where allure-pytest timed the assertion."""
    started = time.time()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with FakeOpenAIServer(delayed(0.3, reply("<answer>x</answer>"))) as server:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-p", "no:randomly", "-p",
             "no:cacheprovider", "--data", "sample", "--scenario", "direct", "-n", workers,
             "--concurrency", "4", "--no-cache", "--runs-dir", str(tmp_path / "runs"),
             "--base-url", server.base_url, "--api-key", "t", "--model", "m", "--junitxml",
             str(tmp_path / "junit.xml"), "--toolbench-json", str(tmp_path / "report.json"),
             "--durations=0", "--durations-min=0.2", "--alluredir", str(tmp_path / "allure")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # wrong answers, no gates
    ended = time.time()
    cases = json.loads((tmp_path / "report.json").read_text())["cases"]
    walls = {c["case_id"]: c["wall_s"] for c in cases}
    times = {tc.get("name", "").removeprefix("test_toolhop[").removesuffix("]"):
             float(tc.get("time", "nan"))
             for tc in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    assert sorted(times) == sorted(walls) and len(walls) == 6
    assert all(walls[c] >= 0.3 for c in walls)
    assert all(times[c] >= walls[c] - 0.002 for c in walls), (times, walls)  # 3 decimals
    assert median(times[c] - walls[c] for c in walls) < 0.25, (times, walls)  # a busy machine
    slowest = [line.split()[1] for line in done.stdout.splitlines()
               if line.endswith("-direct]") and line.split()[0].endswith("s")]
    # each case's call (>= 0.3 s); a set-up only where a process started its session fixtures
    assert slowest.count("call") == 6, done.stdout
    assert set(slowest) <= {"call", "setup"} and slowest.count("setup") <= max(1, int(workers))

    spans = {}
    for path in (tmp_path / "allure").glob("*-result.json"):
        result = json.loads(path.read_text())
        case = next(p["value"] for p in result["parameters"] if p["name"] == "case")
        spans[case.strip("'")] = (result["start"], result["stop"])
    assert sorted(spans) == sorted(walls)
    for c in cases:
        assert started <= c["started_at"] <= c["started_at"] + c["wall_s"] <= ended
        start = round(c["started_at"] * 1000)
        assert spans[c["case_id"]] == (start, start + round(c["wall_s"] * 1000))
