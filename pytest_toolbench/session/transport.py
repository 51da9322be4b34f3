"""Results travel the pytest way: a worker attaches each finished case's :class:`CaseResult` as
JSON to its ``TestReport.user_properties``; pytest-xdist serialises reports to the controller,
whose ``pytest_runtest_logreport`` collects them (session/controller.py). Without xdist the same
hook runs in-process, so ``-n 0`` and ``-n 8`` share one code path and give identical metrics.
An output this process could not write (a response-cache entry on a full disk) rides on its next
report the same way, and a worker's sandbox states and late output failures go in its
``workeroutput`` at its session end."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_toolbench import output_errors
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.junit_properties import summary_properties
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.session.state import STATE_KEY, is_worker


#: The report property that carries a finished case's result (its JSON from an xdist worker).
RESULT_PROPERTY = "toolbench_result"

#: A worker's output failure (e.g. a response-cache write on a full disk) on its next report.
OUTPUT_ERROR_PROPERTY = "toolbench_output_error"

#: The test item's case result, from its set-up (``case_result``) until its teardown report.
RESULT_KEY = pytest.StashKey[CaseResult]()

#: Set once the result rode on a report, so the controller receives it exactly once.
SENT_KEY = pytest.StashKey[bool]()


def _record_journal_failure(call: pytest.CallInfo[None]) -> None:
    """An xdist worker's own journal (its backstop copy, written by the case fixture) that could
    not be written fails the case's setup; it is an output failure of the run, not of the case."""
    if call.excinfo is None:  # nearly every report: no import, no lookup
        return
    from pytest_toolbench.results.journal import JournalWriteError

    exc = call.excinfo.value
    if isinstance(exc, JournalWriteError):
        output_errors.record(OutputFailure.of("worker's results journal", exc.filename, exc))


def _attach_output_failures(report: pytest.TestReport) -> None:
    """Output failures this process recorded (a response-cache write on a full disk, in the model
    layer) ride on its next report to the controller, which stops the run on them."""
    for failure in output_errors.take():
        report.user_properties.append((OUTPUT_ERROR_PROPERTY, failure.to_json()))


def ends_the_test(item: pytest.Item, report: pytest.TestReport) -> bool:
    """Whether ``report`` is the test's last before its teardown: the call, a failed set-up, or
    a passed one under ``--setup-only``, which runs no call (a case runs in its set-up, so that
    mode runs the cases; with no report to carry them, a run in one process lost every result)."""
    if report.when == "setup":
        return report.failed or bool(getattr(item.config.option, "setuponly", False))
    return report.when == "call"


def attach_result(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Attach the case's result to the first report that ends the test (:func:`ends_the_test`),
    its summary properties to the teardown report (JUnit XML reads them there), and this
    process's output failures to whichever report goes next."""
    result = item.stash.get(RESULT_KEY, None)
    sent = item.stash.get(SENT_KEY, False)
    if result is not None and not sent and (report.failed or ends_the_test(item, report)):
        # On this report only (not item.user_properties, which pytest copies into every phase's
        # report), so the controller receives each result exactly once.
        # A worker sends JSON (xdist serialises reports); in-process the object itself travels,
        # which saves a dump and a parse per case.
        payload = result.model_dump_json() if is_worker(item.config) else result
        report.user_properties.append((RESULT_PROPERTY, payload))
        item.stash[SENT_KEY] = True
    if result is not None and report.when == "teardown":
        report.user_properties.extend(summary_properties(result))
        # The last report of the test: the result has gone to the controller (or, never sent,
        # is in this worker's journal). Items live until the session ends, so a result left in
        # the stash kept every transcript of the run in each xdist worker's memory.
        del item.stash[RESULT_KEY]
    _record_journal_failure(call)
    _attach_output_failures(report)


class WorkerReportHooks:
    """Registered in xdist workers only (plugin.py)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):  # type: ignore[no-untyped-def]
        """Once every plugin has taken the report (xdist has sent it to the controller), its
        result's JSON is dropped: pytest's terminal reporter keeps every report until the
        session ends, and with it every transcript of the worker's share of the run."""
        try:
            return (yield)
        finally:
            if any(name == RESULT_PROPERTY for name, _ in report.user_properties):
                report.user_properties[:] = [
                    prop for prop in report.user_properties if prop[0] != RESULT_PROPERTY]


def take_payloads(
    report: pytest.TestReport,
) -> tuple[list[tuple[CaseResult, str | None]], list[OutputFailure]]:
    """The results and output failures a report carries, removed from it, so reporters running
    after the controller (JUnit XML) carry only the compact toolbench.* summary. Each result
    comes with the JSON it arrived as from an xdist worker (None in-process)."""
    kept: list[tuple[str, object]] = []
    results: list[tuple[CaseResult, str | None]] = []
    failures: list[OutputFailure] = []
    for name, value in report.user_properties:
        if name == OUTPUT_ERROR_PROPERTY:
            failures.append(OutputFailure.from_json(str(value)))
        elif name == RESULT_PROPERTY:
            if isinstance(value, CaseResult):
                results.append((value, None))
            else:
                results.append((CaseResult.model_validate_json(value), str(value)))  # type: ignore[arg-type]
        else:
            kept.append((name, value))
    report.user_properties = kept
    return results, failures


def hand_over_worker_output(config: pytest.Config) -> None:
    """An xdist worker hands its pools' isolation states and the output failures recorded after
    its last report to the controller (read there at ``pytest_testnodedown``)."""
    st = config.stash.get(STATE_KEY, None)
    if st is not None and is_worker(config):
        config.workeroutput["toolbench_sandbox"] = st.sandbox_states  # type: ignore[attr-defined]
        config.workeroutput["toolbench_output_errors"] = [  # type: ignore[attr-defined]
            f.to_json() for f in output_errors.take()]


def worker_output(node: Any) -> tuple[list[dict[str, Any]], list[OutputFailure]]:
    """Controller side: what :func:`hand_over_worker_output` put in a finished worker's output."""
    output = getattr(node, "workeroutput", None) or {}
    return (list(output.get("toolbench_sandbox", [])),
            [OutputFailure.from_json(text) for text in output.get("toolbench_output_errors", [])])
