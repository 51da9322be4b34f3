"""Baseline gates: grammar and verdicts on hand-checkable runs (the suite runs are in
test_baseline_e2e.py)."""

from __future__ import annotations

import pytest

from test_compare import A_OK, B_OK, LABELS, SPECS, case, run

from pytest_toolbench.compare import compare_runs
from pytest_toolbench.compare.baseline import check_baseline_gates
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results.gates import Baseline, evaluate_gate, exit_status, parse_gate


@pytest.mark.parametrize(
    "text, path, op, threshold, baseline, paired, canonical",
    [
        ("toolhop.mandatory.accuracy>=baseline-0.02", "toolhop.mandatory.accuracy", ">=", -0.02,
         True, None, "toolhop.mandatory.accuracy>=baseline-0.02"),
        ("toolhop.mandatory.accuracy >= baseline", "toolhop.mandatory.accuracy", ">=", 0.0, True,
         None, "toolhop.mandatory.accuracy>=baseline"),
        ("toolhop.mandatory.accuracy[hops=3]>=baseline", "toolhop.mandatory[hops=3].accuracy",
         ">=", 0.0, True, None, "toolhop.mandatory[hops=3].accuracy>=baseline"),
        ("toolhop.mandatory[hops=3].accuracy>=baseline+2%", "toolhop.mandatory[hops=3].accuracy",
         ">=", 0.02, True, None, "toolhop.mandatory[hops=3].accuracy>=baseline+0.02"),
        ("toolhop.mandatory.accuracy.diff_lower>=-0.05", "toolhop.mandatory.accuracy", ">=",
         -0.05, False, "diff_lower", "toolhop.mandatory.accuracy.diff_lower>=-0.05"),
        ("toolhop.mandatory.accuracy[hops=3].diff_upper>=0", "toolhop.mandatory[hops=3].accuracy",
         ">=", 0.0, False, "diff_upper", "toolhop.mandatory[hops=3].accuracy.diff_upper>=0"),
        ("toolhop.direct.accuracy.diff>-0.1", "toolhop.direct.accuracy", ">", -0.1, False, "diff",
         "toolhop.direct.accuracy.diff>-0.1"),
        ("toolhop.direct.accuracy.mcnemar_p>=0.05", "toolhop.direct.accuracy", ">=", 0.05, False,
         "mcnemar_p", "toolhop.direct.accuracy.mcnemar_p>=0.05"),
        ("toolhop.direct.accuracy.ci_low>=baseline", "toolhop.direct.accuracy.ci_low", ">=", 0.0,
         True, None, "toolhop.direct.accuracy.ci_low>=baseline"),
    ],
)
def test_baseline_grammar(text, path, op, threshold, baseline, paired, canonical) -> None:
    g = parse_gate(text)
    assert (g.path, g.op, g.baseline, g.paired) == (path, op, baseline, paired)
    assert g.threshold == pytest.approx(threshold)
    assert g.needs_baseline
    assert str(g) == canonical
    assert parse_gate(str(g)) == g  # the canonical text parses back to the same gate


@pytest.mark.parametrize(
    "text, needle",
    [
        ("toolhop.direct.accuracy.diff>=baseline", "already relative to the baseline"),
        ("toolhop.direct.accuracy>=baselines", "baseline-<number>"),
        ("toolhop.direct.accuracy>=baseline*2", "baseline-<number>"),
        ("toolhop.direct.error_rate.diff<=0", "not to error_rate"),
        ("toolhop.direct.accuracy.ci_low.diff_lower>=0", "not to .ci_low"),
    ],
)
def test_malformed_baseline_gates(text, needle) -> None:
    with pytest.raises(ValueError) as info:
        parse_gate(text)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_plain_gates_are_unchanged() -> None:
    g = parse_gate("toolhop.mandatory[hops=3].accuracy.ci_low>0.3")
    assert not g.needs_baseline and str(g) == "toolhop.mandatory[hops=3].accuracy.ci_low>0.3"


def test_a_baseline_gate_without_baseline_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="pass --baseline RUN.json"):
        check_baseline_gates(["toolhop.direct.accuracy>=0.4", "toolhop.direct.accuracy>=baseline"],
                             None)
    check_baseline_gates(["toolhop.direct.accuracy>=0.4"], None)  # plain gates need none


@pytest.fixture
def baseline_and_current():
    base = run("A", [case(i, v, model="a") for i, v in enumerate(A_OK)])  # 0.6
    cur = run("B", [case(i, v, model="b") for i, v in enumerate(B_OK)])  # 0.9, b=1, c=4
    comp = compare_runs([base, cur], SPECS, LABELS, n_boot=1000)
    return Baseline(metrics=base.metrics, comparison=comp), cur.metrics, comp


def test_verdicts_against_a_baseline(baseline_and_current) -> None:
    bl, metrics, comp = baseline_and_current
    d = comp.find("bench.s.accuracy").diffs[0]

    def verdict(text: str):
        return evaluate_gate(parse_gate(text), metrics, bl)

    ok = verdict("bench.s.accuracy>=baseline+0.25")  # 0.9 >= 0.6 + 0.25
    assert ok.passed and ok.actual == pytest.approx(0.9)
    assert "baseline 0.6+0.25 = 0.85" in ok.reason
    assert not verdict("bench.s.accuracy>=baseline+0.35").passed  # 0.9 < 0.95
    # subgroup hops=4: 0.8 vs 0.2
    assert verdict("bench.s.accuracy[hops=4]>=baseline+0.6").passed
    assert not verdict("bench.s[hops=4].accuracy>baseline+0.6").passed
    # paired quantities
    diff = verdict("bench.s.accuracy.diff>=0.3")
    assert diff.passed and diff.actual == pytest.approx(0.3) and "n paired 10" in diff.reason
    low = verdict("bench.s.accuracy.diff_lower>=-0.05")
    assert low.actual == pytest.approx(d.ci_low) and low.passed == (d.ci_low >= -0.05)
    up = verdict("bench.s.accuracy.diff_upper<0")  # "B is worse": false here
    assert up.actual == pytest.approx(d.ci_high) and not up.passed
    p = verdict("bench.s.accuracy.mcnemar_p>0.05")
    assert p.actual == pytest.approx(12 / 32) and p.passed
    # McNemar is undefined on a ratio metric: the gate fails, saying why.
    bad = verdict("bench.s.call_error_rate.mcnemar_p>0.05")
    assert not bad.passed and "McNemar needs 0/1" in bad.reason
    # Verdicts are ordinary metric verdicts: a failing one sets GATE_FAILED (exit 10).
    assert exit_status([ok, verdict("bench.s.accuracy>=baseline+0.35")]) is ToolbenchExit.GATE_FAILED


def test_identical_runs_pass_every_baseline_gate() -> None:
    base = run("A", [case(i, v, model="a") for i, v in enumerate(A_OK)])
    same = run("A2", [case(i, v, model="a") for i, v in enumerate(A_OK)])
    bl = Baseline(metrics=base.metrics, comparison=compare_runs([base, same], SPECS, LABELS))
    for text in ("bench.s.accuracy>=baseline", "bench.s.accuracy[hops=4]>=baseline-0.02",
                 "bench.s.accuracy.diff_lower>=0", "bench.s.accuracy.diff_upper<=0",
                 "bench.s.accuracy.mcnemar_p>=1"):
        v = evaluate_gate(parse_gate(text), same.metrics, bl)
        assert v.passed, (text, v.reason)


def test_missing_paths_and_missing_baseline_fail_with_a_reason(baseline_and_current) -> None:
    bl, metrics, _ = baseline_and_current
    v = evaluate_gate(parse_gate("bench.s[hops=9].accuracy>=baseline"), metrics, bl)
    assert not v.passed and "not found in this run" in v.reason
    v = evaluate_gate(parse_gate("bench.s.accuracy>=baseline"), metrics, None)
    assert not v.passed and "no --baseline" in v.reason
    v = evaluate_gate(parse_gate("bench.t.accuracy.diff>=0"), metrics, bl)
    assert not v.passed and "not in the comparison" in v.reason


def test_a_verdict_says_when_the_case_sets_differ() -> None:
    base = run("A", [case(i, v, model="a") for i, v in enumerate(A_OK)] + [case(10, 1, model="a")])
    cur = run("B", [case(i, v, model="b") for i, v in enumerate(B_OK)])
    bl = Baseline(metrics=base.metrics, comparison=compare_runs([base, cur], SPECS, LABELS))
    v = evaluate_gate(parse_gate("bench.s.accuracy.diff>=0"), cur.metrics, bl)
    assert "only in baseline: 1, only in this run: 0" in v.reason


def test_a_paired_gate_on_a_benchmark_one_side_lacks_says_which() -> None:
    """The comparison leaves such a benchmark out (test_compare.py); the gate fails and names
    the side without it, not only "not in the comparison"."""
    from test_compare import LABELS_TWO, SPECS_TWO, with_other

    base = run("A", [case(i, v, model="a") for i, v in enumerate(A_OK)])
    both = with_other("B", [case(i, v, model="b") for i, v in enumerate(B_OK)],
                      [case(i, 1, model="b") for i in range(3)])
    for ref, cur, side in ((base, both, "the baseline"), (both, base, "this run")):
        bl = Baseline(metrics=ref.metrics,
                      comparison=compare_runs([ref, cur], SPECS_TWO, LABELS_TWO, n_boot=100))
        v = evaluate_gate(parse_gate("other.s.accuracy.diff>=0"), cur.metrics, bl)
        assert not v.passed
        assert v.reason == (f"other.s.accuracy is not in the comparison with the baseline "
                            f"({side} has no other case)")
