"""``--baseline RUN.json`` inside a pytest run: load it up front, compare at the end.

The baseline is read while pytest configures (a missing or malformed file, or a baseline gate
without ``--baseline``, is a one-line usage error before any model call); at session end the
current results are compared with it by the same library as ``toolbench compare``, with the
baseline as the reference (differences are this run minus the baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_toolbench.compare.core import compare_runs, registry_specs
from pytest_toolbench.compare.load import LoadedRun, load_run
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.gates import Baseline, Gate, parse_gate
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
    n_boot: int, seed: int,
) -> Comparison:
    current = LoadedRun(label=f"this run {model}", record=RunRecord(
        run=RunInfo(settings={"model": model}), metrics=metrics, cases=list(results)))
    specs, labels = registry_specs()
    return compare_runs([baseline, current], specs, labels, n_boot=max(1, n_boot), seed=seed)


def gate_baseline(baseline: LoadedRun | None, comparison: Comparison | None) -> Baseline | None:
    if baseline is None or comparison is None:
        return None
    return Baseline(metrics=baseline.metrics, comparison=comparison, label=baseline.path or "")
