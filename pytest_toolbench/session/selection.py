"""Which cases a run selects and how they become pytest parameters: the targeted suites, each
benchmark's cases after ``--scenario`` / ``--sample-ids`` / ``--limit``, their markers, and the
checks made before any model call (the data loads, ``-m`` can match, the gates fit the selection)."""

from __future__ import annotations

import contextlib
import functools
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_toolbench.benchmarks import declarations, registry, unknown_benchmark
from pytest_toolbench.benchmarks.base import Benchmark, Case, HasDataChecks, HasDataSources, HasSelection
from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.benchmarks.dataset_errors import DatasetError, DatasetWarning, error_lines
from pytest_toolbench.benchmarks.suite_files import suite_name_of
from pytest_toolbench.config import RunSettings
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.models.sdk_process import launcher as sdk_launcher
from pytest_toolbench.option_sources import from_command_line
from pytest_toolbench.results.gates import check_gate_selection, parse_gate
from pytest_toolbench.results.partial_run import SHOWN_MISSING, first_named
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.runtime.repeat import expand_repeats
from pytest_toolbench.runtime.upcoming import case_of
from pytest_toolbench.session.data_warning import INSTALLED, issue_config_warning, issue_data_warning
from pytest_toolbench.session.state import ToolbenchState, is_worker, state

#: workerinput key: the controller reports the data's warnings, so this xdist worker keeps quiet.
DATA_WARNED_KEY = "toolbench_data_warned"


def targeted_benchmarks(config: pytest.Config) -> list[str]:
    """Benchmarks whose suite folder (``suites/<name>``) the command line points at or contains."""
    names = list(registry())
    out: list[str] = []
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if "suites" in path.parts:
            i = len(path.parts) - 1 - path.parts[::-1].index("suites")
            root = Path(*path.parts[: i + 1])
            found = [path.parts[i + 1]] if len(path.parts) > i + 1 else names
        elif (path / "suites").is_dir():
            root, found = path / "suites", names
        else:
            continue
        out += [n for n in found if n in names and (root / n).is_dir() and n not in out]
    return out


class SuiteModule(pytest.Module):
    """A benchmark's suite file whose ``test_<name>`` is collected whatever the project's
    ``python_functions`` says: one of ``["check_*"]`` left the suite without a test, and the run
    said "the selection, -k/-m or --lf left none"."""

    def funcnamefilter(self, name: str) -> bool:
        return name == f"test_{suite_name_of(self.path)}" or super().funcnamefilter(name)


def suite_module(file_path: Path, parent: pytest.Collector,
                 collected: list[Any]) -> list[Any] | None:
    """``collected`` with a benchmark's suite file as a test module its test is collected from,
    or None to keep it as it is. A project whose ``python_files`` leaves out ``test_*.py``
    (``["check_*.py"]``, ``*_test.py``) collected no module from it, and one whose
    ``python_functions`` leaves out ``test_*`` no test; either way ``pytest suites/toolhop`` ran
    no case, saying "the selection, -k/-m or --lf left none". The suite file is the harness's,
    whatever the project names its own tests. Another plugin's module class is left alone."""
    name = suite_name_of(file_path)
    if name is None or name not in declarations():
        return None
    modules = [c for c in collected if isinstance(c, pytest.Module)]
    if not modules:
        return [*collected, SuiteModule.from_parent(parent, path=file_path)]
    plain = [c for c in modules if type(c) is pytest.Module]
    if not plain or plain[0].funcnamefilter(f"test_{name}"):
        return None
    return [SuiteModule.from_parent(parent, path=file_path) if c is plain[0] else c
            for c in collected]


def warn_shared_cases(session: pytest.Session) -> None:
    """Tests that share a case with another (pytest-repeat's ``--count 3`` parametrises each
    test again, the same case in each copy) in the warnings summary: the case runs and is scored
    once, its copies share its result, and "54 passed" read as three samples per case where the
    metrics had one (``n`` 6). ``--repeats`` is the harness's way to run a case K times."""
    if getattr(session.config, "workerinput", {}).get("workerid", "gw0") != "gw0":
        return  # every xdist worker collects the same tests: the first one says it
    ids = [case.id for item in session.items if isinstance(case := case_of(item), Case)]
    shared = len(ids) - len(set(ids))
    if not shared:
        return
    try:
        issue_data_warning(session.config, pytest.PytestWarning(
            f"pytest-toolbench: {shared} of {len(ids)} collected tests repeat another's case "
            "(another plugin copies tests, e.g. pytest-repeat's --count): a case runs and is "
            "scored once per run and its copies share its result; --repeats K runs each case K "
            "times (pass@k, unstable cases)"), source=INSTALLED)
    except pytest.UsageError:
        # An error filter (-W error) made it one: it stops an in-process run (exit 4); raised in
        # an xdist worker's collection it ended a run that passed with exit 1 and no word.
        if is_worker(session.config):
            return
        raise


def validate_selection(config: pytest.Config) -> dict[str, list[Case]]:
    """Before any model call: load each targeted benchmark's data (a bad record is a one-line
    usage error each), note its data sources and suite size, check the gates against the
    selected cases, and stop with NO_CASES if the selection matches no case at all."""
    st = state(config)
    st.targeted = targeted_benchmarks(config)
    if not st.targeted:
        return {}
    with data_warnings_once(config):
        selected = {name: cases_for(config, name) for name in st.targeted}
    for name in st.targeted:
        benchmark = registry()[name]
        if isinstance(benchmark, HasDataSources):
            try:
                with warnings.catch_warnings():  # collection warns about the same records once
                    warnings.simplefilter("ignore", DatasetWarning)
                    st.data_sources += benchmark.data_sources(
                        st.settings.data_dir, st.settings.options_for(name, benchmark.options_model))
            except (DatasetError, OSError) as exc:
                raise _data_usage_error(name, exc) from None
        else:
            st.data_sources += DataSource.fetched_for(name)
        if isinstance(benchmark, HasDataChecks):  # files read later (a KG, a tool pool): now
            try:
                benchmark.check_data(st.settings)
            except (DatasetError, OSError) as exc:
                raise _data_usage_error(name, exc) from None
    check_marker_selection(config, selected)
    unknown_ids = unknown_sample_ids(st)
    if not any(selected.values()):
        pytest.exit(
            f"pytest-toolbench: the selection matches no case ({_selection_text(st.settings)}); "
            f"{unknown_ids + '; ' if unknown_ids else ''}nothing to run",
            returncode=int(ToolbenchExit.NO_CASES),
        )
    if unknown_ids:  # a typo among good ids: the run goes on with the others, and says so
        issue_config_warning(
            config, pytest.PytestWarning(f"pytest-toolbench: --sample-ids: {unknown_ids}"))
    scenarios = {n: {c.scenario for c in cases} for n, cases in selected.items()}
    groups: dict[str, dict[str, set[str]]] = {}
    for n, cases in selected.items():
        for c in cases:
            for label, value in c.labels.items():
                groups.setdefault(n, {}).setdefault(label, set()).add(str(value))
    try:
        for gate in st.settings.gates:
            parsed = parse_gate(gate)
            if parsed.path.split(".")[0] not in selected:
                raise ValueError(f"gate {parsed}: its benchmark's suite is not part of this run "
                                 f"(running: {st.targeted})")
            check_gate_selection(parsed, scenarios, groups)
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-toolbench: {exc}") from None
    return selected


@contextlib.contextmanager
def data_warnings_once(config: pytest.Config) -> Iterator[None]:
    """The controller reports each DatasetWarning of the run's data once, in pytest's warnings
    summary, not raw on stderr before the session header; the xdist workers, which load the same
    files again to collect, keep quiet about them (:data:`DATA_WARNED_KEY`, set by
    session/run_start.py ``worker_input``). A ``-W error::...DatasetWarning`` filter still
    applies."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen: set[str] = set()
    for w in caught:
        if not issubclass(w.category, DatasetWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        elif str(w.message) not in seen:
            seen.add(str(w.message))
            # the message quotes the data (names, values): pytest's summary prints it raw
            shown = w.category(safe_text(str(w.message), multiline=True))
            issue_data_warning(config, shown)


@contextlib.contextmanager
def _quiet_if_reported(config: pytest.Config) -> Iterator[None]:
    """In an xdist worker whose controller reports the data's warnings: ignore them here."""
    with warnings.catch_warnings():
        if is_worker(config) and config.workerinput.get(DATA_WARNED_KEY):  # type: ignore[attr-defined]
            warnings.simplefilter("ignore", DatasetWarning)
        yield


def check_marker_selection(config: pytest.Config, selected: dict[str, list[Case]]) -> None:
    """A ``-m`` term that can match none of the selected cases (a value of the wrong type or
    spelling, e.g. ``hops(n='3')`` for an int label) is a usage error naming the marker and the
    values that exist when the expression selects nothing, else a warning (marker_check.py)."""
    markexpr = getattr(config.option, "markexpr", "")
    if not markexpr:
        return
    from pytest_toolbench.marker_check import check_markexpr

    marks = [[d.mark for d in case_marks(registry()[name], c)] + [_mark("toolbench", "benchmark", name).mark]
             for name, cases in selected.items() for c in cases]
    if not marks:
        return
    registered = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    dead, selects_some = check_markexpr(markexpr, marks, registered)
    if not dead:
        return
    if not selects_some:
        raise pytest.UsageError(f"pytest-toolbench: -m {markexpr!r} selects no case: "
                                + "; ".join(dead))
    issue_config_warning(
        config, pytest.PytestWarning(f"pytest-toolbench: -m {markexpr!r}: " + "; ".join(dead)))


def unknown_sample_ids(st: ToolbenchState) -> str:
    """The --sample-ids no targeted suite has (a typo, or another benchmark's id), with what
    each suite's ids look like; "" when every id names a sample."""
    unknown = [i for i in st.settings.sample_ids or () if i not in st.sample_ids_found]
    if not unknown:
        return ""
    looks = ", ".join(f"{n}'s ids look like {safe_text(i)!r}"
                      for n, i in st.first_sample_ids.items())
    return (f"no sample {first_named([safe_text(i) for i in unknown], SHOWN_MISSING)} in "
            f"{', '.join(st.targeted)}" + (f" ({looks})" if looks else ""))


def _selection_text(settings: RunSettings, none: str = "no selection option") -> str:
    parts = []
    if settings.scenarios:
        parts.append(f"--scenario {','.join(settings.scenarios)}")
    if settings.sample_ids:
        ids = settings.sample_ids
        more = f" and {len(ids) - SHOWN_MISSING} more" if len(ids) > SHOWN_MISSING else ""
        parts.append(f"--sample-ids {','.join(ids[:SHOWN_MISSING])}{more}")
    if settings.limit is not None:
        parts.append(f"--limit {settings.limit}")
    return " ".join(parts) or none


def _data_usage_error(name: str, exc: BaseException) -> pytest.UsageError:
    """A dataset problem as a usage error: one line per bad record (capped), no traceback."""
    if isinstance(exc, DatasetError):
        lines = error_lines(exc)
    else:
        lines = [str(exc)]
    lines = [safe_text(line) for line in lines]  # they quote the bad records' values
    head = f"pytest-toolbench: cannot load {name} data: {lines[0]}"
    return pytest.UsageError("\n".join([head, *lines[1:]]))


def has_toolbench_tests(config: pytest.Config) -> bool:
    """Whether this run needs the model server: it targets the suites, or names a model/backend.

    Under xdist the controller does not collect, so it cannot look at the items themselves; the
    rule is kept simple and predictable instead: a path under (or holding) ``suites/``, or an
    explicit ``--model`` / ``--backend vllm``. Unit-test runs therefore never start vLLM.
    """
    # Only the command line counts here: a model kept in the ini file must not start vLLM for
    # unit-test runs (option_sources.py).
    if from_command_line(config, "--model") or (
        from_command_line(config, "--backend") and config.getoption("--backend") == "vllm"
    ):
        return True
    return any(sdk_launcher.names_suites(str(arg)) for arg in config.args)


def parametrize_cases(metafunc: pytest.Metafunc) -> None:
    """Parametrise a toolbench test (``@pytest.mark.toolbench(name)`` with a ``case`` argument)
    over its benchmark's selected cases, each repeat its own id (``-r<k>``)."""
    marker = metafunc.definition.get_closest_marker("toolbench")
    if marker is None or "case" not in metafunc.fixturenames:
        return
    name = marker.args[0] if marker.args else marker.kwargs["benchmark"]
    benchmark = registry().get(name)
    if benchmark is None:  # a typo, or a package whose entry point did not load: one line
        pytest.fail(f"pytest-toolbench: {unknown_benchmark(name)}", pytrace=False)
    cases = cases_for(metafunc.config, name)
    cases = expand_repeats(cases, state(metafunc.config).settings.repeats)  # ids end in -r<k>
    if not cases and metafunc.config.getini("empty_parameter_set_mark") in ("", "skip"):
        # pytest's own skip read "test_familytool[NOTSET]: got empty parameter set for (case)"
        # in JUnit and Allure; this one says why (another empty_parameter_set_mark is pytest's)
        st = state(metafunc.config)
        chosen = _selection_text(st.settings, none=f"--{name}-* options")
        why = (f"pytest-toolbench: the selection ({chosen}) left no {name} case of "
               f"{st.suite_sizes.get(name, '?')}")
        metafunc.parametrize("case", [pytest.param(None, id="no-case-selected",
                                                   marks=pytest.mark.skip(reason=why))])
        return
    metafunc.parametrize(
        "case", [pytest.param(c, id=c.id, marks=case_marks(benchmark, c)) for c in cases]
    )


def cases_for(config: pytest.Config, name: str) -> list[Case]:
    """The benchmark's cases after --scenario and the benchmark's own selection options
    (``select``, benchmarks/base.py HasSelection), then --sample-ids / --limit, in a stable
    order. The one selection path: the controller's checks and every worker's parametrisation
    see the same cases."""
    st = state(config)
    if name in st.cases:
        return st.cases[name]
    settings = st.settings
    benchmark = registry()[name]
    if settings.scenarios:
        unknown = set(settings.scenarios) - {s for b in registry().values() for s in b.scenarios}
        if unknown:  # named with the scenarios there are, as -m's values are (marker_check.py)
            known = "; ".join(f"{n}: {', '.join(registry()[n].scenarios)}"
                              for n in (st.targeted or sorted(registry())) if n in registry())
            raise pytest.UsageError(f"pytest-toolbench: unknown --scenario "
                                    f"{', '.join(sorted(unknown))}; the scenarios are {known}")
    check_resolved(settings, name)  # never the bundled sample in place of unfetched real data
    try:
        # Every scenario first (the suite's size, for "subset: 40 of 240"), then the selection;
        # load_cases is scenario-major in file order, so filtering keeps its order.
        with _quiet_if_reported(config):
            cases = load_all_cases(settings, name)
    except (DatasetError, OSError) as exc:
        raise _data_usage_error(name, exc) from None
    st.suite_sizes[name] = len(cases)
    wanted = set(settings.sample_ids or ())
    if wanted:  # against the whole suite: an id --scenario leaves out is no typo
        st.sample_ids_found.update(c.sample_id for c in cases if c.sample_id in wanted)
        if cases:
            st.first_sample_ids[name] = cases[0].sample_id
    if settings.scenarios:
        cases = [c for c in cases if c.scenario in settings.scenarios]
    if isinstance(benchmark, HasSelection):
        cases = benchmark.select(cases, settings.options_for(name, benchmark.options_model))
    if wanted:
        cases = [c for c in cases if c.sample_id in wanted]
    if settings.limit is not None:
        keep = list(dict.fromkeys(c.sample_id for c in cases))  # first-seen order, O(n)
        kept = set(keep[: settings.limit])
        cases = [c for c in cases if c.sample_id in kept]
    st.cases[name] = cases
    return cases


def check_resolved(settings: RunSettings, name: str) -> None:
    """A suite with real data whose files this run did not fetch (its tests collected from
    outside the ``suites/`` folders the command line names; session/data.py) is refused, never
    silently run on the bundled sample."""
    if settings.data != "real" or settings.data_dir is not None:
        return
    from pytest_toolbench.datasets.registry import has_real_files

    if has_real_files(name):
        raise pytest.UsageError(
            f"pytest-toolbench: {name}: the real data was not fetched for this run (its tests are "
            f"not under a suites/{name} folder on the command line); run its suite folder, or "
            f"pass --data-dir DIR or --data sample")


def load_all_cases(settings: RunSettings, name: str) -> list[Case]:
    """Every case of the benchmark's suite (every scenario, nothing deselected) as the run's
    options load them (ToolBeHonest's language picks its file): the suite's size."""
    benchmark = registry()[name]
    return benchmark.load_cases(
        settings.data_dir, benchmark.scenarios, settings.options_for(name, benchmark.options_model))


def case_marks(benchmark: Benchmark, case: Case) -> list[pytest.MarkDecorator]:
    marks = [_mark(benchmark.name), _mark("scenario", "name", case.scenario)]
    for label, keyword in benchmark.label_markers.items():
        if label in case.labels:
            marks.append(_mark(label, keyword, case.labels[label]))
    return marks


@functools.lru_cache(maxsize=65536)
def _mark(name: str, keyword: str | None = None, value: Any = None) -> pytest.MarkDecorator:
    """One (immutable) MarkDecorator per distinct marker, shared by every case that carries it:
    building one per case and label was a fifth of collection time on 10,000 cases."""
    decorator = getattr(pytest.mark, name)
    return decorator if keyword is None else decorator(**{keyword: value})
