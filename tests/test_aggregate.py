"""Aggregation: hand-computed metrics, error exclusion, breakdowns, order independence, CIs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pytest_toolbench.results.aggregate import MetricPath, RunMetrics, aggregate, natural_key
from pytest_toolbench.results.bootstrap import bootstrap_mean, bootstrap_ratio, resample_indices
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.metrics import MetricSpec

ACC = MetricSpec(name="accuracy", value="answer_correct")
IER = MetricSpec(
    name="instance_error_rate",
    kind="ratio",
    value="error_calls",
    denominator="calls",
    higher_is_better=False,
    scenarios=("mandatory",),
)
SPECS = {"toolhop": (ACC, IER)}
BREAKDOWN = {"toolhop": ("hops",)}


def case(
    i: int,
    *,
    correct: bool | None = None,
    hops: int = 3,
    scenario: str = "mandatory",
    calls: tuple[int, int] | None = None,
    error: str | None = None,
    parse_failures: int = 0,
) -> CaseResult:
    values: dict[str, float] = {}
    if correct is not None:
        values["answer_correct"] = float(correct)
    if calls is not None:
        values["error_calls"], values["calls"] = float(calls[0]), float(calls[1])
    outcome = Outcome.ERROR if error else (Outcome.PASSED if correct else Outcome.FAILED)
    return CaseResult(
        case_id=f"toolhop-{i:03d}-{scenario}",
        benchmark="toolhop",
        scenario=scenario,
        outcome=outcome,
        labels={"hops": hops, "domain": "film"},
        values=values,
        error=InfraError(kind=error, message="boom") if error else None,
        parse_failures=[{"reason": "unextracted_tool_call", "raw_text": "<tool_call>{"}]
        * parse_failures,
    )


def ten_cases_seven_correct() -> list[CaseResult]:
    return [case(i, correct=i < 7) for i in range(10)]


def test_mean_is_hand_computed_fraction() -> None:
    m = aggregate(ten_cases_seven_correct(), SPECS, BREAKDOWN)
    s = m.scenario("toolhop", "mandatory")
    assert s is not None
    acc = s.metrics["accuracy"]
    assert acc.value == pytest.approx(0.7)
    assert acc.n == 10
    assert acc.ci_low is not None and acc.ci_high is not None
    assert acc.ci_low < 0.7 < acc.ci_high
    assert acc.is_rate and acc.higher_is_better


def test_ratio_sums_numerators_over_denominators_and_counts_cases_with_calls() -> None:
    results = [
        case(0, correct=True, calls=(1, 5)),
        case(1, correct=False, calls=(2, 10)),
        case(2, correct=True, calls=(0, 5)),
        case(3, correct=False),  # no tool calls: not applicable to the ratio
    ]
    s = aggregate(results, SPECS, BREAKDOWN).scenarios[0]
    ier = s.metrics["instance_error_rate"]
    assert ier.value == pytest.approx(3 / 20)  # 0.15, not the mean of per-case rates (0.2)
    assert ier.n == 3
    assert not ier.higher_is_better
    assert s.metrics["accuracy"].n == 4
    assert s.metrics["accuracy"].value == pytest.approx(0.5)


def test_infrastructure_errors_are_excluded_and_counted_by_kind() -> None:
    results = ten_cases_seven_correct() + [
        # Error cases carrying values must still not move any metric.
        case(20, correct=True, calls=(5, 5), error="http_500"),
        case(21, correct=True, error="http_500"),
        case(22, error="timeout"),
    ]
    s = aggregate(results, SPECS, BREAKDOWN).scenarios[0]
    assert s.n_cases == 13
    assert s.n_errors == 3
    assert s.error_kinds == {"http_500": 2, "timeout": 1}
    assert s.error_rate == pytest.approx(3 / 13)
    assert s.metrics["accuracy"].value == pytest.approx(0.7)
    assert s.metrics["accuracy"].n == 10
    assert s.metrics["instance_error_rate"].n == 0
    assert s.metrics["instance_error_rate"].value is None


def test_error_without_error_object_counts_as_unknown() -> None:
    r = CaseResult(
        case_id="x", benchmark="toolhop", scenario="mandatory", outcome=Outcome.ERROR
    )
    s = aggregate([r], SPECS, BREAKDOWN).scenarios[0]
    assert s.error_kinds == {"unknown": 1}
    assert s.metrics["accuracy"].value is None and s.metrics["accuracy"].n == 0


def test_metric_restricted_to_a_scenario_is_absent_elsewhere() -> None:
    results = [case(0, correct=True, scenario="free", calls=(1, 2))]
    s = aggregate(results, SPECS, BREAKDOWN).scenarios[0]
    assert s.scenario == "free"
    assert list(s.metrics) == ["accuracy"]


def test_parse_failures_counted_as_events_and_cases() -> None:
    results = [case(0, correct=False, parse_failures=2), case(1, correct=True, parse_failures=1)]
    results += [case(2, correct=True)]
    s = aggregate(results, SPECS, BREAKDOWN).scenarios[0]
    assert s.n_parse_failures == 3
    assert s.n_cases_with_parse_failures == 2


def test_breakdown_by_hops_is_exact_and_naturally_sorted() -> None:
    results = [
        case(0, correct=True, hops=3),
        case(1, correct=True, hops=3),
        case(2, correct=False, hops=3),
        case(3, correct=False, hops=10),
        case(4, correct=True, hops=4, calls=(1, 4)),
        case(5, correct=False, hops=4, calls=(1, 6)),
        case(6, correct=True, hops=4, error="http_500"),
    ]
    s = aggregate(results, SPECS, BREAKDOWN).scenarios[0]
    groups = s.breakdown["hops"]
    assert [g.group for g in groups] == ["3", "4", "10"]  # natural, not lexicographic
    g3, g4, g10 = groups
    assert (g3.n_cases, g3.n_errors) == (3, 0)
    assert g3.metrics["accuracy"].value == pytest.approx(2 / 3)
    assert g3.metrics["accuracy"].n == 3
    assert g3.metrics["instance_error_rate"].value is None
    assert (g4.n_cases, g4.n_errors) == (3, 1)
    assert g4.metrics["accuracy"].value == pytest.approx(0.5)
    assert g4.metrics["instance_error_rate"].value == pytest.approx(2 / 10)
    assert g4.metrics["instance_error_rate"].n == 2
    assert g10.metrics["accuracy"].value == 0.0
    assert g10.metrics["accuracy"].ci_low == 0.0 == g10.metrics["accuracy"].ci_high
    # Groups partition the scored cases.
    assert sum(g.metrics["accuracy"].n for g in groups) == s.metrics["accuracy"].n == 6


def test_natural_key_orders_numbers_then_words() -> None:
    assert sorted(["10", "3", "b", "4", "a"], key=natural_key) == ["3", "4", "10", "a", "b"]


def test_input_order_does_not_change_metrics() -> None:
    rng = random.Random(7)
    results = [
        case(
            i,
            correct=rng.random() < 0.45,
            hops=3 + i % 5,
            scenario=("mandatory", "free")[i % 2],
            calls=(rng.randint(0, 3), rng.randint(3, 6)) if i % 3 else None,
            error="http_500" if i % 17 == 0 else None,
        )
        for i in range(120)
    ]
    reference = aggregate(results, SPECS, BREAKDOWN).model_dump_json()
    for seed in range(3):
        shuffled = results[:]
        random.Random(seed).shuffle(shuffled)
        assert aggregate(shuffled, SPECS, BREAKDOWN).model_dump_json() == reference
    # Different xdist workers: results arrive as interleaved chunks.
    chunks = results[0::4] + results[1::4] + results[2::4] + results[3::4]
    assert aggregate(iter(chunks), SPECS, BREAKDOWN).model_dump_json() == reference


def test_duplicate_case_ids_still_order_independent() -> None:
    a = case(1, correct=True)
    b = case(1, correct=False)
    x = aggregate([a, b, case(2, correct=True)], SPECS, BREAKDOWN)
    y = aggregate([case(2, correct=True), b, a], SPECS, BREAKDOWN)
    assert x == y
    assert x.scenarios[0].metrics["accuracy"].n == 3


def test_scenarios_sorted_and_roundtrip_json() -> None:
    results = [case(0, correct=True, scenario="mandatory"), case(1, correct=False, scenario="free")]
    m = aggregate(results, SPECS, BREAKDOWN)
    assert [s.scenario for s in m.scenarios] == ["free", "mandatory"]
    assert RunMetrics.model_validate_json(m.model_dump_json()) == m


def test_ci_contains_estimate_and_narrows_with_n() -> None:
    small = aggregate([case(i, correct=i % 2 == 0) for i in range(20)], SPECS, BREAKDOWN)
    big = aggregate([case(i, correct=i % 2 == 0) for i in range(400)], SPECS, BREAKDOWN)
    ws, wb = (
        m.scenarios[0].metrics["accuracy"] for m in (small, big)
    )
    for mv in (ws, wb):
        assert mv.value == pytest.approx(0.5)
        assert mv.ci_low is not None and mv.ci_high is not None
        assert mv.ci_low <= mv.value <= mv.ci_high
    assert (wb.ci_high - wb.ci_low) < (ws.ci_high - ws.ci_low) / 3  # ~sqrt(20) narrower
    # Normal approximation for p=0.5, n=400: 2 * 1.96 * sqrt(0.25 / 400) = 0.098.
    assert 0.085 < wb.ci_high - wb.ci_low < 0.11


def test_confidence_level_widens_interval() -> None:
    rs = [case(i, correct=i % 3 == 0) for i in range(60)]
    narrow = aggregate(rs, SPECS, BREAKDOWN, confidence=0.8).scenarios[0].metrics["accuracy"]
    wide = aggregate(rs, SPECS, BREAKDOWN, confidence=0.99).scenarios[0].metrics["accuracy"]
    assert wide.ci_low < narrow.ci_low and wide.ci_high > narrow.ci_high  # type: ignore[operator]


def test_constant_values_collapse_ci_and_n_one() -> None:
    m = aggregate([case(i, correct=True) for i in range(5)], SPECS, BREAKDOWN)
    acc = m.scenarios[0].metrics["accuracy"]
    assert (acc.value, acc.ci_low, acc.ci_high, acc.n) == (1.0, 1.0, 1.0, 5)
    one = aggregate([case(0, correct=False, calls=(1, 3))], SPECS, BREAKDOWN).scenarios[0]
    assert (one.metrics["accuracy"].value, one.metrics["accuracy"].ci_low) == (0.0, 0.0)
    ier = one.metrics["instance_error_rate"]
    assert ier.value == ier.ci_low == ier.ci_high == pytest.approx(1 / 3) and ier.n == 1


def test_bootstrap_helpers_edge_cases() -> None:
    # Float noise must not open a constant sample's interval.
    est = bootstrap_mean([0.1] * 7)
    assert est.value == est.ci_low == est.ci_high
    assert bootstrap_mean([]) == (None, None, None, 0)
    # Proportional per-case ratios: every resample equals the estimate.
    r = bootstrap_ratio([1, 2, 3], [10, 20, 30])
    assert r.value == r.ci_low == r.ci_high == pytest.approx(0.1)
    # Zero total denominator: undefined, but n counts the applicable cases.
    assert bootstrap_ratio([0, 0], [0, 0]) == (None, None, None, 2)
    with pytest.raises(ValueError):
        bootstrap_ratio([1], [1, 2])
    with pytest.raises(ValueError):
        bootstrap_mean([0, 1], confidence=1.5)


def test_bootstrap_is_seeded_and_resamples_cases() -> None:
    values = np.arange(30) % 2
    assert bootstrap_mean(values, seed=3) == bootstrap_mean(values, seed=3)
    idx = resample_indices(30, n_boot=50, seed=0)
    assert idx.shape == (50, 30) and idx.min() >= 0 and idx.max() < 30
    # Ratio resampling keeps numerator and denominator of a case together: with one case
    # dominating the denominator, the interval stays well inside [0, 1].
    r = bootstrap_ratio([0, 1, 1, 1], [100, 1, 1, 1], n_boot=500)
    assert r.value == pytest.approx(3 / 103)
    assert r.ci_high is not None and r.ci_high <= 1.0


def test_unknown_benchmark_gets_counts_but_no_metrics() -> None:
    r = CaseResult(case_id="f-1", benchmark="familytool", scenario="base", outcome=Outcome.PASSED)
    s = aggregate([r], SPECS, BREAKDOWN).scenarios[0]
    assert (s.benchmark, s.n_cases, s.metrics, s.breakdown) == ("familytool", 1, {}, {})


def test_non_rate_metric_detected() -> None:
    spec = MetricSpec(name="calls_per_case", value="calls")
    rs = [case(i, correct=True, calls=(0, 2 + i)) for i in range(3)]
    mv = aggregate(rs, {"toolhop": (spec,)}, {}).scenarios[0].metrics["calls_per_case"]
    assert mv.value == pytest.approx(3.0) and not mv.is_rate


def test_lookup_paths() -> None:
    results = ten_cases_seven_correct() + [case(50, error="http_500"), case(51, hops=4, correct=False)]
    m = aggregate(results, SPECS, BREAKDOWN)
    acc = m.scenarios[0].metrics["accuracy"]
    assert m.lookup("toolhop.mandatory.accuracy") == pytest.approx(7 / 11)
    assert m.lookup("toolhop.mandatory.accuracy.ci_low") == acc.ci_low
    assert m.lookup("toolhop.mandatory.accuracy.ci_high") == acc.ci_high
    assert m.lookup("toolhop.mandatory.accuracy.n") == 11.0
    assert m.lookup("toolhop.mandatory[hops=3].accuracy") == pytest.approx(0.7)
    assert m.lookup("toolhop.mandatory[hops=4].accuracy.n") == 1.0
    assert m.lookup("toolhop.mandatory.error_rate") == pytest.approx(1 / 12)
    assert m.lookup("toolhop.mandatory[hops=3].error_rate") == pytest.approx(1 / 11)
    assert m.lookup("toolhop.mandatory.instance_error_rate") is None  # declared, no values
    assert m.resolve("toolhop.mandatory.instance_error_rate") == (True, None)
    for missing in (
        "toolhop.free.accuracy",
        "toolhop.mandatory.nope",
        "toolhop.mandatory[hops=9].accuracy",
        "toolhop.mandatory[domain=film].accuracy",
        "bfcl.mandatory.accuracy",
    ):
        assert m.resolve(missing) == (False, None), missing
    with pytest.raises(ValueError, match="malformed metric path"):
        m.lookup("toolhop.accuracy")
    paths = m.available_paths()
    assert "toolhop.mandatory.accuracy" in paths
    assert "toolhop.mandatory.error_rate" in paths
    assert "toolhop.mandatory[hops=4].instance_error_rate" in paths
    assert "did you mean toolhop.mandatory.accuracy" in m.suggest("toolhop.mandatry.accuracy")


def test_metric_path_roundtrip() -> None:
    for text in (
        "toolhop.mandatory.accuracy",
        "toolhop.mandatory.accuracy.ci_low",
        "toolhop.mandatory[hops=3].accuracy.n",
        "tool-hop.free_2.error_rate",
    ):
        assert str(MetricPath.parse(text)) == text
    assert str(MetricPath.parse(" toolhop.mandatory.accuracy.value ")) == "toolhop.mandatory.accuracy"
    with pytest.raises(ValueError, match="error_rate has no .ci_low"):
        MetricPath.parse("toolhop.mandatory.error_rate.ci_low")


def test_scenarios_follow_the_benchmark_order_with_unknown_ones_last():
    results = [case(i, correct=True, scenario=s) for i, s in enumerate(["free", "direct", "zeta", "mandatory", "alpha"])]
    default = aggregate(results, SPECS, BREAKDOWN, n_boot=50)
    assert [m.scenario for m in default.scenarios] == ["alpha", "direct", "free", "mandatory", "zeta"]
    ordered = aggregate(
        results, SPECS, BREAKDOWN, n_boot=50,
        scenario_order={"toolhop": ("direct", "mandatory", "free")},
    )
    assert [m.scenario for m in ordered.scenarios] == ["direct", "mandatory", "free", "alpha", "zeta"]
