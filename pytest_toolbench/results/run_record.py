"""One run, as one typed record: what every view of a run is written from and read back as.

The session end builds a :class:`RunRecord` once (session/finish.py) and every writer takes that
one object: the JSON report (``--toolbench-json`` and the run folder's ``report.json``, both
written by :meth:`RunRecord.write`, the only JSON writer), the terminal, Markdown, Allure, JUnit
and plots; ``toolbench compare``, ``--baseline`` and ``toolbench runs`` read a report back into
the same type. The ``run`` part's settings, server, sandbox, endpoints and data sources are typed
sections (results/run_sections.py) written back exactly as their producers wrote them.

The document's layout is the schema below (``schema_version`` 1): top-level ``partial`` and
``missing_cases`` (also in ``run``), ``run`` (identity, settings, data, status, coverage...),
``metrics``, ``gates``, ``cases`` sorted by id, then ``repeats`` (only with ``--repeats``) and
``baseline`` (only with ``--baseline``). The run folder's ``report.json`` holds
``cases_journal`` instead of ``cases``: the journal that stores them once per run
(results/case_store.py, whose ``resolve_cases`` every reader goes through). Every field but
``cases`` has a default, so reports written by older versions, or by hand in tests, are read as
they are; fields this version does not know are kept (``extra="allow"``) rather than dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from pytest_toolbench.counting import counted
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.fileio import indented_json
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.case_store import CASES_REF, result_order
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.held_results import is_held
from pytest_toolbench.results.repeats import RepeatStats
from pytest_toolbench.results.run_sections import (
    DataSourceEntry,
    EndpointCounts,
    SandboxSection,
    ServerSection,
    SettingsSection,
    TokenTotals,
)
from pytest_toolbench.results.safe_text import safe_json_bytes

SCHEMA_VERSION = 1
#: The top-level ``cases`` entry of an indented report whose list is empty: where a streamed
#: report's cases go (RunRecord.json_chunks); only a top-level key is indented by 2.
_EMPTY_CASES = b'\n  "cases": []'


class Coverage(DeferredModel):
    """How much of one benchmark's suite the run covered (distinct cases, not repeats)."""

    cases: int
    suite_cases: int | None = None
    subset: bool = False


class CacheCounts(DeferredModel):
    model_calls: int = 0
    replies_from_cache: int = 0
    #: Cases answered whole by the result cache, not scored again (runtime/result_cache.py);
    #: left out when none, so a record of a run without it reads and writes back byte for byte.
    results_from_cache: int = Field(default=0, exclude_if=lambda v: v == 0)


class RunInfo(DeferredModel):
    """Who ran what, where and how it ended: the report's ``run`` section."""

    model_config = ConfigDict(extra="allow")

    run_id: str | None = None
    started: float | None = None
    finished: float | None = None
    toolbench_version: str = ""
    python: str = ""
    platform: str = ""
    #: The run settings (config.RunSettings as JSON, without the API key).
    settings: SettingsSection = Field(default_factory=SettingsSection)
    #: The managed vLLM server (None: the run started none).
    server: ServerSection | None = None
    #: Data file -> sha256, for the benchmarks that reported results.
    datasets: dict[str, str] = Field(default_factory=dict)
    data_sources: list[DataSourceEntry] = Field(default_factory=list)
    #: What the data was per benchmark (real, sample, this project's reconstruction, local),
    #: its revision and fingerprint, and the run's fingerprint (results/provenance.py); None in
    #: reports written before provenance was kept (read as "unknown").
    data: dict[str, Any] | None = None
    partial: bool = False
    interrupted_by: str | None = None
    #: Why pytest itself stopped the run early, no interruption ("-x/--maxfail=1 stopped the
    #: run"); None (and not written) otherwise.
    pytest_stop: str | None = Field(default=None, exclude_if=lambda v: v is None)
    missing_cases: list[str] = Field(default_factory=list)
    output_errors: list[str] = Field(default_factory=list)
    n_results: int = 0
    pytest_args: list[str] = Field(default_factory=list)
    #: The isolation the tool sandbox really had (None: no sandbox started).
    sandbox: SandboxSection | None = None
    exit_status: int | None = None
    coverage: dict[str, Coverage] = Field(default_factory=dict)
    #: Requests and errors per endpoint (only when the run called one: absent otherwise).
    endpoints: dict[str, EndpointCounts] | None = None
    wall_s: float | None = None
    startup_s: dict[str, float] = Field(default_factory=dict)
    cache: CacheCounts | None = None
    #: None (and not written) in a report from before it was kept.
    usage: TokenTotals | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def model(self) -> str:
        return str(self.settings.model or "")

    def partial_reason(self) -> str:
        """Why a partial run's report covers less than its selection, in a few words
        (``toolbench compare``): its interruption, pytest's own stop, an unwritten output, or
        its cases without a result."""
        if self.interrupted_by:
            return f"interrupted ({self.interrupted_by})"
        if self.pytest_stop:
            return self.pytest_stop
        if self.output_errors:
            return "an output could not be written"
        if self.missing_cases:
            return f"{counted(len(self.missing_cases), 'selected case')} without a result"
        return "interrupted"

    def tokens_text(self) -> str | None:
        """The run's tokens over its model calls, as :meth:`TokenTotals.text` words them; None
        where none were recorded (the terminal's line, the leaderboard's cell)."""
        if self.usage is None:
            return None
        cache = self.cache
        return self.usage.text(cache.model_calls if cache else None,
                               cache.replies_from_cache if cache else 0)

    def endpoint_counts(self) -> dict[str, dict[str, int]]:
        """URL -> {"requests": n, "errors": n}, as models/endpoint_pool.py counts them."""
        return {url: {"requests": c.requests, "errors": c.errors}
                for url, c in (self.endpoints or {}).items()}


class RunRecord(DeferredModel):
    """One run: its identity and status, metrics, gate verdicts, every case, and (when asked
    for) its repeat statistics and ``--baseline`` comparison."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    #: True when the run was interrupted (SIGINT/SIGTERM/SIGHUP), lost selected cases, or stopped on
    #: an output it could not write: metrics cover the reported cases only.
    partial: bool = False
    #: Selected cases that never reported a result.
    missing_cases: list[str] = Field(default_factory=list)
    run: RunInfo = Field(default_factory=RunInfo)
    metrics: RunMetrics = Field(default_factory=lambda: RunMetrics(scenarios=[]))
    gates: list[GateVerdict] = Field(default_factory=list)
    #: Sorted by (case id, scenario, benchmark), so two reports of one run diff cleanly.
    cases: list[CaseResult]
    repeats: RepeatStats | None = None
    baseline: Comparison | None = None

    @classmethod
    def build(cls, *, run: RunInfo, metrics: RunMetrics, cases: list[CaseResult],
              gates: list[GateVerdict] | None = None, repeats: RepeatStats | None = None,
              baseline: Comparison | None = None) -> RunRecord:
        """The record of a run, its cases in the report's order; ``partial`` and
        ``missing_cases`` repeat the run's own."""
        ordered = sorted(cases, key=result_order)
        return cls(partial=run.partial, missing_cases=list(run.missing_cases), run=run,
                   metrics=metrics, gates=list(gates or []), cases=ordered, repeats=repeats,
                   baseline=baseline)

    @property
    def model(self) -> str:
        """The model the run evaluated (its settings, else its cases' model)."""
        return self.run.model or next((c.model for c in self.cases if c.model), "")

    def report_dict(self, cases_ref: dict[str, Any] | None = None,
                    cases: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The JSON report's document: ``repeats``, ``baseline`` and ``run.endpoints`` only when
        the run had them. NaN stays a float (the report writes it as the stdlib would).
        ``cases_ref``: the run folder's report, whose cases are in the run's journal
        (results/case_store.py): that reference stands where ``cases`` would. ``cases``: the
        cases already as JSON values (results/held_results.py ``whole_cases``), in their place."""
        exclude: dict[str, Any] = {k: True for k in ("repeats", "baseline") if getattr(self, k) is None}
        run_exclude = {k for k in ("endpoints", "data") if getattr(self.run, k) is None}
        if run_exclude:
            exclude["run"] = run_exclude
        if cases_ref is None and cases is None:
            if any(is_held(c) for c in self.cases):  # their bulk is in the journal alone
                raise ValueError("a record holding the controller's held results cannot write its "
                                 "cases inline: pass them whole (results/held_results.py)")
            return self.model_dump(mode="json", exclude=exclude)
        slot = (CASES_REF, cases_ref) if cases_ref is not None else ("cases", cases)
        doc = self.model_dump(mode="json", exclude={**exclude, "cases": True})
        out: dict[str, Any] = {}
        for key, value in doc.items():  # in the place of "cases": after the gates
            out[key] = value
            if key == "gates":
                out[slot[0]] = slot[1]
        return out

    def to_json(self, cases_ref: dict[str, Any] | None = None,
                cases: list[dict[str, Any]] | None = None) -> bytes:
        """The JSON report (:meth:`report_dict`): indented, UTF-8, NaN kept as the stdlib writes
        it (fileio.py). The encoder writes DEL, C1 and bidi controls raw; they are ``\\u``
        escapes here, so ``cat`` or an editor shows a dataset's or model's text as stored, not
        reordered or acted on."""
        return safe_json_bytes(indented_json(self.report_dict(cases_ref, cases)))

    def json_chunks(self, cases: Iterable[dict[str, Any]]) -> Iterator[bytes]:
        """``to_json(cases=list(cases))`` in pieces, byte for byte, one case at a time: a report
        holding a long run's cases inline is never whole in memory, nor are its cases as Python
        values (``cases`` may be a generator: results/held_results.py ``whole_cases``)."""
        head = self.to_json(cases=[])
        if head.count(_EMPTY_CASES) != 1:  # pragma: no cover - the layout is report_dict's
            raise ValueError("the report's cases entry is not where a streamed report puts it")
        bracket = head.index(_EMPTY_CASES) + len(_EMPTY_CASES) - 1  # its "]"
        opening, closing = head[:bracket], head[bracket:]
        first = True
        for case in cases:
            yield opening + b"\n    " if first else b",\n    "
            # A case one level down is its own indented text with every line 4 spaces further
            # in: a newline in JSON text stands between tokens, never inside a string.
            yield safe_json_bytes(indented_json(case)[:-1]).replace(b"\n", b"\n    ")
            first = False
        yield head if first else b"\n  " + closing

    def write(self, path: str | Path, encoded: bytes | Iterable[bytes] | None = None) -> Path:
        """Write the JSON report atomically (a CI step never reads half a report): the one
        writer of ``--toolbench-json`` and the run folder's ``report.json``. ``encoded``: this
        record's :meth:`to_json` (the run folder's with its journal's reference) or
        :meth:`json_chunks`, when the caller has it already."""
        from pytest_toolbench.fileio import atomic_write_chunks

        p = Path(path)
        if encoded is None:
            encoded = self.to_json()
        atomic_write_chunks(p, (encoded,) if isinstance(encoded, bytes) else encoded)
        return p
