"""The controller's hooks: the process that sees every report (the xdist controller, or the
only process with ``-n 0``).

It collects each result from its report (session/transport.py) and appends it to the run's
journal as it arrives, so an interrupted run keeps what it had; with ``--gate`` single cases never
fail the run: a wrong answer's report becomes a pass (its outcome stays in the
``toolbench.outcome`` property, Allure and the terminal) and an infrastructure error's a skip.
It records which nodes were selected, so a case without a result is named, never lost. At the
session end it turns the results into the run's one record (session/finish.py), built once, and
writes every report from it; an output it cannot write stops the run (exit ``OUTPUT_ERROR``) and
is noted in that same record.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import Case, details_read_at_session_end
from pytest_toolbench.counting import counted
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.models.meter import REQUEST_METER
from pytest_toolbench.report import progress
from pytest_toolbench import output_errors
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.gates import GateVerdict, exit_status, parse_gate
from pytest_toolbench.results import case_store
from pytest_toolbench.results.held_results import SESSION_END_DETAILS, held, whole_cases
from pytest_toolbench.results.partial_run import MAXFAIL_TEXT, maxfail_stop, pytest_stop_words
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.runtime.logger_registry import guard_logger_registry
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.session.selection import load_all_cases
from pytest_toolbench.session.identity import run_identity, sandbox_warning, wall_time_note
from pytest_toolbench.session.listing import runs_tests
from pytest_toolbench.session.signals import interrupts_of
from pytest_toolbench.session.state import is_xdist_controller, run_dir_of, run_dir_path, state
from pytest_toolbench.session.transport import (
    FROM_RESULT_CACHE, RESULT_KEY, from_result_cache, let_gates_decide, stop_like_worker,
    take_payloads, worker_output,
)

if TYPE_CHECKING:
    from pytest_toolbench.results.run_record import RunRecord
    from pytest_toolbench.session.run_end import RunEnd


#: Imported in the background during the test loop (ControllerHooks.pytest_runtestloop). Only
#: third-party modules: the harness's own go through pytest's assertion-rewriting import hook,
#: which is not meant to run on two threads at once. numpy alone: the end of a run imports no
#: other (rich, listed here until the summary moved to text_table.py, cost every run 50 ms of
#: CPU beside its cases, and a controller that never needed it).
FINISH_MODULES = ("numpy",)

#: The longest an interrupted run's end waits for its xdist workers to stop (seconds).
WORKER_STOP_WAIT = 5.0


def wait_for_workers_to_stop(config: pytest.Config, timeout: float = WORKER_STOP_WAIT) -> bool:
    """Wait, ``timeout`` seconds at most, until every xdist worker still active when the
    controller left its test loop has ended its session (sent ``workerfinished``, or its channel
    closed): an interrupted run's end, before it reads the workers' journals. The interruption
    reaches the workers as Ctrl-C's SIGINT (the group's, or passed on: session/signals.py), but
    a worker goes on until it takes it, on a busy machine a second or more: the case it was in
    ended, was journalled and got its Allure result after the controller had read the journals,
    so the report named it missing and Allure had it twice, "not run" (written here) beside the
    worker's own result. A worker that got no signal (a SIGINT sent to the controller alone)
    runs on: the wait ends at ``timeout`` and what it journals later stays out, as before.
    Reads what xdist's receiver threads set on each worker's controller (``_down``); nothing
    of xdist's event queue is taken. True: every worker is known to have ended (its session
    finished, its journal closed), so nothing can write to the run folder any more; False when
    one still runs, or xdist's internals are not what they were (then nothing is known)."""
    import time

    dsession = config.pluginmanager.getplugin("dsession")
    active = getattr(dsession, "_active_nodes", None)
    nodes = list(active or ())
    deadline = time.monotonic() + timeout
    while (any(not getattr(node, "_down", True) for node in nodes)
           and time.monotonic() < deadline):
        time.sleep(0.02)
    return active is not None and all(getattr(node, "_down", None) is True for node in nodes)


def _warm_imports() -> None:
    guard_logger_registry()  # the imports may make loggers while pytest walks the registry
    threading.Thread(target=_import_modules, args=(FINISH_MODULES,),
                     name="toolbench-warm-imports", daemon=True).start()


def _import_modules(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the hook that needs it imports it again and reports the error there
            return


class ControllerHooks:
    """Hooks that only make sense in the process that sees every report (controller or -n 0)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.st = state(config)
        self.gated_failures: set[str] = set()  # node ids --lf/--ff must still see as failed
        #: With gates, node ids of tests still failed once the cases' own outcomes were turned:
        #: they fail the run all the same (session/run_end.py ``failed_tests_verdict``).
        self._failed_tests: dict[str, None] = {}
        self.session: pytest.Session | None = None  # its exitstatus is final at unconfigure
        self._cases_by_id: dict[str, Case] | None = None  # xdist: node parameter id -> case
        self._selection_kept = False  # (:meth:`_keep_selection`)
        self._crashed: dict[str, tuple[Case, str]] = {}  # case id -> (case, xdist's crash text)
        self._worker_crashed = False  # any worker, whether or not its case had a result
        self._stopping = False  # an output failure has stopped the run
        #: Under xdist, -x/--maxfail stopped the run (:meth:`_maxfail_stop`), not a signal:
        #: xdist's words for it ("stopping after 1 failures").
        self._stopped_at_maxfail: str | None = None
        #: Every result of the run is in its journal (no journal write failed): the run folder's
        #: report then names the journal instead of repeating the cases.
        self._journal_whole = False
        #: How the run ended and its one record (none only when an output failed before any
        #: case reported, or pytest stopped with its own error): the session end's, read by
        #: JUnit, the terminal summary and the gate table.
        self.end: RunEnd | None = None
        self.record: RunRecord | None = None
        #: The terminal's text of the run (the record's summary, or why no case ran).
        self.summary = ""
        #: The gate table of a run without a record (no case ran).
        self._unrecorded_verdicts: list[GateVerdict] = []
        self._gates_printed = False
        #: Benchmark -> the details keys held of its results (:meth:`_held_keys`).
        self._held_details: dict[str, frozenset[str] | None] = {}

    @property
    def verdicts(self) -> list[GateVerdict]:
        """The gate table: the record's verdicts (or, no case ran, the run's own). A signal that
        comes while the reports are written adds none (session/signals.py): the reports written
        before it could not show one."""
        return list(self.record.gates if self.record is not None else self._unrecorded_verdicts)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """While the cases wait on the model, import what the end of the run needs (numpy for the
        bootstrap), which would otherwise follow the last reply."""
        config = session.config
        # Only in a run of benchmark cases: a plain test session (-n 0) would race its own
        # numpy users (pytest.approx reads sys.modules['numpy'] while it is half imported).
        if self.st.startup is not None:  # the live progress line owns the terminal line now
            self.st.startup.line_busy = True
        if not runs_tests(config):
            return
        if is_xdist_controller(config):  # it runs no case: it waits from the start
            _warm_imports()
        elif any(self.st.cases.values()):
            # Here the cases run in this process: it waits once a request leaves for the model.
            # A fully cached re-run never waits; started at once, the thread took the GIL from
            # its cases (~0.06 s of its wall: perf/README.md, eighteenth pass).
            REQUEST_METER.when_waiting(_warm_imports)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """Around every plugin's session start (xdist starting its workers, the data read and
        validated): a Ctrl-C or SIGTERM is held to the collection's start (session/signals.py).
        Not while a managed vLLM server is prepared: converting a model may take minutes, which
        a Ctrl-C must cut short (pytest then skips the session end, and no report is written)."""
        from pytest_toolbench.session.run_start import needs_managed_server

        interrupts = interrupts_of(self.config)
        if interrupts is None or needs_managed_server(self.st.settings):
            return (yield)
        with interrupts.held_to_the_session_end():
            return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_sessionstart")
    def pytest_sessionstart_workers(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """Right around xdist starting its workers (inside the validation's wrapper, which still
        runs): a Ctrl-C to the whole process group reaches the workers too, and one that xdist
        was still setting up dies of it; xdist then fails its setup (execnet: "connection
        already closed"), an INTERNALERROR with no session end and no report. When the session
        start holds that Ctrl-C, the lost worker is the interruption itself: the start goes on
        without it and the held signal ends the run as any other (session/signals.py)."""
        try:
            return (yield)
        except Exception as exc:
            interrupts = interrupts_of(self.config)
            held = interrupts.start_cut_short() if interrupts is not None else None
            dsession = self.config.pluginmanager.getplugin("dsession")
            if interrupts is None or held is None or getattr(dsession, "nodemanager", None) is None:
                raise  # no signal held, or not xdist's start of its workers: not ours to judge
            interrupts.note(f"pytest-toolbench: {held}: an xdist worker stopped while it was "
                            f"starting ({safe_text(str(exc))[:200]}); the run ends interrupted")
            return None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """A signal the session start held (session/signals.py ``held_to_the_session_end``) is
        raised here, the first point where pytest still runs the session end that writes the
        reports. A collection a signal cuts short is not the run's selection
        (:meth:`_collect_unknown_selection`)."""
        interrupts = interrupts_of(self.config)
        if interrupts is not None:
            interrupts.raise_held()
        try:
            return (yield)
        except KeyboardInterrupt:
            # Cut short, pytest still ends its collection (pytest_collection_finish, in a
            # ``finally``) with what it had: a part of the cases, or all of them before -k/-m
            # deselected any. That is no selection: the session end collects it whole.
            self.st.tracker.forget_selection()
            self._selection_kept = False
            raise

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """In-process: the selected nodes, after -k/-m/--lf deselection (session/case_tracker.py)."""
        self.st.tracker.expect_items(session.items)
        self._keep_selection()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller does not collect: each worker's node ids are the selection;
        their cases are the ones the controller loaded itself (validate_selection)."""
        if self._cases_by_id is None:
            from pytest_toolbench.session.case_tracker import cases_by_id

            self._cases_by_id = cases_by_id(self.st.cases, self.st.settings.repeats)
        self.st.tracker.expect_node_ids(ids, self._cases_by_id)
        self._keep_selection()  # every worker collects the same nodes (xdist checks): the first

    def _keep_selection(self) -> None:
        """The selected cases' ids and node ids in the run's scratch files, once: should the run
        be killed outright, ``toolbench finish`` names from them the cases it left without a
        result (and, with --junitxml, each case's testcase)."""
        st = self.st
        if self._selection_kept or not st.targeted or not runs_tests(self.config):
            return
        self._selection_kept = True
        cases = [(case.id, nodeid) for nodeid, case in st.tracker.expected.items() if case is not None]
        with contextlib.suppress(OSError):  # only a killed run's list of missing cases needs it
            case_store.write_selection(run_dir_of(st), [i for i, _ in cases], [n for _, n in cases])

    @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_runtest_logreport")
    def pytest_runtest_logreport_whole(self, report: pytest.TestReport):  # type: ignore[no-untyped-def]
        """Every plugin takes a report in whole: a Ctrl-C or SIGTERM waits for its end
        (session/signals.py), so no journal line or JUnit testcase is left half made."""
        interrupts = interrupts_of(self.config)
        if interrupts is None:
            return (yield)
        with interrupts.holding():
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the result and drop the bulky JSON from the report, so reporters running after
        us (JUnit XML) carry only the compact toolbench.* summary, not the transcript."""
        cached = from_result_cache(report)
        results, failures = take_payloads(report)
        for result, text in results:
            self._add_result(report, result, text)
            if cached:
                self.st.from_result_cache.add(result.case_id)
        with_result = bool(results) or self._crashed_case(report)
        self.st.tracker.saw_report(report, with_result=with_result)
        for failure in failures:
            self._stop_on_output_failure(failure)

    @pytest.hookimpl(trylast=True, specname="pytest_runtest_logreport")
    def pytest_runtest_logreport_failed(self, report: pytest.TestReport) -> None:
        """A report still failed after the tryfirst hook above turned a case's own outcome
        (with gates): a plain test beside the suites, or a case's test that broke outside its
        scoring. Kept so that passing gates do not pass over it."""
        if report.failed and self.st.settings.gates:
            # pytest names a test in a file outside its rootdir "::name": its path then comes
            # from the report's location (relative to the rootdir)
            name = report.nodeid if not report.nodeid.startswith("::") else (
                f"{report.location[0]}{report.nodeid}")
            self._failed_tests[name] = None

    def _add_result(self, report: pytest.TestReport | None, result: CaseResult,
                    text: str | None) -> None:
        self.st.results[result.case_id] = result
        progress.add_result(self.config, result)
        if self._journal(result, text):  # from here on the journal holds its bulk
            self.st.results[result.case_id] = held(result, self._held_keys(result.benchmark))
        # (a worker turned its gated failures itself: session/transport.py WorkerReportHooks)
        if report is not None and self.st.settings.gates and (
                let_gates_decide(report, result) or hasattr(report, "toolbench_status")):
            self.gated_failures.add(report.nodeid)  # --lf still reruns it

    def _take_unsent_results(self, session: pytest.Session) -> None:
        """In one process, the result of the case whose test a signal stopped after its set-up
        had it, before the report that carries it reached this controller (session/transport.py
        ``attach_result``; made and marked sent, or not yet made): the case ran, and Allure has
        its result (completed from it, report/allure_report.py), so the run has it too,
        journalled, not named as a case never run beside it; a hit of the result cache with its
        stored JSON, and counted as answered by it, as its report would have carried it."""
        for item in session.items:
            result = item.stash.get(RESULT_KEY, None)
            if result is not None and result.case_id not in self.st.results:
                text = item.stash.get(FROM_RESULT_CACHE, None)
                self._add_result(None, result, text)
                if text is not None:
                    self.st.from_result_cache.add(result.case_id)

    def _held_keys(self, benchmark: str) -> frozenset[str] | None:
        """The ``details`` keys the session end reads of ``benchmark``'s results (None: all of
        them: a benchmark that does not say which its report tables read, or says it wrongly)."""
        if benchmark not in self._held_details:
            bench = registry().get(benchmark)
            try:
                declared = details_read_at_session_end(bench) if bench is not None else None
            except ValueError:
                declared = None
            self._held_details[benchmark] = (None if declared is None
                                             else frozenset((*SESSION_END_DETAILS, *declared)))
        return self._held_details[benchmark]

    def _crashed_case(self, report: pytest.TestReport) -> bool:
        """A node whose xdist worker died under it: remembered, and at the session end its case
        is the result its worker journalled before dying or else an infrastructure error that
        says the worker crashed (:meth:`_crash_standins`), never a case without a result. With
        gates its report becomes a skip like any infrastructure error's (--lf still reruns it)."""
        from pytest_toolbench.session.case_tracker import crash_message

        message = crash_message(report)
        if message is not None:  # its Allure result may be unwritten (_write_allure_left_unwritten)
            self._worker_crashed = True
        case = self.st.tracker.case_of(report.nodeid) if message is not None else None
        if message is None or case is None or case.id in self.st.results:
            return False
        self._crashed[case.id] = (case, message)
        if self.st.settings.gates:
            path, line, _ = report.location
            report.outcome = "skipped"
            report.longrepr = (str(path), (line or 0) + 1, f"{message}; counted by the "
                               "error-rate gate unless its worker journalled a result first")
            report.toolbench_status = "infra-error"  # type: ignore[attr-defined]
            self.gated_failures.add(report.nodeid)
        return True

    def _crash_standins(self) -> None:
        """Crashed nodes whose result no journal held: infrastructure errors of kind
        ``worker_crashed`` carrying xdist's message (session/case_tracker.py)."""
        from pytest_toolbench.session.case_tracker import crashed_result

        for case_id, (case, message) in self._crashed.items():
            if case_id not in self.st.results:
                result = crashed_result(case, message, model=self.st.settings.model)
                self.st.results[case_id] = result
                self._journal(result)

    def _journal(self, result: CaseResult, text: str | None = None) -> bool:
        """Append to the run's journal (``text``: the result's JSON as a worker sent it, written
        as it is); a failed write (full disk, EIO...) stops the run. True once written."""
        st = self.st
        if any(f.what == "results journal" for f in st.output_failures):
            return False  # stopping already: the journal is not written past its failure
        try:
            if st.journal is None:
                st.journal = case_store.run_journal(run_dir_of(st))
            if text is None:
                st.journal.append(result)
            else:
                st.journal.append_json(text)
        except OSError as exc:
            path = case_store.journal_path(run_dir_of(st))  # only named on failure: two Paths a case
            self._stop_on_output_failure(OutputFailure.of("results journal", path, exc))
            return False
        return True

    def _stop_on_output_failure(self, failure: OutputFailure) -> None:
        """Stop the run at once with one line naming the file and the error (exit OUTPUT_ERROR):
        results it can no longer keep must not be produced, and never end in a green run.
        The session end still writes what it can, marked partial."""
        if failure not in self.st.output_failures:
            self.st.output_failures.append(failure)
        if not self._stopping:
            self._stopping = True
            # pytest prints the terminal summary only for its own statuses, so the exit is
            # pytest's INTERRUPTED; the session end turns it into OUTPUT_ERROR (session/run_end.py run_status).
            pytest.exit(f"{failure.message()}; the run stopped (exit status "
                        f"{int(ToolbenchExit.OUTPUT_ERROR)} OUTPUT_ERROR)",
                        returncode=int(pytest.ExitCode.INTERRUPTED))

    # pytest only looks at methods named pytest_*; specname makes this a second sessionfinish.
    @pytest.hookimpl(trylast=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_keep_gated_failures(self, session: pytest.Session) -> None:
        """Put the cases the gates turned into passes/skips back into ``cache/lastfailed``.

        pytest's cacheprovider drops a node id from its last-failed set when the (rewritten)
        report passes or skips, and writes the set out in its own sessionfinish. Adding ours to
        the written file afterwards (trylast) works whatever key type or hook order a pytest
        version uses internally: the file has always been ``{nodeid: true}``."""
        cache = getattr(self.config, "cache", None)
        if not self.gated_failures or cache is None or self.config.getoption("cacheshow", False):
            return
        lastfailed = dict(cache.get("cache/lastfailed", {}))
        lastfailed.update(dict.fromkeys(self.gated_failures, True))
        cache.set("cache/lastfailed", lastfailed)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:  # pytest-xdist, controller side
        sandbox_states, failures = worker_output(node)
        self.st.sandbox_states.extend(sandbox_states)
        for failure in failures:
            if failure not in self.st.output_failures:  # the run stops at its session end
                self.st.output_failures.append(failure)
        stop_like_worker(node)

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        status = getattr(report, "toolbench_status", None)
        if status == "wrong":
            return "wrong", "w", ("WRONG", {"yellow": True})
        if status == "infra-error":
            return "infra-error", "e", ("INFRA-ERROR", {"red": True})
        return None

    @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_defer_signals(self, session: pytest.Session):  # type: ignore[no-untyped-def]
        """Around every plugin's session end (ours, JUnit, Allure, the terminal summary): a
        Ctrl-C or SIGTERM from here on is noted, not raised (session/signals.py), so no report
        is left unwritten or half written."""
        interrupts = interrupts_of(self.config)
        if interrupts is not None:
            interrupts.finishing()
        return (yield)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Why pytest stopped when no signal did, named as pytest names it, not as a Ctrl-C
        nobody pressed: its own ``Interrupted`` ("1 error during collection"), or a
        ``pytest.exit(reason)``: a plugin's or conftest's that exits as an interruption, or one
        with a status of its own, as the harness's stop on a runner this machine cannot give
        (usage error, 4). That one is named too: when cases had run before it (a second suite's
        runner), the run is partial and says why, not "never reported: a worker lost"; and its
        status stands (:func:`run_end.run_status`), as it does when no case ran. (The harness's
        own stop on an unwritable output is an output failure, noted before it exits.)"""
        st, value = self.st, excinfo.value
        if st.interrupted_by is not None or st.output_failures:
            return
        if self._maxfail_stop(value):
            self._stopped_at_maxfail = str(value)  # the session end ends it as pytest's own -x
        elif isinstance(value, pytest.Session.Interrupted):
            st.interrupted_by = pytest_stop_words(str(value))
        elif isinstance(value, pytest.exit.Exception):
            st.interrupted_by = f"pytest.exit: {value.msg}"
            # a status of its own stands; not 0, which would pass a partial run (12 then)
            st.exit_status_stands = value.returncode not in (
                None, int(pytest.ExitCode.OK), int(pytest.ExitCode.INTERRUPTED))

    def _maxfail_stop(self, value: BaseException) -> bool:
        """Whether ``value`` is xdist's stop on -x/--maxfail. Without xdist pytest ends such a
        run as failed (exit 1, the session end makes it 12 INCOMPLETE: its unrun cases are
        named); xdist's controller raises its own KeyboardInterrupt with pytest's text
        ("stopping after 1 failures", from a worker or its own count), which read as a Ctrl-C
        nobody pressed: "interrupted (SIGINT)", exit 2."""
        if not self.config.getoption("maxfail", 0) or not is_xdist_controller(self.config):
            return False
        from xdist.dsession import Interrupted  # only an xdist controller gets here

        # (its other stops, "gw0 received keyboard-interrupt", are a signal's: SIGINT stays)
        return isinstance(value, Interrupted) and MAXFAIL_TEXT.fullmatch(str(value)) is not None

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collector that failed (its own, or an xdist worker's, which xdist passes on once)."""
        if report.failed and report.nodeid not in self.st.collection_errors:
            self.st.collection_errors.append(report.nodeid)

    def _collection_stops_run(self) -> bool:
        """Without xdist pytest stops a run whose collection failed (exit 2, "1 error during
        collection", every case unrun), unless --continue-on-collection-errors. xdist's
        controller instead runs what the workers did collect, and with gates on those the run
        passed (exit 0) although a suite it was asked to run, e.g. one whose benchmark is not
        installed, never ran. The same run under xdist now ends as it would without: interrupted
        by that error (partial, exit 2), whatever its cases did."""
        st = self.st
        if (not st.collection_errors or st.interrupted_by is not None
                or self.config.getoption("continue_on_collection_errors", False)):
            return False
        n = len(st.collection_errors)
        st.interrupted_by = f"{counted(n, 'error')} during collection"
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        st = self.st
        self.session = session
        if not runs_tests(self.config):
            # A listing command (-n 2 --collect-only, --fixtures...) ran no case: merging the
            # workers' journals below would make an empty run folder, and the end of the run
            # would name every selected case as missing.
            return
        xdist = is_xdist_controller(self.config)
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self._collect_unknown_selection(session)
            if not xdist:
                self._take_unsent_results(session)
        if self._stopped_at_maxfail:  # ended as without xdist (:meth:`_maxfail_stop`)
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
        workers_ended = False
        if xdist and exitstatus == pytest.ExitCode.INTERRUPTED:
            workers_ended = wait_for_workers_to_stop(self.config)
        if xdist:  # what only the workers' journals hold goes into the run's journal too
            # (run_dir_path: a plain test session under xdist has no run folder to make)
            with contextlib.suppress(pytest.exit.Exception):  # the journal failed: noted
                st.recovered = case_store.merge_worker_journals(run_dir_path(st), st.results,
                                                                self._journal)
        try:
            self._crash_standins()
        except pytest.exit.Exception:  # the journal failed: noted in st.output_failures
            pass
        if st.journal is not None:  # the last group commit: every result is on disk from here
            st.journal.sync_soon()
            if st.results:
                # The end's modules (the record's models, the summary's rendering) load while
                # that fsync runs (it releases the GIL), off the path to the first request.
                from pytest_toolbench.session import end_summary, finish  # noqa: F401
            with contextlib.suppress(OSError):  # a failed write already stopped the run
                st.journal.close()
            st.journal = None
        self._journal_whole = not any(f.what == "results journal" for f in st.output_failures)
        # The workers' journals and the run's scratch files go once the run's journal holds
        # every result and no worker can still be writing: an interrupted run's only when every
        # worker has ended (its workers may run on past this point: kept then; an interrupted
        # FamilyTool run kept 41 MB of plain worker journals beside its 1.4 MB journal), and
        # not after a pytest.exit whose status stands, which stops the run as a usage error does.
        run_ended = ((st.interrupted_by is None or st.exit_status_stands)
                     and exitstatus != pytest.ExitCode.INTERRUPTED)
        if self._journal_whole and (run_ended or workers_ended):
            with contextlib.suppress(OSError):  # one left behind loses nothing
                if xdist:
                    case_store.remove_worker_journals(run_dir_path(st))
                case_store.remove_scratch(run_dir_path(st))
        missing = self._check_completeness()
        if missing and st.interrupted_by is None:  # named, not "never reported: a worker lost"
            # -x/--maxfail: pytest's own count (its session's), or under xdist the controller's
            stop = self._stopped_at_maxfail or session.shouldfail
            if isinstance(stop, str):
                st.pytest_stop = maxfail_stop(stop, int(self.config.getoption("maxfail", 0)))
        if xdist and self._collection_stops_run():
            exitstatus = session.exitstatus = pytest.ExitCode.INTERRUPTED
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if interrupted and st.interrupted_by is None and not st.output_failures:
            st.interrupted_by = "SIGINT"  # (an output failure stops the run as an interruption)
        self.end = self._end(exitstatus, missing)
        # A run interrupted or stopped (-x on a plain test, every result lost) before its first
        # result still gets every report, each saying so (partial, the cases never run, the
        # failed run check): a --toolbench-json left unwritten would leave a CI step reading an
        # earlier run's file at that path as this run's. Not a run pytest.exit stopped with a
        # status of its own (a usage error before the first case: the sandbox's layers, an
        # embedder that cannot load): that status stands (_no_case_ran).
        lost = bool(missing) and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        stopped_early = (st.interrupted_by is not None and not st.exit_status_stands) or lost
        if not st.results and (not st.targeted or not stopped_early or st.output_failures):
            self._no_case_ran(session, exitstatus)
            return
        self._finish_run(session, self.end)

    def _collect_unknown_selection(self, session: pytest.Session) -> None:
        """A run interrupted before its selection was collected (a signal held through the
        session start, one that cut an in-process collection short, or under xdist one that
        came while the workers started, before any of them reported its node ids) collects it
        now, as ``-n 0`` does before its first case:
        pytest's own collection, with -k/-m/--lf and every plugin's deselection, running no
        test. Its missing cases are then named in every report and JUnit gets a testcase for
        each, as when the signal comes during an in-process collection; before, such a run said
        only that which cases it left was unknown (results/partial_run.py ``MISSING_UNKNOWN``),
        with no testcase per case. A collection that fails leaves them unknown."""
        tracker = self.st.tracker
        if tracker.collected or not self.st.targeted:
            return
        # pytest stopped its output capture on the interruption (pytest_keyboard_interrupt);
        # a collector's report reads it: capturing again for the collection's length
        capman = self.config.pluginmanager.getplugin("capturemanager")
        restart = capman is not None and getattr(capman, "_global_capturing", None) is None
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "_numcollected"):
            # counted once: "collected 36 items" said of a second collection of 18
            reporter._numcollected = 0
            reporter.stats.pop("deselected", None)
        try:
            if restart:
                capman.start_global_capturing()
                capman.suspend_global_capture()
            session.perform_collect()
        except Exception:  # noqa: BLE001 - an argument that names nothing: unknown, as before
            tracker.forget_selection()  # pytest_collection_finish ran anyway (its ``finally``)
        finally:
            if restart:
                capman.stop_global_capturing()

    def _finish_run(self, session: pytest.Session, end: RunEnd) -> None:
        """Score the results, build the run's one record, and write every report from it."""
        from pytest_toolbench.session import end_summary
        from pytest_toolbench.session.finish import covered_cases, run_record, score_run

        st = self.st
        results = list(st.results.values())
        benchmarks = {n: b for n, b in registry().items() if n in {r.benchmark for r in results}}
        settings = st.settings
        scores = score_run(results, benchmarks, settings, st.baseline, st.data_sources,
                           keep_estimates_in=settings.cache_dir if settings.use_cache else None)
        self._ensure_suite_sizes(covered_cases(results))
        record = run_record(scores, end, results, run_identity(self.config, st))
        self.record = record
        session.exitstatus = int(record.run.exit_status or 0)
        notes = end_summary.run_notes(record, end.notes(), st.data_sources, st.suite_sizes)
        self.summary, full_summary = end_summary.summaries(self.config, record, notes,
                                                           st.data_sources)
        self._write_reports(session, record, notes, full_summary)
        self._write_junit()

    def _write_reports(self, session: pytest.Session, record: RunRecord, notes: list[str],
                       full_summary: str) -> None:
        """Every report but JUnit's, each from ``record``; a failed write is noted in it before
        the next report is written, and at the end in the record, the exit status and the
        terminal's summary."""
        from pytest_toolbench.runs.record import REPORT_NAME, mark_unreported, save_report

        st = self.st
        failed_before = len(st.output_failures)
        # The run's folder first: it shares its disk with the journal, and if it cannot be
        # written the --toolbench-json below still says so (partial, exit status, the error).
        # Its cases are the journal's (stored once, results/case_store.py) unless the journal
        # lost one; --toolbench-json, a file a user moves on its own, holds them inline.
        folder = run_dir_of(st)
        self._write_output("run folder's report", folder / REPORT_NAME, lambda: save_report(
            folder, record, cases_in_journal=self._journal_whole, cases=self._whole_cases))
        if st.settings.json_path:
            json_path = Path(st.settings.json_path)
            if len(st.output_failures) > failed_before:
                self._note_output_failures(session, record)
            self._write_output("JSON report", json_path, lambda: record.write(
                json_path, record.json_chunks(self._whole_cases())))
        if st.settings.md_path:
            from pytest_toolbench.report.markdown_report import write_markdown_report

            self._write_output("Markdown summary", st.settings.md_path, lambda: write_markdown_report(
                st.settings.md_path, record, notes=[*notes, wall_time_note(st)]))
        from pytest_toolbench.report.allure_and_plots import write_plots_and_allure

        self._write_output("plots or Allure files", folder, lambda: write_plots_and_allure(
            self.config, record, full_summary, run_dir=folder, data_sources=st.data_sources,
            backend=st.settings.resolved_backend))
        if self.config.getoption("--alluredir", None):
            self._write_output("Allure results of the cases never run",
                               self.config.getoption("--alluredir"),
                               lambda: self._write_allure_not_run(session))
            self._write_output("Allure results of the cases their workers left without one",
                               self.config.getoption("--alluredir"),
                               self._write_allure_left_unwritten)
        if len(st.output_failures) > failed_before:  # a report could not be written
            self._note_output_failures(session, record)
            if not (folder / REPORT_NAME).is_file():
                # run.json would still say "running", and toolbench runs call the run killed
                first = st.output_failures[0]  # what stopped the run, else that report's failure
                self._write_output("run index", folder / "run.json", lambda: mark_unreported(
                    folder, exit_status=int(session.exitstatus), stopped_by=first))
            self.summary += "".join(f"{f.message()}\n" for f in st.output_failures[failed_before:])

    def _write_allure_not_run(self, session: pytest.Session) -> None:
        """With --alluredir: a result for every selected case that never ran (an interrupted
        run's, or one stopped early), as JUnit's error testcase for each (:meth:`_write_junit`),
        so Allure counts the whole selection (report/allure_report.py ``write_not_run``)."""
        st = self.st
        if not (self.end and self.end.missing):
            return
        nodes = st.tracker.missing_cases(st.results)
        if not nodes:
            return
        from allure_pytest.utils import pytest_markers

        from pytest_toolbench.report.allure_report import write_not_run
        from pytest_toolbench.results.partial_run import not_run_message

        wanted = {nodeid for nodeid, _ in nodes}
        tags = {item.nodeid: list(pytest_markers(item))  # known where this process collected
                for item in getattr(session, "items", None) or () if item.nodeid in wanted}
        write_not_run(nodes, st.settings.model or "",
                      not_run_message(st.interrupted_by, st.pytest_stop),
                      tags=tags)

    def _write_allure_left_unwritten(self) -> None:
        """With --alluredir, in a run interrupted, or under xdist with a worker crashed or a
        result recovered from a worker's journal: the Allure result of each case the run counts
        as run (:meth:`_crash_standins` included) that the folder holds no result of this run
        for (report/allure_report.py ``case_ids_in``, ``write_finished``). None was written: the
        case's worker crashed, or a signal stopped the process that ran it between the case's
        journal line or report and allure-pytest's result file, or inside allure-pytest's own
        writing (1 run in ~4 to ~25 of an interrupted test, ``-n 0`` and ``-n 2``, on this
        machine). Under xdist, written after the interrupted run's wait for its workers
        (``wait_for_workers_to_stop``): a worker still running past it may still write its own."""
        st = self.st
        if not (st.interrupted_by is not None or self._worker_crashed or st.recovered):
            return  # every case ran to its test's end, where allure-pytest wrote its result
        from pytest_toolbench.report.allure_report import case_ids_in, write_finished

        alluredir = self.config.getoption("--alluredir")
        wanted = set(st.results) - case_ids_in(alluredir, st.run_id)
        if not wanted:
            return
        nodes = [(nodeid, case) for nodeid, case in st.tracker.expected.items()
                 if case is not None and case.id in wanted]
        whole = whole_cases([st.results[case.id] for _, case in nodes], run_dir_of(st))
        write_finished([(nodeid, case, CaseResult.model_validate(result))
                        for (nodeid, case), result in zip(nodes, whole)],
                       st.settings.model or "", alluredir=alluredir, run_id=st.run_id)

    def _whole_cases(self) -> Iterator[dict[str, Any]]:
        """The record's cases whole, as JSON values, one at a time, for a report that holds them
        inline: the held ones (results/held_results.py) read back from the run's journal."""
        assert self.record is not None
        return whole_cases(self.record.cases, run_dir_of(self.st))

    def _end(self, pytest_status: int, missing: list[str]) -> RunEnd:
        from pytest_toolbench.session.run_end import RunEnd

        st = self.st
        return RunEnd(pytest_status=int(pytest_status), interrupted_by=st.interrupted_by,
                      pytest_stop=st.pytest_stop,
                      status_stands=st.exit_status_stands, missing=list(missing),
                      selected=len(st.tracker.expected),
                      output_failures=list(st.output_failures),
                      missing_unknown=not st.tracker.collected,
                      results_from_cache=len(st.from_result_cache.intersection(st.results)),
                      failed_tests=list(self._failed_tests))

    def _note_output_failures(self, session: pytest.Session, record: RunRecord) -> None:
        """The outputs that failed so far, noted in the run's record (session/finish.py): the
        reports written after this, the gate table and the exit status show them."""
        from pytest_toolbench.session.finish import note_output_failures

        assert self.end is not None
        self.end = note_output_failures(record, self.end, self.st.output_failures)
        session.exitstatus = int(record.run.exit_status or 0)

    def _check_completeness(self) -> list[str]:
        """The selected cases without a result (session/case_tracker.py), after taking the output
        failures this process recorded after its last report (output_errors.py)."""
        st = self.st
        for failure in output_errors.take():
            if failure not in st.output_failures:
                st.output_failures.append(failure)
        return st.tracker.missing(st.results)

    def _write_output(self, what: str, path: Any, write: Any) -> None:
        """A report writer's I/O error (full disk, EIO...) is an output failure, never a traceback
        that leaves the other reports unwritten."""
        try:
            write()
        except (OSError, case_store.CaseStoreError) as exc:  # the latter: held cases unreadable
            failure = OutputFailure.of(what, path, exc)
            if failure not in self.st.output_failures:
                self.st.output_failures.append(failure)

    def _ensure_suite_sizes(self, covered: dict[str, int]) -> None:
        """Suite sizes of benchmarks the session start did not load (e.g. a run from a test file
        outside ``suites/``); a benchmark whose data cannot be read is left unknown."""
        for name in covered:
            if name not in self.st.suite_sizes and name in registry():
                try:
                    self.st.suite_sizes[name] = len(load_all_cases(self.st.settings, name))
                except Exception:  # noqa: BLE001 - only a note depends on it
                    pass

    def _no_case_ran(self, session: pytest.Session, exitstatus: int) -> None:
        """A toolbench run in which no case ran fails with NO_CASES (gates or not): passing gates
        on nothing, or a green CI job that evaluated nothing, would be wrong."""
        from pytest_toolbench.runs.record import mark_ended
        from pytest_toolbench.session.run_end import run_status, run_verdicts

        st, end = self.st, self.end
        if not st.targeted or end is None:  # (a listing command returned before: sessionfinish)
            return
        no_cases = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED,
                                  pytest.ExitCode.NO_TESTS_COLLECTED)
        # an output failed (nothing more is written), or cases were selected but all lost
        if st.output_failures or (end.missing and no_cases):
            self._unrecorded_verdicts = run_verdicts(end) if st.settings.gates else []
            session.exitstatus = run_status(end, self._unrecorded_verdicts,
                                            gated=bool(st.settings.gates))
            notes = end.notes()
            self.summary = "".join(f"{n}\n" for n in notes) + f"exit status {session.exitstatus}\n"
            self._write_output("run index", run_dir_of(st) / "run.json", lambda: mark_ended(
                run_dir_of(st), partial=True, interrupted_by=st.interrupted_by,
                exit_status=int(session.exitstatus)))
            self._write_junit()
            return
        if not no_cases:  # (pytest's own error: a usage error, an internal error)
            mark_ended(run_dir_of(st), partial=st.interrupted_by is not None,
                       interrupted_by=st.interrupted_by, exit_status=int(exitstatus))
            return
        session.exitstatus = int(ToolbenchExit.NO_CASES)
        line = "pytest-toolbench: no case ran (the selection, -k/-m or --lf left none)"
        self.summary = f"{line}; exit status {int(ToolbenchExit.NO_CASES)}\n"
        if st.settings.gates:
            self._unrecorded_verdicts = [
                GateVerdict(gate=str(parse_gate(g)), actual=None, passed=False,
                            reason="no case ran") for g in st.settings.gates
            ]
        self._write_unscored_reports(session, line)
        self._write_junit()

    def _write_unscored_reports(self, session: pytest.Session, note: str) -> None:
        """The reports of a run in which no case ran, from a record without a case, metric or
        scored verdict (its gates and exit status are the run's own): a --toolbench-json left
        unwritten would leave a CI step reading an earlier run's file at that path as this
        run's."""
        from pytest_toolbench.session.finish import run_record, score_run

        st = self.st
        assert self.end is not None
        record = run_record(score_run([], {}, st.settings), self.end, [],
                            run_identity(self.config, st))
        record.gates = list(self._unrecorded_verdicts)
        record.run.exit_status = int(session.exitstatus)
        self.record = record
        self._write_reports(session, record, [note], self.summary)

    def _write_junit(self) -> None:
        """With --junitxml: a testcase with an error for every selected case that never ran
        (else the file would count only those that did), then the gate verdicts as testcases,
        from the run's record."""
        from pytest_toolbench.report import junit_gates
        from pytest_toolbench.results.partial_run import not_run_message

        st = self.st
        xml = junit_gates.junit_of(self.config)
        if xml is None:
            return
        gated = bool(st.settings.gates)
        junit_gates.write_unreported_testcases(xml, [
            junit_gates.ended_of(nodeid, result, gated=gated)
            for nodeid, result in st.tracker.unreported(st.results)])
        not_run = st.tracker.missing_nodes(st.results) if self.end and self.end.missing else []
        if not_run:
            junit_gates.write_missing_testcases(
                xml, not_run, not_run_message(st.interrupted_by, st.pytest_stop))
        if self.record is not None:  # what data the run was on, on the suite
            junit_gates.write_data_properties(xml, self.record)
        else:  # no case ran, so nothing was scored: the data its start read, all the same
            junit_gates.write_data_source_properties(xml, st.data_sources)
        if self.verdicts:
            junit_gates.write_gate_testcases(xml, self.verdicts)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        st = self.st
        if not self.summary:
            return
        from pytest_toolbench.report.terminal import wrap_note  # loaded already: end_summary's

        terminalreporter.write_sep("=", "pytest-toolbench")
        # Wrapped as the summary's notes are: the sandbox line alone ran to 113 columns for
        # every ordinary user (no cgroup given), and a model's name can be any length.
        width = max(40, self.config.get_terminal_writer().fullwidth)
        header = [f"model: {st.settings.model}   run: {st.run_id}",
                  wall_time_note(st)]  # now: the reports are written
        for line in header:
            for part in wrap_note(line, width):
                terminalreporter.write_line(part)
        warning = sandbox_warning(st.sandbox_states)
        if warning:
            alarming = warning.startswith("WARNING")
            for part in wrap_note(warning, width):
                terminalreporter.write_line(part, red=alarming, bold=alarming)
        # The summary quotes data (notes, labels, errors); its parts are escaped where they are
        # laid out, and the whole once more here, where it reaches the terminal.
        terminalreporter.write(safe_text(self.summary, multiline=True))
        if st.recovered:
            terminalreporter.write_line(
                f"{counted(st.recovered, 'result')} whose reports never arrived were recovered "
                "from the workers' journals"
            )
        if st.settings.json_path and self.record is not None:
            terminalreporter.write_line(f"JSON report: {st.settings.json_path}")
        if st.settings.md_path and self.record is not None:
            terminalreporter.write_line(f"Markdown summary: {st.settings.md_path}")
        if self.record is not None:
            line = f"run folder: {run_dir_of(st)}"
            more = " (report.json, results.jsonl.gz; toolbench runs lists it)"
            fits = len(line + more) <= terminalreporter._tw.fullwidth
            terminalreporter.write_line(line + more if fits else line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The gate table goes last, after pytest's own closing lines, so a CI log ends on it."""
        REQUEST_METER.forget(_warm_imports)  # this run never waited: not the next session's work
        st, end, verdicts = self.st, self.end, self.verdicts
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if not verdicts or reporter is None or self._gates_printed:
            return
        from pytest_toolbench.report.terminal import render_gates

        self._gates_printed = True
        gates_status = exit_status(verdicts)
        # the status the run really exits with (e.g. 5 when no case ran), not only the gates'
        status = int(self.session.exitstatus) if self.session is not None else int(gates_status)
        reporter.write_sep("=", "pytest-toolbench gates")
        reporter.write(safe_text(render_gates(verdicts, width=max(40, reporter._tw.fullwidth)),
                                 multiline=True))
        # never PASSED on a run that exits non-zero (lost cases, an unwritten output, Ctrl-C)
        word = "PASSED" if gates_status is ToolbenchExit.OK and status == 0 else "FAILED"
        name = ToolbenchExit(status).name if status in ToolbenchExit._value2member_map_ else "?"
        if status == ToolbenchExit.OUTPUT_ERROR:
            why = "an output could not be written, so the run stopped: " + "; ".join(
                f"{f.path}: {f.error}" for f in st.output_failures)
        elif status == ToolbenchExit.INCOMPLETE:
            from pytest_toolbench.results.partial_run import missing_text

            why = missing_text(end.missing if end else [], len(st.tracker.expected))
        elif status in (ToolbenchExit.INTERRUPTED, ToolbenchExit.USAGE_ERROR) and any(
                v.kind == "interrupted" and not v.passed for v in verdicts):
            why = next(v.reason for v in verdicts if v.kind == "interrupted")
        elif status == ToolbenchExit.CASES_FAILED and any(
                v.kind == "tests" and not v.passed for v in verdicts):
            failed = int(next(v.actual or 0 for v in verdicts if v.kind == "tests"))
            # the verdict above names them; this line stays within 80 columns
            why = f"{counted(failed, 'other test')} failed (named above)"
        elif status == gates_status:
            # short enough that the longest such line (11 INFRA_ERRORS) fits 80 columns
            why = "set by the gates, not single cases"
        elif status == ToolbenchExit.NO_CASES:
            why = "no case ran, so no gate could pass"
        else:
            why = (f"not the gates' {int(gates_status)} {gates_status.name}: the run did not "
                   "finish normally")
        reporter.write_line(safe_text(  # why: case ids and error texts from the run
            f"gates {word} (exit status {status} {name}): {why}"
            + (" [partial run]" if end is not None and end.partial else "")
        ))
