"""Every selected case ends in the report: scored, wrong, an infrastructure error, or named missing.

A selected case without a result (its worker lost, its report dropped) would leave metrics that
quietly cover fewer cases than were asked for; the controller names such cases
(session/case_tracker.py), and this module words them for the terminal and the gate table: the
run is partial and exits ``INCOMPLETE``. An output the run could not write gets its verdict here
too."""

from __future__ import annotations

from pytest_toolbench.counting import counted
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.output_errors import OutputFailure

#: How many missing case ids the terminal names before "and K more" (the JSON lists all).
SHOWN_MISSING = 10


def first_named(names: list[str], shown: int) -> str:
    """``a, b and 3 more``: at most ``shown`` of ``names``, then how many were left out."""
    left = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {left} more" if left > 0 else "")


def missing_text(missing: list[str], selected: int, *, shown: int = SHOWN_MISSING) -> str:
    """``2 of 40 selected cases have no result: a, b`` (at most ``shown`` ids, then "and K more")."""
    n = len(missing)
    names = first_named(missing, shown)
    verb = "has" if n == 1 else "have"
    return f"{n} of {counted(selected, 'selected case')} {verb} no result: {names}"


def missing_note(missing: list[str], selected: int, interrupted_by: str | None = None) -> str:
    why = (f"not run: the run was interrupted ({interrupted_by})" if interrupted_by is not None
           else "never reported: a worker lost, the run stopped early, or the transport failed")
    return (f"PARTIAL RESULTS: {missing_text(missing, selected)} ({why}); metrics cover only the "
            "cases that reported")


#: Said of a run that stopped before its selection was collected: killed (``toolbench finish``)
#: before it had kept its selection (results/case_store.py ``write_selection``), or interrupted
#: before its collection and unable to collect it at its session end (session/controller.py
#: ``_collect_unknown_selection``). The cases it left are not known, and "every selected case
#: had reported" would be said of a selection of none.
MISSING_UNKNOWN = ("which selected cases have no result is unknown (the run stopped before its "
                   "cases were collected)")


def partial_notes(failures: list[OutputFailure], interrupted_by: str | None, missing: list[str],
                  selected: int, *, missing_unknown: bool = False) -> list[str]:
    """The PARTIAL RESULTS lines above a partial run's metrics: each unwritten output, the
    interruption, then the cases without a result."""
    notes = [f"PARTIAL RESULTS: {f.message().removeprefix('pytest-toolbench: ')}; the run "
             "stopped" for f in failures]
    if interrupted_by is not None:
        notes.append(f"PARTIAL RESULTS: the run was interrupted ({interrupted_by}); "
                     "metrics cover only the cases that finished"
                     + (f"; {MISSING_UNKNOWN}" if missing_unknown else ""))
    if missing:
        notes.append(missing_note(missing, selected, interrupted_by))
    return notes


def completeness_verdict(missing: list[str], selected: int) -> GateVerdict:
    return GateVerdict(gate="every selected case reported", actual=float(len(missing)),
                       passed=False, kind="completeness",
                       reason=missing_text(missing, selected) + "; the metrics cover only the "
                       "cases that reported")


#: The gate name of the verdict an interrupted run gets, and its JUnit testcases' message.
RUN_COMPLETED = "run completed"


def not_run_message(interrupted_by: str | None) -> str:
    """Why a selected case has no result, for the JUnit testcase that stands for it."""
    if interrupted_by is not None:
        return f"not run: the run was interrupted ({interrupted_by})"
    return ("not run: the case never reported a result (a worker lost, the run stopped early, "
            "or the transport failed)")


def interrupted_verdict(interrupted_by: str, missing: list[str], selected: int, *,
                        missing_unknown: bool = False) -> GateVerdict:
    """The failed verdict of a run stopped by Ctrl-C or SIGTERM: whatever the gates say about
    the cases that finished, the run did not evaluate what was asked."""
    if missing_unknown:
        reason = f"the run was interrupted ({interrupted_by}): {MISSING_UNKNOWN}"
    else:
        lost = missing_text(missing, selected) if missing else "every selected case had reported"
        reason = f"the run was interrupted ({interrupted_by}): {lost}"
    return GateVerdict(gate=RUN_COMPLETED, actual=float(len(missing)), passed=False,
                       kind="interrupted", reason=reason)


def output_verdict(failures: list[OutputFailure]) -> GateVerdict:
    return GateVerdict(gate="every output written", actual=float(len(failures)), passed=False,
                       kind="output", reason="; ".join(f.message().removeprefix("pytest-toolbench: ")
                                                      for f in failures))


__all__ = [
    "MISSING_UNKNOWN",
    "RUN_COMPLETED",
    "SHOWN_MISSING",
    "completeness_verdict",
    "first_named",
    "interrupted_verdict",
    "missing_note",
    "missing_text",
    "not_run_message",
    "output_verdict",
    "partial_notes",
]
