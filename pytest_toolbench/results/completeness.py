"""Every selected case ends in the report: scored, wrong, an infrastructure error, or named missing.

A selected case without a result (its worker lost, its report dropped) would leave metrics that
quietly cover fewer cases than were asked for; the controller names such cases
(session/completeness.py), and this module words them for the terminal and the gate table: the
run is partial and exits ``INCOMPLETE``. An output the run could not write gets its verdict here
too."""

from __future__ import annotations

from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.output_errors import OutputFailure

#: How many missing case ids the terminal names before "and K more" (the JSON lists all).
SHOWN_MISSING = 10


def missing_text(missing: list[str], selected: int, *, shown: int = SHOWN_MISSING) -> str:
    """``2 of 40 selected cases have no result: a, b`` (at most ``shown`` ids, then "and K more")."""
    n = len(missing)
    names = ", ".join(missing[:shown]) + (f" and {n - shown} more" if n > shown else "")
    verb = "has" if n == 1 else "have"
    return f"{n} of {selected} selected case{'s' if selected != 1 else ''} {verb} no result: {names}"


def missing_note(missing: list[str], selected: int) -> str:
    return (f"PARTIAL RESULTS: {missing_text(missing, selected)} (never reported: a worker lost, "
            "the run stopped early, or the transport failed); metrics cover only the cases that "
            "reported")


def completeness_verdict(missing: list[str], selected: int) -> GateVerdict:
    return GateVerdict(gate="every selected case reported", actual=float(len(missing)),
                       passed=False, kind="completeness",
                       reason=missing_text(missing, selected) + "; the metrics cover only the "
                       "cases that reported")


def output_verdict(failures: list[OutputFailure]) -> GateVerdict:
    return GateVerdict(gate="every output written", actual=float(len(failures)), passed=False,
                       kind="output", reason="; ".join(f.message().removeprefix("pytest-toolbench: ")
                                                      for f in failures))


__all__ = [
    "SHOWN_MISSING",
    "completeness_verdict",
    "missing_note",
    "missing_text",
    "output_verdict",
]
