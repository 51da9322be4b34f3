"""A run's start on the controller: its settings checked and its state made at configure, the
outputs checked before any model call, the data validated and the run's folder opened at session
start, and the one vLLM server of the run prepared; what each xdist worker is told."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench import __version__
from pytest_toolbench.benchmarks import ENTRY_POINT_GROUP, declarations, registry, unknown_benchmark
from pytest_toolbench.benchmarks.base import run_open_protocols
from pytest_toolbench.config import RunSettings
from pytest_toolbench.entry_points import left_out_named
from pytest_toolbench.options import check_base_url, settings_from_config
from pytest_toolbench.results.gates import check_gate_names, parse_gate
from pytest_toolbench.session import sdk
from pytest_toolbench.session.data import WORKER_KEY, resolve_run_data, worker_data_dir
from pytest_toolbench.session.identity import new_run_id
from pytest_toolbench.session.listing import runs_tests
from pytest_toolbench.session.selection import (
    DATA_WARNED_KEY, has_toolbench_tests, targeted_benchmarks, validate_selection,
)
from pytest_toolbench.session.state import (
    STATE_KEY, ToolbenchState, is_worker, is_xdist_controller, run_dir_of, state,
)

#: workerinput key: the controller's folder of parsed data files (benchmarks/parsed_files.py).
PARSED_FILES_KEY = "toolbench_parsed_files"
#: workerinput key: the worker's Allure results name the run (report/allure_report.py RUN_LABEL).
LABEL_RESULTS_KEY = "toolbench_label_results"


def register_markers(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "toolbench(benchmark): a pytest-toolbench suite test")
    config.addinivalue_line("markers", "scenario(name): benchmark scenario of a case")
    # one line per label, naming the benchmarks that have it: `pytest --markers` listed
    # ToolHop's and FamilyTool's hops(n) twice
    labels: dict[tuple[str, str], list[str]] = {}
    for benchmark in declarations().values():  # without loading the benchmarks' modules
        config.addinivalue_line("markers", f"{benchmark.name}: a {benchmark.name} case")
        for label, keyword in benchmark.label_markers.items():
            labels.setdefault((label, keyword), []).append(benchmark.name)
    for (label, keyword), names in labels.items():
        config.addinivalue_line("markers", f"{label}({keyword}): case label {label} "
                                f"({', '.join(names)})")


def configure_run(config: pytest.Config) -> ToolbenchState:
    """The run's settings, checked before anything else happens (gate names, the baseline, every
    output writable, an endpoint model's key), its state, and its SDK process decided."""
    share_parsed_files(config)
    try:
        settings = settings_from_config(config)
        for gate in settings.gates:
            parsed = parse_gate(gate)
            named = parsed.path.split(".")[0]
            if named not in registry() and left_out_named(ENTRY_POINT_GROUP, named):
                # its package is installed but did not load: say why, not only "unknown"
                raise ValueError(f"gate {parsed}: {unknown_benchmark(named)}")
            check_gate_names(parsed, registry())
        baseline = None
        # The comparison's modules (~35 ms of imports) only where a gate or --baseline needs them:
        # this runs in every pytest command of the environment and in every xdist worker.
        if settings.gates or settings.baseline_path is not None:
            from pytest_toolbench.compare.baseline import check_baseline_gates, load_baseline

            check_baseline_gates(settings.gates, settings.baseline_path)
            if not is_worker(config) and settings.baseline_path is not None:
                baseline = load_baseline(settings.baseline_path, settings.gates)
        if starts_run(config):
            from pytest_toolbench.output_paths import check_run_outputs

            refuse = {}
            if settings.view_dir is not None and not is_worker(config):
                from pytest_toolbench.view.site_folder import out_folder_problem

                refuse["--toolbench-view"] = out_folder_problem  # a folder its build would clear
            # every output writable before any model call, each problem in the one list
            check_run_outputs(config, settings, refuse)
        if not is_worker(config) and settings.backend != "auto":
            from pytest_toolbench.models.providers import find_provider
            from pytest_toolbench.option_sources import from_command_line, ini_name

            # an unknown name lists the known ones, and names the ini file when it came from there
            where = None if from_command_line(config, "--backend") else (
                f"{config.inipath or 'ini'}: {ini_name('--backend')} = {settings.backend!r}")
            find_provider(settings.resolved_backend, where)
        if not is_worker(config) and settings.resolved_backend == "openai" and has_toolbench_tests(config):
            if not settings.base_url and os.environ.get("OPENAI_BASE_URL"):
                check_base_url(os.environ["OPENAI_BASE_URL"], "$OPENAI_BASE_URL")
            # fails fast on a missing key; sends no request. With the run's open protocols, as
            # the model under test is built (session/fixtures.py toolbench_model): without them
            # --decoding open planned no parser and warned "no upstream open-model parser fits"
            # for every model, one whose family a benchmark's parser reads included.
            from pytest_toolbench.models.factory import build_model

            build_model(settings, open_protocols=run_open_protocols(registry())
                        if settings.open_protocol else None)
        # the real data fetched and verified now, once, before xdist starts its workers
        settings = resolve_run_data(config, settings)
        # only now: a run refused above (no data offline, an unwritable output) leaves no
        # folder behind in the cache's place, which may be a folder the user never chose
        keep_parsed_files(config, settings)
    except ValueError as exc:  # one ERROR line per problem (every unwritable output)
        from pytest_toolbench.output_paths import problems_of

        raise pytest.UsageError(*(f"pytest-toolbench: {p}" for p in problems_of(exc))) from exc
    run_id = config.workerinput["toolbench_run_id"] if is_worker(config) else new_run_id()  # type: ignore[attr-defined]
    st = config.stash[STATE_KEY] = ToolbenchState(settings=settings, run_id=run_id, baseline=baseline)
    st.sdk = sdk.decide(config, settings)
    return st


def share_parsed_files(config: pytest.Config) -> None:
    """Under xdist, the data files the controller parses are kept for the workers, which read
    them instead of parsing each file again (benchmarks/parsed_files.py)."""
    from pytest_toolbench.benchmarks import parsed_files

    if is_worker(config):
        folder = config.workerinput.get(PARSED_FILES_KEY)  # type: ignore[attr-defined]
        if folder:
            parsed_files.read_shared_parsed_files(folder)
            config.add_cleanup(parsed_files.stop_sharing)
    elif is_xdist_controller(config) and starts_run(config):
        parsed_files.share_parsed_files()
        config.add_cleanup(parsed_files.stop_sharing)


def keep_parsed_files(config: pytest.Config, settings: RunSettings) -> None:
    """A process that runs toolbench cases keeps the data files it parses for the next run, in
    the response cache's folder (benchmarks/parsed_files.py); a plain test session keeps none,
    nor does a run told ``--no-cache`` (it writes nothing into that folder)."""
    if settings.use_cache and runs_tests(config) and has_toolbench_tests(config):
        from pytest_toolbench.benchmarks import parsed_files

        if parsed_files.keep_parsed_files(settings.cache_dir) is not None:
            config.add_cleanup(parsed_files.stop_keeping)


def check_alluredir(config: pytest.Config) -> None:
    """``--alluredir`` is checked before allure-pytest's own configure creates it (which crashes,
    exit 3, on a path it cannot make)."""
    if starts_run(config):
        from pytest_toolbench.output_paths import check_folder

        alluredir = _alluredir(config)
        if alluredir is not None:
            try:
                check_folder(Path(alluredir), "--alluredir")
            except ValueError as exc:
                raise pytest.UsageError(f"pytest-toolbench: {exc}") from None


def starts_run(config: pytest.Config) -> bool:
    """The controller of a command that runs toolbench cases (not a listing, session/listing.py):
    it validates the data, opens the run folder and prepares the vLLM server."""
    return not is_worker(config) and runs_tests(config) and has_toolbench_tests(config)


def needs_managed_server(settings: RunSettings) -> bool:
    return settings.resolved_backend == "vllm" and not settings.base_url


def prepare_server(config: pytest.Config) -> None:
    """Validate the data, then prepare the run's vLLM server (resolved, converted once per
    machine, described now; started on the first cache miss), so bad data never costs a start."""
    validate_and_record(config)
    st = state(config)
    from pytest_toolbench.runtime.startup_progress import StartupProgress
    from pytest_toolbench.servers.managed import ManagedServer

    st.startup = StartupProgress()
    config.add_cleanup(st.startup.close)
    st.server = ManagedServer.prepare(st.settings, log_dir=run_dir_of(st), progress=st.startup)
    config.add_cleanup(st.server.stop)


def validate_and_record(config: pytest.Config) -> None:
    """Validate the selection and its data (session/selection.py); the run's folder then says
    what is running, even if the run is later killed."""
    st = state(config)
    selected = validate_selection(config)
    if st.baseline is not None and st.targeted:
        check_baseline_data(config, selected)
    if st.targeted:
        from pytest_toolbench.runs.record import record_start
        from pytest_toolbench.secret_args import redact_secret_args

        record_start(run_dir_of(st), run_id=st.run_id, suites=st.targeted, started=st.started,
                     settings=st.settings.recorded(),
                     data_sources=[d.model_dump(mode="json") for d in st.data_sources],
                     version=__version__, suite_sizes=dict(st.suite_sizes),
                     pytest_args=redact_secret_args(config.invocation_params.args),
                     alluredir=_alluredir(config))
        from pytest_toolbench.report.allure_and_plots import label_allure_results

        label_allure_results(config, st.run_id)


def _alluredir(config: pytest.Config) -> str | None:
    """allure-pytest's results folder as pytest parsed it, absolute (relative to where pytest
    was started), or None without ``--alluredir``."""
    from pytest_toolbench.output_paths import as_written

    folder = config.getoption("allure_report_dir", None)
    return str(as_written("--alluredir", folder, Path(config.invocation_params.dir))) if folder else None


def stop_started_workers(config: pytest.Config) -> None:
    """Stop the xdist workers of a run refused after they were started (its validation overlaps
    their start-up). pytest skips the session end of a session that never started, where xdist
    stops them, so execnet's own exit handler did: it waited a second for workers still busy
    importing, then killed them."""
    dsession = config.pluginmanager.getplugin("dsession")
    group = getattr(getattr(dsession, "nodemanager", None), "group", None)
    if group is not None:
        with contextlib.suppress(Exception):  # stopping must not mask why the run was refused
            group.terminate(timeout=0)


def check_baseline_data(config: pytest.Config, selected: dict[str, Any]) -> None:
    """Before any model call: a --baseline run on other data (another fingerprint, real vs
    sample, another revision) or with no case in common is refused, one line, exit 4, unless
    --allow-different-data (then the comparison and every gate line say so)."""
    from pytest_toolbench.compare.baseline import check_baseline_data as check
    from pytest_toolbench.results.safe_text import safe_text

    st = state(config)
    cases = [c for cases in selected.values() for c in cases]
    try:
        check(st.baseline, st.data_sources, cases, allow=st.settings.allow_different_data)
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-toolbench: --baseline: {safe_text(str(exc))}") from None


def worker_input(node: Any) -> None:
    """What an xdist worker is told at its start: the run's id, server, SDK process, whether
    the controller reports the data's warnings (it loads the suites' data before any case),
    whether its Allure results name the run, the data folder it resolved (session/data.py), and
    where the controller keeps the data files it parsed."""
    from pytest_toolbench.servers.managed import server_info_for_worker

    st = state(node.config)
    node.workerinput["toolbench_run_id"] = st.run_id
    node.workerinput["toolbench_server"] = server_info_for_worker(st.server)
    node.workerinput["toolbench_sdk"] = sdk.sdk_address(node.config)
    targeted = bool(targeted_benchmarks(node.config))
    node.workerinput[DATA_WARNED_KEY] = targeted
    node.workerinput[LABEL_RESULTS_KEY] = targeted  # the run has a run folder to name
    node.workerinput[WORKER_KEY] = worker_data_dir(st.settings)
    from pytest_toolbench.benchmarks.parsed_files import shared_folder

    folder = shared_folder()
    node.workerinput[PARSED_FILES_KEY] = str(folder) if folder is not None else None


def label_worker_results(config: pytest.Config) -> None:
    """An xdist worker of a run with a run folder labels its Allure results with the run's id,
    as the controller does its own once the folder is made (:func:`validate_and_record`)."""
    if config.workerinput.get(LABEL_RESULTS_KEY):  # type: ignore[attr-defined]
        from pytest_toolbench.report.allure_and_plots import label_allure_results

        label_allure_results(config, state(config).run_id)


def stop_run_processes(config: pytest.Config) -> None:
    """At unconfigure: the run's SDK process and vLLM server are stopped."""
    sdk.stop(config)
    st = config.stash.get(STATE_KEY, None)
    if st is not None and st.server is not None:
        st.server.stop()
        st.server = None
