"""pytest's entry points into pytest-toolbench: each hook hands over to ``session/``.

A run, as pytest drives it: ``pytest_configure`` checks the settings and makes the run's state
(session/run_start.py, the SDK process decided there, session/sdk.py); the session start
validates the selection and its data before any model call (session/selection.py) and prepares
a vLLM server if the run needs one; collection parametrises each suite over its cases; every
finished case travels to the controller on its test report (session/transport.py), which
journals it, lets the gates decide single cases and, at the session end, turns the results into
one run record and writes every report from it (session/controller.py, session/finish.py,
session/end_summary.py). SIGTERM and SIGHUP end a run like Ctrl-C (session/signals.py).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_toolbench.models.sdk_process import launcher  # the standard library only

# First, before the imports below (pydantic, the SDK's models): the SDK process may start now,
# on a guess from the command line, so its own imports overlap pytest's; configure decides
# (session/sdk.py).
launcher.start_at_import()

from pytest_toolbench.options import add_options  # noqa: E402  (after the SDK process's start)
from pytest_toolbench.report import progress  # noqa: E402
from pytest_toolbench.runtime.logger_registry import guard_logger_registry  # noqa: E402
from pytest_toolbench.runtime.upcoming import set_current_item  # noqa: E402
from pytest_toolbench.session import case_timing, gc_tuning, orphan, run_start, transport  # noqa: E402
from pytest_toolbench.session.controller import ControllerHooks  # noqa: E402
from pytest_toolbench.session.selection import (  # noqa: E402
    has_toolbench_tests,
    parametrize_cases,
    suite_module,
    warn_shared_cases,
)
from pytest_toolbench.session.data_warning import warn_left_out_entry_points  # noqa: E402
from pytest_toolbench.session.signals import (  # noqa: E402
    install_interrupts,
    install_worker_hangup,
    note_worker,
)
from pytest_toolbench.session.state import is_worker, state  # noqa: E402


# --------------------------------------------------------------------------- configuration
def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # The harness's fixtures (model, runner, case_result...) come with the plugin, so a suite
    # outside this repository needs no conftest of ours.
    from pytest_toolbench.session import fixtures

    if not config.pluginmanager.is_registered(fixtures):  # e.g. -p pytest_toolbench.session.fixtures
        config.pluginmanager.register(fixtures, "pytest_toolbench.session.fixtures")
    run_start.register_markers(config)
    if has_toolbench_tests(config):  # before the run's first thread (a vLLM server's owner)
        guard_logger_registry()
    st = run_start.configure_run(config)
    from pytest_toolbench.report.allure_and_plots import configure_allure

    configure_allure(config)
    progress.install(config, worker=is_worker(config), selection=st)  # the live progress line
    if not is_worker(config):
        config.pluginmanager.register(ControllerHooks(config), "toolbench-controller")
        if st.settings.view_dir is not None:  # --toolbench-view: after the controller's report
            from pytest_toolbench.view.pytest_hook import ViewRefresh

            config.pluginmanager.register(ViewRefresh(st.settings.view_dir, st.settings.runs_dir),
                                          "toolbench-view")
        install_interrupts(config)
    else:
        config.pluginmanager.register(transport.WorkerReportHooks(config), "toolbench-worker-reports")
        run_start.label_worker_results(config)
        orphan.watch_controller(config)  # a controller killed under it: session/orphan.py
        install_worker_hangup()


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_alluredir(config: pytest.Config) -> None:
    """Before allure-pytest's own configure; the other outputs are checked in ``pytest_configure``."""
    run_start.check_alluredir(config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Prepare the one vLLM server of the run on the controller, before xdist starts workers
    (they get its address)."""
    config = session.config
    if not is_worker(config):  # listing commands too: a package whose benchmark, pins or
        warn_left_out_entry_points(config)  # provider did not load, named once
    if run_start.starts_run(config) and run_start.needs_managed_server(state(config).settings):
        run_start.prepare_server(config)


@pytest.hookimpl(wrapper=True, specname="pytest_sessionstart")
def pytest_sessionstart_validate(session: pytest.Session) -> Generator[None, None, None]:
    """Without a server to start, validate after xdist has started its workers, so their
    start-up (imports, collection) overlaps the controller's reading of the data. No model call
    can come first: a worker runs a test only once the controller's test loop, which begins
    after every sessionstart hook, hands it one.

    A wrapper, not ``trylast``: xdist's own sessionstart, which starts the workers, is ``trylast``
    too and registered later, so pluggy called it after a ``trylast`` validation."""
    result = yield
    config = session.config
    if run_start.starts_run(config) and not run_start.needs_managed_server(state(config).settings):
        try:
            run_start.validate_and_record(config)
        except BaseException:  # refused (bad data, no case, Ctrl-C): no worker will run
            run_start.stop_started_workers(config)
            raise
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist hook (controller side)
    run_start.worker_input(node)
    orphan.tell_worker(node)
    note_worker(node.config, node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` (xdist's default) with every worker's queue kept as deep as its run-ahead
    window (runtime/xdist_scheduling.py); other ``--dist`` modes and non-toolbench runs keep
    xdist's own scheduler."""
    if config.getvalue("dist") != "load" or not has_toolbench_tests(config):
        return None
    from pytest_toolbench.runtime.xdist_scheduling import RunAheadScheduling

    window = 2 * state(config).settings.concurrency + 2  # session/fixtures.py's look-ahead + 2
    return RunAheadScheduling(config, log, window=window)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands what the controller reads at ``pytest_testnodedown`` (the controller's
    own session end is session/controller.py)."""
    transport.hand_over_worker_output(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    gc_tuning.freeze_at_exit()
    run_start.stop_run_processes(config)


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Before pytest's terminal reporter prints the interruption: every traceback entry given a
    line number, which a signal at a line-less instruction leaves without (it crashed pytest's
    report, exit 1: session/traceback_lines.py)."""
    from pytest_toolbench.session.traceback_lines import number_traceback_lines

    number_traceback_lines(excinfo)


# --------------------------------------------------------------------------- collection
@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Any, parent: pytest.Collector):  # type: ignore[no-untyped-def]
    collected = yield
    replaced = suite_module(file_path, parent, collected)
    return collected if replaced is None else replaced


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_cases(metafunc)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    warn_shared_cases(session)
    gc_tuning.freeze_collected()


# --------------------------------------------------------------------------- result transport
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    set_current_item(item)  # before its fixtures are set up (runtime/upcoming.py)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    case_timing.retime(item, report)
    transport.attach_result(item, call, report)
    return report
