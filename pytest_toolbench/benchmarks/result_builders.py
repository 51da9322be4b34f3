"""What every runner needs to turn a finished case into a :class:`CaseResult`: the base fields,
the tally of its model calls (usage, latency, calls, cache hits, parse failures), the
infrastructure-error result, the run-wide option deviations and a short text for failure lines.

The benchmark decides what it scores and which details it keeps; this module only writes the
common fields one way, so a result reads the same whichever runner made it. The harness builds
its own errors here too (a case past ``--case-timeout``, a runner that raised, a worker that
died): one :func:`error_result` for every errored case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.models.base import ChatModel, ChatResponse, ModelCallError, Usage
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome


def truncate(text: Any, limit: int = 200, none: str | None = "<none>") -> str:
    """One line of at most ``limit`` characters (whitespace runs collapsed, a cut ends in
    ``...``); ``None`` reads as ``none`` (or ``"None"`` when ``none`` is None)."""
    if text is None and none is not None:
        return none
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class CallTally:
    """The model calls a case made: summed into the result's usage/latency/call fields."""

    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    model_calls: int = 0
    cached_calls: int = 0
    parse_failures: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, response: ChatResponse, *, turn: int | None = None,
        counts_as_parse_failure: Callable[[str], bool] = lambda reason: True,
    ) -> None:
        """One answered call. Its parse failure is kept (with ``turn`` when given) unless the
        benchmark reads that kind of reply itself (``counts_as_parse_failure(reason)`` False)."""
        self.add_usage(response.usage, response.latency_s, response.cached)
        failure = response.parse_failure
        if failure is not None and counts_as_parse_failure(failure.reason):
            self.parse_failures.append(
                {"turn": turn, **failure.model_dump()} if turn is not None else failure.model_dump()
            )

    def add_usage(self, usage: Usage, latency_s: float, cached: bool) -> None:
        """One call known by its usage alone (e.g. a memoised reply made in this case)."""
        self.model_calls += 1
        self.cached_calls += bool(cached)
        self.usage = self.usage + usage
        self.latency_s += latency_s

    def fields(self) -> dict[str, Any]:
        return {
            "usage": self.usage,
            "latency_s": self.latency_s,
            "model_calls": self.model_calls,
            "cached_calls": self.cached_calls,
            "parse_failures": self.parse_failures,
        }


def base_fields(
    case: Case, model: ChatModel | str | None = None, benchmark: str | None = None,
    labels: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields every result of ``case`` starts from: the model's name (a ChatModel's, or the
    name itself), the case's benchmark and labels unless given, and its ``--repeats`` index."""
    return {
        "case_id": case.id,
        "benchmark": case.benchmark if benchmark is None else benchmark,
        "scenario": case.scenario,
        "model": model if isinstance(model, str) else getattr(model, "name", ""),
        "labels": dict(case.labels) if labels is None else labels,
        "repeat": case.repeat,
    }


def scored_result(
    base: dict[str, Any], passed: bool, values: dict[str, float], details: dict[str, Any],
    failure_message: str | None, transcript: list[dict[str, Any]], tally: CallTally | None = None,
) -> CaseResult:
    """A scored case: PASSED or FAILED by the benchmark's criterion."""
    return CaseResult(
        **base, **(tally.fields() if tally is not None else {}),
        outcome=Outcome.PASSED if passed else Outcome.FAILED,
        values=values, details=details, transcript=transcript,
        failure_message=None if passed else failure_message,
    )


def error_result(
    base: dict[str, Any], error: ModelCallError | InfraError, details: dict[str, Any] | None = None,
    transcript: list[dict[str, Any]] | None = None, failure_message: str | None = None,
    tally: CallTally | None = None,
) -> CaseResult:
    """An infrastructure ERROR (a model call failed after retries, scoring could not run, the
    case timed out, its runner raised or its worker died): excluded from metrics, counted apart.
    The harness's own errors have no details, transcript or failure line."""
    return CaseResult(
        **base, **(tally.fields() if tally is not None else {}),
        outcome=Outcome.ERROR,
        error=error if isinstance(error, InfraError) else InfraError.of(error),
        details=details or {}, transcript=transcript or [], failure_message=failure_message,
    )


def option_deviations(
    options: BaseModel, notes: dict[str, str | None], upstream: BaseModel | None = None
) -> list[dict[str, Any]]:
    """The run-wide departures from the upstream protocol chosen through options: one entry per
    option named in ``notes`` whose value differs from upstream's (the options model's default,
    or ``upstream``), ``{"kind": name, "value": value}`` plus ``"note"`` where one is given."""
    reference = upstream if upstream is not None else type(options)()
    out: list[dict[str, Any]] = []
    for name, note in notes.items():
        value = getattr(options, name)
        if value == getattr(reference, name):
            continue
        entry: dict[str, Any] = {"kind": name, "value": value}
        if note is not None:
            entry["note"] = note
        out.append(entry)
    return out
