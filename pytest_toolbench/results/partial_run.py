"""Every selected case ends in the report: scored, wrong, an infrastructure error, or named missing.

A selected case without a result (its worker lost, its report dropped) would leave metrics that
quietly cover fewer cases than were asked for; the controller names such cases
(session/case_tracker.py), and this module words them for the terminal and the gate table: the
run is partial and exits ``INCOMPLETE``. An output the run could not write gets its verdict here
too."""

from __future__ import annotations

import re

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


#: What a PARTIAL RESULTS line says of the metrics (report/terminal.py ``coverage_notes`` does
#: not say it again under one).
METRICS_COVER_ONLY = "metrics cover only the cases that"


def missing_note(missing: list[str], selected: int, interrupted_by: str | None = None,
                 pytest_stop: str | None = None) -> str:
    return (f"PARTIAL RESULTS: {missing_text(missing, selected)} "
            f"({_why_not_run(interrupted_by, pytest_stop)}); {METRICS_COVER_ONLY} reported")


#: Why a selected case has no result when nothing the run knows of stopped it.
_NEVER_REPORTED = "never reported: a worker lost, the run stopped early, or the transport failed"


def _why_not_run(interrupted_by: str | None, pytest_stop: str | None) -> str:
    if interrupted_by is not None:
        return f"not run: the run was interrupted ({interrupted_by})"
    if pytest_stop is not None:
        return f"not run: {pytest_stop}"
    return _NEVER_REPORTED


#: pytest's words (and xdist's) when -x/--maxfail stops a run: "stopping after 1 failures".
MAXFAIL_TEXT = re.compile(r"stopping after \d+ failures?")


def maxfail_stop(pytest_text: str, maxfail: int) -> str | None:
    """``-x/--maxfail=1 stopped the run`` from pytest's (or xdist's) ``stopping after 1
    failures``: why the cases after it have no result, where the run said "never reported: a
    worker lost..." of the cases the user's own -x left unrun. None for any other text. (No
    count: under xdist a failure on another worker can come after xdist's.)"""
    if MAXFAIL_TEXT.fullmatch(pytest_text) is None:
        return None
    option = "-x/--maxfail=1" if maxfail == 1 else f"--maxfail={maxfail}"
    return f"{option} stopped the run"


#: pytest's own words when one of its options stops a run as an interruption, and what the
#: run's reports say instead: "interrupted (Test failed, continuing from this test next run.)"
#: named no option, and read as if a test had asked to be continued.
PYTEST_STOP_WORDS = {
    "Test failed, continuing from this test next run.":
        "--stepwise stopped at the first failing case; the next --stepwise run starts there",
}


def pytest_stop_words(text: str) -> str:
    """The reason of pytest's own ``Interrupted``, in the words the run's reports use."""
    return PYTEST_STOP_WORDS.get(text, text) or "pytest stopped the run"


#: Said of a run that stopped before its selection was collected: killed (``toolbench finish``)
#: before it had kept its selection (results/case_store.py ``write_selection``), or interrupted
#: before its collection and unable to collect it at its session end (session/controller.py
#: ``_collect_unknown_selection``). The cases it left are not known, and "every selected case
#: had reported" would be said of a selection of none.
MISSING_UNKNOWN = ("which selected cases have no result is unknown (the run stopped before its "
                   "cases were collected)")


def partial_notes(failures: list[OutputFailure], interrupted_by: str | None, missing: list[str],
                  selected: int, *, missing_unknown: bool = False,
                  pytest_stop: str | None = None) -> list[str]:
    """The PARTIAL RESULTS lines above a partial run's metrics: each unwritten output, the
    interruption, then the cases without a result."""
    notes = [f"PARTIAL RESULTS: {f.message().removeprefix('pytest-toolbench: ')}; the run "
             "stopped" for f in failures]
    if interrupted_by is not None:
        notes.append(f"PARTIAL RESULTS: the run was interrupted ({interrupted_by}); "
                     f"{METRICS_COVER_ONLY} finished"
                     + (f"; {MISSING_UNKNOWN}" if missing_unknown else ""))
    if missing:
        notes.append(missing_note(missing, selected, interrupted_by, pytest_stop))
    return notes


def completeness_verdict(missing: list[str], selected: int,
                         pytest_stop: str | None = None) -> GateVerdict:
    why = f" (not run: {pytest_stop})" if pytest_stop is not None else ""
    return GateVerdict(gate="every selected case reported", actual=float(len(missing)),
                       passed=False, kind="completeness",
                       reason=missing_text(missing, selected) + why + "; the metrics cover only "
                       "the cases that reported")


#: The gate name of the verdict an interrupted run gets, and its JUnit testcases' message.
RUN_COMPLETED = "run completed"


def not_run_message(interrupted_by: str | None, pytest_stop: str | None = None) -> str:
    """Why a selected case has no result, for the JUnit testcase that stands for it."""
    if interrupted_by is not None or pytest_stop is not None:
        return _why_not_run(interrupted_by, pytest_stop)
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
    "MAXFAIL_TEXT",
    "MISSING_UNKNOWN",
    "RUN_COMPLETED",
    "SHOWN_MISSING",
    "completeness_verdict",
    "first_named",
    "interrupted_verdict",
    "maxfail_stop",
    "missing_note",
    "missing_text",
    "not_run_message",
    "output_verdict",
    "partial_notes",
]
