"""A run stopped by SIGTERM or Ctrl-C: its reports are written, say what never ran, and fail.

The end-to-end tests run ``pytest suites/toolhop`` in a subprocess against a slow local endpoint
(tests/fake_openai_server.py), signal it mid-run, and read what a CI system reads: the exit
status, the JUnit XML, the terminal's gate table, the Markdown summary and the JSON report. The
signals during the reports use ``-p slow_plots`` (tests/slow_plots.py), which makes the plots,
written at the session end, take long enough to be interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from allure_commons.utils import md5

from fake_openai_server import FakeOpenAIServer, delayed, reply
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.report.allure_report import NOT_RUN, OUTCOME_LABEL
from pytest_toolbench.results import case_store
from pytest_toolbench.results.partial_run import MISSING_UNKNOWN, RUN_COMPLETED
from pytest_toolbench.results.gates import GateVerdict, exit_status
from pytest_toolbench.results.journal import read_journal
from pytest_toolbench.session.finish import RunEnd, run_status, run_verdicts
from pytest_toolbench.session.signals import INTERRUPTS_KEY, Interrupts, note_worker
from pytest_toolbench.session.state import STATE_KEY
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]
N = len(json.loads(BUNDLED_TOOLHOP.read_text()))
SELECTED = 3 * N  # every record in each of ToolHop's three scenarios
GATE = "toolhop.direct.accuracy>=0"  # passes on any answer: only the interruption can fail


# --------------------------------------------------------------------------- verdicts
def test_an_interruption_is_a_failed_verdict_naming_what_never_ran():
    end = RunEnd(pytest_status=2, interrupted_by="SIGTERM", missing=["a", "b"], selected=5)
    (verdict,) = run_verdicts(end)
    assert verdict.gate == RUN_COMPLETED and not verdict.passed and verdict.kind == "interrupted"
    assert verdict.reason == ("the run was interrupted (SIGTERM): 2 of 5 selected cases have no "
                              "result: a, b")
    passed = GateVerdict(gate="g", actual=1.0, passed=True, reason="ok")
    assert exit_status([passed, verdict]) is ToolbenchExit.INTERRUPTED
    assert run_status(end, [passed, verdict], gated=True) == ToolbenchExit.INTERRUPTED


# --------------------------------------------------------------------------- the handler
class _Config:
    def __init__(self) -> None:
        self.stash: dict = {}


def test_the_first_signal_waits_for_a_report_being_taken_in_and_later_ones_are_only_noted(
        monkeypatch):
    lines: list[str] = []
    interrupts = Interrupts(_Config(), write=lines.append)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with interrupts.holding():
            interrupts.handle(signal.SIGTERM, None)  # held: the report is taken in whole
            lines.append("report taken in")
    assert lines == ["report taken in"]
    interrupts.handle(signal.SIGINT, None)  # a second one: noted, never raised
    assert interrupts.count == 2 and "finishing the reports first" in lines[-1]
    exits: list[int] = []
    monkeypatch.setattr("pytest_toolbench.session.signals._exit_now", exits.append)
    interrupts.handle(signal.SIGINT, None)  # a third: stops at once
    assert exits == [ToolbenchExit.INTERRUPTED] and "stopping at once" in lines[-1]


def test_from_the_session_end_on_even_a_first_signal_is_only_noted(monkeypatch):
    lines: list[str] = []
    interrupts = Interrupts(_Config(), write=lines.append)  # type: ignore[arg-type]
    interrupts.finishing()
    interrupts.handle(signal.SIGINT, None)
    # the run had ended: it keeps the status its reports record, not a 2 they never show
    assert "then the exit status they record" in lines[-1]
    exits: list[int] = []
    monkeypatch.setattr("pytest_toolbench.session.signals._exit_now", exits.append)
    interrupts.handle(signal.SIGTERM, None)  # a second: noted too (README: not cut short)
    assert exits == [] and "finishing the reports first" in lines[-1]
    interrupts.handle(signal.SIGTERM, None)  # the third of the run: stops at once
    assert exits == [ToolbenchExit.INTERRUPTED] and "stopping at once" in lines[-1]


def test_a_signal_in_the_session_start_waits_for_the_collection_and_then_reaches_the_workers():
    """Raised in the session start, pytest skipped the session end (no report); passed on to
    the workers at once, xdist's setup of a worker it stopped failed with an INTERNALERROR."""
    config = _Config()
    config.stash[STATE_KEY] = type("State", (), {"interrupted_by": None})()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        interrupts = Interrupts(config, write=lambda line: None)  # type: ignore[arg-type]
        interrupts.workers = {"gw0": child.pid}
        with interrupts.held_to_the_session_end():
            interrupts.handle(signal.SIGTERM, None)  # held: not raised, not passed on
        assert config.stash[STATE_KEY].interrupted_by == "SIGTERM"
        time.sleep(0.2)
        assert child.poll() is None
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            interrupts.raise_held()  # the collection's start
        assert child.wait(timeout=30) != 0  # stopped by the SIGINT it was passed on as
        interrupts.raise_held()  # once: nothing more is held
    finally:
        child.kill()


def test_a_first_sigterm_reaches_the_workers_that_are_children_of_this_process_only():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # a grandchild: not a child of this process, so never signalled (as a worker's reused pid)
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                             text=True)
    assert shell.stdout is not None
    grandchild = int(shell.stdout.readline())
    try:
        interrupts = Interrupts(_Config(), write=lambda line: None)  # type: ignore[arg-type]
        interrupts.workers = {"gw0": child.pid, "gw1": grandchild}
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            interrupts.handle(signal.SIGTERM, None)
        assert child.wait(timeout=30) != 0  # stopped by the SIGINT (KeyboardInterrupt)
        assert shell.poll() is None and Path(f"/proc/{grandchild}").exists()
        interrupts.handle(signal.SIGTERM, None)  # a second: noted, passed on to no one
    finally:
        for proc in (child, shell):
            proc.kill()
        os.kill(grandchild, signal.SIGKILL)
        shell.wait()


class _Spec:
    def __init__(self, popen: bool, via: str | None = None) -> None:
        self.popen, self.via = popen, via


class _Gateway:
    def __init__(self, gateway_id: str, spec: _Spec, pid: int | None) -> None:
        self.id, self.spec = gateway_id, spec
        if pid is not None:  # execnet's cache of the worker's process information
            self._cache_rinfo = type("RInfo", (), {"pid": pid})()


def test_only_workers_on_this_machine_are_kept_for_a_sigterm():
    config = _Config()
    interrupts = Interrupts(config, write=lambda line: None)  # type: ignore[arg-type]
    config.stash[INTERRUPTS_KEY] = interrupts
    for gateway in (_Gateway("gw0", _Spec(popen=True), 101),
                    _Gateway("gw1", _Spec(popen=False), 102),  # ssh=host: a pid over there
                    _Gateway("gw2", _Spec(popen=True, via="gw1"), 103),
                    _Gateway("gw3", _Spec(popen=True), None)):  # no cache: nothing to go on
        note_worker(config, type("Node", (), {"gateway": gateway})())  # type: ignore[arg-type]
    assert interrupts.workers == {"gw0": 101}


# --------------------------------------------------------------------------- end to end
def _start(tmp_path: Path, server: FakeOpenAIServer, *args: str,
           own_group: bool = False) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "tests"), env.get("PYTHONPATH")]))
    env["TOOLBENCH_TEST_PLOTTING"] = str(tmp_path / "plotting")
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "-p", "slow_plots", "--runs-dir", str(tmp_path / "runs"),
           "--toolbench-json", str(tmp_path / "report.json"),
           "--junitxml", str(tmp_path / "junit.xml"), "--toolbench-md", str(tmp_path / "summary.md"),
           "--base-url", server.base_url, "--api-key", "t", "--model", "m", "--no-cache",
           "--concurrency", "1", *args]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=own_group)


def _wait_for(condition, what: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def _junit(tmp_path: Path) -> tuple[dict[str, str], list[ET.Element]]:
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    return dict(suite.attrib), list(suite.iter("testcase"))


def _allure(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp_path / "allure").glob("*-result.json")]


def _case_of(result: dict) -> str:
    (value,) = [p["value"] for p in result["parameters"] if p["name"] == "case"]
    return value[1:-1]  # allure's represent(): quoted


def _assert_allure_has_every_case(tmp_path: Path, missing: list[str], selected: int,
                                  why: str = "SIGTERM", model: str = "m") -> None:
    """Allure has a result for each selected case, once: those that never ran skipped, with the
    JUnit message and an outcome label saying so, named, placed and identified (fullName,
    historyId, testCaseId, suite path, epic, feature, story, case labels, tags) as a case that
    ran is, so their history lines up with the runs in which they did run."""
    # Under xdist a worker slower to stop than the run's end waits for it (5 s at most:
    # controller.wait_for_workers_to_stop) may close a case's result after the controller exited.
    deadline = time.monotonic() + 15
    while len(results := _allure(tmp_path)) < selected and time.monotonic() < deadline:
        time.sleep(0.2)
    by_case = {_case_of(r): r for r in results}
    assert len(results) == len(by_case) == selected, (
        [(_case_of(r), r.get("status"), r.get("historyId"), [x["value"] for x in r["labels"]
          if x["name"] == OUTCOME_LABEL]) for r in results if sum(
            _case_of(q) == _case_of(r) for q in results) > 1])
    not_run = {case for case, r in by_case.items()
               if {"name": OUTCOME_LABEL, "value": NOT_RUN} in r["labels"]}
    assert sorted(not_run) == sorted(missing)
    shapes = set()
    for case, r in by_case.items():
        labels = {label["name"]: label["value"] for label in r["labels"]}
        scenario = case.rsplit("-", 1)[1]
        assert [labels[k] for k in ("parentSuite", "suite", "subSuite", "epic", "feature")] == [
            model, "toolhop", scenario, "toolhop", scenario]
        assert labels["story"] == f"hops={labels['hops']}" and labels["model"] == model
        assert sorted(x["value"] for x in r["labels"] if x["name"] == "tag") == sorted([model, "toolhop"])
        assert r["fullName"] == "suites.toolhop.test_toolhop#test_toolhop"
        assert r["historyId"] == md5(r["fullName"], f"Case({case})", repr(model))
        assert r["testCaseId"] == md5(md5(r["fullName"]), model)
        assert r["name"].startswith(f"[{model}] {case}: ")
        if case in not_run:
            assert r["status"] == "skipped"
            assert r["statusDetails"]["message"] == f"not run: the run was interrupted ({why})"
        shapes.add((tuple(sorted(x["name"] for x in r["labels"] if x["name"] != "error_kind")),
                    tuple((p["name"], p.get("excluded")) for p in r["parameters"])))
    assert len(shapes) == 1  # a case never run has the labels and parameters of one that ran
    # each names the run (its folder), whichever process wrote it: a worker, the controller's
    # test or its end, a cut-short result completed
    runs = {x["value"] for r in results for x in r["labels"] if x["name"] == "toolbench_run"}
    assert len(runs) == 1 and (tmp_path / "runs" / runs.pop()).is_dir()


def _journalled(runs: Path) -> int:
    """Results the one run in ``runs`` has journalled so far (its journal or a worker's)."""
    folders = list(runs.iterdir()) if runs.is_dir() else []
    return case_store.count_results(folders[0]) if len(folders) == 1 else 0


def _interrupted_mid_run(tmp_path: Path, *args: str, second_signal: bool = False):
    """Signal the run after its third model request and its first journalled result (SIGTERM,
    or Ctrl-C twice: the second while the reports are written); return (the process, stdout,
    stderr)."""
    with FakeOpenAIServer(delayed(0.5, reply("<answer>x</answer>"))) as server:
        proc = _start(tmp_path, server, *args)
        _wait_for(lambda: len(server.requests) >= 3, "third request", proc)
        # and a result on disk: on a busy machine (-n 2 beside another make test) the third
        # request had left before any worker had journalled a result, so none was scored
        _wait_for(lambda: _journalled(tmp_path / "runs") >= 1, "first journalled result", proc)
        proc.send_signal(signal.SIGINT if second_signal else signal.SIGTERM)
        if second_signal:
            _wait_for((tmp_path / "plotting").exists, "plotting", proc)
            time.sleep(0.3)  # inside the slow plot
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    return proc, out, err


@pytest.mark.parametrize("workers", ["0", "2"])
def test_after_sigterm_junit_lists_every_case_never_run_and_the_gates_fail(tmp_path, workers):
    proc, out, err = _interrupted_mid_run(tmp_path, "-n", workers, "--gate", GATE,
                                          "--alluredir", str(tmp_path / "allure"))
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    missing = report["missing_cases"]
    assert report["partial"] and 0 < len(missing) < SELECTED
    # Allure too counts every selected case: the case the signal came in (allure-pytest's
    # bare result for it replaced) and those never begun, each once. Under xdist the run's end
    # waits for the workers to stop before it reads their journals and writes the "not run"
    # results (controller.wait_for_workers_to_stop): a case a worker finished meanwhile has its
    # own result alone, not a "not run" one beside it; and a worker stopped just after a case's
    # journal line notes the case for Allure first (signals.worker_interrupts_held).
    _assert_allure_has_every_case(tmp_path, missing, SELECTED)
    ran = SELECTED - len(missing)

    suite, testcases = _junit(tmp_path)
    cases = [t for t in testcases if t.get("classname") == "suites.toolhop.test_toolhop"]
    # every selected case is a named testcase, once; those that never ran are errors
    assert sorted(t.get("name") for t in cases) == sorted({t.get("name") for t in cases})
    assert len(cases) == SELECTED and all(t.get("name") for t in testcases)
    not_run = [t for t in cases if t.find("error") is not None]
    assert len(not_run) == len(missing) and int(suite["errors"]) == len(missing)
    assert {t.find("error").get("message") for t in not_run} == {  # type: ignore[union-attr]
        "not run: the run was interrupted (SIGTERM)"}
    assert {t.get("name").split("[")[1][:-1] for t in not_run} == set(missing)  # type: ignore[union-attr]
    run_check = [t for t in testcases if t.get("classname") == "toolbench-run"]
    assert [t.get("name") for t in run_check] == [RUN_COMPLETED]
    failure = run_check[0].find("failure")
    assert failure is not None and "the run was interrupted (SIGTERM)" in failure.get("message", "")
    # Besides the cases, a testcase per verdict of the report, once: the --gate, the run check,
    # and one --max-error-rate verdict per scenario with results (results/gates.py
    # error_rate_verdicts). How many scenarios have results is a race: under xdist the workers
    # run on after the signal until the session end reads their journals, and on a loaded
    # machine the signal comes late, so a mandatory case can have ended too: a fourth verdict.
    gates = report["gates"]
    scored = sorted({c["scenario"] for c in report["cases"]})
    assert sorted(g["gate"] for g in gates if g["kind"] == "error_rate") == [
        f"toolhop.{s}.error_rate<=0" for s in scored]
    assert [t.get("name") for t in testcases if t not in cases] == [g["gate"] for g in gates]
    # the suite's count is the testcases', each counted once (a JUnit reader in CI counts it)
    assert int(suite["tests"]) == len(testcases) == SELECTED + len(gates)
    assert ran == len(report["cases"])
    # The workers stopped with the run (the SIGTERM was passed on to them as Ctrl-C's SIGINT):
    # no worker journalled a result after the session end read the journals, so no case the
    # report names as missing has a result in a worker's journal (before: 6 of 16 did).
    (folder,) = (tmp_path / "runs").iterdir()
    assert _journalled_ids(folder) <= {c["case_id"] for c in report["cases"]}

    # one verdict source: the table's head counts the failed verdict, in the terminal and
    # Markdown, and no "all passed" stands above the FAILED line
    assert "all passed" not in out and f"== gates: {len(gates)} checked, 1 FAILED ==" in out
    assert out.strip().splitlines()[-1].startswith(
        "gates FAILED (exit status 2 INTERRUPTED): the run was interrupted (SIGTERM)")
    markdown = (tmp_path / "summary.md").read_text()
    assert f"**Gates: 1 of {len(gates)} failed**" in markdown and "all passed" not in markdown
    assert [g["gate"] for g in gates if not g["passed"]] == [RUN_COMPLETED]


def test_under_xdist_the_run_end_waits_for_the_workers_to_stop_before_naming_what_never_ran(
        tmp_path, monkeypatch):
    """The first SIGTERM is passed on to the workers as a SIGINT; a worker slow to stop (a
    busy machine's scheduler) finished the case it was in after the controller had read the
    workers' journals: the report named that case missing and Allure had it twice, "not run"
    beside the worker's own result. The run's end waits (a few seconds at most) for the
    workers to stop before it reads their journals, so every output names the same cases, each
    once."""
    monkeypatch.setenv("TOOLBENCH_TEST_WORKER_STOP_DELAY", "1.5")
    proc, out, err = _interrupted_mid_run(tmp_path, "-n", "2", "-p", "slow_worker_stop",
                                          "--alluredir", str(tmp_path / "allure"))
    report, journalled = _xdist_interrupted_outputs(tmp_path, proc, out, err)
    assert journalled <= {c["case_id"] for c in report["cases"]}
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED)


def _xdist_interrupted_outputs(tmp_path: Path, proc: subprocess.Popen, out: str,
                               err: str) -> tuple[dict, set[str]]:
    """An xdist run interrupted mid-run: its JSON report and the case ids its workers
    journalled, once its exit status and the share of cases it left are checked."""
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert 0 < len(report["missing_cases"]) < SELECTED
    (folder,) = (tmp_path / "runs").iterdir()
    return report, _journalled_ids(folder)


def _journalled_ids(folder: Path) -> set[str]:
    """The cases the workers journalled: their journals, or where the run's end removed them
    (every worker had stopped), the run's journal they were merged into."""
    workers = case_store.worker_journal_paths(folder)
    if workers:
        return {r.case_id for path in workers for r in read_journal(path)}
    return {r.case_id for r in case_store.read_cases(folder)}


@pytest.mark.parametrize("workers_stop_in_time", [True, False])
def test_an_interrupted_run_drops_its_worker_journals_once_every_worker_has_stopped(
        tmp_path, monkeypatch, workers_stop_in_time):
    """An interrupted FamilyTool run at -n 2 left 41 MB of plain worker journals (and its
    scratch files) beside its 1.4 MB journal, which holds every result they do: they are kept
    only while a worker may still write to them (it had not stopped within the run end's
    wait)."""
    # workers slow to stop (1.5 s, or 8 s: past any controller's way to its session end)
    monkeypatch.setenv("TOOLBENCH_TEST_WORKER_STOP_DELAY", "1.5" if workers_stop_in_time else "8")
    monkeypatch.setenv("TOOLBENCH_TEST_WORKER_WAIT", "120" if workers_stop_in_time else "0")
    proc, out, err = _interrupted_mid_run(tmp_path, "-n", "2", "-p", "slow_worker_stop",
                                          "-p", "worker_wait")
    report, journalled = _xdist_interrupted_outputs(tmp_path, proc, out, err)
    (folder,) = (tmp_path / "runs").iterdir()
    kept = sorted(p.name for p in folder.iterdir() if p.name.startswith(("worker-", "scratch")))
    if workers_stop_in_time:
        assert kept == [], kept
        reported = {c["case_id"] for c in report["cases"]}
        assert journalled == reported and not reported & set(report["missing_cases"])
    else:  # a worker still running may still write: nothing of theirs is taken away
        for worker in ("worker-gw0.jsonl", "worker-gw1.jsonl"):  # plain, or closed: its .gz
            assert any(name.startswith(worker) for name in kept), kept


def test_a_worker_stopped_inside_its_journal_append_leaves_the_case_its_allure_result(tmp_path):
    """A worker's journal line and its Allure note are written together: the interruption came
    in (tests/signal_in_journal.py) just after the line was written, so the run's end counted
    the case as run, while the Allure result of its cut-short test was dropped (the case not
    yet noted as known there): the case that ran had no Allure result at all."""
    with FakeOpenAIServer(delayed(0.5, reply("<answer>x</answer>"))) as server:
        proc = _start(tmp_path, server, "-n", "2", "-p", "signal_in_journal",
                      "--alluredir", str(tmp_path / "allure"))
        out, err = proc.communicate(timeout=180)
    report, journalled = _xdist_interrupted_outputs(tmp_path, proc, out, err)
    assert journalled and not journalled & set(report["missing_cases"])
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED)


#: Test plugins (tests/<name>.py) that send the run a SIGTERM at one point of its first case's
#: end, in one process (-n 0), and what that signal did there before it was guarded against.
STOPPED_AT = {
    # after the test body (labels set, verdict raised), before the report carrying the result:
    # the case was named never run beside allure-pytest's result, which said "passed"
    "signal_after_call": "named not run, its Allure result passed whatever its outcome",
    # after that report was made (the result on it, marked sent), before it was logged: the
    # result never reached the run's end, which named the case "not run" beside its result
    "signal_after_report": "named not run beside its own Allure result (19 for 18)",
    # inside allure-commons' hand-over of the result to its file logger: no result file
    "signal_in_allure_write": "no Allure result (17 for 18)",
    # inside attach_case, labels set, the case parameter not yet the id: a history id unlike
    # the case's in every other run
    "signal_in_attach": "a history id of its own",
    # inside allure-pytest's teardown, after the history id, before the run's labels
    "signal_in_allure_teardown": "no host, thread, framework, language, package or tag label",
}


@pytest.mark.parametrize("plugin", sorted(STOPPED_AT))
def test_a_case_a_signal_stops_at_its_end_in_one_process_is_run_once_with_its_result(
        tmp_path, plugin):
    """Wherever the signal lands in the first case's end (:data:`STOPPED_AT`), the case ran:
    the run counts it once, and Allure has its one result, with the case's status and the
    identity and labels of the case's result in any other run."""
    with FakeOpenAIServer(delayed(0.2, reply("<answer>x</answer>"))) as server:
        proc = _start(tmp_path, server, "-n", "0", "-p", plugin,
                      "--alluredir", str(tmp_path / "allure"))
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    ran = [c["case_id"] for c in report["cases"]]
    assert len(ran) == 1 and len(report["missing_cases"]) == SELECTED - 1
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED)
    (first,) = [r for r in _allure(tmp_path) if _case_of(r) == ran[0]]
    assert first["status"] == "failed", first  # a wrong answer ("x")
    suite, testcases = _junit(tmp_path)
    assert sum(t.get("name", "").startswith("test_toolhop") for t in testcases) == SELECTED


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_ctrl_c_before_the_first_result_still_writes_every_report(tmp_path, workers):
    """Interrupted while every case waits on its first reply: no case to score, but each report
    is this run's, and says so. A JSON report left unwritten would leave a CI step reading the
    file an earlier run wrote at that path as this run's (it did, with its metrics)."""
    (tmp_path / "report.json").write_text('{"stale": "an earlier run\'s report"}')
    with FakeOpenAIServer(delayed(30, reply("<answer>x</answer>"))) as server:
        proc = _start(tmp_path, server, "-n", workers, "--gate", GATE,
                      "--alluredir", str(tmp_path / "allure"))
        _wait_for(lambda: len(server.requests) >= 1, "first request", proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED, why="SIGINT")
    assert "stale" not in report and report["partial"] and report["cases"] == []
    assert sorted(report["missing_cases"]) == sorted(set(report["missing_cases"]))
    assert len(report["missing_cases"]) == SELECTED
    assert report["run"]["interrupted_by"] == "SIGINT" and report["run"]["exit_status"] == 2
    assert report["run"]["coverage"]["toolhop"]["cases"] == 0
    assert [(g["gate"], g["passed"]) for g in report["gates"]] == [(GATE, False), (RUN_COMPLETED, False)]
    (folder,) = (tmp_path / "runs").iterdir()
    kept = json.loads((folder / "report.json").read_text())  # no journal to name: cases inline
    assert kept["cases"] == [] and kept["missing_cases"] == report["missing_cases"]
    index = json.loads((folder / "run.json").read_text())
    assert (index["status"], index["suites"], index["n_cases"]) == ("interrupted", ["toolhop"], 0)

    suite, testcases = _junit(tmp_path)
    assert (int(suite["tests"]), int(suite["errors"]), int(suite["failures"])) == (SELECTED + 2, SELECTED, 2)
    assert [t.get("name") for t in testcases[SELECTED:]] == [GATE, RUN_COMPLETED]
    assert "**Gates: 2 of 2 failed**" in (tmp_path / "summary.md").read_text()
    assert "== gates: 2 checked, 2 FAILED ==" in out


@pytest.mark.parametrize(("phase", "workers"), [("validation", "0"), ("validation", "2"),
                                               ("workers", "2"), ("collection", "2")])
def test_a_sigterm_before_the_cases_are_collected_still_writes_every_report(
        tmp_path, monkeypatch, phase, workers):
    """SIGTERM while the session start reads the selection's data or starts the xdist workers:
    pytest skips the session end of a session whose start was interrupted, so no report was
    written and an earlier run's --toolbench-json and --junitxml stood as this run's. SIGTERM a
    little later, while the xdist workers collect: the reports said "every selected case had
    reported" (no node id had reached the controller, so none was counted missing). Then each
    report was this run's but said only that which cases it left was unknown, with no JUnit
    testcase per case, where an in-process collection the same signal stopped named them all
    (test_a_ctrl_c_before_the_first_result...). Now the session end collects the selection the
    run never did, and every report names each case, as with -n 0."""
    (tmp_path / "report.json").write_text('{"stale": "an earlier run\'s report"}')
    (tmp_path / "junit.xml").write_text('<testsuites><testsuite name="stale"/></testsuites>')
    monkeypatch.setenv("TOOLBENCH_TEST_SLOW_AT", phase)
    monkeypatch.setenv("TOOLBENCH_TEST_STARTING", str(tmp_path / "starting"))
    monkeypatch.setenv("TOOLBENCH_TEST_START_DELAY", "2")
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        proc = _start(tmp_path, server, "-n", workers, "--gate", GATE, "-p", "slow_start",
                      "--alluredir", str(tmp_path / "allure"))
        _wait_for((tmp_path / "starting").exists, phase, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert not server.requests  # no case ran
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED)
    assert "stale" not in report and report["partial"] and report["cases"] == []
    assert report["run"]["interrupted_by"] == "SIGTERM" and report["run"]["exit_status"] == 2
    assert len(report["missing_cases"]) == len(set(report["missing_cases"])) == SELECTED
    (run_check,) = [g for g in report["gates"] if g["gate"] == RUN_COMPLETED]
    assert not run_check["passed"] and MISSING_UNKNOWN not in run_check["reason"]
    assert f"{SELECTED} of {SELECTED} selected cases have no result" in run_check["reason"]
    suite, testcases = _junit(tmp_path)
    assert suite.get("name") != "stale"
    assert [t.get("name") for t in testcases[SELECTED:]] == [GATE, RUN_COMPLETED]
    not_run = {t.get("name").split("[")[1][:-1] for t in testcases[:SELECTED]  # type: ignore[union-attr]
               if t.find("error") is not None}
    assert not_run == set(report["missing_cases"])
    assert (int(suite["tests"]), int(suite["errors"]), int(suite["failures"])) == (
        SELECTED + 2, SELECTED, 2)  # a testcase per case never run, the --gate and the run check
    assert "== gates: 2 checked, 2 FAILED ==" in out


def test_a_ctrl_c_to_the_process_group_while_the_workers_start_writes_every_report(
        tmp_path, monkeypatch):
    """Ctrl-C at a terminal reaches the whole process group, the xdist workers with the
    controller: one that xdist was still setting up died of it, and xdist's setup failed
    (execnet: "connection already closed"), an INTERNALERROR: exit status 3, no report at all.
    The lost worker is the held Ctrl-C's own doing: the run ends interrupted, every report
    naming each case, as when the signal reaches the controller alone (above)."""
    monkeypatch.setenv("TOOLBENCH_TEST_SLOW_AT", "workers")
    monkeypatch.setenv("TOOLBENCH_TEST_STARTING", str(tmp_path / "starting"))
    monkeypatch.setenv("TOOLBENCH_TEST_START_DELAY", "1")
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        proc = _start(tmp_path, server, "-n", "2", "--gate", GATE, "-p", "slow_start",
                      "--alluredir", str(tmp_path / "allure"), own_group=True)
        _wait_for((tmp_path / "starting").exists, "the workers' start", proc)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert not server.requests
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    assert "INTERNALERROR" not in out + err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["interrupted_by"] == "SIGINT" and report["cases"] == []
    assert len(set(report["missing_cases"])) == SELECTED
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], SELECTED, why="SIGINT")
    suite, testcases = _junit(tmp_path)
    assert (int(suite["tests"]), int(suite["errors"])) == (SELECTED + 2, SELECTED)
    assert [t.get("name") for t in testcases[SELECTED:]] == [GATE, RUN_COMPLETED]


@pytest.mark.parametrize(("phase", "workers"), [("validation", "0"), ("validation", "2"),
                                               ("collection", "0")])
def test_a_sigterm_before_the_collection_names_only_the_cases_k_selects(tmp_path, monkeypatch,
                                                                        phase, workers):
    """The selection the session end collects for a run stopped before its collection is the
    one pytest would have run: -k's deselected cases are not named as missing. So too for an
    in-process collection the signal cut short, which named all 18 cases before -k deselected
    any (pytest ends a collection it was interrupted in with what it had)."""
    monkeypatch.setenv("TOOLBENCH_TEST_SLOW_AT", phase)
    monkeypatch.setenv("TOOLBENCH_TEST_STARTING", str(tmp_path / "starting"))
    monkeypatch.setenv("TOOLBENCH_TEST_START_DELAY", "2")
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        proc = _start(tmp_path, server, "-n", workers, "-k", "direct", "-p", "slow_start",
                      "--alluredir", str(tmp_path / "allure"))
        _wait_for((tmp_path / "starting").exists, phase, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted(report["missing_cases"]) == sorted(f"{r}-direct" for r in _direct_ids())
    _assert_allure_has_every_case(tmp_path, report["missing_cases"], N)  # -k's 6, not 18
    suite, testcases = _junit(tmp_path)
    assert (int(suite["tests"]), int(suite["errors"])) == (N, N)


def test_a_case_never_run_lines_up_in_allure_history_with_the_run_where_it_ran(tmp_path,
                                                                               monkeypatch):
    """Two runs in one results folder, as a CI job keeps them: a whole run writes a result per
    case and none "not run"; a run of the same selection interrupted before its cases writes a
    "not run" result for each, with the history id and test case id of that case's result in
    the whole run, so Allure's history shows the case as not run that time."""
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        whole = _start(tmp_path, server, "-n", "0", "-k", "direct",
                       "--alluredir", str(tmp_path / "allure"))
        out, err = whole.communicate(timeout=300)
    assert whole.returncode == ToolbenchExit.CASES_FAILED, out[-3000:] + err[-3000:]  # "x": wrong
    first = _allure(tmp_path)
    assert len(first) == N and all({"name": OUTCOME_LABEL, "value": NOT_RUN} not in r["labels"]
                                   for r in first)
    _assert_allure_has_every_case(tmp_path, [], N)
    for r in first:  # a cut-short result completed here has allure-pytest's history id too
        assert _completed_cut_short(r).historyId == r["historyId"]
    monkeypatch.setenv("TOOLBENCH_TEST_SLOW_AT", "validation")
    monkeypatch.setenv("TOOLBENCH_TEST_STARTING", str(tmp_path / "starting"))
    monkeypatch.setenv("TOOLBENCH_TEST_START_DELAY", "2")
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        proc = _start(tmp_path, server, "-n", "2", "-k", "direct", "-p", "slow_start",
                      "--alluredir", str(tmp_path / "allure"))
        _wait_for((tmp_path / "starting").exists, "validation", proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    uuids = {r["uuid"] for r in first}
    second = [r for r in _allure(tmp_path) if r["uuid"] not in uuids]
    assert len(second) == N and all(r["status"] == "skipped" for r in second)
    identity = {(_case_of(r), r["historyId"], r["testCaseId"], r["name"]) for r in first}
    assert {(_case_of(r), r["historyId"], r["testCaseId"], r["name"]) for r in second} == identity


def _completed_cut_short(written: dict):
    """``written`` (a result allure-pytest wrote) as a signal left it before its teardown: its
    labels and parameters (attach_case's), no history id; then completed by the plugin."""
    from allure_commons.model2 import Label, Parameter, TestResult

    from pytest_toolbench.report.allure_report import _finish_labelled

    result = TestResult(fullName=written["fullName"],
                        labels=[Label(**x) for x in written["labels"]],
                        parameters=[Parameter(**p) for p in written["parameters"]])
    _finish_labelled(result)
    return result


def test_every_history_id_written_here_follows_allure_pytests_own_recipe(monkeypatch):
    """The results the plugin writes itself (a cut-short test completed, a case never run) take
    their history id from allure-pytest's ``get_history_id``, as allure-pytest's own results do:
    a recipe of their own would drift from it, and a case's history split in two."""
    import allure_pytest.utils
    from allure_commons.model2 import Label, Parameter, TestResult

    from pytest_toolbench.benchmarks.base import Case
    from pytest_toolbench.report.allure_report import _built_result, _finish_labelled

    calls = []

    def recipe(full_name, parameters, original_values):
        calls.append(sorted(str(original_values.get(p.name, p.value)) for p in parameters
                            if not p.excluded))
        return md5("changed", full_name, *calls[-1])

    monkeypatch.setattr(allure_pytest.utils, "get_history_id", recipe)
    case = Case(id="toolhop-1-direct", benchmark="toolhop", scenario="direct", sample_id="1",
                labels={"hops": 3})
    built = _built_result("suites/toolhop/test_toolhop.py::test_toolhop[toolhop-1-direct]", case,
                          "m", NOT_RUN, "skipped", "not run")
    cut = TestResult(fullName=built.fullName, labels=[Label(name="epic", value="toolhop")],
                     parameters=[Parameter(name=p.name, value=p.value, excluded=p.excluded)
                                 for p in built.parameters])
    _finish_labelled(cut)
    expected = md5("changed", built.fullName, "'m'", "Case(toolhop-1-direct)")
    assert (built.historyId, cut.historyId) == (expected, expected)
    assert calls == [["'m'", "Case(toolhop-1-direct)"]] * 2


FAILING_CONTROLLER_COLLECTION = """
import pytest


def pytest_collection_modifyitems(config):
    if config.pluginmanager.has_plugin("dsession"):  # the xdist controller's session end only
        raise RuntimeError("this collection fails")
"""


def test_a_session_end_collection_that_fails_leaves_the_missing_cases_unknown(tmp_path,
                                                                            monkeypatch):
    """The session end's collection of a run stopped before its own (above) fails: its cases
    stay unknown, as before, never "every selected case had reported" of a selection of none."""
    (tmp_path / "failing_collection.py").write_text(FAILING_CONTROLLER_COLLECTION)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("TOOLBENCH_TEST_SLOW_AT", "validation")
    monkeypatch.setenv("TOOLBENCH_TEST_STARTING", str(tmp_path / "starting"))
    monkeypatch.setenv("TOOLBENCH_TEST_START_DELAY", "2")
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        proc = _start(tmp_path, server, "-n", "2", "--gate", GATE, "-p", "slow_start",
                      "-p", "failing_collection")
        _wait_for((tmp_path / "starting").exists, "validation", proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] and report["missing_cases"] == []
    (run_check,) = [g for g in report["gates"] if g["gate"] == RUN_COMPLETED]
    assert MISSING_UNKNOWN in run_check["reason"]
    assert "every selected case had reported" not in run_check["reason"]


def _direct_ids() -> list[str]:
    """``toolhop-<id>`` of each bundled ToolHop record (its direct case's id, less the scenario)."""
    return [f"toolhop-{record['id']}" for record in json.loads(BUNDLED_TOOLHOP.read_text())]


STOP_PLUGIN = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    pytest.exit("stopped by my plugin")
"""


@pytest.mark.parametrize(("stop", "named"), [("collection", "1 error during collection"),
                                             ("pytest.exit", "pytest.exit: stopped by my plugin")])
def test_a_stop_by_pytest_itself_is_named_as_pytest_names_it_not_as_a_ctrl_c(tmp_path, stop, named):
    """pytest stops a run whose collection failed, or on a plugin's ``pytest.exit(reason)``, as an
    interruption (exit status 2): the reports name its reason, where they said "SIGINT", a
    Ctrl-C nobody pressed."""
    extra: list[str] = []
    env = dict(os.environ)
    if stop == "collection":
        bad = tmp_path / "test_broken.py"
        bad.write_text("def broken(:\n")
        extra = [str(bad)]
    else:
        (tmp_path / "stop_plugin.py").write_text(STOP_PLUGIN)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
        extra = ["-p", "stop_plugin"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", *extra, "-q", "-p", "no:cacheprovider",
         "-p", "no:randomly", "--data", "sample", "--model", "oracle", "--no-cache",
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "report.json")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"the run was interrupted ({named})" in " ".join(proc.stdout.split())
    assert "SIGINT" not in proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["interrupted_by"] == named
    assert report["cases"] == [] and len(report["missing_cases"]) == 18


def test_a_stepwise_stop_is_named_as_the_option_not_in_pytests_own_words(tmp_path):
    """``--stepwise`` stops a run at its first failing case as an interruption (pytest's exit
    status 2): the reports said "interrupted (Test failed, continuing from this test next
    run.)", naming no option."""
    with FakeOpenAIServer(reply("<answer>definitely wrong</answer>")) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "--sw", "-q", "-p", "no:randomly",
             "-o", f"cache_dir={tmp_path / 'pytest-cache'}", "--data", "sample", "--model", "m",
             "--base-url", server.base_url, "--api-key", "t", "--no-cache",
             "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "report.json")],
            cwd=REPO, capture_output=True, text=True, timeout=300,
            env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")})
    assert proc.returncode == ToolbenchExit.INTERRUPTED, proc.stdout[-3000:] + proc.stderr[-3000:]
    named = "--stepwise stopped at the first failing case; the next --stepwise run starts there"
    assert f"the run was interrupted ({named})" in " ".join(proc.stdout.split())
    assert "interrupted (Test failed" not in " ".join(proc.stdout.split())  # (pytest's own
    # "!!! Interrupted: Test failed, continuing from this test next run. !!!" line stays)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["interrupted_by"] == named and len(report["missing_cases"]) == 17


def test_under_xdist_a_collection_error_stops_the_run_as_without_it(tmp_path):
    """pytest without xdist stops a run whose collection failed (exit 2, the test above). xdist
    ran what its workers did collect instead, and with a gate on those cases the run passed:
    ``pytest suites -n 2 --gate ...`` with one suite that cannot load (its benchmark not
    installed, a syntax error) exited 0, "gates PASSED". It now ends interrupted by that error,
    partial, exit 2; --continue-on-collection-errors still runs on, as pytest's own does."""
    bad = tmp_path / "test_broken.py"
    bad.write_text("def broken(:\n")
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", str(bad), "-q", "-n", "2",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--data", "sample", "--model", "oracle",
           "--no-cache", "--runs-dir", str(tmp_path / "runs"), "--scenario", "direct",
           "--gate", "toolhop.direct.accuracy>=0.5"]
    proc = subprocess.run([*cmd, "--toolbench-json", str(tmp_path / "report.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the run was interrupted (1 error during collection)" in " ".join(proc.stdout.split())
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] and report["run"]["interrupted_by"] == "1 error during collection"
    assert len(report["cases"]) == 6  # what the workers collected ran, and is reported
    (run_check,) = [g for g in report["gates"] if g["gate"] == RUN_COMPLETED]
    assert not run_check["passed"]
    going_on = subprocess.run([*cmd, "--continue-on-collection-errors"], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
    assert going_on.returncode == ToolbenchExit.OK, going_on.stdout[-3000:]


def test_a_second_ctrl_c_while_the_reports_are_written_exits_2_with_every_report(tmp_path):
    proc, out, err = _interrupted_mid_run(tmp_path, "-n", "0", "--gate", GATE, second_signal=True)
    assert proc.returncode == ToolbenchExit.INTERRUPTED, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err, out[-3000:] + err[-3000:]
    assert "pytest-toolbench: SIGINT: finishing the reports first" in err
    for name in ("report.json", "junit.xml", "summary.md"):
        assert (tmp_path / name).exists(), name
    assert list((tmp_path / "report.plots").glob("*.png"))  # the plots it was writing: finished
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["interrupted_by"] == "SIGINT"
    suite, testcases = _junit(tmp_path)
    assert int(suite["errors"]) == len(report["missing_cases"]) > 0
    assert "gates FAILED (exit status 2 INTERRUPTED)" in out


def _finished_run_signalled_while_writing(tmp_path: Path, signals: list[signal.Signals],
                                          *args: str) -> tuple[subprocess.Popen, str, str]:
    """Run every case of ToolHop's direct scenario (the oracle: no endpoint), then send
    ``signals`` (0.1 s apart) while the plots, among the last reports, are written."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(REPO / "tests"), os.environ.get("PYTHONPATH")])),
        "TOOLBENCH_TEST_PLOTTING": str(tmp_path / "plotting")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-p", "slow_plots", "--model", "oracle", "--scenario", "direct",
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "report.json"),
         "--junitxml", str(tmp_path / "junit.xml"), "--toolbench-md", str(tmp_path / "summary.md"),
         *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for((tmp_path / "plotting").exists, "plotting", proc)
    time.sleep(0.3)
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(0.1)
    out, err = proc.communicate(timeout=120)
    return proc, out, err


def _assert_every_output_says_complete(tmp_path: Path, status: int) -> None:
    """The JSON report, the run folder's report and index, and the JUnit file all tell the story
    of a run whose every case reported, ended with ``status``."""
    report = json.loads((tmp_path / "report.json").read_text())
    (folder,) = (tmp_path / "runs").iterdir()
    kept = json.loads((folder / "report.json").read_text())
    for doc in (report, kept):
        assert not doc["partial"] and doc["missing_cases"] == []
        assert (doc["run"]["interrupted_by"], doc["run"]["exit_status"]) == (None, status)
    index = json.loads((folder / "run.json").read_text())
    assert (index["status"], index["partial"], index["exit_status"]) == ("finished", False, status)
    suite, testcases = _junit(tmp_path)
    assert suite["errors"] == "0" and RUN_COMPLETED not in {t.get("name") for t in testcases}
    assert int(suite["failures"]) == sum(not g["passed"] for g in report["gates"])


@pytest.mark.parametrize(("signum", "workers"), [(signal.SIGINT, "0"), (signal.SIGTERM, "2")])
def test_a_signal_while_a_finished_run_writes_its_reports_leaves_every_output_agreeing(
        tmp_path, signum, workers):
    """Every case had reported when the signal came: the reports are finished as they were
    being written (a run complete, its gates' verdicts) and the exit status is theirs. Before,
    the run exited 2 with a failed "run completed" line in the terminal only, while the JSON
    reports, the run's index and the JUnit file said the run had passed with exit status 0."""
    proc, out, err = _finished_run_signalled_while_writing(tmp_path, [signum], "--gate", GATE,
                                                           "-n", workers)
    assert proc.returncode == ToolbenchExit.OK, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err
    assert f"pytest-toolbench: {signum.name}: finishing the reports first" in err
    _assert_every_output_says_complete(tmp_path, ToolbenchExit.OK)
    suite, _ = _junit(tmp_path)
    assert int(suite["tests"]) == N + 2  # every case, the --gate and the one error-rate verdict
    assert "all passed" in out and out.strip().splitlines()[-1].startswith(
        "gates PASSED (exit status 0 OK)")


def test_two_signals_while_the_reports_are_written_do_not_cut_them_short(tmp_path):
    """A second signal does not cut the reports short, a third stops at once (README,
    'Interrupted runs'): two SIGTERMs during the reports, 0.1 s apart, stopped the run at once,
    leaving no JUnit file, no terminal summary and a run index saying exit status 0 beside an
    exit status of 2."""
    proc, out, err = _finished_run_signalled_while_writing(
        tmp_path, [signal.SIGTERM, signal.SIGTERM])
    assert proc.returncode == ToolbenchExit.OK, out[-3000:] + err[-3000:]
    assert "stopping at once" not in err and "Traceback" not in out + err
    assert list((tmp_path / "report.plots").glob("*.png"))  # the plots it was writing: finished
    _assert_every_output_says_complete(tmp_path, ToolbenchExit.OK)
    assert "pytest-toolbench" in out and f"{N} passed" in out
