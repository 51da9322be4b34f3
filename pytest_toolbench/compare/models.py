"""The comparison's models (results/comparison.py), under the names ``compare/`` has used."""

from pytest_toolbench.results.comparison import (
    CaseChanges,
    Comparison,
    McNemar,
    MetricComparison,
    PairCoverage,
    PairedDiff,
    RunRef,
    RunValue,
    ScenarioComparison,
)

__all__ = [
    "CaseChanges",
    "Comparison",
    "McNemar",
    "MetricComparison",
    "PairCoverage",
    "PairedDiff",
    "RunRef",
    "RunValue",
    "ScenarioComparison",
]
