"""A run record from its parts, for callers that hold the parts rather than a session (tests,
tools): the JSON report is that record serialised (results/run_record.py), written by its one
writer, ``RunRecord.write`` (atomic: a CI step never reads half a report), with a stable
ordering (cases by id, metrics in declaration order) so two reports of one run diff cleanly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.repeats import RepeatStats
from pytest_toolbench.results.run_record import SCHEMA_VERSION, RunInfo, RunRecord

__all__ = ["SCHEMA_VERSION", "build_json_report", "record_of"]


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

