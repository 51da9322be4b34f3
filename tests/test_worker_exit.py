"""A ``pytest.exit`` in an xdist worker (session/transport.py ``WorkerReportHooks``).

The harness stops a run with one line when this machine cannot give what a benchmark needs (an
embedder package not installed, a sandbox without its isolation layers, a model that cannot be
built); a conftest or plugin may stop it with ``pytest.exit`` too. In a worker, xdist alone took
that worker's end for a crash of the test it was running: the run ended in an INTERNALERROR
traceback (``assert not crashitem``), exit 3, instead of the line. With ``-n 2`` the run now ends
as it does with ``-n 0``: the same line, exit status, cases and report.
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

#: A plugin's own stop, at the set-up of the free scenario's cases.
PLUGIN_EXIT = """
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        if item.name.endswith("-free]"):
            pytest.exit("stopped by a plugin")
"""


def run(tmp_path: Path, source: str, workers: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    env = plugin_env(tmp_path, source)
    report = tmp_path / f"report-{workers}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "toolhop"), "--data", "sample",
         "--model", "oracle", "-n", workers, "-p", "no:cacheprovider",
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(report)],
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
    assert json.loads(index.read_text())["exit_status"] == ToolbenchExit.USAGE_ERROR


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
