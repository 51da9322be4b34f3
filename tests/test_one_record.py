"""A run builds its record once, and every writer takes that one object.

A spy plugin (written to tmp_path, loaded with ``-p``) wraps the session end's record builder
(session/finish.py ``run_record``) and each writer the controller calls: the run folder
(runs/record.py ``save_report``), the JSON writer (``RunRecord.write``), the terminal's text
(session/end_summary.py ``summaries``), Markdown, plots and Allure, and JUnit's suite
properties. It logs which record object each received; the run must show one construction and
one object everywhere. With a writer made to fail, the failure is noted in that same object:
the JSON written after it says so, and the exit status is OUTPUT_ERROR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.exitcodes import ToolbenchExit

REPO = Path(__file__).resolve().parents[1]

SPY = '''
import atexit, errno, json, os

from pytest_toolbench.report import allure_and_plots, junit_gates, markdown_report
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.runs import record as runs_record
from pytest_toolbench.session import end_summary, finish

LOG = []
FAIL = os.environ.get("SPY_FAIL", "")
atexit.register(lambda: open(os.environ["SPY_LOG"], "w").write(json.dumps(LOG)))


def spy(owner, name, record_at, label=None):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        record = result if record_at is None else args[record_at]
        LOG.append([label or name, id(record)])
        if (label or name) == FAIL:
            raise OSError(errno.ENOSPC, "No space left on device", "spy")
        return result

    setattr(owner, name, wrapper)


spy(finish, "run_record", None, "built")
spy(RunRecord, "build", None, "RunRecord.build")
spy(runs_record, "save_report", 1, "run folder")
spy(RunRecord, "write", 0, "json")
spy(end_summary, "summaries", 1, "terminal")
spy(markdown_report, "write_markdown_report", 1, "markdown")
spy(allure_and_plots, "write_plots_and_allure", 1, "allure and plots")
spy(junit_gates, "write_data_properties", 1, "junit")
'''


def spied_run(tmp_path: Path, fail: str = "") -> tuple[subprocess.CompletedProcess, list]:
    (tmp_path / "record_spy.py").write_text(SPY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GITHUB_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]),
               SPY_LOG=str(tmp_path / "log.json"), SPY_FAIL=fail, COLUMNS="80")
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--data", "sample", "--model",
           "oracle", "-n", "0", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
           "-p", "record_spy", "--limit", "2", "--gate", "toolhop.direct.accuracy>=0.5",
           "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
           "--toolbench-json", str(tmp_path / "run.json"), "--toolbench-md", str(tmp_path / "run.md"),
           "--junitxml", str(tmp_path / "junit.xml"), "--alluredir", str(tmp_path / "allure")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    return proc, json.loads((tmp_path / "log.json").read_text())


def test_a_run_builds_its_record_once_and_every_writer_gets_that_object(tmp_path):
    proc, log = spied_run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    built = [obj for name, obj in log if name == "built"]
    assert len(built) == 1 and [n for n, _ in log].count("RunRecord.build") == 1
    writers = {name: obj for name, obj in log if name not in ("built", "RunRecord.build")}
    assert set(writers) == {"run folder", "json", "terminal", "markdown", "allure and plots",
                            "junit"}
    assert set(writers.values()) == set(built), log
    # the JSON writer wrote both copies: the run folder's and --toolbench-json
    assert [n for n, _ in log].count("json") == 2
    run_folder = next((tmp_path / "runs").iterdir())
    # the same document, but for the cases: the run folder's report names the run's journal,
    # which holds them once (results/case_store.py); read back, they are the export's
    folder_doc = json.loads((run_folder / "report.json").read_text())
    export = json.loads((tmp_path / "run.json").read_text())
    ref = folder_doc.pop("cases_journal")
    assert ref == {"file": "results.jsonl", "count": len(export.pop("cases"))} and folder_doc == export
    from pytest_toolbench.compare.load import load_record

    assert load_record(run_folder / "report.json") == load_record(tmp_path / "run.json")


def test_a_failed_writer_is_noted_in_the_same_record_the_later_writers_get(tmp_path):
    proc, log = spied_run(tmp_path, fail="run folder")
    assert proc.returncode == ToolbenchExit.OUTPUT_ERROR, proc.stdout[-3000:] + proc.stderr[-2000:]
    built = {obj for name, obj in log if name == "built"}
    assert len(built) == 1 and {obj for _, obj in log} == built
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["partial"] and report["run"]["partial"]
    assert report["run"]["exit_status"] == ToolbenchExit.OUTPUT_ERROR
    assert report["run"]["output_errors"] and "run folder's report" in report["run"]["output_errors"][0]
    assert [g["kind"] for g in report["gates"] if not g["passed"]] == ["output"]
    assert "every output written" in (tmp_path / "run.md").read_text()
    assert "gates FAILED (exit status 13 OUTPUT_ERROR)" in proc.stdout


@pytest.mark.parametrize("gated", [True, False])
def test_noting_output_failures_reads_as_a_record_built_with_them(gated):
    """session/finish.py: the record updated in place equals the one run_record would build."""
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.output_errors import OutputFailure
    from pytest_toolbench.results.aggregate import RunMetrics
    from pytest_toolbench.results.case_result import CaseResult, Outcome
    from pytest_toolbench.results.gates import GateVerdict
    from pytest_toolbench.session.finish import (
        RunEnd,
        RunIdentity,
        Scores,
        note_output_failures,
        run_record,
    )

    settings = RunSettings(model="m", gates=("toolhop.direct.accuracy>=0.5",) if gated else ())
    identity = RunIdentity(run_id="r", started=1.0, finished=2.0, wall_s=1.0, settings=settings,
                           pytest_args=[])
    scores = Scores(metrics=RunMetrics(scenarios=[]), repeats=None, comparison=None,
                    verdicts=[GateVerdict(gate="toolhop.direct.accuracy>=0.5", actual=1.0,
                                          passed=True, reason="1 >= 0.5")] if gated else [])
    results = [CaseResult(case_id="c1", benchmark="toolhop", scenario="direct", model="m",
                          outcome=Outcome.PASSED)]
    end = RunEnd(pytest_status=0, missing=["c2"], selected=2)
    first = OutputFailure.of("run folder's report", "/x/report.json", OSError(28, "No space"))
    second = OutputFailure.of("Markdown summary", "/x/run.md", OSError(5, "I/O error"))
    record = run_record(scores, end, results, identity)
    end = note_output_failures(record, end, [first])
    end = note_output_failures(record, end, [first, second])
    rebuilt = run_record(scores, RunEnd(pytest_status=0, missing=["c2"], selected=2,
                                        output_failures=[first, second]), results, identity)
    assert record.to_json() == rebuilt.to_json()
    assert record.run.exit_status == ToolbenchExit.OUTPUT_ERROR and record.partial
