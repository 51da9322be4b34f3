"""CI gates on run metrics: ``--gate "toolhop.mandatory[hops=3].accuracy.ci_low>=0.40"``.

Gates are parsed at startup (a typo must fail before an hour of model calls, not after) and
evaluated on the controller once every result is in. A gate on a metric the run did not produce
fails: silently passing a misspelt gate would make CI green for the wrong reason.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.results.aggregate import ERROR_RATE, PATH_GRAMMAR, MetricPath, RunMetrics

if TYPE_CHECKING:
    from pytest_toolbench.benchmarks.base import Benchmark

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
_EXAMPLE = 'e.g. "toolhop.mandatory.accuracy>=0.45" or "toolhop.mandatory[hops=3].accuracy.ci_low>0.3"'


class Gate(BaseModel):
    path: str
    op: Op
    threshold: float

    def __str__(self) -> str:
        return f"{self.path}{self.op}{self.threshold:g}"


class GateVerdict(BaseModel):
    gate: str
    actual: float | None
    passed: bool
    reason: str
    #: "metric": a --gate; "error_rate": the per-scenario --max-error-rate limit.
    kind: Literal["metric", "error_rate"] = "metric"


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


def parse_gate(text: str) -> Gate:
    """Parse ``<path><op><threshold>``; raise ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty gate; expected <metric path><op><number>, {_EXAMPLE}")
    stripped = text.strip()
    # The subgroup part holds its own '=', so match the operator after it.
    head, sep, tail = stripped.rpartition("]")
    m = _GATE_RE.match(tail.strip() if sep else stripped)
    if m is None:
        raise ValueError(
            f"malformed gate {text!r}: expected <metric path><op><number> with op one of "
            f">=, >, <=, <, == ({_EXAMPLE})"
        )
    path = (head + sep + m["path"]).strip() if sep else m["path"].strip()
    try:
        parsed = MetricPath.parse(path)
    except ValueError as exc:
        raise ValueError(f"malformed gate {text!r}: {exc}") from None
    threshold = _threshold(m["threshold"], text)
    return Gate(path=str(parsed), op=m["op"], threshold=threshold)  # type: ignore[arg-type]


def parse_gates(texts: Iterable[str]) -> list[Gate]:
    return [parse_gate(t) for t in texts]


def check_gate_names(gate: Gate, benchmarks: Mapping[str, Benchmark]) -> None:
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
    """Too many infrastructure errors first (the metrics are then unreliable), then metric gates."""
    if any(not v.passed for v in verdicts if v.kind == "error_rate"):
        return ToolbenchExit.INFRA_ERRORS
    if any(not v.passed for v in verdicts if v.kind == "metric"):
        return ToolbenchExit.GATE_FAILED
    return ToolbenchExit.OK


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def evaluate_gate(gate: Gate, metrics: RunMetrics) -> GateVerdict:
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
    passed = _OPS[gate.op](actual, gate.threshold)
    relation = "satisfies" if passed else "violates"
    return GateVerdict(
        gate=str(gate),
        actual=actual,
        passed=passed,
        reason=f"actual {_fmt(actual)} {relation} {gate.op} {_fmt(gate.threshold)}",
    )


def evaluate_gates(gates: Iterable[Gate], metrics: RunMetrics) -> list[GateVerdict]:
    return [evaluate_gate(g, metrics) for g in gates]


def error_rate_verdicts(metrics: RunMetrics, max_error_rate: float) -> list[GateVerdict]:
    """One verdict per scenario: infrastructure errors / all cases <= max_error_rate."""
    verdicts = []
    for s in metrics.scenarios:
        rate = s.error_rate
        passed = rate <= max_error_rate
        kinds = ", ".join(f"{k} x{v}" for k, v in s.error_kinds.items()) or "none"
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
    "PATH_GRAMMAR",
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
