"""A process lets go of each case's result once the test's last report is made: pytest keeps
every item, and its terminal reporter every report, until the session ends, so a result left on
either kept every transcript of the run in each xdist worker's memory. The controller still
receives every result, and so does the report; it holds each without the bulk the run's journal
has (results/held_results.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_env import plugin_env

REPO = Path(__file__).resolve().parents[1]

#: Loaded in the controller and in every worker (tests/plugin_env.py): at its session end each
#: process writes how many items still hold a result, how many kept reports still carry one and
#: how many CaseResult objects are alive.
PROBE = '''
import gc, json, os, pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    from pytest_toolbench.results.case_result import CaseResult
    from pytest_toolbench.session.transport import RESULT_KEY, RESULT_PROPERTY
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    held = sum(1 for item in session.items if RESULT_KEY in item.stash)
    # the terminal reporter keeps every report (a worker's too): none may still carry a result
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = [r for kept in (reporter.stats.values() if reporter else []) for r in kept]
    carried = sum(1 for r in reports for name, _ in getattr(r, "user_properties", ())
                  if name == RESULT_PROPERTY)
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is CaseResult]
    from pytest_toolbench.results.held_results import is_held
    with open(os.path.join(os.environ["PROBE_DIR"], worker + ".json"), "w") as f:
        json.dump({"items": len(session.items), "held": held, "alive": len(alive),
                   "whole": sum(1 for o in alive if not is_held(o)),
                   "reports": len(reports), "carried": carried}, f)
'''


@pytest.mark.parametrize("workers", ["0", "2"])
def test_no_item_keeps_its_result_after_its_test(tmp_path: Path, workers: str) -> None:
    probes = tmp_path / "probes"
    probes.mkdir()
    env = {**plugin_env(tmp_path, PROBE), "PROBE_DIR": str(probes)}
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly", "-p",
         "no:cacheprovider", "--model", "oracle", "--data", "sample", "-n", workers,
         "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
         "--toolbench-json", str(report)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    seen = {p.stem: json.loads(p.read_text()) for p in probes.iterdir()}
    ran = sorted(name for name, probe in seen.items() if probe["items"])  # the processes with tests
    assert ran == (["controller"] if workers == "0" else ["gw0", "gw1"]), seen
    cases = len(json.loads(report.read_text())["cases"])
    assert cases == 18  # every result reached the controller and its report
    for name in ran:
        assert seen[name]["held"] == 0 and seen[name]["carried"] == 0, seen
    assert sum(seen[name]["reports"] for name in ran) == 3 * 18  # every report kept was looked at
    if workers == "2":  # a worker keeps none alive (the controller holds them for its report)
        assert all(seen[w]["alive"] == 0 for w in ran), seen
    # The controller holds every result without the bulk its journal has (results/held_results.py),
    # yet the --toolbench-json report above holds them whole, transcripts included.
    assert seen["controller"]["alive"] >= 18 and seen["controller"]["whole"] == 0, seen
    assert all(case["transcript"] for case in json.loads(report.read_text())["cases"])
