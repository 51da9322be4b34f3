"""Runs as pandas DataFrames, for notebooks: one row per run, per metric, per case.

    from pytest_toolbench.analysis import runs_df, metrics_df, cases_df
    metrics = metrics_df(".toolbench/runs")          # every run in the runs folder
    metrics.pivot_table(index="model", columns=["benchmark", "scenario"], values="value")

Each function takes one path or a list: runs folders, run folders or ``--toolbench-json`` files
(as ``toolbench view``), read through the site's loader (view/load.py), so both read the same
records. Every frame has ``run_key`` (unique per run) to join on. pandas is the optional
``[analysis]`` extra (``pip install 'pytest-toolbench[analysis]'``); nothing else imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_toolbench.results.repeats import base_case_id
from pytest_toolbench.view.load import ViewRun, load_view_runs

if TYPE_CHECKING:
    import pandas as pd

Paths = str | Path | Sequence[str | Path]


def _pandas():  # noqa: ANN202 - the pandas module
    try:
        import pandas
    except ImportError:  # pragma: no cover - the message is the point
        raise ImportError("pytest_toolbench.analysis needs pandas: pip install "
                          "'pytest-toolbench[analysis]'") from None
    return pandas


def _runs(paths: Paths) -> list[ViewRun]:
    given = [paths] if isinstance(paths, (str, Path)) else list(paths)
    result = load_view_runs(given)
    if result.skipped:
        import warnings

        for line in result.skipped:
            warnings.warn(f"not a readable run record, left out: {line}", stacklevel=3)
    return result.runs


def _run_columns(run: ViewRun) -> dict[str, Any]:
    return {"run_key": run.key, "run_id": run.run_id, "model": run.model}


def runs_df(paths: Paths) -> pd.DataFrame:
    """One row per run: identity, backend, data (kind and fingerprint per benchmark, one line),
    start/end (UTC timestamps), cases, errors, tokens, gates, status and exit status."""
    pd = _pandas()
    from pytest_toolbench.results.provenance import run_fingerprint, short_line

    rows = []
    for run in _runs(paths):
        r, info = run.record, run.record.run
        rows.append({
            **_run_columns(run),
            "backend": info.settings.backend,
            "benchmarks": ",".join(run.benchmarks()),
            "data": short_line(run.data()),
            "data_fingerprint": run_fingerprint(info.data_sources),
            "subset": any(c.subset for c in info.coverage.values()),
            "started": pd.to_datetime(info.started, unit="s", utc=True) if info.started else pd.NaT,
            "finished": pd.to_datetime(info.finished, unit="s", utc=True) if info.finished else pd.NaT,
            "wall_s": info.wall_s,
            "n_cases": len({base_case_id(c) for c in r.cases}),
            "n_results": len(r.cases),
            "n_errors": sum(s.n_errors for s in r.metrics.scenarios),
            # None in a report from before they were kept
            "prompt_tokens": info.usage.prompt_tokens if info.usage else None,
            "completion_tokens": info.usage.completion_tokens if info.usage else None,
            "gates_passed": sum(g.passed for g in r.gates),
            "gates_failed": sum(not g.passed for g in r.gates),
            "partial": r.partial,
            "exit_status": info.exit_status,
            "toolbench_version": info.toolbench_version,
            "path": run.path,
        })
    return pd.DataFrame(rows)


def metrics_df(paths: Paths, *, breakdowns: bool = True) -> pd.DataFrame:
    """One row per (run, benchmark, scenario, metric) and, with ``breakdowns``, per subgroup
    (``label``/``group`` set; None for the scenario's own value): value, CI, n, as recorded."""
    pd = _pandas()
    rows = []
    for run in _runs(paths):
        for s in run.record.metrics.scenarios:
            base = {**_run_columns(run), "benchmark": s.benchmark, "scenario": s.scenario}
            groups = [(None, None, s.metrics)]
            if breakdowns:
                groups += [(label, g.group, g.metrics) for label, gs in s.breakdown.items() for g in gs]
            for label, group, metrics in groups:
                for name, mv in metrics.items():
                    rows.append({**base, "label": label, "group": group, "metric": name,
                                 "value": mv.value, "ci_low": mv.ci_low, "ci_high": mv.ci_high,
                                 "n": mv.n, "is_rate": mv.is_rate,
                                 "higher_is_better": mv.higher_is_better})
    return pd.DataFrame(rows, columns=["run_key", "run_id", "model", "benchmark", "scenario",
                                       "label", "group", "metric", "value", "ci_low", "ci_high",
                                       "n", "is_rate", "higher_is_better"])


def cases_df(paths: Paths, *, transcripts: bool = False) -> pd.DataFrame:
    """One row per case result: outcome, each label as ``label_<name>``, each per-case value
    as ``value_<name>``, failure message, error kind, tokens, latency, the case's start (UTC
    timestamp) and wall time (``started``, ``wall_s``; NaT/None for a run recorded before they
    were kept); with ``transcripts`` the transcript (a list of messages) too."""
    pd = _pandas()
    rows = []
    for run in _runs(paths):
        for c in run.record.cases:
            row = {**_run_columns(run), "case_id": c.case_id, "base_id": base_case_id(c),
                   "benchmark": c.benchmark, "scenario": c.scenario, "outcome": c.outcome.value,
                   "repeat": c.repeat, "failure_message": c.failure_message,
                   "error_kind": c.error.kind if c.error else None,
                   "model_calls": c.model_calls, "cached_calls": c.cached_calls,
                   "prompt_tokens": c.usage.prompt_tokens,
                   "completion_tokens": c.usage.completion_tokens,
                   "latency_s": c.latency_s, "started": c.started_at, "wall_s": c.wall_s,
                   "parse_failures": len(c.parse_failures)}
            row.update({f"label_{k}": v for k, v in c.labels.items()})
            row.update({f"value_{k}": v for k, v in c.values.items()})
            if transcripts:
                row["transcript"] = c.transcript
            rows.append(row)
    df = pd.DataFrame(rows)
    if "started" in df:  # converted once, not per row; None reads NaT
        df["started"] = pd.to_datetime(df["started"], unit="s", utc=True)
    return df


__all__ = ["cases_df", "metrics_df", "runs_df"]
