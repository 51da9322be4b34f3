"""A ``pytest.exit`` in an xdist worker (session/transport.py ``WorkerReportHooks``).

The harness stops a run with one line when this machine cannot give what a benchmark needs (an
embedder package not installed, a sandbox without its isolation layers, a model that cannot be
built); a conftest or plugin may stop it with ``pytest.exit`` too. In a worker, xdist alone took
that worker's end for a crash of the test it was running: the run ended in an INTERNALERROR
traceback (``assert not crashitem``), exit 3, instead of the line. With ``-n 2`` the run now ends
as it does with ``-n 0``: the same line, exit status, cases and report.

Such a stop after some cases ran (a second suite's runner) keeps its status (4, not 12
INCOMPLETE) and names itself in every report, where they said only that the cases "never
reported: a worker lost, the run stopped early, or the transport failed".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_env import plugin_env
from pytest_toolbench.exitcodes import ToolbenchExit

REPO = Path(__file__).resolve().parents[1]

#: Every benchmark's runner unavailable, as without the [retrieval] extra's embedder package.
NO_RUNNER = """
    from pytest_toolbench.benchmarks.base import EnvironmentUnavailable
    from pytest_toolbench.runtime.environment import RunEnvironment

    def _no_runner(self, benchmark):
        raise EnvironmentUnavailable(f"{benchmark}: no runner on this machine")

    RunEnvironment.runner = _no_runner
"""

#: FamilyTool's runner unavailable, ToolHop's as usual: the stop comes after ToolHop's cases ran.
NO_FAMILYTOOL_RUNNER = """
    from pytest_toolbench.benchmarks.base import EnvironmentUnavailable
    from pytest_toolbench.runtime.environment import RunEnvironment

    _real = RunEnvironment.runner

    def _runner(self, benchmark):
        if benchmark == "familytool":
            raise EnvironmentUnavailable(f"{benchmark}: no runner on this machine")
        return _real(self, benchmark)

    RunEnvironment.runner = _runner
"""

#: A plugin's own stop, at the set-up of the free scenario's cases.
PLUGIN_EXIT = """
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        if item.name.endswith("-free]"):
            pytest.exit("stopped by a plugin")
"""


#: A plugin's stop that claims success part-way.
PLUGIN_EXIT_ZERO = PLUGIN_EXIT.replace('pytest.exit("stopped by a plugin")',
                                       'pytest.exit("done early", returncode=0)')
assert PLUGIN_EXIT_ZERO != PLUGIN_EXIT


def run(tmp_path: Path, source: str, workers: str, suites: tuple[str, ...] = ("toolhop",),
        ) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    env = plugin_env(tmp_path, source)
    report = tmp_path / f"report-{workers}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *(str(REPO / "suites" / s) for s in suites),
         "--data", "sample", "--model", "oracle", "-n", workers, "-p", "no:cacheprovider",
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(report),
         "--junitxml", str(tmp_path / "junit.xml")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return proc, json.loads(report.read_text()) if report.exists() else None


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_runner_this_machine_cannot_give_stops_the_run_with_its_line(tmp_path, workers):
    proc, _ = run(tmp_path, NO_RUNNER, workers)
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, out[-4000:]
    assert "INTERNALERROR" not in out
    assert "pytest-toolbench: toolhop: no runner on this machine" in proc.stdout
    [index] = (tmp_path / "runs").glob("*/run.json")
    entry = json.loads(index.read_text())
    assert entry["exit_status"] == ToolbenchExit.USAGE_ERROR
    # toolbench runs says why no case ran; the folder holds nothing else (no scratch left)
    assert entry["interrupted_by"] == "pytest.exit: pytest-toolbench: toolhop: no runner on this machine"
    assert [p.name for p in index.parent.iterdir()] == ["run.json"]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_runner_missing_after_other_cases_ran_keeps_its_status_and_names_itself(tmp_path, workers):
    proc, report = run(tmp_path, NO_FAMILYTOOL_RUNNER, workers, ("toolhop", "familytool"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, out[-4000:]
    assert "INTERNALERROR" not in out and "never reported" not in out
    why = "pytest.exit: pytest-toolbench: familytool: no runner on this machine"
    assert f"PARTIAL RESULTS: the run was interrupted ({why})" in " ".join(proc.stdout.split())
    assert report is not None and report["partial"] and report["run"]["interrupted_by"] == why
    assert {c["case_id"].split("-")[0] for c in report["cases"]} == {"toolhop"}
    missing = report["missing_cases"]
    assert missing and all(c.startswith("familytool-") for c in missing)
    [index] = (tmp_path / "runs").glob("*/run.json")
    entry = json.loads(index.read_text())
    assert (entry["status"], entry["exit_status"], entry["interrupted_by"]) == (
        "interrupted", ToolbenchExit.USAGE_ERROR, why)
    junit = (tmp_path / "junit.xml").read_text()
    assert f"not run: the run was interrupted ({why})" in junit


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_plugins_exit_in_a_case_ends_the_run_as_an_interruption_naming_it(tmp_path, workers):
    proc, report = run(tmp_path, PLUGIN_EXIT, workers)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-4000:]
    assert "INTERNALERROR" not in out and "stopped by a plugin" in proc.stdout
    assert report is not None and report["run"]["interrupted_by"] == "pytest.exit: stopped by a plugin"
    missing = report["missing_cases"]
    assert report["partial"] and len(missing) == 6 and all(c.endswith("-free") for c in missing)
    assert len(report["cases"]) == 12


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_exit_with_status_0_part_way_is_still_a_partial_run_that_fails(tmp_path, workers):
    """Its reason is named as any exit's, but its 0 does not stand: a partial run never passes."""
    proc, report = run(tmp_path, PLUGIN_EXIT_ZERO, workers)
    out = proc.stdout + proc.stderr
    assert proc.returncode == ToolbenchExit.INCOMPLETE, out[-4000:]
    assert report is not None and report["run"]["interrupted_by"] == "pytest.exit: done early"
    assert report["partial"] and len(report["missing_cases"]) == 6
