"""``--baseline RUN.json`` inside a pytest run: load it up front, compare at the end.

The baseline is read while pytest configures (a missing or malformed file, or a baseline gate
without ``--baseline``, is a one-line usage error before any model call); at session end the
current results are compared with it by the same library as ``toolbench compare``, with the
baseline as the reference (differences are this run minus the baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench.compare.core import compare_runs, registry_specs
from pytest_toolbench.compare.load import LoadedRun, load_run
from pytest_toolbench.compare.same_data import case_keys, data_of, keys_mismatch, runs_mismatch
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.gates import Baseline, Gate, GateVerdict, parse_gate
from pytest_toolbench.results.provenance import (
    ALLOW_FLAG,
    allowed_note,
    find,
    refusal_line,
    run_data,
)
from pytest_toolbench.results.run_record import RunInfo, RunRecord


def baseline_gates(gates: Sequence[str]) -> list[Gate]:
    return [g for g in (parse_gate(t) for t in gates) if g.needs_baseline]


def check_baseline_gates(gates: Sequence[str], baseline_path: Path | None) -> None:
    """A gate that reads the baseline needs ``--baseline`` (ValueError, one line)."""
    needing = baseline_gates(gates)
    if needing and baseline_path is None:
        raise ValueError(f"gate {needing[0]} compares with a baseline run; pass --baseline RUN.json")


def load_baseline(path: Path, gates: Sequence[str]) -> LoadedRun:
    """Load the baseline report and check that it has every path a baseline gate reads."""
    run = load_run(path)
    run.label = f"baseline {run.model}"
    for gate in baseline_gates(gates):
        found, _ = run.metrics.resolve(gate.path)
        if not found:
            raise ValueError(
                f"gate {gate}: the baseline run {path} has no {gate.path}; "
                f"{run.metrics.suggest(gate.path)}"
            )
    return run


def compare_with_baseline(
    baseline: LoadedRun, results: Sequence[CaseResult], metrics: RunMetrics, *, model: str,
    n_boot: int, seed: int, data_sources: Sequence[Any] = (), allow_different_data: bool = False,
) -> Comparison:
    """This run compared with the baseline; a comparison of runs on different data (allowed by
    --allow-different-data, or found only now) says so in ``different_data``."""
    dumps = [d if isinstance(d, dict) else d.model_dump(mode="json") for d in data_sources]
    current = LoadedRun(label=f"this run {model}", record=RunRecord(
        run=RunInfo(settings={"model": model}, data_sources=dumps), metrics=metrics,
        cases=list(results)))
    specs, labels = registry_specs()
    comparison = compare_runs([baseline, current], specs, labels, n_boot=max(1, n_boot), seed=seed)
    what = runs_mismatch(baseline, current, BASELINE_NAME, THIS_RUN)
    if what:
        comparison.different_data = [allowed_note(what) if allow_different_data
                                     else f"REFUSED: {refusal_line(what)}"]
    return comparison


BASELINE_NAME, THIS_RUN = "the baseline", "this run"


def baseline_mismatch(baseline: LoadedRun, data_sources: Sequence[Any],
                      cases: Iterable[Any]) -> str | None:
    """Before any model call: how this run's data and selected cases differ from the baseline's
    (one line), or None."""
    cases = list(cases)
    names = sorted({c.benchmark for c in cases})
    return keys_mismatch(BASELINE_NAME, data_of(baseline),
                         case_keys(baseline.cases), THIS_RUN, run_data(data_sources, names),
                         case_keys(cases))


def check_baseline_data(baseline: LoadedRun, data_sources: Sequence[Any], cases: Iterable[Any],
                        *, allow: bool) -> str | None:
    """ValueError (one line, exit 4 as a usage error) for a baseline on other data or with no
    case in common, unless ``allow``; returns the difference (None: the same data)."""
    what = baseline_mismatch(baseline, data_sources, cases)
    if what and not allow:
        raise ValueError(f"{baseline.path}: {refusal_line(what)}")
    return what


def with_data(verdicts: Sequence[GateVerdict], data_sources: Sequence[Any],
              baseline: LoadedRun | None, comparison: Comparison | None, *,
              allow_different_data: bool) -> list[GateVerdict]:
    """Every gate line names the data it was computed on (``[data: toolhop real@b439d72a1b2c fp
    ...]``); a baseline gate also the baseline's, and says when the two differ. A baseline gate
    over a refused comparison (different data found only at the end) fails."""
    ours = run_data(data_sources)
    theirs = data_of(baseline) if baseline is not None else []
    differ = bool(comparison is not None and comparison.different_data)
    out = []
    for v in verdicts:
        bench = v.gate.split(".", 1)[0]
        note = f"data: {find(ours, bench).short()}" if v.kind in ("metric", "error_rate") else ""
        is_baseline = v.kind == "metric" and _needs_baseline(v.gate)
        if not note:
            out.append(v)
            continue
        update: dict[str, Any] = {}
        if is_baseline and baseline is not None:
            note = f"data: this run {find(ours, bench).short()}, baseline {find(theirs, bench).short()}"
            if differ and allow_different_data:
                note += f"; DIFFERENT DATA, compared anyway ({ALLOW_FLAG})"
            elif differ:
                update = {"passed": False}
                note += "; " + comparison.different_data[0]  # type: ignore[union-attr]
        update["reason"] = f"{v.reason} [{note}]"
        out.append(v.model_copy(update=update))
    return out


def _needs_baseline(gate: str) -> bool:
    try:
        return parse_gate(gate).needs_baseline
    except ValueError:
        return False


def gate_baseline(baseline: LoadedRun | None, comparison: Comparison | None) -> Baseline | None:
    if baseline is None or comparison is None:
        return None
    return Baseline(metrics=baseline.metrics, comparison=comparison, label=baseline.path or "")
