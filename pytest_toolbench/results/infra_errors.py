"""How infrastructure errors are explained wherever they are printed.

A bare ``timeout x1`` leaves a user guessing: was it retried, why did it happen, what to change?
Every place that prints infrastructure errors (terminal summary, Markdown report, the error-rate
gate) goes through :func:`describe_errors`, which gives per kind its cause, the attempts made and
the option that would help. The endpoint layer (models/openai_backend.py) records attempts and,
where it knows the settings, a precise hint on the error; ``models/errors.py`` holds the hints
for every kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from textwrap import shorten
from typing import Any


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.models.errors import UNREACHABLE_MARK, is_server_failure, kind_hint
from pytest_toolbench.results.safe_text import safe_text


def not_scored_text(kind: str, message: str, *, multiline: bool = True) -> str:
    """What a case that ended on an infrastructure error says, wherever its failure is shown:
    ``infrastructure error (<kind>), not scored: <message>``, the endpoint's or tool's text
    escaped (:func:`safe_text`; newlines kept when ``multiline``, for a failure's message
    block). The case's test fails with it (session/fixtures.py), and an Allure result the plugin
    completes for such a case says the same (report/allure_report.py ``_cut_short``)."""
    return safe_text(f"infrastructure error ({kind}), not scored: {message}", multiline=multiline)


def attempts_text(fewest: int | None, most: int) -> str:
    """``3 attempts per call``, or ``1-3 attempts per call`` where the failed calls of a kind
    sent different numbers of requests (``fewest`` unknown, as in a record without it: ``most``).
    The terminal summary and the run page (view/run_page.py) say it the same way."""
    span = str(most) if fewest in (None, most) else f"{fewest}-{most}"
    return f"{span} {'attempt' if most == 1 else 'attempts'} per call"


class ErrorSummary(DeferredModel):
    """The infrastructure errors of one kind in one scenario."""

    kind: str
    count: int
    cause: str
    hint: str
    #: Fewest and most requests sent per failed call (None: not endpoint calls).
    attempts_min: int | None = None
    attempts_max: int | None = None
    #: The one-line verdict when these errors come from an endpoint given up as unreachable (its
    #: URL and the cause, models/reachability.py); None otherwise.
    unreachable: str | None = None

    def text(self) -> str:
        """``timeout x1 (no reply within ...; 1 attempt; try: raise --request-timeout ...)``."""
        parts = [self.cause]
        if self.attempts_max is not None:
            parts.append(attempts_text(self.attempts_min, self.attempts_max))
        parts.append(f"try: {self.hint}")
        return f"{self.kind} x{self.count} ({'; '.join(parts)})"


def summarize_errors(errors: Iterable[Any]) -> dict[str, ErrorSummary]:
    """Kind -> summary over CaseResults whose outcome is ERROR (sorted by kind)."""
    acc: dict[str, dict[str, Any]] = {}
    for result in errors:
        err = getattr(result, "error", None)
        kind = err.kind if err is not None else "unknown"
        entry = acc.setdefault(kind, {"count": 0, "attempts": [], "hint": None, "cause": None,
                                      "unreachable": None})
        entry["count"] += 1
        if err is not None and entry["unreachable"] is None and is_unreachable_message(err.message):
            entry["unreachable"] = err.message
            if err.hint:  # the verdict's cause (URL and cause) wins over a single call's
                entry["cause"], _, entry["hint"] = err.hint.partition(" | try: ")
        if err is not None and err.attempts is not None:
            entry["attempts"].append(err.attempts)
        if err is not None and err.hint and entry["hint"] is None:
            entry["cause"], _, entry["hint"] = err.hint.partition(" | try: ")
    out: dict[str, ErrorSummary] = {}
    for kind in sorted(acc):
        entry = acc[kind]
        cause, hint = kind_hint(kind)
        if entry["hint"]:  # the error's own (precise) cause and option win
            cause, hint = entry["cause"] or cause, entry["hint"] or hint
        attempts = entry["attempts"]
        out[kind] = ErrorSummary(kind=kind, count=entry["count"], cause=cause, hint=hint,
                                 attempts_min=min(attempts) if attempts else None,
                                 attempts_max=max(attempts) if attempts else None,
                                 unreachable=entry["unreachable"])
    return out


def is_unreachable_message(message: str | None) -> bool:
    """Whether an error message is an endpoint's unreachable verdict (models/reachability.py)."""
    return bool(message) and message.startswith("endpoint ") and (
        f" {UNREACHABLE_MARK} " in message.split(". Last error:", 1)[0])


def unreachable_lines(scenarios: Iterable[Any]) -> list[str]:
    """One line per endpoint given up as unreachable in the run, whatever the number of scenarios
    and cases it failed: ``endpoint URL unreachable: connection refused on every attempt ...``.
    ``scenarios``: objects with ``error_details`` (kind -> :class:`ErrorSummary`)."""
    lines: dict[str, str] = {}  # endpoint and cause -> the first verdict's line
    for s in scenarios:
        for summary in (getattr(s, "error_details", None) or {}).values():
            if summary.unreachable:
                line, _, last_error = summary.unreachable.partition(". Last error: ")
                if is_server_failure(summary.kind) and last_error:
                    # The endpoint answered: what it said (a proxy's login page, a gateway's
                    # error body) is the clue; a refused connection's last error adds nothing.
                    line += f"; its last reply: {shorten(last_error, 160, placeholder=' ...')}"
                # Processes that decided apart (no shared SDK process) counted their own attempts.
                lines.setdefault(line.split(" since the run began", 1)[0], line)
    return list(lines.values())


def describe_errors(error_kinds: Mapping[str, int],
                    details: Mapping[str, ErrorSummary] | None = None) -> str:
    """``timeout x2 (cause; N attempts per call; try: option), ...`` for a scenario's errors.
    Kinds without a summary (e.g. a report from an older version) get the generic wording."""
    texts = []
    for kind, count in error_kinds.items():
        summary = (details or {}).get(kind)
        if summary is None:
            cause, hint = kind_hint(kind)
            summary = ErrorSummary(kind=kind, count=count, cause=cause, hint=hint)
        texts.append(summary.text())
    return ", ".join(texts)
