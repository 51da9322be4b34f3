"""Read ``--toolbench-json`` reports back into typed runs for comparison.

A report that cannot be read is one line naming the file (and the case index where a case is
malformed), never a traceback: ``toolbench compare`` and ``--baseline`` are CI steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec


class RunLoadError(ValueError):
    """A report file that is missing or not a toolbench JSON report (message: one line)."""


class LoadedRun(BaseModel):
    """One run: its cases and the metrics it reported."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str
    model: str
    cases: list[CaseResult]
    metrics: RunMetrics
    path: str | None = None
    run_id: str | None = None
    partial: bool = False
    settings: dict = {}

    @classmethod
    def from_cases(
        cls,
        label: str,
        cases: Sequence[CaseResult],
        specs: dict[str, tuple[MetricSpec, ...]],
        labels: dict[str, tuple[str, ...]],
        *,
        n_boot: int = 2000,
        seed: int = 0,
    ) -> LoadedRun:
        """A run built in memory (the current pytest session, tests): metrics via ``aggregate``."""
        metrics = aggregate(cases, specs, labels, n_boot=n_boot, seed=seed)
        model = next((c.model for c in cases if c.model), label)
        return cls(label=label, model=model, cases=list(cases), metrics=metrics)


def _short(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ())) or "record"
    return f"{where}: {err.get('msg', 'invalid')}"


def load_run(path: str | Path) -> LoadedRun:
    """Load one report; raise :class:`RunLoadError` with a one-line message on bad input."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunLoadError(f"{p}: cannot read run report ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunLoadError(f"{p}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise RunLoadError(f"{p}: not a pytest-toolbench JSON report (no 'cases' list)")
    cases: list[CaseResult] = []
    for i, raw in enumerate(data["cases"]):
        try:
            cases.append(CaseResult.model_validate(raw))
        except ValidationError as exc:
            raise RunLoadError(f"{p}: cases[{i}]: {_short(exc)}") from None
    try:
        metrics = RunMetrics.model_validate(data.get("metrics") or {"scenarios": []})
    except ValidationError as exc:
        raise RunLoadError(f"{p}: metrics: {_short(exc)}") from None
    run = data.get("run") if isinstance(data.get("run"), dict) else {}
    settings = run.get("settings") if isinstance(run.get("settings"), dict) else {}
    model = str(settings.get("model") or next((c.model for c in cases if c.model), "") or p.stem)
    return LoadedRun(
        label=model,
        model=model,
        cases=cases,
        metrics=metrics,
        path=str(p),
        run_id=run.get("run_id"),
        partial=bool(data.get("partial", False)),
        settings=settings,
    )


def unique_labels(runs: Sequence[LoadedRun]) -> list[str]:
    """Column labels: the model name, made unique with the file name (or #k) when two runs
    share a model (e.g. one model before and after a change)."""
    labels = [r.label for r in runs]
    out: list[str] = []
    for i, (label, run) in enumerate(zip(labels, runs)):
        if labels.count(label) > 1:
            stem = Path(run.path).stem if run.path else f"#{i + 1}"
            if stem == "report" and run.run_id:  # a run folder's report.json: its run id says more
                stem = run.run_id
            label = f"{label} ({stem})"
        if label in out:
            label = f"{label} #{i + 1}"
        out.append(label)
    return out


def load_runs(paths: Sequence[str | Path]) -> list[LoadedRun]:
    runs = [load_run(p) for p in paths]
    for run, label in zip(runs, unique_labels(runs)):
        run.label = label
    return runs
