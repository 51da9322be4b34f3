"""Gates: parsing (incl. malformed strings), evaluation, subgroup paths, missing metrics."""

from __future__ import annotations

import pytest

from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.gates import (
    Gate,
    error_rate_verdicts,
    evaluate_gate,
    evaluate_gates,
    parse_gate,
    parse_gates,
)
from pytest_toolbench.results.metrics import MetricSpec

SPECS = {
    "toolhop": (
        MetricSpec(name="accuracy", value="answer_correct"),
        MetricSpec(name="unused", value="never_set"),
    )
}


def _case(i: int, correct: bool, hops: int, error: str | None = None) -> CaseResult:
    return CaseResult(
        case_id=f"toolhop-{i:02d}-mandatory",
        benchmark="toolhop",
        scenario="mandatory",
        outcome=Outcome.ERROR if error else (Outcome.PASSED if correct else Outcome.FAILED),
        labels={"hops": hops},
        values={} if error else {"answer_correct": float(correct)},
        error=InfraError(kind=error, message="x") if error else None,
    )


@pytest.fixture(scope="module")
def metrics() -> RunMetrics:
    # 20 scored cases: hops=3 -> 8/10 correct, hops=4 -> 2/10 correct; overall 0.5.
    # Plus 2 infrastructure errors: error_rate = 2/22.
    rs = [_case(i, i < 8, 3) for i in range(10)] + [_case(10 + i, i < 2, 4) for i in range(10)]
    rs += [_case(30, False, 3, "http_500"), _case(31, False, 4, "http_500")]
    return aggregate(rs, SPECS, {"toolhop": ("hops",)})


@pytest.mark.parametrize(
    ("text", "path", "op", "threshold"),
    [
        ("toolhop.mandatory.accuracy>=0.45", "toolhop.mandatory.accuracy", ">=", 0.45),
        ("toolhop.mandatory.accuracy > 0.45", "toolhop.mandatory.accuracy", ">", 0.45),
        ("  toolhop.mandatory.accuracy<=1 ", "toolhop.mandatory.accuracy", "<=", 1.0),
        ("toolhop.mandatory.accuracy<0.9", "toolhop.mandatory.accuracy", "<", 0.9),
        ("toolhop.mandatory.accuracy.n==20", "toolhop.mandatory.accuracy.n", "==", 20.0),
        ("toolhop.mandatory.accuracy.ci_low>=45%", "toolhop.mandatory.accuracy.ci_low", ">=", 0.45),
        ("toolhop.mandatory.accuracy.ci_high<=.9", "toolhop.mandatory.accuracy.ci_high", "<=", 0.9),
        ("toolhop.mandatory[hops=3].accuracy>=0.5", "toolhop.mandatory[hops=3].accuracy", ">=", 0.5),
        (
            "toolhop.mandatory[hops=3].accuracy.ci_low >= 0.3",
            "toolhop.mandatory[hops=3].accuracy.ci_low",
            ">=",
            0.3,
        ),
        ("toolhop.mandatory.error_rate<=0.05", "toolhop.mandatory.error_rate", "<=", 0.05),
        ("toolhop.mandatory.accuracy>=-1e-3", "toolhop.mandatory.accuracy", ">=", -0.001),
    ],
)
def test_parse_gate(text: str, path: str, op: str, threshold: float) -> None:
    gate = parse_gate(text)
    assert (gate.path, gate.op) == (path, op)
    assert gate.threshold == pytest.approx(threshold)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty gate"),
        ("   ", "empty gate"),
        ("toolhop.mandatory.accuracy", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy=>0.4", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy=0.4", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy!=0.4", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy>=0.4>=0.5", "expected <metric path><op><number>"),
        (">=0.4", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy>=", "expected <metric path><op><number>"),
        ("toolhop.mandatory.accuracy>=high", "is not a number"),
        ("toolhop.mandatory.accuracy>=nan", "must be finite"),
        ("toolhop.accuracy>=0.4", "malformed metric path"),
        ("toolhop.mandatory.accuracy.stderr>=0.4", "malformed metric path"),
        ("toolhop.mandatory[hops].accuracy>=0.4", "malformed metric path"),
        ("toolhop.mandatory[hops>=3].accuracy>=0.4", "malformed metric path"),
        ("toolhop mandatory accuracy>=0.4", "malformed metric path"),
        ("toolhop.mandatory.error_rate.ci_low<=0.1", "error_rate has no .ci_low"),
    ],
)
def test_malformed_gates_raise_helpful_value_error(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_gate(text)
    message = str(info.value)
    assert needle in message
    if text.strip():
        assert repr(text) in message  # the user sees which --gate was wrong


def test_parse_gates_stops_on_first_bad_one() -> None:
    assert [str(g) for g in parse_gates(["toolhop.a.b>=1", "toolhop.a.b<0.2"])] == [
        "toolhop.a.b>=1",
        "toolhop.a.b<0.2",
    ]
    with pytest.raises(ValueError, match="'bad'"):
        parse_gates(["toolhop.a.b>=1", "bad"])


def test_evaluate_pass_fail_and_boundaries(metrics: RunMetrics) -> None:
    def verdict(text: str) -> tuple[bool, float | None]:
        v = evaluate_gate(parse_gate(text), metrics)
        return v.passed, v.actual

    assert verdict("toolhop.mandatory.accuracy>=0.5") == (True, 0.5)  # boundary passes >=
    assert verdict("toolhop.mandatory.accuracy>0.5") == (False, 0.5)  # boundary fails >
    assert verdict("toolhop.mandatory.accuracy<=0.5")[0]
    assert not verdict("toolhop.mandatory.accuracy<0.5")[0]
    assert verdict("toolhop.mandatory.accuracy==0.5")[0]
    assert verdict("toolhop.mandatory.accuracy>=50%")[0]
    assert verdict("toolhop.mandatory.accuracy.n==20") == (True, 20.0)
    assert verdict("toolhop.mandatory[hops=3].accuracy>=0.8") == (True, 0.8)
    assert verdict("toolhop.mandatory[hops=4].accuracy>=0.45") == (False, 0.2)
    assert verdict("toolhop.mandatory.error_rate<=0.1")[0]  # 2/22 = 0.0909
    assert not verdict("toolhop.mandatory.error_rate<=0.05")[0]


def test_ci_bound_gates_are_stricter_than_point_gates(metrics: RunMetrics) -> None:
    point = evaluate_gate(parse_gate("toolhop.mandatory[hops=3].accuracy>=0.6"), metrics)
    low = evaluate_gate(parse_gate("toolhop.mandatory[hops=3].accuracy.ci_low>=0.6"), metrics)
    assert point.passed and point.actual == pytest.approx(0.8)
    assert low.actual is not None and low.actual < 0.8
    # n=10 with 8 correct: the bootstrap lower bound sits near 0.5, below the threshold.
    assert not low.passed
    assert "violates >= 0.6" in low.reason


def test_missing_metric_fails_with_available_paths(metrics: RunMetrics) -> None:
    v = evaluate_gate(parse_gate("toolhop.mandatry.accuracy>=0.4"), metrics)
    assert not v.passed and v.actual is None
    assert "not found" in v.reason
    assert "did you mean toolhop.mandatory.accuracy" in v.reason
    assert "toolhop.mandatory.error_rate" in v.reason
    sub = evaluate_gate(parse_gate("toolhop.mandatory[hops=9].accuracy>=0.4"), metrics)
    assert not sub.passed and "not found" in sub.reason
    assert "toolhop.mandatory[hops=3].accuracy" in sub.reason
    empty = evaluate_gate(parse_gate("toolhop.mandatory.accuracy>=0.4"), RunMetrics(scenarios=[]))
    assert not empty.passed and "no metrics were computed" in empty.reason


def test_undefined_metric_fails(metrics: RunMetrics) -> None:
    v = evaluate_gate(parse_gate("toolhop.mandatory.unused<=1"), metrics)
    assert not v.passed and v.actual is None
    assert "undefined" in v.reason


def test_evaluate_gates_keeps_order_and_gate_text(metrics: RunMetrics) -> None:
    gates = [Gate(path="toolhop.mandatory.accuracy", op="<", threshold=0.9), parse_gate("toolhop.x.y>0")]
    verdicts = evaluate_gates(gates, metrics)
    assert [v.gate for v in verdicts] == ["toolhop.mandatory.accuracy<0.9", "toolhop.x.y>0"]
    assert [v.passed for v in verdicts] == [True, False]


def test_error_rate_verdicts(metrics: RunMetrics) -> None:
    (ok,) = error_rate_verdicts(metrics, 0.1)
    assert ok.passed and ok.actual == pytest.approx(2 / 22)
    assert "2/22" in ok.reason and "http_500 x2" in ok.reason
    (bad,) = error_rate_verdicts(metrics, 0.05)
    assert not bad.passed and "above" in bad.reason
    (edge,) = error_rate_verdicts(metrics, 2 / 22)
    assert edge.passed  # equal to the limit passes
    assert error_rate_verdicts(RunMetrics(scenarios=[]), 0.0) == []


def test_exit_status_puts_infrastructure_errors_before_metric_gates() -> None:
    from pytest_toolbench.exitcodes import ToolbenchExit
    from pytest_toolbench.results.gates import GateVerdict, exit_status

    ok = GateVerdict(gate="a", actual=1.0, passed=True, reason="")
    bad = GateVerdict(gate="a", actual=0.0, passed=False, reason="")
    rate_bad = GateVerdict(gate="e", actual=0.5, passed=False, reason="", kind="error_rate")
    assert exit_status([ok]) is ToolbenchExit.OK
    assert exit_status([bad, ok]) is ToolbenchExit.GATE_FAILED
    assert exit_status([bad, rate_bad]) is ToolbenchExit.INFRA_ERRORS
    # a test failed outside the cases' scoring: after every gate (session/run_end.py)
    tests = GateVerdict(gate="t", actual=1.0, passed=False, reason="", kind="tests")
    assert exit_status([ok, tests]) is ToolbenchExit.CASES_FAILED
    assert exit_status([bad, tests]) is ToolbenchExit.GATE_FAILED
    assert exit_status([rate_bad, tests]) is ToolbenchExit.INFRA_ERRORS


@pytest.mark.parametrize(
    ("text", "suggestions"),
    [
        ("toolhop.mandatory.accuracy>=45", ("'toolhop.mandatory.accuracy>=0.45'",
                                            "'toolhop.mandatory.accuracy>=45%'")),
        ("toolhop.mandatory[hops=3].accuracy.ci_low > 30", ("ci_low > 0.3'", "ci_low > 30%'")),
        ("toolhop.mandatory.error_rate<=5", ("error_rate<=0.05'", "error_rate<=5%'")),
        ("toolhop.mandatory.accuracy>=baseline-2", ("baseline-0.02'", "baseline-2%'")),
        ("toolhop.mandatory.accuracy.diff_lower>=-5", ("diff_lower>=-0.05'", "diff_lower>=-5%'")),
    ],
)
def test_a_rate_gate_above_1_is_rejected_with_the_fraction_and_percent_spelled_out(
    text: str, suggestions: tuple[str, ...]
) -> None:
    """Rates are fractions; ``accuracy>=45`` could never pass and would fail only after the run."""
    with pytest.raises(ValueError) as info:
        parse_gate(text)
    message = str(info.value)
    assert "\n" not in message and "rates are fractions" in message
    assert all(s in message for s in suggestions), message


def test_percent_thresholds_read_as_fractions_and_counts_keep_plain_numbers() -> None:
    assert parse_gate("toolhop.mandatory.accuracy>=45%").threshold == pytest.approx(0.45)
    assert parse_gate("toolhop.mandatory.accuracy>=100%").threshold == pytest.approx(1.0)
    assert parse_gate("toolhop.mandatory.accuracy.n>=45").threshold == 45  # a count: any number
    with pytest.raises(ValueError, match="outside -100%..100%"):
        parse_gate("toolhop.mandatory.accuracy>=450%")
    with pytest.raises(ValueError, match="count of cases"):
        parse_gate("toolhop.mandatory.accuracy.n>=45%")
