"""One run's state in a pytest process: the settings, the results that arrived, and what the
session end needs (selection, data sources, output failures, the run's servers)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.config import RunSettings
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.session.case_tracker import CaseTracker
from pytest_toolbench.results.journal import ResultJournal
from pytest_toolbench.output_errors import OutputFailure

if TYPE_CHECKING:  # loaded only by the runs that use them, off the start-up path
    from pytest_toolbench.compare.load import LoadedRun
    from pytest_toolbench.models.sdk_process.launcher import SdkProcess
    from pytest_toolbench.runtime.startup_progress import StartupProgress
    from pytest_toolbench.servers.managed import ManagedServer

STATE_KEY = pytest.StashKey["ToolbenchState"]()


@dataclass
class ToolbenchState:
    """Controller-side state of one run while it is live. What the run's end makes of it (the
    record, its summary and gate table) is the controller's (session/controller.py), not kept
    here a second time."""

    settings: RunSettings
    run_id: str
    started: float = field(default_factory=time.time)
    results: dict[str, CaseResult] = field(default_factory=dict)
    #: The cases whose result the result cache answered (runtime/result_cache.py).
    from_result_cache: set[str] = field(default_factory=set)
    journal: ResultJournal | None = None
    server: ManagedServer | None = None
    cases: dict[str, list[Case]] = field(default_factory=dict)
    #: Results the session end recovered from the workers' journals (their reports never came).
    recovered: int = 0
    #: Benchmarks whose suites this run targets (known on the controller at session start).
    targeted: list[str] = field(default_factory=list)
    #: Benchmark -> number of cases in its whole suite (every scenario, no selection).
    suite_sizes: dict[str, int] = field(default_factory=dict)
    #: --sample-ids: the ids some targeted suite has, and each suite's first id (for the hint
    #: that names a typo, session/selection.py ``unknown_sample_ids``).
    sample_ids_found: set[str] = field(default_factory=set)
    first_sample_ids: dict[str, str] = field(default_factory=dict)
    data_sources: list[DataSource] = field(default_factory=list)
    #: "SIGTERM"/"SIGINT"/"SIGHUP" when the run was interrupted (its reports are then partial),
    #: or pytest's own reason when it stopped the run itself ("1 error during collection"), or a
    #: ``pytest.exit``'s ("pytest.exit: <reason>").
    interrupted_by: str | None = None
    #: The run was stopped by a ``pytest.exit`` with a failing status of its own, not an
    #: interruption's (the harness's stop on a runner, sandbox or model this machine cannot give:
    #: 4): that status stands, whatever the cases that ran before it did. (An exit with 0 does
    #: not: a partial run never passes, it exits 12.)
    exit_status_stands: bool = False
    #: Why pytest itself stopped a run that was not interrupted before every selected case ran
    #: (results/partial_run.py ``maxfail_stop``: "-x/--maxfail=1 stopped the run"): the cases
    #: it left are named with it, not as lost.
    pytest_stop: str | None = None
    #: Node ids of the collectors that failed (a suite whose benchmark is not installed, a
    #: syntax error): under xdist the workers' reach the controller, and the run stops as pytest
    #: stops one without xdist (controller.py ``pytest_collectreport``).
    collection_errors: list[str] = field(default_factory=list)
    #: --baseline: the loaded run (controller), compared with this run at the session end.
    baseline: LoadedRun | None = None
    #: The run's shared SDK process (models/sdk_process), started at configure.
    sdk: SdkProcess | None = None
    # isolation each tool-sandbox pool of the run actually had (sandbox/pool.py isolation_state);
    # a worker's travel to the controller in workeroutput
    sandbox_states: list[dict[str, Any]] = field(default_factory=list)
    #: Progress of model conversion and server start (runtime/startup_progress.py), controller only.
    startup: StartupProgress | None = None
    #: The selected nodes and which reported (session/case_tracker.py), controller only.
    tracker: CaseTracker = field(default_factory=CaseTracker)
    #: Outputs the run could not write (output_errors.py); any one stops the run.
    output_failures: list[OutputFailure] = field(default_factory=list)


def state(config: pytest.Config) -> ToolbenchState:
    return config.stash[STATE_KEY]


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_xdist_controller(config: pytest.Config) -> bool:
    return not is_worker(config) and bool(getattr(config.option, "numprocesses", None))


def record_sandbox_state(config: pytest.Config, isolation: dict[str, Any]) -> None:
    """Called by the tool-sandbox fixture: the report states the isolation the tools really had,
    not only whether ``--sandbox-insecure`` was passed."""
    state(config).sandbox_states.append(isolation)


def run_dir(config: pytest.Config) -> Path:
    """This run's folder (journals, server log), the same path in controller and workers."""
    return run_dir_of(state(config))


_MADE_RUN_DIRS: set[Path] = set()


def run_dir_path(st: ToolbenchState) -> Path:
    """The run's folder, not made: for code that only reads or removes what may be in it."""
    return st.settings.runs_dir / st.run_id


def run_dir_of(st: ToolbenchState) -> Path:
    """The run's folder, made on first use."""
    path = run_dir_path(st)
    if path not in _MADE_RUN_DIRS:  # once per process, not once per result
        path.mkdir(parents=True, exist_ok=True)
        _MADE_RUN_DIRS.add(path)
    return path
