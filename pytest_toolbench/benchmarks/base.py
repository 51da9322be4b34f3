"""What a benchmark is, to the rest of the harness.

A benchmark is an object with:

- ``options_model``: a pydantic model of its own options; every field becomes a
  ``--<name>-<field>`` flag (benchmarks/options.py) and the run's values reach the benchmark as one
  instance of it, never through a module-level object;
- ``load_cases(data_dir, scenarios, options)``: dataset files -> :class:`Case` objects (one per
  sample x scenario/level/mode), in a stable order;
- ``select(cases, options)`` (optional, :class:`HasSelection`): narrows the loaded cases by its
  own options (FamilyTool's ``--familytool-split``); applied with ``--scenario``, so there is one
  selection path;
- ``make_runner(env)``: the :class:`CaseRunner` that turns a case into a
  :class:`~pytest_toolbench.results.case_result.CaseResult`; ``env`` is ONE
  :class:`BenchmarkEnv` (settings, options, and the shared resources built on first use, so a
  benchmark pays only for what it uses);
- ``report_tables(results)`` (optional, :class:`HasReportTables`), ``data_sources`` and
  ``check_data`` (optional, provenance and early data checks);
- ``metrics``, ``scenarios``, ``breakdown_labels``, ``label_markers``, ``name``, ``title``;
- ``headline`` (optional, a :class:`~pytest_toolbench.results.headline.Headline`): what the end
  screen shows by default, laid out as the paper's main table (``-v`` shows everything);
  without it each scenario's first declared metric.

The harness builds each runner itself the first time a case of that benchmark runs; a benchmark
needs no fixtures. ``fixtures/<name>.py`` may still exist, for pytest-native users: session
fixtures over the same environment (``toolbench_env``).

Registering a benchmark: the four bundled ones are listed in ``benchmarks/__init__.py``; any
other package registers its own through the ``pytest_toolbench.benchmarks`` entry point group,
one line, ``<name> = "<module>:<object>"`` (the entry point's name is the benchmark's ``name``):

.. code-block:: toml

    [project.entry-points."pytest_toolbench.benchmarks"]
    toy = "toy_benchmark.benchmark:TOY"

Its suite is a folder ``suites/<name>/`` holding a test file whose tests carry
``pytest.mark.toolbench("<name>")`` and take ``case`` and ``case_result`` (the harness's fixtures,
``pytest_toolbench.session.fixtures``); README.md in this folder, and ``tests/toy_benchmark/``,
show a complete one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, Sequence, runtime_checkable

from pydantic import BaseModel

from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.benchmarks.packed import unpacked
from pytest_toolbench.models.base import ChatModel
from pytest_toolbench.models.open_protocol import BenchmarkOpenProtocol, OpenProtocols
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.metrics import MetricSpec

if TYPE_CHECKING:  # annotation only: sandbox workers import this module
    from pytest_toolbench.config import RunSettings
    from pytest_toolbench.sandbox.interface import SandboxRunner


@dataclass(frozen=True, slots=True, repr=False)
class Case:
    """One pytest node: a benchmark sample under one scenario.

    A slotted dataclass, not a pydantic model: cases are built by the harness from records the
    loader validated, nothing outside sends them in, and every collected case lives for the whole
    run in every xdist worker, so it is kept small (no per-instance ``__dict__`` or fields-set).
    Frozen, because one record's cases share its objects.
    """

    #: Stable, e.g. "toolhop-17-mandatory"; always starts with ``<benchmark>-``.
    id: str
    benchmark: str
    scenario: str
    sample_id: str
    #: Subgroup labels, also turned into pytest markers (e.g. hops=3 -> @mark.hops(n=3)).
    labels: dict[str, str | int] = field(default_factory=dict)
    #: The validated upstream record (benchmark-specific pydantic model), or a
    #: :class:`~pytest_toolbench.benchmarks.packed.KeptRecord` of it; runners read
    #: :attr:`sample`, which unpacks.
    stored_sample: Any = None
    #: ``--repeats K``: which run of the case this is (1..K; None without repeats). The id then
    #: ends in :func:`repeat_suffix` (runtime/repeat.py makes the copies).
    repeat: int | None = None

    @property
    def sample(self) -> Any:
        """The record the runner works on; a packed one is rebuilt on every read, so a runner
        reads it once per run."""
        return unpacked(self.stored_sample)

    def with_sample_unpacked(self) -> Case:
        """This case holding its record unpacked (itself if it was not packed). The case runtime
        calls it once, when the case starts, so a runner that reads :attr:`sample` twice does
        not unpack twice."""
        sample = self.sample
        return self if sample is self.stored_sample else replace(self, stored_sample=sample)

    def __repr__(self) -> str:  # shown by pytest and Allure as the parameter value: keep it short
        return f"Case({self.id})"

    __str__ = __repr__


def repeat_suffix(repeat: int) -> str:
    """What ``--repeats`` appends to the id of run ``repeat`` of a case (and of any pseudo case id
    a runner derives from it)."""
    return f"-r{repeat}"


@runtime_checkable
class CaseRunner(Protocol):
    """Runs one case against a model inside the benchmark's environment."""

    async def run(self, case: Case, model: ChatModel) -> CaseResult: ...


class EnvironmentUnavailable(Exception):
    """A resource a runner needs cannot be had here (an embedder that does not load, a sandbox
    without its isolation layers). ``make_runner`` raises it with one line; the harness stops the
    run with that line (exit 4) instead of failing every case of the benchmark."""


@runtime_checkable
class BenchmarkEnv(Protocol):
    """What ``make_runner`` gets: one per pytest process (each xdist worker has its own).

    Every resource is built on first use and then shared by every benchmark of the process, so a
    run that needs no sandbox starts none and one that needs no embedder loads none.
    """

    #: The run's settings (:class:`~pytest_toolbench.config.RunSettings`).
    settings: RunSettings

    def options(self, benchmark: "Benchmark") -> Any:
        """The benchmark's options: an instance of its ``options_model`` (defaults when unset)."""
        ...

    @property
    def embedders(self) -> Any:
        """The shared sentence-transformer embedders and their on-disk embedding cache
        (:class:`~pytest_toolbench.environments.retrieval.Embedders`)."""
        ...

    @property
    def sandbox(self) -> SandboxRunner:
        """The tool sandbox, started on first use: ``await env.sandbox.arun(job, payload,
        timeout_s)`` runs ``job`` (this package's, or a function of a module the benchmark
        declares in ``sandbox_modules``, see :class:`HasSandboxModules`) in a confined child and
        returns a :class:`~pytest_toolbench.sandbox.interface.SandboxOutcome`. Raises
        :class:`EnvironmentUnavailable` where it cannot start."""
        ...

    @property
    def run_dir(self) -> Path:
        """This run's folder, shared by every process of the run."""
        ...

    def scratch_dir(self, name: str) -> Path:
        """A folder of this run for files its processes share only while it runs (a memo of
        calls one case makes for others), not made yet; removed once the run has ended with every
        result in its journal, so nothing a report needs may live only there."""
        ...

    def cases(self, benchmark: str) -> Sequence[Case]:
        """The cases of ``benchmark`` this process may run (its collected ones under pytest), so
        a runner can skip what none of them needs."""
        ...

    @property
    def open_protocols(self) -> OpenProtocols:
        """The run's open-protocol declarations, every benchmark's (:func:`run_open_protocols`),
        as the model under test has them: for a runner that builds a model of its own
        (FamilyTool's ``--familytool-kg-model``), so no benchmark reaches for the others."""
        ...


def require_embedder(embedders: Any, name: str, purpose: str) -> None:
    """Load embedder ``name`` now: one that cannot load here (no package, no local copy, no hub)
    raises :class:`EnvironmentUnavailable` naming ``purpose``, before any model call."""
    from pytest_toolbench.environments.retrieval import EmbedderUnavailable

    try:
        embedders.get(name).model
    except EmbedderUnavailable as exc:
        raise EnvironmentUnavailable(f"{purpose}: {exc}") from exc


@runtime_checkable
class Benchmark(Protocol):
    name: str
    #: Human-readable name (option group titles, report headings), e.g. "ToolHop".
    title: str
    #: The benchmark's own options; each field is a ``--<name>-<field>`` flag (benchmarks/options.py).
    options_model: type[BaseModel]
    scenarios: tuple[str, ...]
    metrics: tuple[MetricSpec, ...]
    #: Labels to break metrics down by in the terminal table (e.g. ("hops",)).
    breakdown_labels: tuple[str, ...]
    #: Marker name -> keyword used in the marker, e.g. {"hops": "n", "domain": "name"}.
    label_markers: dict[str, str]

    def load_cases(
        self, data_dir: Path | None, scenarios: tuple[str, ...], options: Any = None
    ) -> list[Case]:
        """Every case of ``scenarios`` in the data under ``data_dir`` (None: the bundled
        sample), scenario-major in a stable order. ``options`` is an instance of
        ``options_model`` (None: its defaults); only options that choose the data belong here
        (ToolBeHonest's language picks its file)."""
        ...

    def make_runner(self, env: BenchmarkEnv) -> CaseRunner:
        """The runner of this process, built once, the first time one of its cases runs."""
        ...


@runtime_checkable
class HasSelection(Protocol):
    """Optional: a benchmark whose own options narrow the selection (FamilyTool's
    ``--familytool-split``, ``--familytool-kg-mode``, ``--familytool-extraction``). Applied where
    ``--scenario`` is, before ``--sample-ids`` and ``--limit``, on the controller and in every
    worker alike; keeps the cases' order."""

    def select(self, cases: list[Case], options: Any) -> list[Case]: ...


@runtime_checkable
class HasReportTables(Protocol):
    """Optional: a benchmark whose paper reports more than per-scenario means (leaderboards,
    weighted overalls, tables laid out by split x hops) builds them from the scored results.
    Called once on the controller at session end with that benchmark's non-error and error
    results alike (sorted by case id, so ``-n 0`` and ``-n 4`` give identical tables). Those
    results carry no transcript; a benchmark that declares ``report_details`` (the ``details``
    keys its tables read, :func:`details_read_at_session_end`) gets only those keys, and reading
    another raises ``LeftInJournal`` (results/held_results.py)."""

    def report_tables(self, results: list[CaseResult]) -> list[ReportTable]: ...


def details_read_at_session_end(bench: Any) -> tuple[str, ...] | None:
    """The ``details`` keys ``bench.report_tables`` reads, from its ``report_details`` (a tuple
    of key names): the controller holds only those (and the harness's own) of each result until
    the session end, the rest stays in the run's journal (results/held_results.py). None (hold
    every key) for a benchmark with report tables that declares nothing: one registered from
    outside keeps working as it did. A declaration that is not a tuple of names is refused."""
    declared = getattr(bench, "report_details", None)
    if declared is None:
        return None if isinstance(bench, HasReportTables) else ()
    if not isinstance(declared, (tuple, list)) or not all(isinstance(k, str) for k in declared):
        raise ValueError(f"{getattr(bench, 'name', bench)!r}: report_details must be a tuple of "
                         f"details keys, got {declared!r}")
    return tuple(declared)


@runtime_checkable
class HasSandboxModules(Protocol):
    """Optional: a benchmark whose tools run in the sandbox from its own code. Each module named
    here (importable where the harness runs, e.g. ``"toybench_tools"``) may be named as a job,
    ``"<module>:<function>"``, in ``env.sandbox.arun``: the sandbox's zygotes import it before
    any call, its folder is readable to the calls, and no other module outside this package is
    ever run (a job name from data is refused). Harness code, so keep it small and stdlib-only:
    it is imported into every zygote."""

    sandbox_modules: tuple[str, ...]


def declared_sandbox_modules(benchmarks: "dict[str, Any]") -> tuple[str, ...]:
    """The job modules ``benchmarks`` (name -> Benchmark, e.g. the registry) declare, in order;
    a declaration that is not a tuple of module names is refused with one line."""
    out: list[str] = []
    for name, bench in benchmarks.items():
        declared = getattr(bench, "sandbox_modules", ())
        if not isinstance(declared, (tuple, list)) or not all(isinstance(m, str) for m in declared):
            raise ValueError(f"{name!r}: sandbox_modules must be a tuple of module names, got {declared!r}")
        out += [m for m in declared if m not in out]
    return tuple(out)


@runtime_checkable
class HasDataSources(Protocol):
    """Optional: the files a benchmark reads from ``data_dir`` (None: its bundled sample), one
    :class:`DataSource` each, so the summary names the data (path, records, sha256, bundled).
    ``options`` as for ``load_cases``. Called once on the controller at session start; may raise
    what ``load_cases`` raises."""

    def data_sources(self, data_dir: Path | None, options: Any = None) -> list[DataSource]: ...


@runtime_checkable
class HasDataChecks(Protocol):
    """Optional: the data files a run reads only later and chooses by its options (FamilyTool's
    KG of each selected split or ``--familytool-kg-file``, Meta-Bench's distractor pool).
    Called once on the controller at session start, before any model call; raises a one-line
    :class:`~pytest_toolbench.benchmarks.dataset_errors.DatasetError` (or ``OSError``) for a
    file that cannot be used. ``settings`` is the run's
    :class:`~pytest_toolbench.config.RunSettings`."""

    def check_data(self, settings: Any) -> None: ...


#: How a benchmark's replies travel under ``--decoding open`` (the vLLM default), i.e. raw text
#: through the chat template (models/open_protocol.py):
#: ``parsed``: tools rendered with ``tool_choice="none"``; the raw text is parsed by the parser the
#: benchmark provides as ``open_parser`` (an ``OpenReplyParser``; ToolHop's upstream parse_qwen25 /
#: parse_llama31 in benchmarks/toolhop/open_parsers.py). Each benchmark's calls are read by its
#: own parser (the runner names its benchmark in ``CallContext.benchmark``).
#: ``text``: the same request, but the raw text reaches the runner untouched (no tool_calls): the
#: runner parses it with its own upstream parser, or reads plain text (requests without tools).
#: ``server``: request and reply as the server makes them (its own tool parser).
OpenProtocolName = Literal["parsed", "text", "server"]
OPEN_PROTOCOLS: tuple[str, ...] = ("parsed", "text", "server")
#: A benchmark that declares nothing gets its model's raw text: never another benchmark's parser.
DEFAULT_OPEN_PROTOCOL: OpenProtocolName = "text"
#: The benchmark whose declaration a call naming no benchmark gets (``CallContext.benchmark``
#: None: a model used outside any runner), and whose parser plans the requests of benchmarks
#: without a parser of their own (stop ids, the cache key's ``open_protocol`` entry): ToolHop's
#: upstream protocol (``code/evaluation_open.py``), the one the harness spoke before benchmarks
#: declared theirs, so the cache keys of earlier runs still hold.
OPEN_PROTOCOL_DEFAULT_BENCHMARK = "toolhop"


def open_protocol_of(benchmark: object) -> str:
    """The benchmark's declared protocol, :data:`DEFAULT_OPEN_PROTOCOL` when it declares none."""
    declared = getattr(benchmark, "open_protocol", DEFAULT_OPEN_PROTOCOL)
    if declared not in OPEN_PROTOCOLS:
        raise ValueError(f"{getattr(benchmark, 'name', benchmark)!r}: open_protocol {declared!r} "
                         f"is not one of {OPEN_PROTOCOLS}")
    return declared


def open_declaration_of(benchmark: object) -> BenchmarkOpenProtocol:
    """The benchmark's protocol and parser; ``parsed`` without an ``open_parser`` is refused (its
    replies would be read by no parser of its upstream)."""
    protocol = open_protocol_of(benchmark)
    parser = getattr(benchmark, "open_parser", None)
    if protocol == "parsed" and parser is None:
        raise ValueError(f"{getattr(benchmark, 'name', benchmark)!r}: open_protocol 'parsed' needs "
                         "an open_parser (its upstream's reply parser); declare 'text' to parse "
                         "the raw text in the runner")
    return BenchmarkOpenProtocol(protocol, parser)


def run_open_protocols(benchmarks: "dict[str, Any]") -> OpenProtocols:
    """What ``benchmarks`` (name -> Benchmark, e.g. the registry) declare for the open protocol,
    handed down to the model layer (``build_model(..., open_protocols=...)``): each benchmark's
    protocol and parser, and the default (:data:`OPEN_PROTOCOL_DEFAULT_BENCHMARK`'s declaration;
    ``parsed`` with no parser, i.e. the server's, where it is not registered)."""
    declared = {name: open_declaration_of(bench) for name, bench in benchmarks.items()}
    default = declared.get(OPEN_PROTOCOL_DEFAULT_BENCHMARK, BenchmarkOpenProtocol("parsed", None))
    return OpenProtocols(benchmarks=declared, default=default)
