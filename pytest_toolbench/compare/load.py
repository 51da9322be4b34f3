"""Read ``--toolbench-json`` reports back as run records (results/run_record.py) for comparison.

A report that cannot be read is one line naming the file (and the case index where a case is
malformed), never a traceback: ``toolbench compare`` and ``--baseline`` are CI steps.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from typing import Any

from pydantic import ValidationError

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.results import case_store
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.results.run_record import RunInfo, RunRecord
from pytest_toolbench.results.run_sections import SettingsSection
from pytest_toolbench.runs.record import INDEX_NAME, REPORT_NAME


class RunLoadError(ValueError):
    """A report file that is missing or not a toolbench JSON report (message: one line)."""


class LoadedRun(DeferredModel):
    """One run as a column of a comparison: its record (results/run_record.py, what the JSON
    report holds) and the label and file it is shown by."""

    label: str
    record: RunRecord
    path: str | None = None

    @property
    def model(self) -> str:
        return self.record.model or self.label

    @property
    def cases(self) -> list[CaseResult]:
        return self.record.cases

    @property
    def metrics(self) -> RunMetrics:
        return self.record.metrics

    @property
    def run_id(self) -> str | None:
        return self.record.run.run_id

    @property
    def partial(self) -> bool:
        return self.record.partial

    @property
    def settings(self) -> SettingsSection:
        return self.record.run.settings

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
        """A run built in memory (tests): metrics via ``aggregate``."""
        metrics = aggregate(cases, specs, labels, n_boot=n_boot, seed=seed)
        model = next((c.model for c in cases if c.model), label)
        return cls(label=label, record=RunRecord(
            run=RunInfo(settings=SettingsSection(model=model)), metrics=metrics, cases=list(cases)))


def _short(err: Any) -> str:
    where = ".".join(str(x) for x in err.get("loc", ())) or "record"
    return f"{where}: {err.get('msg', 'invalid')}"


def _where(exc: ValidationError) -> str:
    """``cases[3]: outcome: ...`` / ``metrics: scenarios.0...: ...``: the first error, one line."""
    err = dict(exc.errors()[0])
    loc = tuple(err.get("loc", ()))
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        return f"cases[{loc[1]}]: {_short({**err, 'loc': loc[2:]})}"
    if loc and loc[0] in ("metrics", "run", "gates", "repeats", "baseline"):
        return f"{loc[0]}: {_short({**err, 'loc': loc[1:]})}"
    return _short(err)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic GC while a record is read: a report's tens of thousands of new dicts and models
    hold no cycles, yet each allocation threshold they cross walks the growing heap again (a
    FamilyTool record of 5,628 cases: 1.6 s of CPU with the GC on, 0.95 s with it paused)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def report_file(path: Path) -> Path:
    """The report a path names: the path itself, or a run folder's ``report.json`` (the folder
    is what a user tab-completes under ``.toolbench/runs``). RunLoadError (one line) for a run
    folder with no report yet and for any other folder."""
    if not path.is_dir():
        return path
    report = path / REPORT_NAME
    if report.is_file():
        return report
    if (path / INDEX_NAME).is_file():
        raise RunLoadError(f"{path}: run {path.name} has no {REPORT_NAME} (it did not finish; "
                           "`toolbench runs` shows its status, and `toolbench finish` scores a "
                           "run that was killed)")
    raise RunLoadError(f"{path}: a folder that is not a run's (no {INDEX_NAME} or {REPORT_NAME}"
                       " in it), nor a report file")


def load_record(path: str | Path) -> RunRecord:
    """Read one JSON report (or a run folder's) as its record; :class:`RunLoadError` with a
    one-line message on bad input. A run folder's report gets its cases from the run's journal
    (results/case_store.py); ``--toolbench-json`` and older reports hold them inline."""
    with _gc_paused():
        return _load_record(report_file(Path(path)))


def _report_text(p: Path) -> str:
    """The report's text; RunLoadError (one line, file and line named) for a file that cannot
    be read or is not UTF-8: a corrupt or binary file is skipped by ``toolbench view`` as a
    truncated one is, never a ``UnicodeDecodeError`` traceback."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise RunLoadError(f"{p}: cannot read run report ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        byte = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1)
        raise RunLoadError(f"{p}:{line}: not JSON (not UTF-8 text: {exc.reason} at byte "
                           f"{byte} of the line)") from None


def _load_record(p: Path) -> RunRecord:
    text = _report_text(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunLoadError(f"{p}:{exc.lineno}: not JSON ({exc.msg})") from None
    if isinstance(data, dict):
        try:
            case_store.resolve_cases(data, p)
        except case_store.CaseStoreError as exc:
            raise RunLoadError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise RunLoadError(f"{p}: not a pytest-toolbench JSON report (no 'cases' list)")
    if not isinstance(data.get("run"), dict):
        data["run"] = {}  # a hand-made report: the run's identity is unknown
    if not isinstance(data["run"].get("settings"), dict):
        data["run"]["settings"] = {}
    if data.get("metrics") is None:
        data["metrics"] = {"scenarios": []}
    try:
        return RunRecord.model_validate(data)
    except ValidationError as exc:
        raise RunLoadError(f"{p}: {_where(exc)}") from None


def load_run(path: str | Path) -> LoadedRun:
    """Load one report (or a run folder's); raise :class:`RunLoadError` with a one-line message
    on bad input."""
    p = report_file(Path(path))
    record = load_record(p)
    model = record.model or p.stem
    return LoadedRun(label=model, record=record, path=str(p))


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
