"""A run killed outright (SIGKILL: the OOM killer, a lost CI runner) is scored by `toolbench finish`.

The end-to-end test kills a real ``pytest suites/toolhop -n 2`` run (its whole process group) once
some results are journalled, then reads what the finished run folder gives a CI system: the
report's partial flag, interruption, gates and exit status, its metrics against the results the
journals held, and `toolbench runs` / `compare` reading it like any other run. Others kill the
controller alone, whose orphaned workers must record nothing its death alone caused
(session/orphan.py), against the SDK process dying alone in a live run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fake_openai_server import FakeOpenAIServer, HandlerResult, delayed, reply
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results import case_store
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.journal import read_journal
from pytest_toolbench.results.partial_run import MISSING_UNKNOWN, RUN_COMPLETED, missing_text
from pytest_toolbench.runs.record import RunIndex, RunStart, read_index, write_index
from pytest_toolbench.session.killed_run import KILLED, KilledRunError, finish_killed_run
from pytest_toolbench.session.orphan import ControllerWatch

REPO = Path(__file__).resolve().parents[1]
GATE = "toolhop.direct.accuracy>=0"  # passes on any answer: only the kill can fail the gates


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def _journalled(run_dir: Path) -> dict[str, str]:
    """Case id -> scenario of every result the run's journal and the workers' journals hold."""
    out: dict[str, str] = {}
    for path in [case_store.journal_path(run_dir), *case_store.worker_journal_paths(run_dir)]:
        out.update({r.case_id: r.scenario for r in read_journal(path)})
    return out


def _killed_run(tmp_path: Path, workers: str, *args: str, results: int = 4) -> Path:
    """A ToolHop run over the bundled sample (``-n workers``), SIGKILLed with its workers (and
    its SDK process) once ``results`` results are journalled (0: once it has kept its selection,
    every request still waiting on the endpoint); returns its run folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    delay = 0.3 if results else 120.0

    def ready(run_dir: Path) -> bool:
        if results:
            return case_store.count_results(run_dir) >= results
        return (run_dir / case_store.SCRATCH / case_store.SELECTION_NODES).is_file()

    with FakeOpenAIServer(delayed(delay, reply("<answer>x</answer>"))) as server:
        cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--data", "sample", "-n", workers, "--concurrency", "1",
               "--runs-dir", str(tmp_path / "runs"), "--no-cache", "--base-url", server.base_url,
               "--api-key", "t", "--model", "m", "--gate", GATE, *args]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True)
        deadline = time.monotonic() + 180
        runs = tmp_path / "runs"
        while not (runs.is_dir() and any(ready(d) for d in runs.iterdir())):
            assert proc.poll() is None, f"the run ended before it was killed: {proc.communicate()}"
            assert time.monotonic() < deadline, f"not ready to kill ({results} results) in 180 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    (run_dir,) = runs.iterdir()
    return run_dir


@pytest.mark.parametrize(("workers", "selection_kept"), [("2", True), ("2", False), ("0", True)],
                         ids=["-n 2", "-n 2, killed before its selection was kept", "-n 0"])
def test_finish_scores_a_killed_run_from_its_journals_and_compare_reads_it(tmp_path, workers,
                                                                           selection_kept):
    run_dir = _killed_run(tmp_path, workers)
    assert not (run_dir / "report.json").exists()
    assert read_index(run_dir).status == "incomplete"  # type: ignore[union-attr]
    assert "killed (toolbench finish scores it)" in cli("runs", "--runs-dir", str(tmp_path / "runs")).stdout
    journalled = _journalled(run_dir)  # before finish: the workers' journals go then
    selection = case_store.read_selection(run_dir)
    assert selection is not None and len(selection) == 18  # the sample's 6 records x 3 scenarios
    if not selection_kept:  # as a run killed before it had collected
        (run_dir / case_store.SCRATCH / case_store.SELECTION).unlink()
    missing = [i for i in selection if i not in journalled] if selection_kept else []
    assert not selection_kept or 0 < len(missing) < 18

    nodes = case_store.read_selection_nodes(run_dir, case_store.read_selection(run_dir))
    assert nodes is None if not selection_kept else sorted(nodes) == sorted(selection)

    out_json, out_md = tmp_path / "ci" / "report.json", tmp_path / "ci" / "summary.md"
    out_junit, out_allure = tmp_path / "ci" / "junit.xml", tmp_path / "ci" / "allure"
    done = cli("finish", run_dir.name[:15], "--runs-dir", str(tmp_path / "runs"),
               "--toolbench-json", str(out_json), "--toolbench-md", str(out_md),
               "--junitxml", str(out_junit), "--alluredir", str(out_allure))
    if selection_kept:
        assert done.returncode == 0, done.stdout + done.stderr
    else:  # no node id to name a testcase by: said, the other reports written all the same
        assert done.returncode == ToolbenchExit.OUTPUT_ERROR, done.stdout + done.stderr
        assert f"JUnit XML {out_junit}: not written (the run kept no pytest node ids" in done.stderr
        assert not out_junit.exists() and not list(out_junit.parent.glob(".*.tmp"))
    assert f"{len(journalled)} results scored from its journal" in done.stdout
    assert f"partial ({KILLED})" in done.stdout

    report = json.loads((run_dir / "report.json").read_text())
    run = report["run"]
    assert report["partial"] and run["interrupted_by"] == KILLED and run["missing_cases"] == missing
    assert run["exit_status"] == ToolbenchExit.INTERRUPTED
    assert run["settings"]["model"] == "m" and run["settings"]["gates"] == [GATE]
    assert "--api-key" in run["pytest_args"] and "t" not in run["pytest_args"]  # redacted at start
    assert run["coverage"]["toolhop"]["suite_cases"] == 18
    # every result either journal held, once; the workers' journals merged, then removed
    cases = case_store.read_cases(run_dir)
    assert {c.case_id for c in cases} == set(journalled)
    assert report["cases_journal"]["count"] == len(journalled)
    assert sorted(p.name for p in run_dir.iterdir()) == ["report.json", "results.jsonl.gz", "run.json"]
    # the metrics: "x" answers nothing right, over each scenario's journalled cases
    for scenario in report["metrics"]["scenarios"]:
        n = sum(1 for s in journalled.values() if s == scenario["scenario"])
        accuracy = scenario["metrics"]["accuracy"]
        assert (accuracy["value"], accuracy["n"]) == (0.0, n)
    # the gates: the --gate as asked, and the run's own verdict saying what is not known
    verdicts = {g["gate"]: g for g in report["gates"]}
    assert verdicts[GATE]["passed"] and not verdicts[RUN_COMPLETED]["passed"]
    lost = missing_text(missing, 18) if selection_kept else MISSING_UNKNOWN
    assert verdicts[RUN_COMPLETED]["reason"] == f"the run was interrupted ({KILLED}): {lost}"

    # the reports a CI step asked for beside the folder: the same record, its cases inline
    inline = json.loads(out_json.read_text())
    assert {k: v for k, v in inline.items() if k not in ("cases", "cases_journal")} == {
        k: v for k, v in report.items() if k not in ("cases", "cases_journal")}
    assert sorted(c["case_id"] for c in inline["cases"]) == sorted(journalled)
    summary = out_md.read_text()
    assert f"run `{run['run_id']}`" in summary or run["run_id"] in summary
    assert RUN_COMPLETED in summary and KILLED in summary
    if selection_kept:
        _check_junit(out_junit, nodes, journalled, missing, report,
                     {c.case_id: c.wall_s for c in cases})
    _check_allure(out_allure, report)

    listed = cli("runs", "--runs-dir", str(tmp_path / "runs"))
    assert f"partial ({KILLED})" in listed.stdout and "exit 2 INTERRUPTED" in listed.stdout
    compared = cli("compare", run_dir.name, str(run_dir / "report.json"), "--runs-dir",
                   str(tmp_path / "runs"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert f"{sum(1 for s in journalled.values() if s == 'direct')} paired" in compared.stdout

    again = cli("finish", run_dir.name, "--runs-dir", str(tmp_path / "runs"))
    assert again.returncode == 2 and "has its report already" in again.stderr


def _check_junit(path: Path, nodes: dict[str, str], journalled: dict[str, str], missing: list[str],
                 report: dict, walls: dict[str, float | None]) -> None:
    """The JUnit XML `finish --junitxml` wrote: named as pytest names the cases' testcases, one
    per selected case (with --gate, a finished one passes or is skipped; one left without a
    result is an error), each finished one timed as its case ran (``walls``: its wall time, at
    least the endpoint's 0.3 s), one per gate, the data on the suite, the run's time."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    cases = {(tc.get("classname"), tc.get("name")): tc for tc in suite.iter("testcase")}
    gate_classes = {"toolbench-gates", "toolbench-error-rate", "toolbench-run"}
    gates = {name: tc for (cls, name), tc in cases.items() if cls in gate_classes}
    assert sorted(gates) == sorted(g["gate"] for g in report["gates"])
    assert gates[RUN_COMPLETED].find("failure") is not None and gates[GATE].find("failure") is None
    for case_id, nodeid in nodes.items():
        path_part, _, name = nodeid.rpartition("::")
        tc = cases[(path_part.removesuffix(".py").replace("/", "."), name)]
        error = tc.find("error")
        if case_id in missing:
            assert error is not None and error.get("message") == f"not run: the run was interrupted ({KILLED})"
        else:  # "x" is a wrong answer: under --gate a passed testcase saying so
            assert case_id in journalled and error is None and tc.find("failure") is None
            props = {p.get("name"): p.get("value") for p in tc.iter("property")}
            assert props["toolbench.outcome"] == "failed"
            wall = walls[case_id]
            assert wall is not None and wall >= 0.3
            assert float(tc.get("time")) == pytest.approx(wall, abs=0.001)
    assert len(cases) == len(nodes) + len(gates)
    listed = [tc.get("name") for tc in suite.iter("testcase") if tc.get("classname") not in gate_classes]
    assert listed == [nodeid.rpartition("::")[2] for nodeid in nodes.values()]  # selection order
    assert int(suite.get("tests")) == len(cases) and int(suite.get("errors")) == len(missing)
    assert int(suite.get("failures")) == sum(1 for g in report["gates"] if not g["passed"])
    assert float(suite.get("time")) == pytest.approx(report["run"]["wall_s"], abs=0.01)
    suite_props = {p.get("name") for p in suite.find("properties").iter("property")}
    assert "toolbench.data.toolhop" in suite_props


def _check_allure(alluredir: Path, report: dict) -> None:
    """The run-level Allure files `finish --alluredir` wrote, as the run's own end would have:
    the run among the folder's, each gate a check, the metrics as the run's attachments."""
    run_id = report["run"]["run_id"]
    assert (alluredir / "toolbench-runs" / f"{run_id}.json").is_file()
    for name in ("environment.xml", "categories.json", "allurerc.mjs"):
        assert (alluredir / name).stat().st_size > 0, name
    assert "<key>m</key><value>gates FAILED" in (alluredir / "environment.xml").read_text()
    checks = {json.loads(p.read_text())["name"] for p in alluredir.glob("*-check.json")}
    assert checks == {f"m · gate {g['gate']}" for g in report["gates"]}
    attachments = [a for p in alluredir.glob("*-globals.json")
                   for a in json.loads(p.read_text())["attachments"]]
    text = next(a for a in attachments if a["name"] == f"m · run {run_id} · toolbench metrics")
    assert KILLED in (alluredir / text["source"]).read_text()


def _allure_results(alluredir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]


def _check_allure_generates(alluredir: Path, out: Path) -> None:
    """`allure generate` accepts the folder (where Allure 3 is installed: `make allure`)."""
    from pytest_toolbench.report.allure_html import find_allure

    exe = find_allure([REPO])
    if exe is None:
        return
    generated = subprocess.run([exe, "generate", str(alluredir), "-o", str(out)],
                               capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert (out / "index.html").is_file()


def _case_of(result: dict) -> str:
    (value,) = [p["value"] for p in result["parameters"] if p["name"] == "case"]
    return value[1:-1]  # allure's represent(): quoted


def _identity(result: dict) -> tuple:
    """What lines a result up with the same case's in other runs, and places it in the report
    (every label but the outcome's and the process's)."""
    labels = sorted((x["name"], x["value"]) for x in result["labels"] if x["name"]
                    not in ("toolbench_outcome", "error_kind", "thread", "host", "toolbench_run"))
    return (result["name"], result["fullName"], result["historyId"], result["testCaseId"],
            tuple(labels), tuple((p["name"], p["value"], p.get("excluded")) for p in result["parameters"]))


def _run_of(result: dict) -> str | None:
    """The run a result names (its ``toolbench_run`` label), None if it names none."""
    return next((x["value"] for x in result["labels"] if x["name"] == "toolbench_run"), None)


def test_finish_alluredir_writes_a_not_run_result_for_each_case_the_killed_run_never_finished(
        tmp_path):
    """A run killed outright never wrote the "not run" Allure results an interrupted run's end
    writes: `toolbench finish --alluredir` writes them, one per selected case left without a
    result and none for a case that finished, each identified as that case's result in a run
    where it ran is (history id, test case id, name, labels, parameters), and Allure reads the
    folder."""
    alluredir = tmp_path / "allure"
    run_dir = _killed_run(tmp_path, "2", "--alluredir", str(alluredir))
    journalled = _journalled(run_dir)
    selection = case_store.read_selection(run_dir)
    assert selection is not None
    missing = [i for i in selection if i not in journalled]
    assert 0 < len(missing) < len(selection)
    before = {r["uuid"] for r in _allure_results(alluredir)}

    done = cli("finish", run_dir.name, "--runs-dir", str(tmp_path / "runs"),
               "--alluredir", str(alluredir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note:" not in done.stdout  # every case never run was found in its data again
    written = [r for r in _allure_results(alluredir) if r["uuid"] not in before]
    # (a finished case the kill left without its result file gets it back: not a "not run")
    had = {_case_of(r) for r in _allure_results(alluredir) if r["uuid"] in before}
    assert all(_case_of(r) in journalled and _case_of(r) not in had
               for r in written if r["status"] != "skipped")
    written = [r for r in written if r["status"] == "skipped"]
    assert sorted(_case_of(r) for r in written) == sorted(missing)
    message = f"not run: the run was interrupted ({KILLED})"
    for r in written:
        assert r["status"] == "skipped" and r["statusDetails"]["message"] == message
        assert {"name": "toolbench_outcome", "value": "not run"} in r["labels"]
        assert _run_of(r) == run_dir.name  # the killed run's, as its own results are
    assert {_run_of(r) for r in _allure_results(alluredir) if r["uuid"] in before} == {run_dir.name}

    # the same cases in a whole run, into the same folder: the results line up case by case
    whole = tmp_path / "whole"
    with FakeOpenAIServer(reply("<answer>x</answer>")) as server:
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
             "-p", "no:cacheprovider", "--data", "sample", "-n", "0", "--runs-dir",
             str(whole / "runs"), "--no-cache", "--base-url", server.base_url, "--api-key", "t",
             "--model", "m", "--alluredir", str(whole / "allure"), "-k", " or ".join(missing)],
            cwd=REPO, capture_output=True, text=True, timeout=300,
            env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")})
    normal = {_case_of(r): r for r in _allure_results(whole / "allure")}
    assert sorted(normal) == sorted(missing), ran.stdout[-3000:]
    assert all(r["status"] != "skipped" for r in normal.values())
    for r in written:
        assert _identity(r) == _identity(normal[_case_of(r)])

    _check_allure_generates(alluredir, tmp_path / "html")


def test_a_run_killed_before_any_result_still_gets_its_reports(tmp_path):
    """Killed once it has collected, before any reply: nothing to score, but every report is
    written, as the run's own end writes them when it is interrupted before its first result: the
    JSON report says the run is partial with every case missing (a CI step reading a JSON file
    at that path must not read an earlier run's), and the JUnit file names every selected case
    as not run, with the failed verdicts and the data."""
    import xml.etree.ElementTree as ET

    run_dir = _killed_run(tmp_path, "0", results=0)
    nodes = case_store.read_selection_nodes(run_dir, case_store.read_selection(run_dir))
    assert nodes is not None and len(nodes) == 18
    started = read_index(run_dir).started  # type: ignore[union-attr]
    out_junit, out_json = tmp_path / "ci" / "junit.xml", tmp_path / "ci" / "report.json"
    out_junit.parent.mkdir()
    done = cli("finish", str(run_dir), "--junitxml", str(out_junit), "--toolbench-json",
               str(out_json))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: no case had finished: nothing to score" in done.stdout
    assert f"JUnit XML written: {out_junit}" in done.stdout
    assert f"JSON report written: {out_json}" in done.stdout
    index = read_index(run_dir)
    assert index is not None and index.status == "interrupted" and index.interrupted_by == KILLED
    assert index.exit_status == ToolbenchExit.INTERRUPTED and index.finished >= started
    assert index.suites == ["toolhop"] and index.n_cases == 0
    report = json.loads(out_json.read_text())
    assert report["partial"] and report["cases"] == [] and len(report["missing_cases"]) == 18
    assert report["run"]["interrupted_by"] == KILLED and report["run"]["exit_status"] == 2
    assert report["run"]["coverage"] == {"toolhop": {"cases": 0, "suite_cases": 18, "subset": True}}
    assert [(g["gate"], g["passed"]) for g in report["gates"]] == [(GATE, False), (RUN_COMPLETED, False)]
    # the run folder's report reads back (it has no journal to name: its cases are inline)
    assert json.loads((run_dir / "report.json").read_text())["cases"] == []
    refused = cli("compare", str(out_json), str(run_dir / "report.json"))
    assert refused.returncode == 2 and "has no case result (it was interrupted before any case finished)" in refused.stderr

    suite = ET.parse(out_junit).getroot().find("testsuite")
    assert suite is not None
    testcases = list(suite.iter("testcase"))
    listed = [tc.get("name") for tc in testcases[:18]]
    assert listed == [nodeid.rpartition("::")[2] for nodeid in nodes.values()]  # selection order
    for tc in testcases[:18]:
        error = tc.find("error")
        assert error is not None and error.get("message") == f"not run: the run was interrupted ({KILLED})"
    gate, verdict = testcases[18:]
    assert gate.get("name") == GATE and gate.find("failure") is not None  # nothing to evaluate it on
    failure = verdict.find("failure")
    assert verdict.get("classname") == "toolbench-run" and failure is not None
    assert "the run was interrupted (killed)" in failure.get("message", "")
    assert "18 of 18 selected cases" in failure.get("message", "")
    assert (int(suite.get("tests")), int(suite.get("errors")), int(suite.get("failures"))) == (20, 18, 2)
    assert float(suite.get("time")) == pytest.approx(index.finished - started, abs=0.01)
    props = {p.get("name"): p.get("value") for p in suite.find("properties").iter("property")}
    assert props["toolbench.data.kind"] == "sample" and "toolbench.data.toolhop" in props


# --------------------------------------------------------------------------- the controller alone
#: Requests answered at once before every later one hangs, in the runs below.
FAST = 4


@contextlib.contextmanager
def _in_flight_run(tmp_path: Path, *extra: str, server_gone: threading.Event | None = None,
                   ) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A ``pytest suites/toolhop -n 2 --concurrency 2`` run (the shared SDK process, the default;
    ``extra`` adds options) whose first :data:`FAST` requests are answered at once and every later
    one hangs; yielded once both workers' later calls (four) are in flight. A case answered at
    once is reported only once the test before it on its worker has ended, so not all of them
    may be journalled by then. ``server_gone``, once set, drops each hanging request's connection
    unanswered, as a server that died would. The run's process group is killed on the way out,
    whatever the test left of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    answer = reply("<answer>x</answer>")
    gone = server_gone or threading.Event()

    def handler(body: dict, index: int) -> HandlerResult:
        if index >= FAST:  # in flight until the run goes (a daemon thread of the server)
            if gone.wait(60):
                raise ConnectionAbortedError("the server died")  # the connection closes
        return answer(body, index)

    runs = tmp_path / "runs"
    with FakeOpenAIServer(handler) as server:
        cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--data", "sample", "-n", "2", "--concurrency", "2",
               "--runs-dir", str(runs), "--no-cache", "--base-url", server.base_url,
               "--api-key", "t", "--model", "m", *extra]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while len(server.requests) < FAST + 4:
                assert proc.poll() is None, f"the run ended too soon: {proc.communicate()}"
                assert time.monotonic() < deadline, "no calls in flight in 180 s"
                time.sleep(0.05)
            yield proc, runs
        finally:
            with contextlib.suppress(ProcessLookupError):  # the group outlives its leader
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:  # not read to its end by the test
                proc.communicate(timeout=60)


def test_a_controller_killed_alone_leaves_its_workers_cases_in_flight_not_run(tmp_path):
    """The controller SIGKILLed alone (the OOM killer picks one process): the shared SDK process,
    its child, goes with it, so the calls its orphaned workers had in flight fail as
    ``sdk_process_gone``. The killed run never finished those cases: `toolbench finish` counts
    them not run (killed), as every other case it left, not as infrastructure errors; and the
    orphaned workers go without a word on the terminal the run left (xdist's "cannot send",
    pluggy's PluggyTeardownRaisedWarning)."""
    with _in_flight_run(tmp_path) as (proc, runs):
        workers = psutil.Process(proc.pid).children()  # the two workers and the SDK process
        os.kill(proc.pid, signal.SIGKILL)
        # the orphans write to the pipe the controller left: its end is their end
        orphans_said, _ = proc.communicate(timeout=60)
        _, alive = psutil.wait_procs(workers, timeout=60)
        assert not alive, f"outlived the controller: {alive}"
    (run_dir,) = runs.iterdir()
    journalled = _journalled(run_dir)
    assert len(journalled) <= FAST  # answered cases only: nothing of the cases in flight
    selection = case_store.read_selection(run_dir)
    assert selection is not None and len(selection) == 18

    done = cli("finish", run_dir.name, "--runs-dir", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sdk_process_gone" not in done.stdout and "--sdk-process inline" not in done.stdout
    assert f"{len(journalled)} results scored from its journal" in done.stdout
    report = json.loads((run_dir / "report.json").read_text())
    cases = case_store.read_cases(run_dir)
    assert sorted(c.case_id for c in cases) == sorted(journalled)
    assert [c.error for c in cases] == [None] * len(journalled)
    missing = report["run"]["missing_cases"]
    assert missing == [i for i in selection if i not in journalled] and len(missing) >= 18 - FAST
    assert report["run"]["interrupted_by"] == KILLED
    assert "sdk_process_gone" not in json.dumps(report)
    # and the orphans went without a word
    assert "cannot send" not in orphans_said and "PluggyTeardownRaisedWarning" not in orphans_said
    assert "INTERNALERROR" not in orphans_said, orphans_said


def test_a_controller_killed_with_its_managed_server_leaves_inline_calls_in_flight_not_run(tmp_path):
    """``--sdk-process inline`` against a server the run started (a managed vLLM server dies with
    the controller: PDEATHSIG): the controller SIGKILLed alone takes the server with it, so each
    orphaned worker's calls in flight fail to connect (retried, then refused). Those cases were
    never finished either: not run, not infrastructure errors. Here the fake server drops its
    connections and stops listening as the controller is killed."""
    gone = threading.Event()
    with _in_flight_run(tmp_path, "--sdk-process", "inline", "--max-retries", "1",
                        server_gone=gone) as (proc, runs):
        workers = psutil.Process(proc.pid).children()
        os.kill(proc.pid, signal.SIGKILL)
        gone.set()
        orphans_said, _ = proc.communicate(timeout=60)
        _, alive = psutil.wait_procs(workers, timeout=90)
        assert not alive, f"outlived the controller: {alive}"
    (run_dir,) = runs.iterdir()
    journalled = _journalled(run_dir)
    assert len(journalled) <= FAST, journalled
    done = cli("finish", run_dir.name, "--runs-dir", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(journalled)} results scored from its journal" in done.stdout, done.stdout
    assert [c.error for c in case_store.read_cases(run_dir)] == [None] * len(journalled)
    report = json.loads((run_dir / "report.json").read_text())
    assert "connection" not in json.dumps(report["metrics"]), report["metrics"]
    assert "INTERNALERROR" not in orphans_said and "cannot send" not in orphans_said, orphans_said


def test_the_sdk_process_dying_alone_in_a_live_run_is_still_an_infrastructure_error(tmp_path):
    """The other side of the test above: the SDK process killed while the controller lives is a
    real infrastructure error of each case it failed, recorded by the run's own end."""
    with _in_flight_run(tmp_path) as (proc, runs):
        (sdk,) = [p for p in psutil.Process(proc.pid).children()
                  if "pytest_toolbench.models.sdk_process.server" in p.cmdline()]
        sdk.kill()
        out, _ = proc.communicate(timeout=120)
    (run_dir,) = runs.iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    assert not report["partial"] and report["run"]["missing_cases"] == [], out
    kinds = [c.error.kind if c.error else None for c in case_store.read_cases(run_dir)]
    assert len(kinds) == 18 and kinds.count(None) == FAST, out
    assert set(kinds) - {None} == {"sdk_process_gone"}
    assert "--sdk-process inline" in out  # the hint, as before


def _errored(kind: str | None) -> CaseResult:
    return CaseResult(case_id="toolhop-1-direct", benchmark="toolhop", scenario="direct",
                      outcome=Outcome.ERROR if kind else Outcome.FAILED,
                      error=InfraError(kind=kind, message="x") if kind else None)


def test_a_worker_drops_only_what_its_controllers_death_caused():
    """The rule the end-to-end tests above follow (session/orphan.py): a result is dropped only
    for an error the controller's death causes (its SDK process or its endpoint gone), once the
    controller is gone; a controller that
    outlives the grace clears the SDK process's death as its own, once for the process."""
    orphaned = ControllerWatch(os.getpid(), grace_s=0.0)  # not this process's parent: "gone"
    assert orphaned.controller_gone()
    assert orphaned.killed_with_controller(_errored("sdk_process_gone"))
    # its endpoint gone (a managed server dies with the controller): a dead run's finding
    for kind in ("connection_refused", "connection", "timeout", "server_died"):
        assert orphaned.killed_with_controller(_errored(kind)), kind
    assert not orphaned.killed_with_controller(_errored("http_500"))  # the endpoint answered
    assert not orphaned.killed_with_controller(_errored("internal_error"))
    assert not orphaned.killed_with_controller(_errored(None))

    alive = ControllerWatch(os.getppid(), grace_s=0.2)
    started = time.monotonic()
    assert not alive.controller_gone()
    assert not alive.killed_with_controller(_errored("sdk_process_gone"))
    assert time.monotonic() - started >= 0.2 and alive.sdk_died_alone
    started = time.monotonic()
    assert not alive.killed_with_controller(_errored("sdk_process_gone"))
    assert time.monotonic() - started < 0.1  # decided once
    assert not alive.killed_with_controller(_errored("connection_refused"))  # a live run's error

    unwatched = ControllerWatch(None)  # not the controller's child (e.g. an ssh worker)
    assert not unwatched.controller_gone()
    assert not unwatched.killed_with_controller(_errored("sdk_process_gone"))


# --------------------------------------------------------------------------- refusals
def _index(run_dir: Path, **fields) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    fields.setdefault("start", RunStart(settings={"model": "m"}))
    write_index(run_dir, RunIndex(run_id=run_dir.name, status="running", partial=True,
                                  started=time.time(), **fields))


class _FinishKilled(BaseException):
    """Stands for a SIGKILL of ``toolbench finish`` itself."""


def test_a_finish_killed_before_its_report_keeps_the_selection_for_the_next(tmp_path, monkeypatch):
    """A finish killed after it had removed the run's scratch files but before it had written
    the report left a folder whose next finish reported no missing case (and a passed "run
    completed") for a run that never ran any: the selection goes only after the report."""
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    _index(run_dir, pid=None, host=socket.gethostname())
    selection = ["toolhop-1-direct", "toolhop-2-direct"]
    case_store.write_selection(run_dir, selection,
                               [f"suites/toolhop/test_toolhop.py::test_case[{i}]" for i in selection])

    def killed(*args, **kwargs):
        raise _FinishKilled()

    monkeypatch.setattr("pytest_toolbench.session.killed_run.save_report", killed)
    with pytest.raises(_FinishKilled):
        finish_killed_run(run_dir)
    assert case_store.read_selection(run_dir) == selection
    monkeypatch.undo()
    done = finish_killed_run(run_dir)
    assert done.record.run.missing_cases == selection
    assert not (run_dir / case_store.SCRATCH).exists()  # gone once the report was written


def test_a_corrupt_line_inside_a_journal_is_skipped_with_a_note_naming_it(tmp_path):
    """One unreadable line in the middle of the run's journal or a worker's refused the whole
    run, with pydantic's message over several lines. Now the line is skipped, named by file and
    line, and every other result is scored; the report holds its cases inline, so a reader of
    the run's folder never parses the journal's bad line."""
    from pytest_toolbench.results.case_result import CaseResult, Outcome
    from pytest_toolbench.compare.load import load_record

    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    _index(run_dir, pid=None, host=socket.gethostname(), suites=["toolhop"])
    ids = [f"toolhop-{i}-direct" for i in range(1, 7)]
    case_store.write_selection(run_dir, ids)

    def line(case_id: str) -> str:
        return CaseResult(case_id=case_id, benchmark="toolhop", scenario="direct",
                          outcome=Outcome.PASSED).model_dump_json() + "\n"

    own, worker = case_store.journal_path(run_dir), run_dir / "worker-gw0.jsonl"
    own.write_text(line(ids[0]) + '{"case_id": "toolhop-2-direct", "outcome": \n' + line(ids[2]))
    worker.write_text(line(ids[3]) + "not json at all\n" + line(ids[4]))
    done = cli("finish", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [n for n in done.stdout.splitlines() if "skipping an unreadable journal line" in n]
    assert [n.split(": ")[1] for n in notes] == [f"{own}:2", f"{worker}:2"], done.stdout
    report = json.loads((run_dir / "report.json").read_text())
    assert sorted(c["case_id"] for c in report["cases"]) == [ids[0], ids[2], ids[3], ids[4]]
    assert report["missing_cases"] == [ids[1], ids[5]]
    assert len(load_record(run_dir / "report.json").cases) == 4  # as compare and view read it


def test_a_live_run_is_not_finished(tmp_path):
    _index(tmp_path / "live", pid=os.getpid(), host=socket.gethostname())
    with pytest.raises(KilledRunError, match="is still running"):
        finish_killed_run(tmp_path / "live")


def test_a_run_from_another_host_needs_force(tmp_path):
    _index(tmp_path / "far", pid=1, host="elsewhere.invalid")
    with pytest.raises(KilledRunError, match="started on host 'elsewhere.invalid'.*--force"):
        finish_killed_run(tmp_path / "far")
    done = finish_killed_run(tmp_path / "far", force=True)  # no result journalled: a record of none
    assert done.record.cases == [] and done.notes[-1] == "no case had finished: nothing to score"
    assert done.index.status == "interrupted" and done.index.interrupted_by == KILLED
    with pytest.raises(KilledRunError, match="has its report already \\(interrupted\\)"):
        finish_killed_run(tmp_path / "far", force=True)


def test_a_run_that_kept_no_start_cannot_be_scored(tmp_path):
    _index(tmp_path / "old", pid=None, start=None)
    with pytest.raises(KilledRunError, match="keeps no start"):
        finish_killed_run(tmp_path / "old")


def test_an_unknown_run_is_one_line(tmp_path):
    (tmp_path / "runs").mkdir()
    done = cli("finish", "nope", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"toolbench finish: nope: no run with that id in {tmp_path / 'runs'} ")


def test_an_output_path_that_cannot_be_written_refuses_before_the_folder_is_touched(tmp_path):
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    _index(run_dir, pid=None)
    worker = run_dir / "worker-gw0.jsonl"
    worker.write_text("")
    before = sorted(p.name for p in run_dir.iterdir())
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = cli("finish", str(run_dir), "--toolbench-json", str(blocker / "report.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"toolbench finish: --toolbench-json {blocker / 'report.json'}")
    assert sorted(p.name for p in run_dir.iterdir()) == before
    both = cli("finish", str(run_dir), "--toolbench-json", str(blocker / "report.json"),
               "--toolbench-md", str(blocker / "summary.md"))  # each its own line, not one repr
    assert both.returncode == 2 and both.stderr.splitlines() == [
        f"toolbench finish: --toolbench-json {blocker / 'report.json'}: {blocker} is not a folder",
        f"toolbench finish: --toolbench-md {blocker / 'summary.md'}: {blocker} is not a folder"], \
        both.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == before
    # the run's own files: a summary written over its journal would lose its results
    own = cli("finish", str(run_dir), "--toolbench-md", str(run_dir / "results.jsonl.gz"),
              "--junitxml", str(run_dir / "report.json"), "--alluredir", str(run_dir))
    assert own.returncode == 2 and own.stderr.splitlines() == [
        f"toolbench finish: --toolbench-md {run_dir / 'results.jsonl.gz'}: a file of the run's "
        "folder, which finish writes (or reads); give a path outside it",
        f"toolbench finish: --junitxml {run_dir / 'report.json'}: a file of the run's folder, "
        "which finish writes (or reads); give a path outside it",
        f"toolbench finish: --alluredir {run_dir}: the run's own folder; give a path outside it"], \
        own.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_two_finishes_of_one_run_take_turns(tmp_path):
    """A retried CI step: two finishes of one run at once. Each merged the workers' journals and
    removed the scratch files the other was reading; now the second waits for the first's lock,
    then finds the run ended, and the lock file is gone."""
    from pytest_toolbench.fileio import PathLock
    from pytest_toolbench.session.killed_run import FINISH_LOCK

    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    _index(run_dir, pid=None)
    (run_dir / "worker-gw0.jsonl").write_text("")
    held = PathLock(run_dir / FINISH_LOCK)
    held.acquire()  # as a finish under way
    cmd = [sys.executable, "-m", "pytest_toolbench.cli", "finish", str(run_dir)]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    time.sleep(1.5)
    assert [p.poll() for p in procs] == [None, None]  # both wait for the lock
    held.release()
    outs = [p.communicate(timeout=60) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    refused = next(err for (_, err), p in zip(outs, procs) if p.returncode == 2)
    assert refused.strip() == ("toolbench finish: run 20260101-000000-abcdef has its report "
                               "already (interrupted): nothing to finish")
    assert not (run_dir / FINISH_LOCK).exists()


def test_the_run_given_as_dot_from_its_own_folder_is_named(tmp_path):
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    _index(run_dir, pid=None)
    assert finish_killed_run(run_dir).record.cases == []
    again = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "finish", "."],
                           cwd=run_dir, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert again.returncode == 2 and again.stderr.startswith(
        "toolbench finish: run 20260101-000000-abcdef has its report already (interrupted)"), again.stderr


def test_a_refused_run_is_left_as_it_was(tmp_path):
    """A refusal found from the run's start (here a benchmark not installed) comes before the
    folder is touched: the workers' journals are not merged away."""
    run_dir = tmp_path / "elsewhere-made"
    _index(run_dir, pid=None, suites=["nosuch"])
    worker = run_dir / "worker-gw0.jsonl"
    worker.write_text("")
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(KilledRunError, match="benchmark\\(s\\) nosuch not installed here"):
        finish_killed_run(run_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_finish_names_the_runs_own_alluredir_without_writing_to_it():
    """The killed run's Allure folder as recorded at its start; a run folder of an older
    version, without it: its command line's --alluredir (either spelling; the last wins, as
    argparse takes it). finish writes there only when asked (a note names it)."""
    from types import SimpleNamespace

    from pytest_toolbench.session.finish_cli import run_alluredir

    def done(*args: str, recorded: str | None = None):
        return SimpleNamespace(start=SimpleNamespace(pytest_args=list(args), alluredir=recorded))

    assert run_alluredir(done("suites/toolhop", "--alluredir", "out/allure")) == "out/allure"
    assert run_alluredir(done("--alluredir=a", "-q", "--alluredir", "b")) == "b"
    assert run_alluredir(done("suites/toolhop", "-q")) is None
    assert run_alluredir(done("--alluredir", "b", recorded="/x/b")) == "/x/b"
    assert run_alluredir(done("suites/toolhop", recorded="/x/from-addopts")) == "/x/from-addopts"
    assert run_alluredir(SimpleNamespace(start=None)) is None


def test_a_killed_runs_allure_folder_is_named_as_pytest_parsed_it_addopts_included(tmp_path,
                                                                                  monkeypatch):
    """PYTEST_ADDOPTS (or an ini file's addopts) is not on the recorded command line: the
    folder is recorded at the run's start as pytest parsed it, absolute, and `toolbench finish`
    names it for the cases the kill left."""
    alluredir = tmp_path / "allure"
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--alluredir={alluredir}")  # the run's environment
    run_dir = _killed_run(tmp_path, "0")
    start = read_index(run_dir).start  # type: ignore[union-attr]
    assert start is not None and "--alluredir" not in " ".join(start.pytest_args)
    assert start.alluredir == str(alluredir)
    monkeypatch.delenv("PYTEST_ADDOPTS")
    done = cli("finish", run_dir.name, "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"note: the run wrote Allure results to {alluredir}: --alluredir {alluredir}" in done.stdout


def _step_tree(item: dict, alluredir: Path) -> list[tuple]:
    """An Allure result's steps as (name, status, [(attachment name, its text)], sub-steps)."""
    return [(step["name"], step["status"],
             [(a["name"], (alluredir / a["source"]).read_text()) for a in step.get("attachments", [])],
             _step_tree(step, alluredir))
            for step in item.get("steps", [])]


def test_finish_alluredir_writes_the_result_of_a_finished_case_the_kill_left_without_one(tmp_path):
    """allure-pytest writes a case's result file at its test's end, after the case's journal
    line: a SIGKILL in between left a case the report counts as run with no Allure result.
    `toolbench finish --alluredir` writes it from the journalled result (status, name, history
    id, test case id), and no second result for a case whose file is there."""
    alluredir = tmp_path / "allure"
    run_dir = _killed_run(tmp_path, "2", "--alluredir", str(alluredir))
    journalled = _journalled(run_dir)
    selection = case_store.read_selection(run_dir)
    assert selection is not None
    results = {r.case_id: r for path in [case_store.journal_path(run_dir),
                                         *case_store.worker_journal_paths(run_dir)]
               for r in read_journal(path)}
    files = {_case_of(json.loads(p.read_text())): p for p in alluredir.glob("*-result.json")}
    with_file = sorted(set(files) & set(journalled))
    assert with_file, "no journalled case had its Allure result before the kill"
    lost = with_file[0]  # the kill landed between its journal line and its result file
    before = json.loads(files[lost].read_text())
    files[lost].unlink()
    # the folder is shared: a later run's result of the same case (same history id, started
    # after the killed run's start) is not the killed run's, and does not hide its gap
    later = dict(before, uuid="0" * 8 + "-later", start=before["start"] + 1,
                 labels=[x for x in before["labels"] if x["name"] != "toolbench_run"]
                 + [{"name": "toolbench_run", "value": "a-later-run"}])
    (alluredir / "later-result.json").write_text(json.dumps(later))

    done = cli("finish", run_dir.name, "--runs-dir", str(tmp_path / "runs"),
               "--alluredir", str(alluredir))
    assert done.returncode == 0, done.stdout + done.stderr
    (alluredir / "later-result.json").unlink()
    by_case: dict[str, list[dict]] = {}
    for r in _allure_results(alluredir):
        by_case.setdefault(_case_of(r), []).append(r)
    assert sorted(by_case) == sorted(selection)
    assert all(len(rs) == 1 for rs in by_case.values()), \
        {c: len(rs) for c, rs in by_case.items() if len(rs) > 1}
    (back,) = by_case[lost]
    assert _run_of(back) == _run_of(before) == run_dir.name
    expected = "passed" if results[lost].outcome is Outcome.PASSED else "failed"
    assert back["status"] == before["status"] == expected
    for key in ("historyId", "testCaseId", "fullName", "name"):
        assert back[key] == before[key], key
    assert _identity(back) == _identity(before)
    assert {"name": "toolbench_outcome", "value": "wrong answer"} in back["labels"]
    assert any(a["name"] == "details" and (alluredir / a["source"]).is_file()
               for a in back.get("attachments", []))
    # the case's page as the live run showed it: the conversation's steps, then the scoring's,
    # each with its attachments' text
    assert _step_tree(back, alluredir) == _step_tree(before, alluredir)
    assert back["steps"][-1]["name"].startswith("score: ") and len(back["steps"]) > 1

    _check_allure_generates(alluredir, tmp_path / "html")
