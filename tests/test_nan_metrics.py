"""A per-case value may be nan where a benchmark's upstream gives nan (ToolBeHonest's matching
score of a gold plan with no UnsolvableQuery step, upstream ``utils/calculate_metrics.py``). The
shared layers keep it nan and never turn it into a number: the bootstrap interval, the rate
inference, the paired comparison, the printed cells, and every kind of gate, which must fail and
say why."""

from __future__ import annotations

import math

from pytest_toolbench.compare import compare_runs
from pytest_toolbench.compare.load import LoadedRun
from pytest_toolbench.compare.render import fmt_diff, fmt_value
from pytest_toolbench.compare.stats import paired_bootstrap_mean_diff, paired_bootstrap_ratio_diff
from pytest_toolbench.report.terminal import format_ci, format_number
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.bootstrap import bootstrap_mean, bootstrap_ratio
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.gates import Baseline, evaluate_gate, parse_gate
from pytest_toolbench.results.metrics import MetricSpec

NAN = math.nan
SPECS = {"demo": (MetricSpec(name="score", value="score"),
                  MetricSpec(name="pooled", kind="ratio", value="num", denominator="den"))}
LABELS: dict[str, tuple[str, ...]] = {"demo": ()}


def is_nan(*xs: float | None) -> bool:
    return all(x is not None and math.isnan(x) for x in xs)


def cases(scores: list[float]) -> list[CaseResult]:
    return [CaseResult(case_id=f"demo-{i}", benchmark="demo", scenario="s", model="m",
                       outcome=Outcome.PASSED,
                       values={"score": v, "num": v, "den": 1.0})
            for i, v in enumerate(scores)]


def run(label: str, scores: list[float]) -> LoadedRun:
    return LoadedRun.from_cases(label, cases(scores), SPECS, LABELS, n_boot=200)


def test_bootstrap_keeps_nan_instead_of_an_interval_from_lucky_resamples():
    est = bootstrap_mean([1.0, NAN, 0.0, 1.0], n_boot=200)
    assert is_nan(est.value, est.ci_low, est.ci_high) and est.n == 4
    est = bootstrap_ratio([1.0, NAN, 0.0], [1.0, 1.0, 1.0], n_boot=200)
    assert is_nan(est.value, est.ci_low, est.ci_high) and est.n == 3
    assert bootstrap_mean([1.0, 0.0], n_boot=200).ci_low == 0.0  # finite data: unchanged


def test_a_nan_mean_is_still_a_rate_and_prints_as_nan():
    metrics = aggregate(cases([0.5, NAN, 1.0]), SPECS, LABELS, n_boot=200)
    mv = metrics.scenario("demo", "s").metrics["score"]
    assert is_nan(mv.value, mv.ci_low, mv.ci_high) and mv.n == 3 and mv.is_rate
    assert format_number(mv.value, is_rate=True) == "nan"  # not "nan%"
    assert format_ci(mv) == "[nan, nan]"


def test_paired_differences_with_nan_are_nan():
    est = paired_bootstrap_mean_diff([1.0, 0.0, 1.0], [1.0, NAN, 0.0], n_boot=200)
    assert is_nan(est.value, est.ci_low, est.ci_high) and est.n == 3
    est = paired_bootstrap_ratio_diff([1.0, 0.0], [1.0, 1.0], [NAN, 0.0], [1.0, 1.0], n_boot=200)
    assert is_nan(est.value, est.ci_low, est.ci_high)
    comp = compare_runs([run("A", [1.0, 0.0, 1.0]), run("B", [1.0, NAN, 1.0])], SPECS, LABELS,
                        n_boot=200)
    row = comp.find("demo.s.score")
    assert fmt_value(row.values[1], True) == "nan n=3"
    assert fmt_diff(row.diffs[0], True) == "nan"
    assert row.diffs[0].mcnemar is None  # nan is not a 0/1 outcome


def test_every_gate_on_nan_fails_and_says_nan():
    metrics = aggregate(cases([1.0, NAN]), SPECS, LABELS, n_boot=200)
    for text in ("demo.s.score>=0.5", "demo.s.score<=1", "demo.s.score==1",
                 "demo.s.score.ci_high>0", "demo.s.pooled>=0"):
        verdict = evaluate_gate(parse_gate(text), metrics)
        assert not verdict.passed and is_nan(verdict.actual), text
        assert "is nan" in verdict.reason and "cannot pass" in verdict.reason, verdict.reason


def test_baseline_gates_on_nan_fail_and_say_which_run():
    good, bad = run("good", [1.0, 1.0]), run("bad", [1.0, NAN])
    # this run nan, baseline fine
    base = Baseline(metrics=good.metrics, comparison=compare_runs([good, bad], SPECS, LABELS,
                                                                  n_boot=200))
    verdict = evaluate_gate(parse_gate("demo.s.score>=baseline-0.1"), bad.metrics, base)
    assert not verdict.passed and "in this run is nan" in verdict.reason
    verdict = evaluate_gate(parse_gate("demo.s.score.diff>=-0.1"), bad.metrics, base)
    assert not verdict.passed and "diff is nan" in verdict.reason
    # the baseline nan, this run fine
    base = Baseline(metrics=bad.metrics, comparison=compare_runs([bad, good], SPECS, LABELS,
                                                                 n_boot=200), label="old")
    verdict = evaluate_gate(parse_gate("demo.s.score<=baseline+0.1"), good.metrics, base)
    assert not verdict.passed and "in the baseline run (old) is nan" in verdict.reason
