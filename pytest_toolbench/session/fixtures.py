"""The harness's fixtures: the model under test, the benchmarks' environment, the case runtime
and each test's ``case_result``.

Session scope: one model, one environment (sandbox pool, embedders) and one scheduler per pytest
process (under xdist, per worker; the vLLM server behind the model is shared by all workers, see
servers/managed.py). The runtime builds each benchmark's runner from ``toolbench_env``
(``make_runner(env)``, benchmarks/base.py), so a benchmark needs no fixtures of its own. A suite
gets these through the plugin, or by registering this module (``-p
pytest_toolbench.session.fixtures``, or ``pytest_plugins`` in a conftest, as this repository's
``conftest.py`` does; ``fixtures/toolbench.py`` only re-exports them). The suites import
``assert_case_passed`` from here (benchmarks/suite_files.py writes them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.benchmarks.data_source import data_fingerprint
from pytest_toolbench.benchmarks.base import Case, CaseRunner, EnvironmentUnavailable, run_open_protocols
from pytest_toolbench.config import RunSettings
from pytest_toolbench.environments.retrieval import Embedders
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.options import project_root
from pytest_toolbench.session.case_timing import timed_wait
from pytest_toolbench.session.orphan import killed_with_controller, stop_orphaned_worker
from pytest_toolbench.session.signals import interrupts_held
from pytest_toolbench.session.sdk import sdk_link
from pytest_toolbench.session.state import is_worker, record_sandbox_state, run_dir, state
from pytest_toolbench.session.transport import FROM_RESULT_CACHE, RESULT_KEY
from pytest_toolbench.report.allure_report import attach_case, note_case_result
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results import case_store
from pytest_toolbench.runtime.result_cache import ResultCache, result_cache_for
from pytest_toolbench.results.infra_errors import not_scored_text
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.runtime.case_runtime import CaseRuntime
from pytest_toolbench.runtime.environment import RunEnvironment
from pytest_toolbench.runtime.upcoming import case_of, cases_of, current_item, new_upcoming_items

if TYPE_CHECKING:
    # Each loads in the fixture that needs it: this module is registered in every pytest
    # command of the environment and every xdist worker, most of which start no model.
    from pytest_toolbench.models.spec import ServerInfo
    from pytest_toolbench.sandbox.pool import ToolSandbox


@pytest.fixture(scope="session")
def toolbench_settings(pytestconfig: pytest.Config) -> RunSettings:
    return state(pytestconfig).settings


@pytest.fixture(scope="session")
def toolbench_server_info(pytestconfig: pytest.Config) -> ServerInfo | None:
    """URL, served name, pid and identity of the run's managed model server (None when not
    managed); an xdist worker is told them by the controller (session/run_start.py)."""
    from pytest_toolbench.models.spec import ServerInfo
    from pytest_toolbench.servers.managed import server_info

    if hasattr(pytestconfig, "workerinput"):
        told = pytestconfig.workerinput.get("toolbench_server")
        return ServerInfo.model_validate(told) if told is not None else None
    return server_info(state(pytestconfig).server)


@pytest.fixture(scope="session")
def toolbench_model(
    pytestconfig: pytest.Config, toolbench_settings: RunSettings,
    toolbench_server_info: ServerInfo | None,
) -> ChatModel:
    """The model under test (closed by the runtime, in the loop that used it)."""
    from pytest_toolbench.models.factory import build_model

    try:
        return build_model(toolbench_settings, server=toolbench_server_info,
                           sdk=sdk_link(pytestconfig), open_protocols=run_open_protocols(registry()))
    except ValueError as exc:
        pytest.exit(f"pytest-toolbench: {exc}", returncode=int(ToolbenchExit.USAGE_ERROR))


@pytest.fixture(scope="session")
def toolbench_env(pytestconfig: pytest.Config, toolbench_settings: RunSettings) -> Iterator[RunEnvironment]:
    """The environment every benchmark's runner is built from (benchmarks/base.py,
    ``make_runner(env)``): settings, options, and the embedders, sandbox and run folder, each made
    on first use. The cases it offers a benchmark are the ones this process collected.

    The session comes from the test being set up (``current_item()``), not from ``request``:
    ``request`` in a session fixture puts it in the closure of every test that uses the case
    runtime, and pytest builds a fixture definition (an ``inspect.signature``) for it per test."""
    config = pytestconfig
    item = current_item()
    if item is None:  # only the plugin's pytest_runtest_setup sets it; without it no case runs
        raise RuntimeError("pytest-toolbench: toolbench_env set up outside a test's setup "
                           "(is the pytest_toolbench plugin registered?)")
    session = item.session
    env = RunEnvironment(
        toolbench_settings,
        run_dir=lambda: run_dir(config),
        cases=lambda name: list(cases_of(session.items, name)),
        on_sandbox_state=lambda isolation: record_sandbox_state(config, isolation),
    )
    yield env
    env.close()


def runner_or_stop(env: RunEnvironment, benchmark: str) -> CaseRunner:
    """The benchmark's runner; a resource it needs that cannot be had here (an embedder that does
    not load, a sandbox without its isolation layers) stops the run with one line before any
    model call, instead of failing case after case."""
    try:
        return env.runner(benchmark)
    except EnvironmentUnavailable as exc:
        pytest.exit(f"pytest-toolbench: {exc}", returncode=int(ToolbenchExit.USAGE_ERROR))


@pytest.fixture(scope="session")
def tool_sandbox(toolbench_env: RunEnvironment) -> ToolSandbox:
    """The run's tool sandbox (a warm pool of isolated processes for untrusted tool code),
    started on first request; the isolation it got goes into the run's report."""
    try:
        return toolbench_env.sandbox
    except EnvironmentUnavailable as exc:
        pytest.exit(f"pytest-toolbench: {exc}", returncode=int(ToolbenchExit.USAGE_ERROR))


@pytest.fixture(scope="session")
def toolbench_embedders(toolbench_env: RunEnvironment) -> Embedders:
    """Sentence-transformers embedders (one per name, loaded on first use) and the on-disk
    embedding cache the benchmarks build their FAISS indexes from."""
    return toolbench_env.embedders


@pytest.fixture(scope="session")
def toolbench_runtime(
    pytestconfig: pytest.Config, toolbench_settings: RunSettings, toolbench_model: ChatModel,
    toolbench_env: RunEnvironment,
) -> Iterator[CaseRuntime]:
    runtime = CaseRuntime(toolbench_settings, toolbench_model)
    # Each benchmark's runner is built from the environment the first time one of its cases runs.
    runtime.runner_factory = lambda benchmark: runner_or_stop(toolbench_env, benchmark)
    if hasattr(pytestconfig, "workerinput"):
        worker = pytestconfig.workerinput["workerid"]
        runtime.worker_journal = case_store.worker_journal(run_dir(pytestconfig), worker)
    pytestconfig.stash[_RUNTIME_KEY] = runtime  # case_result's way to it (see there)
    stored_results = result_cache_for(runtime.settings, runtime.model, project_root(pytestconfig),
                                      run_data_fingerprint(pytestconfig))
    if stored_results is not None:
        pytestconfig.stash[_RESULT_CACHE_KEY] = stored_results
    yield runtime
    del pytestconfig.stash[_RUNTIME_KEY]  # torn down: no test may reach it any more
    if stored_results is not None:
        del pytestconfig.stash[_RESULT_CACHE_KEY]
        stored_results.close()
    runtime.close()
    if runtime.worker_journal is not None:
        runtime.worker_journal.close()


def run_data_fingerprint(config: pytest.Config) -> str | None:
    """The run's data fingerprint (benchmarks/data_source.py): the controller's (or ``-n 0``'s)
    own data sources, a worker's from the run's index, which the controller wrote after it
    validated the data and before any case could run; None where neither is known."""
    if not is_worker(config):
        return data_fingerprint(state(config).data_sources)
    from pytest_toolbench.runs.record import read_index

    index = read_index(run_dir(config))
    if index is None or index.start is None:
        return None
    return data_fingerprint(index.start.data_sources)


#: The session's case runtime, once ``toolbench_runtime`` has been set up (removed at its teardown).
_RUNTIME_KEY = pytest.StashKey[CaseRuntime]()
#: The run's result cache in this process, beside the runtime (None where it is off).
_RESULT_CACHE_KEY = pytest.StashKey[ResultCache]()


@pytest.fixture
def case_result(case: Case) -> CaseResult:
    """The finished result of this test's case.

    Submits this case and the next ones this process will run (so up to --concurrency cases are
    in flight), then waits for this one. An infrastructure failure fails the *setup*, so pytest
    shows the case as an ERROR, apart from wrong answers. The test's item comes from
    ``current_item()``.

    The runtime is asked for by name once per session, then read from the config's stash: as a
    parameter, it put the runtime and its six session fixtures in every case's fixture closure,
    and pytest looks each one up (and re-registers its finalizers) per test, most of the fixture
    set-up of a run answered from the cache. Nor does it take ``request``: with ``request`` in its
    closure pytest builds a new fixture definition, each with an ``inspect.signature``, five times
    per test (perf/README.md, "Second pass: where the goals stood").

    A case the result cache answers (runtime/result_cache.py) builds no runner: a benchmark's
    runner, and whatever of the environment it needs (an embedder, the tool sandbox), is built
    at its first case that misses, so a fully cached re-run builds none. An environment that
    cannot give a runner (``runner_or_stop``) therefore stops the run at the first case that
    needs one, before that case or any later one is submitted, and not in a run whose every
    case is answered, which needs none.
    """
    node = current_item()
    if node is None or case_of(node) is not case:
        raise RuntimeError(f"pytest-toolbench: case {case.id} is not the test being set up ({node})")
    runtime = node.config.stash.get(_RUNTIME_KEY, None)
    if runtime is None:  # the session's first case: pytest sets the session fixtures up
        runtime = _fixture_request(node).getfixturevalue("toolbench_runtime")
    stored_results = node.config.stash.get(_RESULT_CACHE_KEY, None)
    # answered whole, with no request built and no scoring (runtime/result_cache.py)
    hit = stored_results.lookup(case) if stored_results is not None else None
    line: str | None = None
    if hit is not None:
        result, line = hit.result, hit.line()  # its journal line, never dumped again
        node.stash[FROM_RESULT_CACHE] = line
    else:
        # Built once per process and benchmark, at its first case the result cache does not
        # answer: before this case or any upcoming one is submitted (can_run asks for it).
        runtime.ensure_runner(case.benchmark)
        runtime.submit(case)
        lookahead = 2 * runtime.settings.concurrency
        for item in new_upcoming_items(node.session, node, lookahead):
            upcoming = case_of(item)
            if (isinstance(upcoming, Case) and runtime.can_run(upcoming)
                    and not (stored_results is not None and stored_results.has(upcoming))):
                runtime.submit(upcoming)
        try:
            result = timed_wait(node, runtime.result, case)  # its test's time is the case's (case_timing.py)
        except pytest.fail.Exception as stop:  # raised by a timer from outside (pytest-timeout)
            result = runtime.stopped_while_waiting(case, stop)
        if stored_results is not None:
            stored_results.put(case, result)
    # A case failed only because the run's controller was killed (its SDK process went with
    # it) is no infrastructure error but a case the killed run never finished: not recorded,
    # and the orphaned worker stops (session/orphan.py).
    if runtime.worker_journal is not None and killed_with_controller(node.config, result):
        stop_orphaned_worker()
    # The result where the run's end finds it (this item's stash, a worker's journal: the
    # backstop for the report channel, plugin.py) and its Allure note, all or none: a case the
    # run's end counts as run must have its Allure result (session/signals.py).
    with interrupts_held(node.config):
        node.stash[RESULT_KEY] = result
        if runtime.worker_journal is not None:
            if line is not None:
                runtime.worker_journal.append_json(line)
            else:
                runtime.worker_journal.append(result)
        note_case_result(node.nodeid, case, result, result.model or runtime.model.name)
    if result.outcome is Outcome.ERROR and result.error is not None:
        with interrupts_held(node.config):  # labelled whole (assert_case_passed)
            attach_case(result, result.model or runtime.model.name)  # shown with the failed setup
        # pytest prints the message raw (FAILED line, JUnit, Allure): an endpoint's or a tool's
        # text is escaped so it cannot drive the terminal.
        pytest.fail(not_scored_text(result.error.kind, result.error.message), pytrace=False)
    return result


def _fixture_request(item: pytest.Item) -> pytest.FixtureRequest:
    """The item's own fixture request (pytest keeps it as ``Function._request``, the object
    ``request`` resolves to), asked for once per session instead of once per test."""
    request = getattr(item, "_request", None)
    if not isinstance(request, pytest.FixtureRequest):
        raise RuntimeError(f"pytest-toolbench: pytest {pytest.__version__} keeps no fixture request "
                           f"on {item.nodeid}; this plugin needs Function._request")
    return request


def assert_case_passed(result: CaseResult) -> None:
    """Report the case to Allure (inside the test body, so attachments land on the test), then
    fail a wrong answer with the case's short message, not a traceback.

    Labelled whole or not at all: a signal inside attach_case left a result with some labels
    and parameters set, which the run's end completed with a history id of its own (the
    ``case`` parameter not yet its id): the case's history would not line up across runs."""
    node = current_item()
    if node is None:
        attach_case(result, result.model)
    else:
        with interrupts_held(node.config):
            attach_case(result, result.model)
    if result.outcome is not Outcome.PASSED:
        # The message quotes the question, the gold and the model's answer (which may repeat a
        # tool's error): escaped, since pytest prints it raw on its FAILED line.
        pytest.fail(safe_text(result.failure_message or "wrong answer", multiline=True),
                    pytrace=False)
