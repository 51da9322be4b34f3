"""The machine-readable run report: run info, metrics, gate verdicts and every case.

Written atomically (temp file + rename) so a CI step never reads half a report, and with a
stable ordering (cases by id, metrics in declaration order) so two reports of one run diff cleanly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_toolbench.fileio import atomic_write_bytes, indented_json
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.gates import GateVerdict

SCHEMA_VERSION = 1


def build_json_report(
    metrics: RunMetrics,
    results: Iterable[CaseResult],
    run_info: dict[str, Any],
    gates: Iterable[GateVerdict] | None = None,
    baseline: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``extra``: further top-level sections (e.g. ``repeats``), added after the fixed ones."""
    cases = sorted(results, key=lambda r: (r.case_id, r.scenario, r.benchmark))
    report = {
        "schema_version": SCHEMA_VERSION,
        #: True when the run was interrupted (SIGINT/SIGTERM), lost selected cases, or stopped on
        #: an output it could not write: metrics cover the reported cases only.
        "partial": bool(run_info.get("partial", False)),
        #: Selected cases that never reported a result (results/completeness.py).
        "missing_cases": list(run_info.get("missing_cases") or []),
        "run": run_info,
        "metrics": metrics.model_dump(mode="json"),
        "gates": [v.model_dump(mode="json") for v in (gates or [])],
        "cases": [r.model_dump(mode="json") for r in cases],
        **(extra or {}),
    }
    if baseline is not None:  # --baseline: the comparison (pytest_toolbench/compare/models.py)
        report["baseline"] = baseline
    return report


def write_json_report(
    path: str | os.PathLike[str],
    metrics: RunMetrics,
    results: Iterable[CaseResult],
    run_info: dict[str, Any],
    gates: Iterable[GateVerdict] | None = None,
    baseline: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the report to ``path`` atomically and return the path."""
    p = Path(path)
    report = build_json_report(metrics, results, run_info, gates, baseline, extra)
    atomic_write_bytes(p, indented_json(report))
    return p
