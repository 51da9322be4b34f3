"""The exit statuses of a pytest-toolbench run, one per thing a CI step wants to tell apart.

pytest's own codes keep their meaning (0-5); the ones only pytest-toolbench produces (gates, lost
cases, unwritable outputs) lie above pytest's range so they never collide with a future pytest code. The README's "Exit codes" table mirrors this.
"""

from __future__ import annotations

from enum import IntEnum


class ToolbenchExit(IntEnum):
    #: With gates: every gate and error-rate limit passed. Without: every case passed.
    OK = 0
    #: pytest's TESTS_FAILED. Without gates: some case was wrong or hit an infrastructure error.
    #: With gates single cases never decide the status; the gates passed, but a test failed
    #: outside the cases' scoring (a plain test beside a suite, a fixture that raised).
    CASES_FAILED = 1
    #: Ctrl-C, SIGTERM or SIGHUP (pytest's INTERRUPTED), or a collection error (under xdist
    #: too); summary and JSON are written, marked partial.
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    #: Bad command line, gate, selection option or dataset, found before any model call.
    USAGE_ERROR = 4
    #: No case was selected or none ran (pytest's NO_TESTS_COLLECTED), gates or not.
    NO_CASES = 5
    #: A metric gate failed (the metrics themselves are trustworthy: error rates were in bounds).
    GATE_FAILED = 10
    #: More infrastructure errors than --max-error-rate allows: the metrics cannot be trusted,
    #: whatever the metric gates say.
    INFRA_ERRORS = 11
    #: A selected case never reported a result (a worker lost, an exception in the transport,
    #: ``-x``/``--maxfail``): the run is partial, the missing cases are named in the summary and
    #: the JSON (``missing_cases``). Checked before 11 and 10, gates or not.
    INCOMPLETE = 12
    #: An output could not be written during the run (the results journal, a response-cache
    #: entry, a report): e.g. a full disk (ENOSPC/EFBIG/EDQUOT), EIO or a read-only file system.
    #: The run stops at once with one line naming the file and the error; reports that could still
    #: be written are marked partial. Wins over every other status.
    OUTPUT_ERROR = 13


__all__ = ["ToolbenchExit"]
