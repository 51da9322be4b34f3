"""CI gates on run metrics: ``--gate "toolhop.mandatory[hops=3].accuracy.ci_low>=0.40"``.

With ``--baseline RUN.json`` a gate can also compare with the baseline run (grammar in
:data:`BASELINE_GRAMMAR`): ``<path><op>baseline[+-delta]`` compares this run's value with the
baseline's value of the same path (each as its run reports it), and ``<path>.diff``,
``.diff_lower``, ``.diff_upper`` or ``.mcnemar_p`` read the paired comparison (this run minus the
baseline over the cases both scored; pytest_toolbench/compare).

Gates are parsed at startup (a typo must fail before an hour of model calls, not after) and
evaluated on the controller once every result is in. A gate on a metric the run did not produce
fails: silently passing a misspelt gate would make CI green for the wrong reason.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results.aggregate import ERROR_RATE, PATH_GRAMMAR, MetricPath, RunMetrics
from pytest_toolbench.results.infra_errors import describe_errors
from pytest_toolbench.results.metrics import MetricSpec

if TYPE_CHECKING:  # the comparison's models are built only for a run with --baseline
    from pytest_toolbench.results.comparison import Comparison


class DeclaresMetrics(Protocol):
    """What a gate's names are checked against: a benchmark's declarations."""

    @property
    def scenarios(self) -> tuple[str, ...]: ...

    @property
    def metrics(self) -> tuple[MetricSpec, ...]: ...

    @property
    def breakdown_labels(self) -> tuple[str, ...]: ...

Op = Literal[">=", ">", "<=", "<", "=="]
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12),
}
# Longest operators first so ">=" is not read as ">" followed by "=0.4".
_GATE_RE = re.compile(r"^(?P<path>[^<>=!]+?)\s*(?P<op>>=|<=|==|>|<)\s*(?P<threshold>[^<>=!]+)$")
#: The tail of a gate whose path ends in its subgroup (``...accuracy[hops=3]>=baseline``).
_OP_ONLY_RE = re.compile(r"^(?P<path>)\s*(?P<op>>=|<=|==|>|<)\s*(?P<threshold>[^<>=!]+)$")
#: ``bench.scenario.metric[label=group]...``: the subgroup written after the metric (an accepted
#: spelling of the canonical ``bench.scenario[label=group].metric...``).
_SUBGROUP_AFTER_RE = re.compile(r"^(?P<pre>[^.\[\]]+\.[^.\[\]]+)\.(?P<metric>[^.\[\]]+)"
                                r"(?P<sub>\[[^\[\]]*\])(?P<rest>.*)$")
_EXAMPLE = 'e.g. "toolhop.mandatory.accuracy>=0.45" or "toolhop.mandatory[hops=3].accuracy.ci_low>0.3"'

#: Paired-comparison quantities (need --baseline): the point difference this run - baseline over
#: the cases both scored, the bounds of its paired bootstrap interval, and McNemar's p-value.
PairedField = Literal["diff", "diff_lower", "diff_upper", "mcnemar_p"]
PAIRED_FIELDS: tuple[str, ...] = ("diff", "diff_lower", "diff_upper", "mcnemar_p")
BASELINE_GRAMMAR = (
    "<path><op>baseline[+|-<delta>] (this run's value against the baseline's, e.g. "
    "toolhop.mandatory.accuracy>=baseline-0.02) or <path>.diff|.diff_lower|.diff_upper|.mcnemar_p"
    "<op><number> (the paired comparison with the baseline, e.g. "
    "toolhop.mandatory.accuracy.diff_lower>=-0.05)"
)


class Gate(DeferredModel):
    path: str
    op: Op
    #: The number to compare with; for a ``baseline`` gate, the offset added to the baseline value.
    threshold: float
    #: ``<path><op>baseline+threshold``: compare with the baseline run's value of ``path``.
    baseline: bool = False
    #: ``<path>.<paired><op>threshold``: a quantity of the paired comparison with the baseline.
    paired: PairedField | None = None

    @property
    def needs_baseline(self) -> bool:
        return self.baseline or self.paired is not None

    def __str__(self) -> str:
        path = f"{self.path}.{self.paired}" if self.paired else self.path
        if self.baseline:
            offset = f"{self.threshold:+g}" if self.threshold else ""
            return f"{path}{self.op}baseline{offset}"
        return f"{path}{self.op}{self.threshold:g}"


class GateVerdict(DeferredModel):
    gate: str
    actual: float | None
    passed: bool
    reason: str
    #: "metric": a --gate; "error_rate": the per-scenario --max-error-rate limit;
    #: "completeness": selected cases without a result (results/partial_run.py); "output": an
    #: output the run could not write (output_errors.py); "interrupted": the run was stopped
    #: (Ctrl-C, SIGTERM, SIGHUP) before its end; "tests": tests that failed outside the cases'
    #: scoring (session/run_end.py). The last four appear only failed.
    kind: Literal["metric", "error_rate", "completeness", "output", "interrupted", "tests"] = "metric"


def _threshold(text: str, gate: str) -> float:
    text = text.strip()
    scale = 1.0
    if text.endswith("%"):  # "45%" reads as 0.45, matching how rates are displayed
        text, scale = text[:-1].strip(), 0.01
    try:
        value = float(text) * scale
    except ValueError:
        raise ValueError(
            f"malformed gate {gate!r}: threshold {text!r} is not a number ({_EXAMPLE})"
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"malformed gate {gate!r}: threshold must be finite")
    return value


def _baseline_offset(text: str, gate: str) -> float | None:
    """``baseline`` -> 0, ``baseline-0.02`` -> -0.02, ``baseline+2%`` -> 0.02; None if the
    threshold does not name the baseline."""
    t = text.strip()
    if not t.lower().startswith("baseline"):
        return None
    rest = t[len("baseline"):].strip()
    if not rest:
        return 0.0
    if rest[0] not in "+-":
        raise ValueError(
            f"malformed gate {gate!r}: expected baseline, baseline+<number> or baseline-<number>"
        )
    sign = -1.0 if rest[0] == "-" else 1.0
    return sign * _threshold(rest[1:], gate)


def _parses(path: str) -> bool:
    try:
        MetricPath.parse(path)
    except ValueError:
        return False
    return True


def parse_gate(text: str) -> Gate:
    """Parse ``<path><op><threshold>`` (or a baseline form, :data:`BASELINE_GRAMMAR`); raise
    ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty gate; expected <metric path><op><number>, {_EXAMPLE}")
    stripped = text.strip()
    # The subgroup part holds its own '=', so match the operator after it.
    head, sep, tail = stripped.rpartition("]")
    m = _GATE_RE.match(tail.strip() if sep else stripped)
    if m is None and sep:
        m = _OP_ONLY_RE.match(tail.strip())
    if m is None:
        raise ValueError(
            f"malformed gate {text!r}: expected <metric path><op><number> with op one of "
            f">=, >, <=, <, == ({_EXAMPLE})"
        )
    path = (head + sep + m["path"]).strip() if sep else m["path"].strip()
    alias = _SUBGROUP_AFTER_RE.match(path)
    if alias is not None:
        path = f"{alias['pre']}{alias['sub']}.{alias['metric']}{alias['rest']}"
    paired = next((f for f in PAIRED_FIELDS if path.endswith(f".{f}")), None)
    if paired is not None and _parses(path[: -len(paired) - 1]):
        path = path[: -len(paired) - 1]
    else:  # e.g. a metric that is itself called "diff"
        paired = None
    try:
        parsed = MetricPath.parse(path)
    except ValueError as exc:
        raise ValueError(f"malformed gate {text!r}: {exc}") from None
    offset = _baseline_offset(m["threshold"], text)
    if paired is not None:
        if parsed.field != "value" or parsed.metric == ERROR_RATE:
            what = ERROR_RATE if parsed.metric == ERROR_RATE else f".{parsed.field}"
            raise ValueError(
                f"malformed gate {text!r}: .{paired} applies to a declared metric, not to "
                f"{what}; {BASELINE_GRAMMAR}"
            )
        if offset is not None:
            raise ValueError(
                f"malformed gate {text!r}: .{paired} is already relative to the baseline; "
                "compare it with a number"
            )
    threshold = _threshold(m["threshold"], text) if offset is None else offset
    _check_scale(text, m["threshold"], parsed, threshold, count=parsed.field == "n" and not paired)
    return Gate(path=str(parsed), op=m["op"], threshold=threshold,  # type: ignore[arg-type]
                baseline=offset is not None, paired=paired)  # type: ignore[arg-type]


_NUMBER_TAIL_RE = re.compile(r"^(?P<lead>.*?)(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)$")


def _check_scale(text: str, written: str, path: MetricPath, threshold: float, count: bool) -> None:
    """Reject a rate gate whose threshold lies outside [-1, 1]: rates are fractions (the tables
    print them as %), so ``accuracy>=45`` could never pass and would only fail after the whole
    run. A count (``.n``) takes any number but no ``%``."""
    gate, w = text.strip(), written.strip()
    if count:
        if w.endswith("%"):
            raise ValueError(f"gate {gate!r}: {path} is a count of cases; its threshold is a "
                             "plain number (no %)")
        return
    if abs(threshold) <= 1:
        return
    why = "rates are fractions from 0 to 1 (the tables print them as %)"
    m = _NUMBER_TAIL_RE.match(w)
    if w.endswith("%") or m is None:
        raise ValueError(f"gate {gate!r}: threshold {w} is outside -100%..100%; {why}")
    prefix = gate[: len(gate) - len(w)]
    fraction = f"{prefix}{m['lead']}{float(m['num']) / 100:g}"
    percent = f"{prefix}{m['lead']}{m['num']}%"
    side = "above 1" if threshold > 0 else "below -1"
    raise ValueError(f"gate {gate!r}: threshold {w} is {side}, but {why}; "
                     f"write {fraction!r} or {percent!r}")


def parse_gates(texts: Iterable[str]) -> list[Gate]:
    return [parse_gate(t) for t in texts]


def check_gate_names(gate: Gate, benchmarks: Mapping[str, DeclaresMetrics]) -> None:
    """Reject a gate whose benchmark, scenario, metric or subgroup label no registered benchmark
    declares (a typo must fail before any model call). Raises ValueError with one line."""
    p = MetricPath.parse(gate.path)
    b = benchmarks.get(p.benchmark)
    if b is None:
        raise ValueError(f"gate {gate}: unknown benchmark {p.benchmark!r}; known: {sorted(benchmarks)}")
    if p.scenario not in b.scenarios:
        raise ValueError(
            f"gate {gate}: {p.benchmark} has no scenario {p.scenario!r}; known: {list(b.scenarios)}"
        )
    if p.metric != ERROR_RATE:
        spec = next((m for m in b.metrics if m.name == p.metric), None)
        names = [m.name for m in b.metrics if m.applies_to(p.scenario)] + [ERROR_RATE]
        if spec is None or not spec.applies_to(p.scenario):
            raise ValueError(
                f"gate {gate}: {p.benchmark}.{p.scenario} has no metric {p.metric!r}; known: {names}"
            )
    if p.label is not None and p.label not in b.breakdown_labels:
        raise ValueError(
            f"gate {gate}: {p.benchmark} has no subgroup label {p.label!r}; "
            f"known: {list(b.breakdown_labels)}"
        )


def check_gate_selection(
    gate: Gate, scenarios: Mapping[str, set[str]], groups: Mapping[str, dict[str, set[str]]]
) -> None:
    """Reject a gate on a scenario or subgroup the selected cases do not contain (it could only
    fail). ``scenarios``: benchmark -> selected scenarios; ``groups``: benchmark -> label ->
    values among the selected cases. Benchmarks absent from ``scenarios`` are not checked."""
    p = MetricPath.parse(gate.path)
    if p.benchmark not in scenarios:
        return
    if p.scenario not in scenarios[p.benchmark]:
        raise ValueError(
            f"gate {gate}: scenario {p.scenario!r} is not among the selected cases "
            f"(selected: {sorted(scenarios[p.benchmark])})"
        )
    if p.label is not None:
        values = groups.get(p.benchmark, {}).get(p.label, set())
        if p.group not in values:
            raise ValueError(
                f"gate {gate}: no selected case has {p.label}={p.group} "
                f"(selected: {sorted(values, key=_natural)})"
            )


def _natural(text: str) -> tuple[int, float | str]:
    try:
        return (0, float(text))
    except ValueError:
        return (1, text)


def exit_status(verdicts: list[GateVerdict]) -> ToolbenchExit:
    """An unwritten output first, then an interruption, then lost cases, then too many
    infrastructure errors (the metrics are then unreliable), then metric gates, then tests that
    failed outside the cases' scoring: the order of session/run_end.py's run_status."""
    if any(not v.passed for v in verdicts if v.kind == "output"):
        return ToolbenchExit.OUTPUT_ERROR
    if any(not v.passed for v in verdicts if v.kind == "interrupted"):
        return ToolbenchExit.INTERRUPTED
    if any(not v.passed for v in verdicts if v.kind == "completeness"):
        return ToolbenchExit.INCOMPLETE
    if any(not v.passed for v in verdicts if v.kind == "error_rate"):
        return ToolbenchExit.INFRA_ERRORS
    if any(not v.passed for v in verdicts if v.kind == "metric"):
        return ToolbenchExit.GATE_FAILED
    if any(not v.passed for v in verdicts if v.kind == "tests"):
        return ToolbenchExit.CASES_FAILED
    return ToolbenchExit.OK


def _fmt(x: float) -> str:
    return f"{x:.4g}"


#: Why a gate on nan fails: nan compares false with everything, so no threshold could be met,
#: and a gate must never pass on a number the run could not compute.
NAN_REASON = ("nan (a case's value is nan, e.g. upstream's mean of no scores), so the gate "
              "cannot pass")


def _nan_verdict(gate: Gate, actual: float | None, reason: str) -> GateVerdict:
    return GateVerdict(gate=str(gate), actual=actual, passed=False, reason=reason)


@dataclass(frozen=True)
class Baseline:
    """What baseline gates read: the baseline run's metrics (as it reported them) and the paired
    comparison of this run with it (reference = the baseline)."""

    metrics: RunMetrics
    comparison: Comparison
    label: str = "baseline"


def _coverage_note(gate: Gate, baseline: Baseline) -> str:
    p = MetricPath.parse(gate.path)
    s = baseline.comparison.scenario(p.benchmark, p.scenario)
    if s is None or not s.coverage:
        return ""
    c = s.coverage[0]
    if not (c.only_in_reference or c.only_in_run):
        return ""
    return (f" (cases differ: {c.n_paired} in both, only in baseline: {c.only_in_reference}, "
            f"only in this run: {c.only_in_run})")


def _one_sided(gate: Gate, comparison: Comparison) -> str:
    """Why a benchmark is missing from the comparison: one of the two runs has no case of it."""
    benchmark = MetricPath.parse(gate.path).benchmark
    for u in comparison.not_compared:
        if u.benchmark == benchmark:
            side = "this run" if u.n_cases[0] else "the baseline"
            return f" ({side} has no {benchmark} case)"
    return ""


def _evaluate_baseline_gate(gate: Gate, metrics: RunMetrics, baseline: Baseline | None) -> GateVerdict:
    def fail(reason: str) -> GateVerdict:
        return GateVerdict(gate=str(gate), actual=None, passed=False, reason=reason)

    if baseline is None:
        return fail("no --baseline run given, so the gate cannot be evaluated")
    if gate.paired is not None:
        row = baseline.comparison.find(gate.path)
        if row is None or not row.diffs:
            return fail(f"{gate.path} is not in the comparison with the baseline"
                        + _one_sided(gate, baseline.comparison))
        d = row.diffs[0]
        actual = {
            "diff": d.diff,
            "diff_lower": d.ci_low,
            "diff_upper": d.ci_high,
            "mcnemar_p": d.mcnemar.p_value if d.mcnemar is not None else None,
        }[gate.paired]
        if actual is None:
            why = ("McNemar needs 0/1 per-case values in both runs" if gate.paired == "mcnemar_p"
                   else "no case was scored in both runs")
            return fail(f"{gate.path}.{gate.paired} is undefined ({why}; n paired {d.n_paired})")
        if math.isnan(actual):
            return _nan_verdict(gate, actual, f"{gate.path}.{gate.paired} is {NAN_REASON}")
        passed = _OPS[gate.op](actual, gate.threshold)
        relation = "satisfies" if passed else "violates"
        return GateVerdict(
            gate=str(gate), actual=actual, passed=passed,
            reason=(f"paired {gate.paired} (this run - baseline, n paired {d.n_paired}) "
                    f"{_fmt(actual)} {relation} {gate.op} {_fmt(gate.threshold)}"
                    + _coverage_note(gate, baseline)),
        )
    found, actual = metrics.resolve(gate.path)
    if not found or actual is None:
        what = "not found in" if not found else "undefined in"
        return fail(f"metric {gate.path} {what} this run")
    found_b, base = baseline.metrics.resolve(gate.path)
    if not found_b or base is None:
        what = "not found in" if not found_b else "undefined in"
        return fail(f"metric {gate.path} {what} the baseline run ({baseline.label})")
    if math.isnan(actual) or math.isnan(base):
        where = "this run" if math.isnan(actual) else f"the baseline run ({baseline.label})"
        return _nan_verdict(gate, actual, f"{gate.path} in {where} is {NAN_REASON}")
    bound = base + gate.threshold
    passed = _OPS[gate.op](actual, bound)
    relation = "satisfies" if passed else "violates"
    offset = f"{gate.threshold:+.4g}" if gate.threshold else ""
    return GateVerdict(
        gate=str(gate), actual=actual, passed=passed,
        reason=(f"actual {_fmt(actual)} {relation} {gate.op} baseline {_fmt(base)}{offset} = "
                f"{_fmt(bound)}" + _coverage_note(gate, baseline)),
    )


def evaluate_gate(gate: Gate, metrics: RunMetrics, baseline: Baseline | None = None) -> GateVerdict:
    if gate.needs_baseline:
        return _evaluate_baseline_gate(gate, metrics, baseline)
    found, actual = metrics.resolve(gate.path)
    if not found:
        return GateVerdict(
            gate=str(gate),
            actual=None,
            passed=False,
            reason=f"metric {gate.path} not found in this run; {metrics.suggest(gate.path)}",
        )
    if actual is None:
        return GateVerdict(
            gate=str(gate),
            actual=None,
            passed=False,
            reason=f"{gate.path} is undefined in this run (no case had a value for it)",
        )
    if math.isnan(actual):
        return _nan_verdict(gate, actual, f"{gate.path} is {NAN_REASON}")
    passed = _OPS[gate.op](actual, gate.threshold)
    relation = "satisfies" if passed else "violates"
    return GateVerdict(
        gate=str(gate),
        actual=actual,
        passed=passed,
        reason=f"actual {_fmt(actual)} {relation} {gate.op} {_fmt(gate.threshold)}",
    )


def evaluate_gates(
    gates: Iterable[Gate], metrics: RunMetrics, baseline: Baseline | None = None
) -> list[GateVerdict]:
    return [evaluate_gate(g, metrics, baseline) for g in gates]


def error_rate_verdicts(metrics: RunMetrics, max_error_rate: float) -> list[GateVerdict]:
    """One verdict per scenario: infrastructure errors / all cases <= max_error_rate."""
    verdicts = []
    for s in metrics.scenarios:
        rate = s.error_rate
        passed = rate <= max_error_rate
        kinds = describe_errors(s.error_kinds, s.error_details) or "none"  # cause, attempts, option
        verdicts.append(
            GateVerdict(
                gate=f"{s.benchmark}.{s.scenario}.error_rate<={max_error_rate:g}",
                actual=rate,
                passed=passed,
                kind="error_rate",
                reason=(
                    f"{s.n_errors}/{s.n_cases} cases hit infrastructure errors ({kinds}); "
                    f"{'within' if passed else 'above'} the {max_error_rate:.2%} limit"
                ),
            )
        )
    return verdicts


__all__ = [
    "BASELINE_GRAMMAR",
    "PAIRED_FIELDS",
    "PATH_GRAMMAR",
    "Baseline",
    "Gate",
    "GateVerdict",
    "check_gate_names",
    "check_gate_selection",
    "exit_status",
    "error_rate_verdicts",
    "evaluate_gate",
    "evaluate_gates",
    "parse_gate",
    "parse_gates",
]
