"""Loggers made on other threads while pytest walks the logger registry (runtime/logger_registry.py).

pytest's logging plugin walks ``logging.root.manager.loggerDict`` around every test phase
without logging's lock; a module imported on one of the harness's threads (a FAISS search, a
sandbox call, the controller's warm imports) that makes a logger then failed the test pytest
was setting up with "dictionary changed size during iteration".
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_env import plugin_env
from pytest_toolbench.runtime.logger_registry import SnapshotIterationDict, guard_logger_registry

REPO = Path(__file__).resolve().parents[1]


def test_a_walk_over_the_guarded_registry_survives_loggers_added_during_it():
    """pytest's walk (``loggerDict.values()``) with a logger made at each step, as another
    thread can between two steps: the walk ends, and every logger made is registered."""
    guard_logger_registry()
    registry = logging.root.manager.loggerDict
    made = []
    for step, _ in enumerate(registry.values()):
        made.append(logging.getLogger(f"toolbench-test.walk.{id(made)}.{step}"))
    assert made
    assert all(logging.root.manager.loggerDict[m.name] is m for m in made)
    for view in (registry.keys, registry.items):
        for step, _ in enumerate(view()):
            logging.getLogger(f"toolbench-test.{view.__name__}.{id(made)}.{step}")


def test_guarding_keeps_every_logger_and_is_done_once():
    before = logging.getLogger("toolbench-test.kept")
    guard_logger_registry()
    guarded = logging.root.manager.loggerDict
    guard_logger_registry()
    assert logging.root.manager.loggerDict is guarded
    assert isinstance(guarded, SnapshotIterationDict)
    assert logging.getLogger("toolbench-test.kept") is before  # the same object, not a new one
    assert logging.getLogger("toolbench-test.kept.child").parent is before  # the tree too


#: A thread that makes loggers from the first test body on, as a module imported on a harness
#: thread does, with thread switches as often as CPython allows: without the guard nearly every
#: test after it failed its set-up or teardown ("dictionary changed size during iteration").
CHURN = """
    import logging, sys, threading
    import pytest

    _started = []

    def _churn():
        for i in range(20000):
            logging.getLogger(f"churn.{i}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(item):
        if not _started:
            _started.append(1)
            sys.setswitchinterval(1e-6)
            threading.Thread(target=_churn, daemon=True).start()
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_whose_threads_make_loggers_passes_every_case(tmp_path, workers):
    env = plugin_env(tmp_path, CHURN)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "toolhop"), "--data", "sample",
         "--model", "oracle", "-n", workers, "-q", "-p", "no:cacheprovider",
         "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(tmp_path / "report.json")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, out
    assert "changed size during iteration" not in proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["cases"]) == 18 and not report["missing_cases"], out
