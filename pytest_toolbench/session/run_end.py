"""How a run ended, as the session saw it: interrupted, cases without a result, outputs it could
not write; the verdicts no --gate asked for that follow from it, and the exit status.

Apart from the scoring (session/finish.py): the controller decides this at every session end,
also when no case ran, without loading the record's models.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_toolbench.counting import counted
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.results.gates import GateVerdict, exit_status
from pytest_toolbench.results.partial_run import (
    completeness_verdict,
    first_named,
    interrupted_verdict,
    output_verdict,
    partial_notes,
)

#: pytest's own statuses that keep their meaning whatever the gates say.
_INTERRUPTED, _INTERNAL_ERROR = int(ToolbenchExit.INTERRUPTED), int(ToolbenchExit.INTERNAL_ERROR)


@dataclass(frozen=True)
class RunEnd:
    """How the run ended, as the session saw it."""

    pytest_status: int
    interrupted_by: str | None = None
    #: Why pytest stopped the run before its selection was done, no interruption (-x).
    pytest_stop: str | None = None
    #: ``pytest_status`` is a ``pytest.exit``'s own (a usage error part-way): it stands.
    status_stands: bool = False
    #: Selected cases without a result, and how many cases were selected.
    missing: list[str] = field(default_factory=list)
    selected: int = 0
    output_failures: list[OutputFailure] = field(default_factory=list)
    #: Which selected cases have no result is not known (``toolbench finish`` of a run killed
    #: before it had kept its selection); ``missing`` is then empty.
    missing_unknown: bool = False
    #: Cases the result cache answered, unscored (runtime/result_cache.py).
    results_from_cache: int = 0
    #: Node ids of tests that failed as pytest counts it once the harness has turned a case's
    #: own outcome (with gates a wrong answer passes and an infrastructure error skips): a test
    #: beside the suites, or a case's test that broke outside its scoring.
    failed_tests: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """The reports cover less than the selection: interrupted, cases lost, or stopped on an
        unwritable output (the one place this is decided)."""
        return self.interrupted_by is not None or bool(self.missing) or bool(self.output_failures)

    def notes(self) -> list[str]:
        """The PARTIAL RESULTS lines above the metrics (results/partial_run.py)."""
        return partial_notes(self.output_failures, self.interrupted_by, self.missing, self.selected,
                             missing_unknown=self.missing_unknown, pytest_stop=self.pytest_stop)


def run_verdicts(end: RunEnd) -> list[GateVerdict]:
    """The failed verdicts that no --gate asked for: an interruption (naming the cases it left
    without a result), lost cases, unwritten outputs. So the gate table's count of failures
    (terminal, Markdown, JUnit, Allure) never reads "all passed" on a run that failed this way."""
    out = []
    if end.interrupted_by is not None:
        out.append(interrupted_verdict(end.interrupted_by, end.missing, end.selected,
                                       missing_unknown=end.missing_unknown))
    elif end.missing:
        out.append(completeness_verdict(end.missing, end.selected, end.pytest_stop))
    if end.output_failures:
        out.append(output_verdict(end.output_failures))
    if end.failed_tests:
        out.append(failed_tests_verdict(end.failed_tests))
    return out


#: The gate name of the verdict a run with failed tests gets (:func:`failed_tests_verdict`).
TESTS_PASSED = "every other test passed"

#: How many failed node ids the verdict names before "and K more".
SHOWN_FAILED = 5


def failed_tests_verdict(failed: list[str]) -> GateVerdict:
    """With gates the cases' own outcomes do not decide the exit status, but a test that failed
    otherwise (a plain test collected beside a suite, a fixture or a suite's own test body that
    raised) is a failure of the run: a CI step gated on metrics must not pass over it."""
    names = first_named(failed, SHOWN_FAILED)
    return GateVerdict(gate=TESTS_PASSED, actual=float(len(failed)), passed=False, kind="tests",
                       reason=f"{counted(len(failed), 'test')} failed "
                       f"outside the cases' scoring: {names}")


def run_status(end: RunEnd, verdicts: list[GateVerdict], *, gated: bool) -> int:
    """The exit status: an unwritten output (13) wins; an interruption, an internal error or a
    ``pytest.exit``'s own status keeps pytest's; then lost cases (12); then the gates' status,
    or pytest's without gates."""
    if end.output_failures:
        return int(ToolbenchExit.OUTPUT_ERROR)
    if end.status_stands or end.pytest_status in (_INTERRUPTED, _INTERNAL_ERROR):
        return int(end.pytest_status)
    if end.missing:
        return int(ToolbenchExit.INCOMPLETE)
    if gated:
        return int(exit_status(verdicts))
    return int(end.pytest_status)
