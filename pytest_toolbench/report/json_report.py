"""The machine-readable run report: the run's record (results/run_record.py) serialised.

Written atomically (temp file + rename) so a CI step never reads half a report, and with a
stable ordering (cases by id, metrics in declaration order) so two reports of one run diff cleanly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.repeats import RepeatStats
from pytest_toolbench.results.run_record import SCHEMA_VERSION, RunInfo, RunRecord

__all__ = ["SCHEMA_VERSION", "build_json_report", "record_of", "write_json_report"]


def record_of(
    metrics: RunMetrics,
    results: Iterable[CaseResult],
    run_info: dict[str, Any] | RunInfo,
    gates: Iterable[GateVerdict] | None = None,
    baseline: Comparison | dict[str, Any] | None = None,
    repeats: RepeatStats | dict[str, Any] | None = None,
) -> RunRecord:
    """A record from its parts (tests and callers that hold the parts, not a session)."""
    info = run_info if isinstance(run_info, RunInfo) else RunInfo.model_validate(run_info)
    return RunRecord.build(
        run=info, metrics=metrics, cases=list(results), gates=list(gates or []),
        repeats=RepeatStats.model_validate(repeats) if isinstance(repeats, dict) else repeats,
        baseline=Comparison.model_validate(baseline) if isinstance(baseline, dict) else baseline,
    )


def build_json_report(
    metrics: RunMetrics,
    results: Iterable[CaseResult],
    run_info: dict[str, Any] | RunInfo,
    gates: Iterable[GateVerdict] | None = None,
    baseline: Comparison | dict[str, Any] | None = None,
    repeats: RepeatStats | dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report as a JSON-ready dict: :func:`record_of` dumped."""
    return record_of(metrics, results, run_info, gates, baseline, repeats).report_dict()


def write_json_report(path: str | os.PathLike[str], record: RunRecord) -> Path:
    """Write the record's report to ``path`` atomically and return the path."""
    return record.write(path)
