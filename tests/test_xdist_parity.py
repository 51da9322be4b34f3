"""The same run tells a CI step the same with and without pytest-xdist: exit status, partial flag,
the reason it stopped, the gates' verdicts.

Each test runs ``pytest suites/toolhop`` in a subprocess with ``-n 0`` and ``-n 2`` against a
local endpoint that answers every question wrong (tests/fake_openai_server.py), and reads the
exit status and the JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fake_openai_server import FakeOpenAIServer, reply
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results.partial_run import RUN_COMPLETED
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]
SELECTED = 3 * len(json.loads(BUNDLED_TOOLHOP.read_text()))  # ToolHop's three scenarios
GATE = "toolhop.direct.accuracy>=0"  # passes on any answer


def _run_wrong(tmp_path: Path, workers: str, *args: str,
               before: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict]:
    """``pytest BEFORE suites/toolhop -n WORKERS ARGS`` against an endpoint that is always
    wrong."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "PYTEST_XDIST_"))}
    report = tmp_path / f"report-n{workers}.json"
    with FakeOpenAIServer(reply(content="not the answer")) as server:
        cmd = [sys.executable, "-m", "pytest", *before, "suites/toolhop", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--data", "sample", "--no-cache",
               "--runs-dir", str(tmp_path / f"runs-n{workers}"), "--toolbench-json", str(report),
               "--base-url", server.base_url, "--api-key", "t", "--model", "m",
               "-n", workers, *args]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


@pytest.mark.parametrize("workers", ["0", "2"])
def test_maxfail_without_gates_leaves_the_run_incomplete_not_interrupted(tmp_path, workers):
    """-x stops at the first wrong answer; the cases it never ran make the run partial and exit
    12 INCOMPLETE (README, Exit codes). Under xdist the stop reached pytest as xdist's own
    KeyboardInterrupt, so the run read "interrupted (SIGINT)", exit 2, a Ctrl-C nobody pressed."""
    junit = tmp_path / "junit.xml"
    proc, report = _run_wrong(tmp_path, workers, "-x", "--junitxml", str(junit))
    assert proc.returncode == ToolbenchExit.INCOMPLETE, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SIGINT" not in proc.stdout
    assert report["partial"] and report["run"]["interrupted_by"] is None
    assert report["run"]["exit_status"] == ToolbenchExit.INCOMPLETE
    assert report["cases"] and len(report["cases"]) + len(report["missing_cases"]) == SELECTED
    # why the cases have no result is the user's -x, not "a worker lost, ... the transport"
    why = "-x/--maxfail=1 stopped the run"
    assert report["run"]["pytest_stop"] == why
    assert f"(not run: {why})" in " ".join(proc.stdout.split())
    assert "a worker lost" not in proc.stdout
    not_run = [c.find("error") for c in ElementTree.parse(junit).iter("testcase")
               if c.find("error") is not None]
    assert len(not_run) == len(report["missing_cases"])
    assert {e.get("message") for e in not_run} == {f"not run: {why}"}
    (run_dir,) = (tmp_path / f"runs-n{workers}").iterdir()
    index = json.loads((run_dir / "run.json").read_text())
    assert index["status"] == "incomplete" and index["pytest_stop"] == why


@pytest.mark.parametrize("workers", ["0", "2"])
def test_with_gates_a_wrong_answer_does_not_stop_a_maxfail_run(tmp_path, workers):
    """With gates a wrong answer is a passed test (README, CI gating), so --maxfail=1 never
    counts it and the gates decide. xdist's workers counted it as pytest's failure all the same,
    stopped, and the run that without xdist passed every gate ended "interrupted", exit 2."""
    proc, report = _run_wrong(tmp_path, workers, "--maxfail=1", "--gate", GATE)
    assert proc.returncode == ToolbenchExit.OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not report["partial"] and report["run"]["interrupted_by"] is None
    assert len(report["cases"]) == SELECTED and report["missing_cases"] == []
    assert all(g["passed"] for g in report["gates"])
    assert RUN_COMPLETED not in {g["gate"] for g in report["gates"]}


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_stopped_before_its_first_case_still_writes_every_report(tmp_path, workers):
    """A plain failing test collected before the suite, with -x: pytest stops before any case
    ran (-n 0; under xdist the other worker may finish a case or two first). The run exits 12
    INCOMPLETE either way, but without xdist it wrote no --toolbench-json and no run report,
    only run.json (``toolbench runs``: "gates -"), and its gate table lost the --gate: a CI step
    read an earlier run's file at that path as this one's."""
    plain = tmp_path / "test_plain.py"
    plain.write_text("def test_plain_fails():\n    assert 0\n")
    proc, report = _run_wrong(tmp_path, workers, "-x", "--gate", GATE, before=(str(plain),))
    assert proc.returncode == ToolbenchExit.INCOMPLETE, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["partial"] and report["run"]["interrupted_by"] is None
    assert report["run"]["exit_status"] == ToolbenchExit.INCOMPLETE
    assert len(report["cases"]) + len(report["missing_cases"]) == SELECTED
    gates = {g["gate"]: g["passed"] for g in report["gates"]}
    assert GATE in gates and gates["every selected case reported"] is False
    (run_dir,) = (tmp_path / f"runs-n{workers}").iterdir()
    assert (run_dir / "report.json").exists()
