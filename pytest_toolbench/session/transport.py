"""Results travel the pytest way: a worker attaches each finished case's :class:`CaseResult` as
JSON to its ``TestReport.user_properties``; pytest-xdist serialises reports to the controller,
whose ``pytest_runtest_logreport`` collects them (session/controller.py). Without xdist the same
hook runs in-process, so ``-n 0`` and ``-n 8`` share one code path and give identical metrics.
An output this process could not write (a response-cache entry on a full disk) rides on its next
report the same way, and a worker's sandbox states, late output failures and ``pytest.exit`` go
in its ``workeroutput`` at its session end."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_toolbench import output_errors
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.junit_properties import summary_properties
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.session.state import STATE_KEY, is_worker


#: The report property that carries a finished case's result (its JSON from an xdist worker).
RESULT_PROPERTY = "toolbench_result"
#: Beside it on a result the result cache answered (runtime/result_cache.py): the controller counts it.
RESULT_CACHE_PROPERTY = "toolbench_result_cache"

#: A worker's output failure (e.g. a response-cache write on a full disk) on its next report.
OUTPUT_ERROR_PROPERTY = "toolbench_output_error"

#: A worker's ``pytest.exit`` (its reason and status) in its ``workeroutput``.
EXIT_OUTPUT = "toolbench_exit"

#: The test item's case result, from its set-up (``case_result``) until its teardown report.
RESULT_KEY = pytest.StashKey[CaseResult]()
#: Set on an item whose result the result cache answered (runtime/result_cache.py): the
#: result's JSON, as ``model_dump_json`` writes it, made from the stored entry without a dump
#: (``StoredResult.line``). Its report says so, the controller counts it and journals that text,
#: and a worker sends it as it is.
FROM_RESULT_CACHE = pytest.StashKey[str]()

#: Set once the result rode on a report, so the controller receives it exactly once.
SENT_KEY = pytest.StashKey[bool]()

#: On a worker's report with --gate: the result whose failure the gates take over
#: (:func:`let_gates_decide`), taken off in WorkerReportHooks before xdist sends the report.
GATED_ATTR = "_toolbench_gated_result"


def let_gates_decide(report: pytest.TestReport, result: CaseResult) -> bool:
    """With gates, a case's own failure is not the run's: a wrong answer's report becomes a
    pass, an infrastructure error's a skip (so the test body is not run in-process), both
    before JUnit, the terminal and pytest's failure counters (-x, --maxfail) see it. Allure
    already took the real status in makereport. True when ``report`` was turned."""
    if not report.failed:
        return False
    if result.outcome is Outcome.FAILED and report.when == "call":
        report.outcome = "passed"
        report.longrepr = None
        report.toolbench_status = "wrong"  # type: ignore[attr-defined]
    elif result.outcome is Outcome.ERROR:
        kind = result.error.kind if result.error else "error"
        path, line, _ = report.location
        report.outcome = "skipped"
        report.longrepr = (str(path), (line or 0) + 1,
                           f"infrastructure error ({kind}), not scored; counted by the "
                           "error-rate gate")
        report.toolbench_status = "infra-error"  # type: ignore[attr-defined]
    else:
        return False
    return True


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
        # which saves a dump and a parse per case, with its JSON where a hit of the result cache
        # has it (the controller's journal line, not dumped again).
        worker = is_worker(item.config)
        text = item.stash.get(FROM_RESULT_CACHE, None)
        if worker:
            payload: Any = text if text is not None else result.model_dump_json()
        else:
            payload = result if text is None else (result, text)
        report.user_properties.append((RESULT_PROPERTY, payload))
        if text is not None:
            report.user_properties.append((RESULT_CACHE_PROPERTY, 1))
        item.stash[SENT_KEY] = True
        if worker and report.failed and item.config.stash[STATE_KEY].settings.gates:
            setattr(report, GATED_ATTR, result)  # turned in WorkerReportHooks, after makereport
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

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """A ``pytest.exit`` in a worker (a runner or sandbox this machine cannot give, a model
        that cannot be built, a conftest's own) is handed to the controller, which stops the run
        with the same line and exit status as a run without xdist (``stop_like_worker``).
        xdist alone takes such a worker's end for a crash of the test it was running, and the
        run ended in an INTERNALERROR traceback (its ``assert not crashitem``), exit 3."""
        value = excinfo.value
        if isinstance(value, pytest.exit.Exception):
            self.config.workeroutput[EXIT_OUTPUT] = {  # type: ignore[attr-defined]
                "reason": value.msg, "returncode": value.returncode}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):  # type: ignore[no-untyped-def]
        """With gates, a failure the gates take over is turned here, in the worker, before
        pytest counts it: counted, it stopped the worker at -x/--maxfail, and a run that without
        xdist passed its gates (the controller turns it before pytest counts it) ended with
        every case the worker had not run missing, exit 2. The controller keeps the turned
        report's node for --lf (session/controller.py).
        Once every plugin has taken the report (xdist has sent it to the controller), its
        result's JSON is dropped: pytest's terminal reporter keeps every report until the
        session ends, and with it every transcript of the worker's share of the run."""
        gated = report.__dict__.pop(GATED_ATTR, None)  # (never sent: no CaseResult on the wire)
        if gated is not None:
            let_gates_decide(report, gated)
        try:
            return (yield)
        finally:
            if any(name == RESULT_PROPERTY for name, _ in report.user_properties):
                report.user_properties[:] = [
                    prop for prop in report.user_properties if prop[0] != RESULT_PROPERTY]


def from_result_cache(report: pytest.TestReport) -> bool:
    """Whether the result this report carries is one the result cache answered."""
    return any(name == RESULT_CACHE_PROPERTY for name, _ in report.user_properties)


def take_payloads(
    report: pytest.TestReport,
) -> tuple[list[tuple[CaseResult, str | None]], list[OutputFailure]]:
    """The results and output failures a report carries, removed from it, so reporters running
    after the controller (JUnit XML) carry only the compact toolbench.* summary. Each result
    comes with the JSON it arrived as from an xdist worker, or in-process from a hit of the
    result cache (else None). (The result cache's mark goes too: :func:`from_result_cache`
    reads it first.)"""
    kept: list[tuple[str, object]] = []
    results: list[tuple[CaseResult, str | None]] = []
    failures: list[OutputFailure] = []
    for name, value in report.user_properties:
        if name == RESULT_CACHE_PROPERTY:
            continue
        if name == OUTPUT_ERROR_PROPERTY:
            failures.append(OutputFailure.from_json(str(value)))
        elif name == RESULT_PROPERTY:
            if isinstance(value, CaseResult):
                results.append((value, None))
            elif isinstance(value, tuple):  # in-process, a hit: (result, its JSON)
                results.append(value)  # type: ignore[arg-type]
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


def _output_of(node: Any) -> dict[str, Any]:
    """A finished worker's ``workeroutput`` (none from a worker that never reached its end)."""
    return getattr(node, "workeroutput", None) or {}


def worker_output(node: Any) -> tuple[list[dict[str, Any]], list[OutputFailure]]:
    """Controller side: what :func:`hand_over_worker_output` put in a finished worker's output."""
    output = _output_of(node)
    return (list(output.get("toolbench_sandbox", [])),
            [OutputFailure.from_json(text) for text in output.get("toolbench_output_errors", [])])


def stop_like_worker(node: Any) -> None:
    """Controller side: a finished worker that stopped with ``pytest.exit`` stops the run the
    same way (its reason, its status), before xdist reads the worker's end as a crash."""
    stopped = _output_of(node).get(EXIT_OUTPUT)
    if stopped is not None:
        pytest.exit(stopped["reason"], returncode=stopped["returncode"])
