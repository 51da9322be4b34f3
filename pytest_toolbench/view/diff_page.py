"""Two runs side by side: the paired difference, its interval and McNemar's p exactly as
``toolbench compare`` computes them (compare/core.py ``compare_runs``; nothing recomputed here),
and the cases whose outcome flipped, each linked to its transcript in both runs.

A pair is compared only where ``toolbench compare`` would compare it: the same benchmarks
(compare/run_refs.py) and the same data with cases in common (compare/same_data.py); otherwise
the page model carries the one-line reason instead of numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.compare.core import compare_runs
from pytest_toolbench.compare.render import not_compared_lines
from pytest_toolbench.compare.same_data import keys_mismatch
from pytest_toolbench.results.comparison import MetricComparison
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.results.repeats import base_case_id
from pytest_toolbench.view.cells import interval, number
from pytest_toolbench.view.load import ViewRun


class DiffRow(DeferredModel):
    metric: str
    a: str
    b: str
    diff: str
    ci: str
    n_paired: int
    p: str
    better: bool | None


class Flip(DeferredModel):
    id: str
    #: Case index in run A / B (None: not found there).
    a: int | None
    b: int | None


class DiffScenario(DeferredModel):
    benchmark: str
    scenario: str
    coverage: str
    rows: list[DiffRow]
    breakdown_rows: list[DiffRow]
    worse: list[Flip]
    better: list[Flip]


class DiffPage(DeferredModel):
    a: str
    b: str
    a_model: str
    b_model: str
    file: str
    scenarios: list[DiffScenario]
    confidence: float
    n_boot: int
    #: ``A: -x/--maxfail=1 stopped the run``: each partial run of the pair and why (its cases
    #: fewer than it selected), as ``toolbench compare`` ends its text.
    partial: list[str] = []
    #: ``familytool: only in A (66 cases); ...``: a benchmark of one run only, not tabulated.
    not_compared: list[str] = []


def diff_file(a: str, b: str) -> str:
    return f"diff-{a}--{b}.html"


def refusal(a: ViewRun, b: ViewRun) -> str | None:
    """Why ``toolbench compare`` would refuse the pair (one line), or None."""
    shared = set(a.benchmarks()) & set(b.benchmarks())
    if not shared:  # compare/run_refs.py check_same_benchmarks: no case could pair
        return (f"runs of different benchmarks cannot be compared: {a.run_id} "
                f"({', '.join(a.benchmarks()) or 'no benchmark'}) vs {b.run_id} "
                f"({', '.join(b.benchmarks()) or 'no benchmark'})")
    return keys_mismatch(f"A ({a.run_id})", a.data(), _keys(a), f"B ({b.run_id})", b.data(), _keys(b))


def _keys(run: ViewRun) -> set[tuple[str, str, str]]:
    return {(c.benchmark, c.scenario, base_case_id(c)) for c in run.record.cases}


def _row(m: MetricComparison) -> DiffRow:
    va, vb = m.values[0], m.values[1]
    d = m.diffs[0]
    rate = m.is_rate
    diff = "n/a" if d.diff is None else (f"{100 * d.diff:+.1f} pp" if rate else f"{d.diff:+.4g}")
    better = None
    if d.diff is not None and d.ci_low is not None and d.ci_high is not None:
        if d.ci_low > 0 or d.ci_high < 0:  # the interval excludes 0
            better = (d.diff > 0) == m.higher_is_better
    return DiffRow(metric=m.row_name, a=number(va.value, rate) if va else "-",
                   b=number(vb.value, rate) if vb else "-", diff=diff,
                   ci=interval(d.ci_low, d.ci_high, rate), n_paired=d.n_paired,
                   p=f"{d.mcnemar.p_value:.3g} (b={d.mcnemar.b}, c={d.mcnemar.c})" if d.mcnemar else "",
                   better=better)


def _index(run: ViewRun) -> dict[tuple[str, str, str], int]:
    """(benchmark, scenario, base case id) -> the case's first index in the run."""
    out: dict[tuple[str, str, str], int] = {}
    for i, c in enumerate(run.record.cases):
        out.setdefault((c.benchmark, c.scenario, base_case_id(c)), i)
    return out


def build_diff(a: ViewRun, b: ViewRun, specs: Mapping[str, tuple[MetricSpec, ...]],
               labels: Mapping[str, tuple[str, ...]], *, n_boot: int = 2000) -> DiffPage:
    """B minus A, as ``toolbench compare A B`` reports it."""
    comparison = compare_runs([a.for_compare(), b.for_compare()], dict(specs), dict(labels),
                              n_boot=n_boot)
    ia, ib = _index(a), _index(b)
    scenarios = []
    for s in comparison.scenarios:
        cov = s.coverage[0]
        coverage = (f"{cov.n_paired} paired, {cov.only_in_reference} only in A, "
                    f"{cov.only_in_run} only in B, {cov.error_in_either} with an error in either")
        ch = s.changes[0] if s.changes else None

        def flips(ids: Sequence[str]) -> list[Flip]:
            return [Flip(id=c, a=ia.get((s.benchmark, s.scenario, c)),
                         b=ib.get((s.benchmark, s.scenario, c))) for c in ids]

        scenarios.append(DiffScenario(
            benchmark=s.benchmark, scenario=s.scenario, coverage=coverage,
            rows=[_row(m) for m in s.metrics if m.label is None],
            breakdown_rows=[_row(m) for m in s.metrics if m.label is not None],
            worse=flips(ch.worse) if ch else [], better=flips(ch.better) if ch else []))
    partial = [f"{side} ({run.run_id}): {ref.partial_reason or 'interrupted'}"
               for side, run, ref in zip("AB", (a, b), comparison.runs) if ref.partial]
    return DiffPage(a=a.key, b=b.key, a_model=a.model, b_model=b.model,
                    file=diff_file(a.key, b.key), scenarios=scenarios,
                    confidence=comparison.confidence, n_boot=comparison.n_boot, partial=partial,
                    not_compared=not_compared_lines(comparison))
