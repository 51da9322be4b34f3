"""Compare runs (``toolbench compare``) and a run with its ``--baseline``: paired statistics
over the cases two runs share (see core.py)."""

from pytest_toolbench.compare.core import compare_runs, compare_with_registry, registry_specs
from pytest_toolbench.compare.load import LoadedRun, RunLoadError, load_run, load_runs
from pytest_toolbench.results.comparison import (
    Comparison,
    MetricComparison,
    PairCoverage,
    PairedDiff,
    RunRef,
    RunValue,
)
from pytest_toolbench.compare.stats import McNemar, mcnemar

__all__ = [
    "Comparison",
    "LoadedRun",
    "McNemar",
    "MetricComparison",
    "PairCoverage",
    "PairedDiff",
    "RunLoadError",
    "RunRef",
    "RunValue",
    "compare_runs",
    "compare_with_registry",
    "load_run",
    "load_runs",
    "mcnemar",
    "registry_specs",
]
