"""pytest glue, and nothing else: options, markers, parametrisation, result transport, summary.

Results travel the pytest way (anchors §3.2): a worker attaches each finished case's
:class:`CaseResult` as JSON to its ``TestReport.user_properties``; pytest-xdist serialises reports
to the controller, whose ``pytest_runtest_logreport`` collects them. Without xdist the same hook
runs in-process, so ``-n 0`` and ``-n 8`` share one code path and give identical metrics.
The controller also appends every result to a journal as it arrives, so an interrupted run keeps
what it had. ``pytest_sessionfinish`` aggregates, evaluates gates and writes the reports.
"""

from __future__ import annotations

import hashlib
import platform
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench import __version__
from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.base import Benchmark, Case, HasReportTables
from pytest_toolbench.benchmarks.dataset_errors import DatasetError
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.factory import build_model
from pytest_toolbench.options import add_options, settings_from_config
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.gates import (
    GateVerdict,
    error_rate_verdicts,
    evaluate_gates,
    parse_gate,
)
from pytest_toolbench.results.journal import ResultJournal, recover_missing
from pytest_toolbench.runtime.server import ManagedServer, server_info_for_worker

RESULT_PROPERTY = "toolbench_result"
RESULT_KEY = pytest.StashKey[CaseResult]()
SENT_KEY = pytest.StashKey[bool]()
STATE_KEY = pytest.StashKey["ToolbenchState"]()


@dataclass
class ToolbenchState:
    """Controller-side state of one run."""

    settings: RunSettings
    run_id: str
    started: float = field(default_factory=time.time)
    results: dict[str, CaseResult] = field(default_factory=dict)
    journal: ResultJournal | None = None
    server: ManagedServer | None = None
    cases: dict[str, list[Case]] = field(default_factory=dict)
    metrics: RunMetrics | None = None
    verdicts: list[GateVerdict] = field(default_factory=list)
    summary: str = ""
    recovered: int = 0


def state(config: pytest.Config) -> ToolbenchState:
    return config.stash[STATE_KEY]


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


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
            parse_gate(gate)
        if not is_worker(config) and settings.resolved_backend == "openai":
            build_model(settings)  # fails fast on a missing key; sends no request
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-toolbench: {exc}") from exc
    run_id = (
        config.workerinput["toolbench_run_id"]
        if is_worker(config)
        else time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    )
    config.stash[STATE_KEY] = ToolbenchState(settings=settings, run_id=run_id)
    if not is_worker(config):
        config.pluginmanager.register(ControllerHooks(config), "toolbench-controller")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the one vLLM server of the run on the controller, before xdist starts workers."""
    config = session.config
    st = state(config)
    if is_worker(config) or config.option.collectonly or not _has_toolbench_tests(config):
        return
    if st.settings.resolved_backend == "vllm" and not st.settings.base_url:
        st.server = ManagedServer.start(st.settings, log_dir=_run_dir(st))
        config.add_cleanup(st.server.stop)


def _has_toolbench_tests(config: pytest.Config) -> bool:
    """Whether this run needs the model server: it targets the suites, or names a model/backend.

    Under xdist the controller does not collect, so it cannot look at the items themselves; the
    rule is kept simple and predictable instead: a path under (or holding) ``suites/``, or an
    explicit ``--model`` / ``--backend vllm``. Unit-test runs therefore never start vLLM.
    """
    if config.getoption("--model") or config.getoption("--backend") == "vllm":
        return True
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if "suites" in path.parts or (path / "suites").is_dir():
            return True
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist hook (controller side)
    st = state(node.config)
    node.workerinput["toolbench_run_id"] = st.run_id
    node.workerinput["toolbench_server"] = server_info_for_worker(st.server)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = config.stash.get(STATE_KEY, None)
    if st is not None and st.server is not None:
        st.server.stop()
        st.server = None


# --------------------------------------------------------------------------- collection
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("toolbench")
    if marker is None or "case" not in metafunc.fixturenames:
        return
    name = marker.args[0] if marker.args else marker.kwargs["benchmark"]
    cases = cases_for(metafunc.config, name)
    benchmark = registry()[name]
    metafunc.parametrize(
        "case", [pytest.param(c, id=c.id, marks=case_marks(benchmark, c)) for c in cases]
    )


def cases_for(config: pytest.Config, name: str) -> list[Case]:
    """The benchmark's cases after --scenario / --sample-ids / --limit, in a stable order."""
    st = state(config)
    if name in st.cases:
        return st.cases[name]
    settings = st.settings
    benchmark = registry()[name]
    scenarios = benchmark.scenarios
    if settings.scenarios:
        unknown = set(settings.scenarios) - {s for b in registry().values() for s in b.scenarios}
        if unknown:
            raise pytest.UsageError(f"unknown --scenario {sorted(unknown)}")
        scenarios = tuple(s for s in benchmark.scenarios if s in settings.scenarios)
    try:
        cases = benchmark.load_cases(settings.data_dir, scenarios)
    except (DatasetError, FileNotFoundError) as exc:
        raise pytest.UsageError(f"pytest-toolbench: cannot load {name} data: {exc}") from exc
    if settings.sample_ids:
        wanted = set(settings.sample_ids)
        cases = [c for c in cases if c.sample_id in wanted]
    if settings.limit is not None:
        keep: list[str] = []
        for c in cases:
            if c.sample_id not in keep:
                keep.append(c.sample_id)
        kept = set(keep[: settings.limit])
        cases = [c for c in cases if c.sample_id in kept]
    st.cases[name] = cases
    return cases


def case_marks(benchmark: Benchmark, case: Case) -> list[pytest.MarkDecorator]:
    marks = [getattr(pytest.mark, benchmark.name), pytest.mark.scenario(name=case.scenario)]
    for label, keyword in benchmark.label_markers.items():
        if label in case.labels:
            marks.append(getattr(pytest.mark, label)(**{keyword: case.labels[label]}))
    return marks


# --------------------------------------------------------------------------- result transport
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Attach the case's result to the first report that ends the test (call, or a failed setup)."""
    report = yield
    result = item.stash.get(RESULT_KEY, None)
    sent = item.stash.get(SENT_KEY, False)
    if result is not None and not sent and (report.when == "call" or report.failed):
        # On this report only (not item.user_properties, which pytest copies into every phase's
        # report), so the controller receives each result exactly once.
        report.user_properties.append((RESULT_PROPERTY, result.model_dump_json()))
        item.stash[SENT_KEY] = True
    if result is not None and report.when == "teardown":
        # JUnit XML reads a test case's properties from its teardown report.
        report.user_properties.extend(summary_properties(result))
    return report


class ControllerHooks:
    """Hooks that only make sense in the process that sees every report (controller or -n 0)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.st = state(config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the result and drop the bulky JSON from the report, so reporters running after
        us (JUnit XML) carry only the compact toolbench.* summary, not the transcript."""
        kept: list[tuple[str, object]] = []
        for name, value in report.user_properties:
            if name != RESULT_PROPERTY:
                kept.append((name, value))
                continue
            result = CaseResult.model_validate_json(value)  # type: ignore[arg-type]
            self.st.results[result.case_id] = result
            if self.st.journal is None:
                self.st.journal = ResultJournal(_run_dir(self.st) / "results.jsonl")
            self.st.journal.append(result)
        report.user_properties = kept

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        st = self.st
        if is_xdist_controller(self.config):
            st.recovered = recover_missing(
                list(run_dir(self.config).glob("worker-*.jsonl")), st.results
            )
        if not st.results:
            return
        from pytest_toolbench.report.terminal import render_summary

        results = list(st.results.values())
        benchmarks = {n: b for n, b in registry().items() if n in {r.benchmark for r in results}}
        st.metrics = aggregate(
            results,
            {n: b.metrics for n, b in benchmarks.items()},
            {n: b.breakdown_labels for n, b in benchmarks.items()},
            scenario_order={n: b.scenarios for n, b in benchmarks.items()},
            n_boot=st.settings.bootstrap_samples,
            seed=st.settings.seed,
        )
        for name, benchmark in benchmarks.items():
            if isinstance(benchmark, HasReportTables):
                own = sorted((r for r in results if r.benchmark == name), key=lambda r: r.case_id)
                st.metrics.tables.extend(benchmark.report_tables(own))
        if st.settings.gates:
            st.verdicts = evaluate_gates([parse_gate(g) for g in st.settings.gates], st.metrics)
            st.verdicts += error_rate_verdicts(st.metrics, st.settings.max_error_rate)
            if exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
                ok = all(v.passed for v in st.verdicts)
                session.exitstatus = pytest.ExitCode.OK if ok else pytest.ExitCode.TESTS_FAILED
        st.summary = render_summary(st.metrics, st.verdicts)
        if st.settings.json_path:
            from pytest_toolbench.report.json_report import write_json_report

            write_json_report(
                st.settings.json_path, st.metrics, results, run_info(self.config, st),
                gates=st.verdicts,
            )
        if self.config.getoption("--alluredir", None):
            from pytest_toolbench.report.allure_report import attach_run_metrics

            attach_run_metrics(st.metrics, st.summary)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        st = self.st
        if not st.summary:
            return
        terminalreporter.write_sep("=", "pytest-toolbench")
        terminalreporter.write_line(
            f"model: {st.settings.model}   run: {st.run_id}   "
            f"results journal: {_run_dir(st) / 'results.jsonl'}"
        )
        if st.settings.sandbox.insecure:
            terminalreporter.write_line(
                "WARNING: --sandbox-insecure: tool code ran without kernel isolation where it was "
                "unavailable (audit hook only); do not trust this run with hostile datasets"
            )
        terminalreporter.write(st.summary)
        if st.recovered:
            terminalreporter.write_line(
                f"{st.recovered} result(s) whose reports never arrived were recovered from the "
                "workers' journals"
            )
        if st.settings.json_path:
            terminalreporter.write_line(f"JSON report: {st.settings.json_path}")
        if st.settings.gates:
            verdict = "PASSED" if all(v.passed for v in st.verdicts) else "FAILED"
            terminalreporter.write_line(
                f"gates {verdict}: the exit status is decided by the gates, not by single cases"
            )


def summary_properties(result: CaseResult) -> list[tuple[str, object]]:
    props: list[tuple[str, object]] = [("toolbench.outcome", result.outcome.value)]
    props += [(f"toolbench.{k}", v) for k, v in sorted(result.values.items())]
    if result.error is not None:
        props.append(("toolbench.error_kind", result.error.kind))
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
        "n_results": len(st.results),
        "pytest_args": [str(a) for a in config.invocation_params.args],
    }


def dataset_checksums(data_dir: Path | None, benchmarks: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if data_dir is None:
        return out
    for name in sorted(benchmarks):
        folder = data_dir / name
        if folder.is_dir():
            for path in sorted(p for p in folder.iterdir() if p.is_file()):
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_dir(config: pytest.Config) -> Path:
    """This run's folder (journals, server log), the same path in controller and workers."""
    return _run_dir(state(config))


def is_xdist_controller(config: pytest.Config) -> bool:
    return not is_worker(config) and bool(getattr(config.option, "numprocesses", None))


def _run_dir(st: ToolbenchState) -> Path:
    path = st.settings.cache_dir.parent / "runs" / st.run_id
    path.mkdir(parents=True, exist_ok=True)
    return path
