"""pytest glue, and nothing else: options, markers, parametrisation, result transport, summary.

Results travel the pytest way (anchors §3.2): a worker attaches each finished case's
:class:`CaseResult` as JSON to its ``TestReport.user_properties``; pytest-xdist serialises reports
to the controller, whose ``pytest_runtest_logreport`` collects them. Without xdist the same hook
runs in-process, so ``-n 0`` and ``-n 8`` share one code path and give identical metrics.
The controller also appends every result to a journal as it arrives, so an interrupted run keeps
what it had. ``pytest_sessionfinish`` aggregates, evaluates gates and writes the reports.

Before any model call the controller validates what it can (options, gate names against the
registered benchmarks, the dataset, and that the selection matches some case). With ``--gate``
single cases never fail the run: the controller turns a wrong answer's report into a pass (its
outcome stays in the ``toolbench.outcome`` property, Allure and the terminal) and an
infrastructure error's into a skip, writes each gate as its own JUnit testcase, and the exit status
comes from :func:`~pytest_toolbench.results.gates.exit_status` (codes in ``exitcodes.py``).
SIGTERM is handled as Ctrl-C: summary and JSON are written, marked partial.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import platform
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

import pytest

from pytest_toolbench.models.sdk_process import launcher as sdk_launcher

# First, before the imports below (pydantic, the SDK's models, ~0.2 s): the first request waits
# for the SDK process's own imports, so it starts as soon as a command looks like it wants one.
sdk_launcher.start_at_import()

from pytest_toolbench import __version__  # noqa: E402  (the SDK process starts first)
from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import Case, HasReportTables
from pytest_toolbench.benchmarks.data_source import file_sha256
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.fileio import atomic_write_bytes, indented_json
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.factory import build_model
from pytest_toolbench.option_sources import early_value
from pytest_toolbench.options import add_options, check_base_url, settings_from_config
from pytest_toolbench.report import progress
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.gates import (
    GateVerdict,
    check_gate_names,
    error_rate_verdicts,
    evaluate_gates,
    exit_status,
    parse_gate,
)
from pytest_toolbench.results import output_errors
from pytest_toolbench.results.journal import ResultJournal, recover_missing
from pytest_toolbench.results.output_errors import OutputFailure
from pytest_toolbench.runtime.server import ManagedServer, server_info_for_worker
from pytest_toolbench.runtime.upcoming import set_current_item
from pytest_toolbench.sandbox.pool import merge_isolation_states
from pytest_toolbench.session.selection import (
    has_toolbench_tests,
    parametrize_cases,
    targeted_benchmarks,
    validate_selection,
)
from pytest_toolbench.session.state import STATE_KEY, ToolbenchState, is_worker, state

#: When this process imported the plugin (about when pytest started): the run's wall time counts
#: from here, so model conversion and server start, which pytest's "in N s" leaves out, are in it.
PROCESS_T0 = time.monotonic()
RESULT_PROPERTY = "toolbench_result"
#: A worker's output failure (e.g. a response-cache write on a full disk) on its next report.
OUTPUT_ERROR_PROPERTY = "toolbench_output_error"
RESULT_KEY = pytest.StashKey[CaseResult]()
SENT_KEY = pytest.StashKey[bool]()


#: The SDK process started before configure decides (at import or pytest_load_initial_conftests).
EARLY_SDK_KEY = pytest.StashKey[Any]()


# --------------------------------------------------------------------------- configuration
def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "toolbench(benchmark): a pytest-toolbench suite test")
    config.addinivalue_line("markers", "scenario(name): benchmark scenario of a case")
    for benchmark in registry().values():
        config.addinivalue_line("markers", f"{benchmark.name}: a {benchmark.name} case")
        for label, keyword in benchmark.label_markers.items():
            config.addinivalue_line("markers", f"{label}({keyword}): case label {label}")
    try:
        settings = settings_from_config(config)
        for gate in settings.gates:
            check_gate_names(parse_gate(gate), registry())
        from pytest_toolbench.compare.baseline import check_baseline_gates, load_baseline

        check_baseline_gates(settings.gates, settings.baseline_path)
        baseline = None
        if not is_worker(config) and settings.baseline_path is not None:
            baseline = load_baseline(settings.baseline_path, settings.gates)
        if not is_worker(config) and has_toolbench_tests(config) and not config.option.collectonly:
            from pytest_toolbench.output_paths import check_run_outputs

            check_run_outputs(config, settings)  # every output writable before any model call
        if not is_worker(config) and settings.resolved_backend == "openai" and has_toolbench_tests(config):
            if not settings.base_url and os.environ.get("OPENAI_BASE_URL"):
                check_base_url(os.environ["OPENAI_BASE_URL"], "$OPENAI_BASE_URL")
            build_model(settings)  # fails fast on a missing key; sends no request
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-toolbench: {exc}") from exc
    run_id = (
        config.workerinput["toolbench_run_id"]
        if is_worker(config)
        else time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    )
    config.stash[STATE_KEY] = ToolbenchState(settings=settings, run_id=run_id, baseline=baseline)
    early_sdk = config.stash.get(EARLY_SDK_KEY, None)
    if not is_worker(config) and _wants_sdk_process(config, settings):
        state(config).sdk = early_sdk or sdk_launcher.SdkProcess()  # its SDK import overlaps collection
    elif early_sdk is not None:  # the early guess was wrong (e.g. the model came from the ini)
        early_sdk.stop()
    from pytest_toolbench.report.session_outputs import configure_allure

    configure_allure(config)
    progress.install(config, worker=is_worker(config), selection=state(config))  # the live line
    if not is_worker(config):
        config.pluginmanager.register(ControllerHooks(config), "toolbench-controller")
        _install_sigterm(config)


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_alluredir(config: pytest.Config) -> None:
    """``--alluredir`` is checked before allure-pytest's own configure creates it (which crashes,
    exit 3, on a path it cannot make); the other outputs are checked in ``pytest_configure``."""
    if not is_worker(config) and has_toolbench_tests(config) and not config.option.collectonly:
        from pytest_toolbench.output_paths import check_folder

        alluredir = config.getoption("allure_report_dir", None)
        if alluredir:
            path = Path(os.path.expanduser(str(alluredir)))
            try:
                check_folder(path if path.is_absolute() else
                             Path(config.invocation_params.dir) / path, "--alluredir")
            except ValueError as exc:
                raise pytest.UsageError(f"pytest-toolbench: {exc}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """Keep (or start) the shared SDK process if the options known so far, the ini file included,
    say the run may send requests, and stop one the plugin's import started on a wrong guess
    (``sdk_process/launcher.py``). ``pytest_configure`` decides for good (issue 11)."""
    started = sdk_launcher.claim_started_at_import()
    if _is_xdist_worker_process() or not _early_guess_wants_sdk(early_config):
        if started is not None:
            started.stop()
        return
    process = started or sdk_launcher.SdkProcess()
    early_config.stash[EARLY_SDK_KEY] = process
    early_config.add_cleanup(process.stop)


def _early_guess_wants_sdk(early_config: pytest.Config) -> bool:
    ns = early_config.known_args_namespace
    return sdk_launcher.may_send_requests(
        sdk_process=str(early_value(early_config, "--sdk-process")),
        model=str(early_value(early_config, "--model") or ""),
        cache_only=bool(early_value(early_config, "--cache-only")),
        info_only=any(getattr(ns, name, False) for name in ("collectonly", "help", "version")),
        paths=[str(arg) for arg in getattr(ns, "file_or_dir", None) or []],
    )


def _is_xdist_worker_process() -> bool:
    """An xdist worker, before pytest has parsed its command line (``workerinput`` is set later).
    xdist sets ``PYTEST_XDIST_WORKER`` in the worker, which runs under execnet's ``python -c``; a
    pytest that a test starts in a subprocess inherits the variable but is a run of its own. (A
    wrong answer only costs a wasted start: ``pytest_configure`` stops it in a worker.)"""
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) and sys.argv[:1] == ["-c"]


def _wants_sdk_process(config: pytest.Config, settings: RunSettings) -> bool:
    """A run that may send requests to an endpoint, with ``--sdk-process shared``."""
    return (
        settings.sdk_process == "shared"
        and settings.resolved_backend in ("openai", "vllm")
        and not settings.cache_only
        and not config.option.collectonly
        and not getattr(config.option, "help", False)
        and has_toolbench_tests(config)
    )


def sdk_address(config: pytest.Config) -> dict[str, Any] | None:
    """How this pytest process reaches the run's SDK process (None: call the SDK in process)."""
    if is_worker(config):
        return config.workerinput.get("toolbench_sdk")  # type: ignore[attr-defined]
    sdk = state(config).sdk
    return sdk.address() if sdk is not None else None


def _install_sigterm(config: pytest.Config) -> None:
    """SIGTERM (CI cancelling a job) ends the run like Ctrl-C, so the summary and the JSON are
    still written (marked partial); the previous handler is restored at the end."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        st = config.stash.get(STATE_KEY, None)
        if st is not None and st.interrupted_by is None:
            st.interrupted_by = "SIGTERM"
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the one vLLM server of the run on the controller, before xdist starts workers (they
    get its address); the data is validated first, so bad data never costs a server start."""
    config = session.config
    if not _starts_run(config) or not _needs_managed_server(state(config).settings):
        return
    _validate_and_record(config)
    st = state(config)
    from pytest_toolbench.runtime.startup_progress import StartupProgress

    st.startup = StartupProgress()
    config.add_cleanup(st.startup.close)
    # Resolved (converted once per machine) and described now; started on the first cache miss.
    st.server = ManagedServer.prepare(st.settings, log_dir=_run_dir(st), progress=st.startup)
    config.add_cleanup(st.server.stop)


@pytest.hookimpl(trylast=True, specname="pytest_sessionstart")
def pytest_sessionstart_validate(session: pytest.Session) -> None:
    """Without a server to start, validate after xdist has started its workers, so their
    start-up (imports, collection) overlaps the controller's reading of the data (issue 11).
    No model call can come first: a worker runs a test only once the controller's test loop,
    which begins after every sessionstart hook, hands it one."""
    config = session.config
    if _starts_run(config) and not _needs_managed_server(state(config).settings):
        _validate_and_record(config)


def _starts_run(config: pytest.Config) -> bool:
    return not is_worker(config) and not config.option.collectonly and has_toolbench_tests(config)


def _needs_managed_server(settings: RunSettings) -> bool:
    return settings.resolved_backend == "vllm" and not settings.base_url


def _validate_and_record(config: pytest.Config) -> None:
    st = state(config)
    validate_selection(config)
    if st.targeted:  # the run's folder says what is running, even if the run is later killed
        from pytest_toolbench.runs.record import record_start

        record_start(_run_dir(st), run_id=st.run_id, suites=st.targeted, started=st.started,
                     settings=st.settings.model_dump(mode="json", exclude={"api_key"}),
                     data_sources=[d.model_dump(mode="json") for d in st.data_sources],
                     version=__version__)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist hook (controller side)
    st = state(node.config)
    node.workerinput["toolbench_run_id"] = st.run_id
    node.workerinput["toolbench_server"] = server_info_for_worker(st.server)
    node.workerinput["toolbench_sdk"] = sdk_address(node.config)
    # The controller loads the suites' data before any case and reports its warnings once.
    node.workerinput["toolbench_data_warned"] = bool(targeted_benchmarks(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` (xdist's default) with every worker's queue kept as deep as its run-ahead
    window (runtime/xdist_scheduling.py); other ``--dist`` modes and non-toolbench runs keep
    xdist's own scheduler."""
    if config.getvalue("dist") != "load" or not has_toolbench_tests(config):
        return None
    from pytest_toolbench.runtime.xdist_scheduling import RunAheadScheduling

    window = 2 * state(config).settings.concurrency + 2  # fixtures/toolbench.py's look-ahead + 2
    return RunAheadScheduling(config, log, window=window)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Collected items live until the end: move them out of the cyclic GC's reach, so the full
    collections that allocation triggers during the run (and pytest's forced ones at exit) do not
    walk every case again and again (issue 11; ``gc.freeze`` is meant for such long-lived heaps)."""
    gc.freeze()
    atexit.unregister(_unfreeze_for_nanobind)  # once per process, however many sessions it runs
    atexit.register(_unfreeze_for_nanobind)


def _unfreeze_for_nanobind() -> None:
    """Frozen objects are never freed at exit, which is the point (freeing 10,000 cases costs a
    second). nanobind extensions (triton, pulled in by torch/vLLM) count unfreed instances as
    leaks and print warnings, so processes that loaded one give them back to the final GC."""
    if "triton" in sys.modules:
        gc.unfreeze()


def record_sandbox_state(config: pytest.Config, isolation: dict[str, Any]) -> None:
    """Called by the tool-sandbox fixture: the report states the isolation the tools really had,
    not only whether ``--sandbox-insecure`` was passed."""
    state(config).sandbox_states.append(isolation)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its pools' isolation states to the controller (pytest_testnodedown)."""
    config = session.config
    st = config.stash.get(STATE_KEY, None)
    if st is not None and is_worker(config):
        config.workeroutput["toolbench_sandbox"] = st.sandbox_states  # type: ignore[attr-defined]
        # recorded after this worker's last report: the controller reads them at testnodedown
        config.workeroutput["toolbench_output_errors"] = [  # type: ignore[attr-defined]
            f.to_json() for f in output_errors.take()]


def pytest_unconfigure(config: pytest.Config) -> None:
    gc.freeze()  # pytest collects several times at exit: only what the run made since is walked
    st = config.stash.get(STATE_KEY, None)
    if st is not None and st.sdk is not None:
        st.sdk.stop()
        st.sdk = None
    if st is not None and st.server is not None:
        st.server.stop()
        st.server = None


# --------------------------------------------------------------------------- collection
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_cases(metafunc)


# --------------------------------------------------------------------------- result transport
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    set_current_item(item)  # before its fixtures are set up (runtime/upcoming.py)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Attach the case's result to the first report that ends the test (call, or a failed setup)."""
    report = yield
    result = item.stash.get(RESULT_KEY, None)
    sent = item.stash.get(SENT_KEY, False)
    if result is not None and not sent and (report.when == "call" or report.failed):
        # On this report only (not item.user_properties, which pytest copies into every phase's
        # report), so the controller receives each result exactly once.
        # A worker sends JSON (xdist serialises reports); in-process the object itself travels,
        # which saves a dump and a parse per case (issue 11).
        payload = result.model_dump_json() if is_worker(item.config) else result
        report.user_properties.append((RESULT_PROPERTY, payload))
        item.stash[SENT_KEY] = True
    if result is not None and report.when == "teardown":
        # JUnit XML reads a test case's properties from its teardown report.
        report.user_properties.extend(summary_properties(result))
    _record_journal_failure(call)
    _attach_output_failures(report)
    return report


def _record_journal_failure(call: pytest.CallInfo[None]) -> None:
    """An xdist worker's own journal (its backstop copy, written by the case fixture) that could
    not be written fails the case's setup; it is an output failure of the run, not of the case."""
    from pytest_toolbench.results.journal import JournalWriteError

    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, JournalWriteError):
        output_errors.record(OutputFailure.of("worker's results journal", exc.filename, exc))


def _attach_output_failures(report: pytest.TestReport) -> None:
    """Output failures this process recorded (a response-cache write on a full disk, in the model
    layer) ride on its next report to the controller, which stops the run on them."""
    for failure in output_errors.take():
        report.user_properties.append((OUTPUT_ERROR_PROPERTY, failure.to_json()))


#: Imported in the background during the test loop (ControllerHooks.pytest_runtestloop). Only
#: third-party modules: the harness's own go through pytest's assertion-rewriting import hook,
#: which is not meant to run on two threads at once.
FINISH_MODULES = ("numpy", "rich.console", "rich.table", "rich.box", "rich.text")


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
        self.session: pytest.Session | None = None  # its exitstatus is final at unconfigure
        self._cases_by_id: dict[str, Case] | None = None  # xdist: node parameter id -> case
        self._crashed: dict[str, tuple[Case, str]] = {}  # case id -> (case, xdist's crash text)
        self._stopping = False  # an output failure has stopped the run

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """While the cases wait on the model, import what the end of the run needs (numpy for the
        bootstrap, rich for the summary): ~0.2 s that would otherwise follow the last reply."""
        config = session.config
        # Only in a run of benchmark cases: a plain test session (-n 0) would race its own
        # numpy users (pytest.approx reads sys.modules['numpy'] while it is half imported).
        if self.st.startup is not None:  # the live progress line owns the terminal line now
            self.st.startup.line_busy = True
        has_cases = any(self.st.cases.values())
        if (has_cases or is_xdist_controller(config)) and not config.option.collectonly:
            threading.Thread(target=_import_modules, args=(FINISH_MODULES,),
                             name="toolbench-warm-imports", daemon=True).start()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """In-process: the selected nodes, after -k/-m/--lf deselection (results/completeness.py)."""
        self.st.tracker.expect_items(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the controller does not collect: each worker's node ids are the selection;
        their cases are the ones the controller loaded itself (validate_selection)."""
        if self._cases_by_id is None:
            from pytest_toolbench.session.completeness import cases_by_id

            self._cases_by_id = cases_by_id(self.st.cases, self.st.settings.repeats)
        self.st.tracker.expect_node_ids(ids, self._cases_by_id)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the result and drop the bulky JSON from the report, so reporters running after
        us (JUnit XML) carry only the compact toolbench.* summary, not the transcript."""
        kept: list[tuple[str, object]] = []
        failures: list[OutputFailure] = []
        with_result = False
        for name, value in report.user_properties:
            if name == OUTPUT_ERROR_PROPERTY:
                failures.append(OutputFailure.from_json(str(value)))
                continue
            if name != RESULT_PROPERTY:
                kept.append((name, value))
                continue
            result = (value if isinstance(value, CaseResult)
                      else CaseResult.model_validate_json(value))  # type: ignore[arg-type]
            with_result = True
            self._add_result(report, result)
        report.user_properties = kept
        if not with_result:
            with_result = self._crashed_case(report)
        self.st.tracker.saw_report(report, with_result=with_result)
        for failure in failures:
            self._stop_on_output_failure(failure)

    def _add_result(self, report: pytest.TestReport, result: CaseResult) -> None:
        self.st.results[result.case_id] = result
        progress.add_result(self.config, result)
        self._journal(result)
        if self.st.settings.gates and report.failed:
            self._let_gates_decide(report, result)

    def _crashed_case(self, report: pytest.TestReport) -> bool:
        """A node whose xdist worker died under it: remembered, and at the session end its case
        is the result its worker journalled before dying or else an infrastructure error that
        says the worker crashed (:meth:`_crash_standins`), never a case without a result. With
        gates its report becomes a skip like any infrastructure error's (--lf still reruns it)."""
        from pytest_toolbench.session.completeness import crash_message

        message = crash_message(report)
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
        ``worker_crashed`` carrying xdist's message (results/completeness.py)."""
        from pytest_toolbench.session.completeness import crashed_result

        for case_id, (case, message) in self._crashed.items():
            if case_id not in self.st.results:
                result = crashed_result(case, message, model=self.st.settings.model)
                self.st.results[case_id] = result
                self._journal(result)

    def _journal(self, result: CaseResult) -> None:
        """Append to the run's journal; a failed write (full disk, EIO...) stops the run."""
        st = self.st
        if any(f.what == "results journal" for f in st.output_failures):
            return  # stopping already: the journal is not written past its failure
        path = _run_dir(st) / "results.jsonl"
        try:
            if st.journal is None:
                st.journal = ResultJournal(path)
            st.journal.append(result)
        except OSError as exc:
            self._stop_on_output_failure(OutputFailure.of("results journal", path, exc))

    def _stop_on_output_failure(self, failure: OutputFailure) -> None:
        """Stop the run at once with one line naming the file and the error (exit OUTPUT_ERROR):
        results it can no longer keep must not be produced, and never end in a green run.
        The session end still writes what it can, marked partial."""
        if failure not in self.st.output_failures:
            self.st.output_failures.append(failure)
        if not self._stopping:
            self._stopping = True
            # pytest prints the terminal summary only for its own statuses, so the exit is
            # pytest's INTERRUPTED; the session end turns it into OUTPUT_ERROR (_run_status).
            pytest.exit(f"{failure.message()}; the run stopped (exit status "
                        f"{int(ToolbenchExit.OUTPUT_ERROR)} OUTPUT_ERROR)",
                        returncode=int(pytest.ExitCode.INTERRUPTED))

    def _let_gates_decide(self, report: pytest.TestReport, result: CaseResult) -> None:
        """With gates, a case's own failure is not the run's: a wrong answer's report becomes a
        pass, an infrastructure error's a skip (so the test body is not run in-process), both
        before JUnit, the terminal and the failure counters see it. Allure already took the real
        status in makereport; ``--lf`` still reruns the case (see the sessionfinish below)."""
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
            return
        self.gated_failures.add(report.nodeid)

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
        output = getattr(node, "workeroutput", None) or {}
        self.st.sandbox_states.extend(output.get("toolbench_sandbox", []))
        for text in output.get("toolbench_output_errors", []):
            failure = OutputFailure.from_json(text)
            if failure not in self.st.output_failures:  # the run stops at its session end
                self.st.output_failures.append(failure)

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        status = getattr(report, "toolbench_status", None)
        if status == "wrong":
            return "wrong", "w", ("WRONG", {"yellow": True})
        if status == "infra-error":
            return "infra-error", "e", ("INFRA-ERROR", {"red": True})
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        st = self.st
        self.session = session
        if is_xdist_controller(self.config):
            st.recovered = recover_missing(
                list(run_dir(self.config).glob("worker-*.jsonl")), st.results
            )
        try:
            self._crash_standins()
        except pytest.exit.Exception:  # the journal failed: noted in st.output_failures
            pass
        if st.journal is not None:  # the last group commit: every result is on disk from here
            with contextlib.suppress(OSError):  # a failed write already stopped the run
                st.journal.close()
            st.journal = None
        self._check_completeness()
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if interrupted and st.interrupted_by is None and not st.output_failures:
            st.interrupted_by = "SIGINT"  # (an output failure stops the run as an interruption)
        if not st.results:
            self._no_case_ran(session, exitstatus)
            return
        from pytest_toolbench.report.terminal import cache_note, coverage_notes

        results = list(st.results.values())
        benchmarks = {n: b for n, b in registry().items() if n in {r.benchmark for r in results}}
        repeated = st.settings.repeats > 1
        from pytest_toolbench.results.repeats import aggregate_repeats, repeat_stats, tables_per_repeat

        st.metrics = (aggregate_repeats if repeated else aggregate)(
            results,
            {n: b.metrics for n, b in benchmarks.items()},
            {n: b.breakdown_labels for n, b in benchmarks.items()},
            scenario_order={n: b.scenarios for n, b in benchmarks.items()},
            n_boot=st.settings.bootstrap_samples,
            seed=st.settings.seed,
        )
        repeats = (
            repeat_stats(results, {n: b.metrics for n, b in benchmarks.items()}, st.settings.repeats,
                         n_boot=st.settings.bootstrap_samples, seed=st.settings.seed,
                         scenario_order={n: b.scenarios for n, b in benchmarks.items()})
            if repeated else None
        )
        for name, benchmark in benchmarks.items():
            if isinstance(benchmark, HasReportTables):
                own = sorted((r for r in results if r.benchmark == name), key=lambda r: r.case_id)
                if repeats is None:
                    st.metrics.tables.extend(benchmark.report_tables(own))
                else:  # each repeat scored alone, as a run without repeats would be
                    shown, per_repeat = tables_per_repeat(benchmark.report_tables, own)
                    st.metrics.tables.extend(shown)
                    repeats.per_repeat_tables.extend(per_repeat)
        if st.baseline is not None:
            from pytest_toolbench.compare.baseline import compare_with_baseline

            st.comparison = compare_with_baseline(
                st.baseline, results, st.metrics, model=st.settings.model,
                n_boot=st.settings.bootstrap_samples, seed=st.settings.seed,
            )
        if st.settings.gates:
            from pytest_toolbench.compare.baseline import gate_baseline

            st.verdicts = evaluate_gates([parse_gate(g) for g in st.settings.gates], st.metrics,
                                         gate_baseline(st.baseline, st.comparison))
            st.verdicts += error_rate_verdicts(st.metrics, st.settings.max_error_rate)
            st.verdicts += self._run_verdicts()
        session.exitstatus = self._run_status(exitstatus)
        covered: dict[str, int] = {}
        for r in results:
            if (r.repeat or 1) == 1:  # distinct cases, not runs
                covered[r.benchmark] = covered.get(r.benchmark, 0) + 1
        self._ensure_suite_sizes(covered)
        notes = self.partial_notes()
        notes += [f"data: {d.describe()}" for d in st.data_sources]
        notes += coverage_notes(covered, st.suite_sizes)
        cached = cache_note(sum(r.model_calls for r in results), sum(r.cached_calls for r in results))
        notes += [cached] if cached else []
        from pytest_toolbench.models.endpoint_pool import endpoint_notes, endpoint_totals

        endpoints = endpoint_totals([r.details for r in results])
        notes += endpoint_notes(endpoints)
        st.summary, full_summary = self._summaries(notes, repeats)
        from pytest_toolbench.report.json_report import build_json_report
        from pytest_toolbench.runs.record import save_report

        info = run_info(self.config, st)
        info.update(self._run_info_status(int(session.exitstatus)))  # decided above
        info["coverage"] = {
            n: {"cases": c, "suite_cases": st.suite_sizes.get(n),
                "subset": st.suite_sizes.get(n) is not None and c < st.suite_sizes[n]}
            for n, c in sorted(covered.items())
        }
        if endpoints:
            info["endpoints"] = endpoints
        info["wall_s"] = round(time.monotonic() - PROCESS_T0, 1)
        info["startup_s"] = {k: round(v, 1) for k, v in (st.startup.durations if st.startup else {}).items()}
        info["cache"] = {"model_calls": sum(r.model_calls for r in results),
                         "replies_from_cache": sum(r.cached_calls for r in results)}
        extra = {"repeats": repeats.model_dump(mode="json")} if repeats is not None else None
        baseline = st.comparison.model_dump(mode="json") if st.comparison else None
        # Built and encoded once: --toolbench-json and the run's own folder (runs/record.py,
        # `toolbench runs`) keep the same document.
        report = build_json_report(st.metrics, results, info, st.verdicts, baseline, extra)
        encoded = indented_json(report)
        failed_before = len(st.output_failures)
        # The run's folder first: it shares its disk with the journal, and if it cannot be
        # written the --toolbench-json below still says so (partial, exit status, the error).
        self._write_output("run folder's report", _run_dir(st) / "report.json",
                           lambda: save_report(_run_dir(st), report, encoded))
        if st.settings.json_path:
            if len(st.output_failures) > failed_before:
                session.exitstatus = self._run_status(exitstatus)
                info.update(self._run_info_status(int(session.exitstatus)))
                report = build_json_report(st.metrics, results, info, st.verdicts, baseline, extra)
                encoded = indented_json(report)
            self._write_output("JSON report", st.settings.json_path,
                               lambda: atomic_write_bytes(Path(st.settings.json_path), encoded))
        if st.settings.md_path:
            from pytest_toolbench.report.markdown_report import write_markdown_report

            self._write_output("Markdown summary", st.settings.md_path, lambda: write_markdown_report(
                st.settings.md_path, st.metrics, st.verdicts, st.comparison,
                model=st.settings.model, run_id=st.run_id, notes=[*notes, wall_time_note(st)]))
        from pytest_toolbench.report.session_outputs import finish

        self._write_output("plots or Allure files", _run_dir(st), lambda: finish(
            self.config, st.metrics, st.verdicts, full_summary, settings=st.settings,
            run_id=st.run_id, run_dir=_run_dir(st), data_sources=st.data_sources,
            comparison=st.comparison))
        if len(st.output_failures) > failed_before:  # a report could not be written
            session.exitstatus = self._run_status(exitstatus)
            st.summary += "".join(f"{f.message()}\n" for f in st.output_failures[failed_before:])
        if st.verdicts:
            from pytest_toolbench.report.junit_gates import write_gate_testcases

            write_gate_testcases(self.config, st.verdicts)

    def _check_completeness(self) -> None:
        """Name the selected cases without a result, and take the output failures this process
        recorded after its last report (results/completeness.py, results/output_errors.py)."""
        st = self.st
        st.missing = st.tracker.missing(st.results)
        for failure in output_errors.take():
            if failure not in st.output_failures:
                st.output_failures.append(failure)

    def _run_verdicts(self) -> list[GateVerdict]:
        """The failed verdicts that no --gate asked for: lost cases (not after an interruption,
        which loses them by design) and unwritten outputs."""
        from pytest_toolbench.results.completeness import completeness_verdict, output_verdict

        st = self.st
        out = []
        if st.missing and st.interrupted_by is None:
            out.append(completeness_verdict(st.missing, len(st.tracker.expected)))
        if st.output_failures:
            out.append(output_verdict(st.output_failures))
        return out

    def _run_status(self, pytest_status: int) -> int:
        """The exit status: an unwritten output (13) wins; an interruption or internal error
        keeps pytest's; then lost cases (12); then the gates' status, or pytest's without gates."""
        st = self.st
        if st.output_failures:
            return int(ToolbenchExit.OUTPUT_ERROR)
        if pytest_status in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            return int(pytest_status)
        if st.missing:
            return int(ToolbenchExit.INCOMPLETE)
        if st.settings.gates:
            return int(exit_status(st.verdicts))
        return int(pytest_status)

    def _run_info_status(self, status: int) -> dict[str, Any]:
        st = self.st
        return {"exit_status": status, "partial": st.partial,
                "missing_cases": list(st.missing),
                "output_errors": [f.message() for f in st.output_failures]}

    def _write_output(self, what: str, path: Any, write: Any) -> None:
        """A report writer's I/O error (full disk, EIO...) is an output failure, never a traceback
        that leaves the other reports unwritten."""
        try:
            write()
        except OSError as exc:
            failure = OutputFailure.of(what, path, exc)
            if failure not in self.st.output_failures:
                self.st.output_failures.append(failure)
            if self.st.verdicts:  # the gate table and JUnit show it (one verdict for all)
                from pytest_toolbench.results.completeness import output_verdict

                self.st.verdicts = [v for v in self.st.verdicts if v.kind != "output"]
                self.st.verdicts.append(output_verdict(self.st.output_failures))

    def _summaries(self, notes: list[str], repeats: Any) -> tuple[str, str]:
        """(the terminal's text, the full text for Allure). The terminal ends on one screen
        (report/terminal.py); ``-v`` puts every table above it. Sections between the two, in
        this order: the repeats (pass@k), then the ``--baseline`` comparison (its table and the
        cases that changed); the Allure text has everything at 120 columns."""
        from pytest_toolbench.report.terminal import data_notes, render_details, render_overview

        st = self.st
        assert st.metrics is not None
        verbose = self.config.get_verbosity() > 0
        width = max(40, self.config.get_terminal_writer().fullwidth)
        sections = ""
        if repeats is not None:
            from pytest_toolbench.report.repeats_text import render_repeats

            sections += render_repeats(repeats, width=width)
        if st.comparison is not None:  # --baseline: comparison table and the cases that changed
            from pytest_toolbench.compare.render import baseline_summary

            sections += baseline_summary(st.comparison)
        first_data = next((i for i, n in enumerate(notes) if n.startswith("data: ")), len(notes))
        other = [n for n in notes if not n.startswith("data: ")]
        screen_notes = (other[:first_data] + data_notes(st.data_sources, verbose=verbose)
                        + other[first_data:])
        details = render_details(st.metrics, width=width) if verbose else ""
        screen = render_overview(st.metrics, width=width, run_notes=screen_notes,
                                 details_hint=not verbose)
        full = (render_details(st.metrics, width=120) + sections
                + render_overview(st.metrics, width=120, run_notes=notes, details_hint=False))
        if verbose:
            screen = "== overview ==\n" + screen
        return details + sections + screen, full

    def _ensure_suite_sizes(self, covered: dict[str, int]) -> None:
        """Suite sizes of benchmarks the session start did not load (e.g. a run from a test file
        outside ``suites/``); a benchmark whose data cannot be read is left unknown."""
        for name in covered:
            if name not in self.st.suite_sizes and name in registry():
                try:
                    b = registry()[name]
                    self.st.suite_sizes[name] = len(b.load_cases(self.st.settings.data_dir, b.scenarios))
                except Exception:  # noqa: BLE001 - only a note depends on it
                    pass

    def partial_notes(self) -> list[str]:
        from pytest_toolbench.results.completeness import missing_note

        st = self.st
        notes = [f"PARTIAL RESULTS: {f.message().removeprefix('pytest-toolbench: ')}; the run "
                 "stopped" for f in st.output_failures]
        if st.interrupted_by is not None:
            notes.append(f"PARTIAL RESULTS: the run was interrupted ({st.interrupted_by}); "
                         "metrics cover only the cases that finished")
        if st.missing:
            notes.append(missing_note(st.missing, len(st.tracker.expected)))
        return notes

    def _no_case_ran(self, session: pytest.Session, exitstatus: int) -> None:
        """A toolbench run in which no case ran fails with NO_CASES (gates or not): passing gates
        on nothing, or a green CI job that evaluated nothing, would be wrong."""
        st = self.st
        if not st.targeted or self.config.option.collectonly:
            return
        from pytest_toolbench.runs.record import mark_ended

        no_cases = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED,
                                  pytest.ExitCode.NO_TESTS_COLLECTED)
        if st.output_failures or (st.missing and no_cases):  # cases were selected but all lost
            session.exitstatus = self._run_status(exitstatus)
            notes = self.partial_notes()
            st.summary = "".join(f"{n}\n" for n in notes) + f"exit status {session.exitstatus}\n"
            self._write_output("run index", _run_dir(st) / "run.json", lambda: mark_ended(
                _run_dir(st), partial=True, interrupted_by=st.interrupted_by,
                exit_status=int(session.exitstatus)))
            if st.settings.gates:
                st.verdicts = self._run_verdicts()
                from pytest_toolbench.report.junit_gates import write_gate_testcases

                write_gate_testcases(self.config, st.verdicts)
            return
        mark_ended(_run_dir(st), partial=st.interrupted_by is not None,
                   interrupted_by=st.interrupted_by,
                   exit_status=int(ToolbenchExit.NO_CASES if no_cases else exitstatus))
        if no_cases:
            session.exitstatus = int(ToolbenchExit.NO_CASES)
            st.summary = ("pytest-toolbench: no case ran (the selection, -k/-m or --lf left none); "
                          f"exit status {int(ToolbenchExit.NO_CASES)}\n")
            if st.settings.gates:
                st.verdicts = [
                    GateVerdict(gate=str(parse_gate(g)), actual=None, passed=False,
                                reason="no case ran") for g in st.settings.gates
                ]
                from pytest_toolbench.report.junit_gates import write_gate_testcases

                write_gate_testcases(self.config, st.verdicts)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        st = self.st
        if not st.summary:
            return
        terminalreporter.write_sep("=", "pytest-toolbench")
        terminalreporter.write_line(f"model: {st.settings.model}   run: {st.run_id}")
        terminalreporter.write_line(wall_time_note(st))  # now: the reports are written
        warning = sandbox_warning(st.sandbox_states)
        if warning:
            terminalreporter.write_line(warning, red=True, bold=True)
        terminalreporter.write(st.summary)
        if st.recovered:
            terminalreporter.write_line(
                f"{st.recovered} result(s) whose reports never arrived were recovered from the "
                "workers' journals"
            )
        if st.settings.json_path and st.metrics is not None:
            terminalreporter.write_line(f"JSON report: {st.settings.json_path}")
        if st.settings.md_path and st.metrics is not None:
            terminalreporter.write_line(f"Markdown summary: {st.settings.md_path}")
        if st.metrics is not None:
            line = f"run folder: {_run_dir(st)}"
            more = " (results.jsonl, report.json; toolbench runs lists it)"
            fits = len(line + more) <= terminalreporter._tw.fullwidth
            terminalreporter.write_line(line + more if fits else line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The gate table goes last, after pytest's own closing lines, so a CI log ends on it."""
        st = self.st
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if not st.verdicts or reporter is None or st.gates_printed:
            return
        from pytest_toolbench.report.terminal import render_gates

        st.gates_printed = True
        gates_status = exit_status(st.verdicts)
        # the status the run really exits with (e.g. 5 when no case ran), not only the gates'
        status = int(self.session.exitstatus) if self.session is not None else int(gates_status)
        reporter.write_sep("=", "pytest-toolbench gates")
        reporter.write(render_gates(st.verdicts, width=max(40, reporter._tw.fullwidth)))
        # never PASSED on a run that exits non-zero (lost cases, an unwritten output, Ctrl-C)
        word = "PASSED" if gates_status is ToolbenchExit.OK and status == 0 else "FAILED"
        name = ToolbenchExit(status).name if status in ToolbenchExit._value2member_map_ else "?"
        if status == ToolbenchExit.OUTPUT_ERROR:
            why = "an output could not be written, so the run stopped: " + "; ".join(
                f"{f.path}: {f.error}" for f in st.output_failures)
        elif status == ToolbenchExit.INCOMPLETE:
            from pytest_toolbench.results.completeness import missing_text

            why = missing_text(st.missing, len(st.tracker.expected))
        elif status == gates_status:
            why = "the exit status is decided by the gates, not by single cases"
        elif status == ToolbenchExit.NO_CASES:
            why = "no case ran, so no gate could pass"
        else:
            why = (f"not the gates' {int(gates_status)} {gates_status.name}: the run did not "
                   "finish normally")
        reporter.write_line(
            f"gates {word} (exit status {status} {name}): {why}"
            + (" [partial run]" if st.partial else "")
        )


def wall_time_note(st: ToolbenchState) -> str:
    """``wall time 3:41 (model conversion 2:31, vLLM start 0:58)``: the whole run as a user
    waited for it, from the plugin's import, which pytest's own "in N s" (counted from its
    session start, after a conversion) does not show."""
    from pytest_toolbench.runtime.startup_progress import clock

    parts = [f"{k} {clock(v)}" for k, v in (st.startup.durations if st.startup else {}).items()]
    if st.server is not None and not st.server.started:
        parts.append("vLLM never started: no request missed the cache")
    return f"wall time {clock(time.monotonic() - PROCESS_T0)}" + (f" ({', '.join(parts)})" if parts else "")


def summary_properties(result: CaseResult) -> list[tuple[str, object]]:
    props: list[tuple[str, object]] = [("toolbench.outcome", result.outcome.value)]
    props += [(f"toolbench.{k}", v) for k, v in sorted(result.values.items())]
    if result.error is not None:
        props.append(("toolbench.error_kind", result.error.kind))
    if result.failure_message:
        props.append(("toolbench.failure_message", result.failure_message[:500]))
    retries = result.details.get("endpoint_retries")
    if retries:
        props.append(("toolbench.endpoint_retries", retries["count"]))
    return props


def run_info(config: pytest.Config, st: ToolbenchState) -> dict[str, Any]:
    settings = st.settings.model_dump(mode="json", exclude={"api_key"})
    return {
        "run_id": st.run_id,
        "started": st.started,
        "finished": time.time(),
        "toolbench_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "settings": settings,
        "server": server_info_for_worker(st.server),
        "datasets": dataset_checksums(st.settings.data_dir, {r.benchmark for r in st.results.values()}),
        "data_sources": [d.model_dump(mode="json") for d in st.data_sources],
        "partial": st.partial,
        "interrupted_by": st.interrupted_by,
        "missing_cases": list(st.missing),
        "output_errors": [f.message() for f in st.output_failures],
        "n_results": len(st.results),
        "pytest_args": redact_secret_args(config.invocation_params.args),
        "sandbox": merge_isolation_states(st.sandbox_states),  # None: no tool sandbox started
    }


def sandbox_warning(states: list[dict[str, Any]]) -> str | None:
    """The terminal warning, only when tool code really ran without the kernel layers (the pool
    refuses that unless ``--sandbox-insecure``); the flag alone on a capable machine says nothing."""
    merged = merge_isolation_states(states)
    if merged is None or merged["kernel_isolation"]:
        return None
    why = "; ".join(f"{k}: {v}" for k, v in merged["missing_notes"].items())
    return ("WARNING: tool code ran WITHOUT kernel isolation (--sandbox-insecure; missing "
            f"{', '.join(merged['missing_layers'])}: {why}); contained by the audit hook only, "
            "do not trust this run with hostile datasets")


_SECRET_OPTION_SUFFIXES = ("-key", "-token", "-secret", "-password")


def redact_secret_args(args: Iterable[object]) -> list[str]:
    """The command line as reported, with the value of any key/token/secret option masked.

    Reports are shared (CI artifacts, Allure); a secret passed as ``--api-key X`` must not travel
    with them.
    """
    out: list[str] = []
    hide_next = False
    for raw in args:
        arg = str(raw)
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        secret = name.startswith("--") and name.lower().endswith(_SECRET_OPTION_SUFFIXES)
        if secret and eq:
            out.append(f"{name}=***")
        else:
            out.append(arg)
            hide_next = secret
    return out


def dataset_checksums(data_dir: Path | None, benchmarks: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if data_dir is None:
        return out
    for name in sorted(benchmarks):
        folder = data_dir / name
        if folder.is_dir():
            for path in sorted(p for p in folder.iterdir() if p.is_file()):
                out[str(path)] = file_sha256(path)
    return out


def run_dir(config: pytest.Config) -> Path:
    """This run's folder (journals, server log), the same path in controller and workers."""
    return _run_dir(state(config))


def is_xdist_controller(config: pytest.Config) -> bool:
    return not is_worker(config) and bool(getattr(config.option, "numprocesses", None))


_MADE_RUN_DIRS: set[Path] = set()


def _run_dir(st: ToolbenchState) -> Path:
    path = st.settings.runs_dir / st.run_id
    if path not in _MADE_RUN_DIRS:  # once per process: it was a mkdir per result (issue 11)
        path.mkdir(parents=True, exist_ok=True)
        _MADE_RUN_DIRS.add(path)
    return path
