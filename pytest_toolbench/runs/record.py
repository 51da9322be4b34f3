"""What a run leaves in its folder (``<cache-dir>/../runs/<run_id>/``), so it can be found again.

* ``run.json``: a small index entry (model, suites, dates, headline metric per scenario, partial
  flag, data fingerprints) that ``toolbench runs`` lists without opening the big report. Written
  when the run starts (status ``running``, with the controller's pid, so a run killed with SIGKILL
  still shows up as ``incomplete``, and with what its end needs to score it, :class:`RunStart`,
  so ``toolbench finish`` can write the report of a run killed before its end) and rewritten
  when it ends.
* ``report.json``: the same JSON as ``--toolbench-json`` (settings, data sources, metrics, gates),
  written at the end of every run, also when it was interrupted (marked partial), but for its
  cases: ``cases_journal`` names the run's journal, which holds them once (the report holds them
  inline only when the journal could not be written whole).
* ``results.jsonl.gz``: the journal (results/case_store.py): appended plain to ``results.jsonl``
  as results arrive, compacted into gzip members with the texts every case repeats stored once.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal

from pydantic import Field, ValidationError

from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.fileio import atomic_write_text
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.process_stamp import process_stamp, same_process
from pytest_toolbench.results import case_store
from pytest_toolbench.results.safe_text import safe_json

if TYPE_CHECKING:  # a run's start (record_start) needs none of the report's models
    from pytest_toolbench.results.case_result import CaseResult
    from pytest_toolbench.results.headline import Headline as HeadlineDeclaration
    from pytest_toolbench.results.run_record import RunInfo, RunRecord
    from pytest_toolbench.results.run_sections import DataSourceEntry

INDEX_NAME = "run.json"
REPORT_NAME = "report.json"

Status = Literal["running", "finished", "interrupted", "incomplete"]


class Headline(DeferredModel):
    """The lead metric of one (benchmark, scenario): what its benchmark's headline puts first
    (results/headline.py's ``lead_metric``). An entry written before that choice (each
    scenario's first declared metric) is read as it was written."""

    benchmark: str
    scenario: str
    metric: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    is_rate: bool = True


class DataFingerprint(DeferredModel):
    benchmark: str
    path: str
    sha256: str | None = None
    #: Provenance (results/provenance.py): real, sample, reconstruction, local; None in entries
    #: written before it was kept (shown as unknown).
    kind: str | None = None
    revision: str | None = None
    pinned: bool | None = None
    bundled: bool | None = None


class RunStart(DeferredModel):
    """What the end of a run needs besides its results, kept from its start: a run killed
    outright (SIGKILL, the OOM killer, a lost CI runner) never reaches its end, and
    ``toolbench finish`` scores its journal from this (session/killed_run.py)."""

    #: config.RunSettings as JSON, without the API key (the report's ``run.settings``).
    settings: dict[str, Any]
    pytest_args: list[str] = Field(default_factory=list)
    #: The data sources as JSON (the report's ``run.data_sources``).
    data_sources: list[dict[str, Any]] = Field(default_factory=list)
    #: Benchmark -> cases in its whole suite.
    suite_sizes: dict[str, int] = Field(default_factory=dict)
    #: The Allure results folder the run writes to, absolute, as pytest parsed ``--alluredir``
    #: (an ini file's ``addopts`` included), or None: ``toolbench finish`` names it.
    alluredir: str | None = None


class RunIndex(DeferredModel):
    run_id: str
    model: str = ""
    backend: str = ""
    suites: list[str] = Field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    status: Status = "finished"
    partial: bool = False
    interrupted_by: str | None = None
    #: Why pytest stopped the run early (-x), as the report's run section has it.
    pytest_stop: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: Distinct cases; with --repeats K each ran up to K times (``n_runs`` results in all).
    n_cases: int = 0
    n_runs: int = 0
    n_errors: int = 0
    repeats: int = 1
    #: Benchmark -> (cases run, cases in its suite) for each benchmark the run covered only in
    #: part (--limit, --sample-ids, -k, -m): its headline is no full-suite figure.
    subsets: dict[str, tuple[int, int]] = Field(default_factory=dict, exclude_if=lambda v: not v)
    headline: list[Headline] = Field(default_factory=list)
    data: list[DataFingerprint] = Field(default_factory=list)
    #: The run's folder, its report.json, and the --toolbench-json path if one was given.
    path: str = ""
    report: str | None = None
    json_path: str | None = None
    toolbench_version: str = ""
    pid: int | None = None
    #: Which process ``pid`` was (process_stamp.py): a pid reused later, after a reboot say, is
    #: not taken for the run's. None: not known (an older version, a system without /proc).
    pid_stamp: str | None = None
    host: str | None = None
    #: The run's exit status (exitcodes.py); None for a run still going, killed, or recorded by
    #: a version that did not keep it.
    exit_status: int | None = None
    #: Gate verdicts (--gate and the per-scenario --max-error-rate limits): counts, and the
    #: failed gates by name. Both 0: the run had no gates.
    gates_passed: int = 0
    gates_failed: list[str] = Field(default_factory=list)
    #: The tokens the endpoint reported (run_sections.TokenTotals) over ``model_calls`` model
    #: calls, ``cached_calls`` of them answered by the response cache. None: none reported (the
    #: oracle, a replay), or a record without them.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model_calls: int | None = None
    cached_calls: int = 0
    #: Kept while the run runs (None once it has ended: its report holds the same), and by a run
    #: whose end could not write its report, so that ``toolbench finish`` can.
    start: RunStart | None = None
    #: The output failure that stopped a run whose end then could not write its report (a full
    #: disk); None (not written) for every other run.
    stopped_by: OutputFailure | None = Field(default=None, exclude_if=lambda v: v is None)

    def tokens_text(self) -> str | None:
        """The run's tokens as its summary words them (TokenTotals.text); None: none recorded."""
        if not (self.prompt_tokens or self.completion_tokens):
            return None
        from pytest_toolbench.results.run_sections import TokenTotals  # `toolbench runs` only

        totals = TokenTotals(prompt_tokens=self.prompt_tokens or 0,
                             completion_tokens=self.completion_tokens or 0)
        return totals.text(self.model_calls, self.cached_calls)


def _fingerprints(data_sources: Iterable[dict[str, Any] | DataSourceEntry]) -> list[DataFingerprint]:
    """The index's data entries: from the run's data sources as JSON at its start, from its
    record's entries at its end (a field an older record lacks reads None either way)."""
    out = []
    for source in data_sources:
        d = source if isinstance(source, dict) else source.as_json()
        out.append(DataFingerprint(benchmark=str(d.get("benchmark", "")), path=str(d.get("path", "")),
                                   sha256=d.get("sha256"), kind=d.get("kind"),
                                   revision=d.get("revision"), pinned=d.get("pinned"),
                                   bundled=d.get("bundled")))
    return out


def write_index(run_dir: Path, index: RunIndex, *, in_place_when_full: bool = False) -> Path:
    """``in_place_when_full``: on a full disk (or quota), where the atomic write cannot make its
    new file, overwrite the index in the blocks it holds already if the new text fits there
    (:func:`overwrite_in_allocated`). Only for a run's last word (its end, its failure): a crash
    in the middle leaves an index :func:`read_index` falls back from (the report, the journal)."""
    path = run_dir / INDEX_NAME
    # bidi and C1 controls (a data path's) as JSON escapes, like the report (results/safe_text.py)
    text = safe_json(index.model_dump_json(indent=2)) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        if not (in_place_when_full and exc.errno in (errno.ENOSPC, errno.EDQUOT)):
            raise
        if not overwrite_in_allocated(path, text.encode("utf-8")):
            raise
    return path


def overwrite_in_allocated(path: Path, data: bytes) -> bool:
    """Write ``data`` over the file at ``path`` without asking the file system for a block: only
    when it fits in the blocks the file holds (``st_blocks``); False, the file untouched, if not.
    Shrinking it after (truncate) frees blocks and needs none."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if len(data) > os.fstat(fd).st_blocks * 512:
            return False
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        return True
    finally:
        os.close(fd)


def mark_unreported(run_dir: Path, *, exit_status: int, stopped_by: OutputFailure) -> None:
    """A run whose end could not write its report (the run folder's disk is full): its index
    says so and keeps its start, so ``toolbench runs`` lists it as stopped by ``stopped_by`` (the
    failure that stopped it), not as killed, and ``toolbench finish`` scores its journal once
    there is room again, as the run's end would have (session/killed_run.py)."""
    index = read_index(run_dir)
    if index is None:
        return
    write_index(run_dir, index.model_copy(update={
        "finished": time.time(), "status": "incomplete", "partial": True, "pid": None,
        "pid_stamp": None, "exit_status": exit_status, "stopped_by": stopped_by,
    }), in_place_when_full=True)


def record_start(
    run_dir: Path,
    *,
    run_id: str,
    settings: dict[str, Any],
    suites: list[str],
    started: float,
    data_sources: Iterable[dict[str, Any]],
    version: str,
    pytest_args: Iterable[str] = (),
    suite_sizes: dict[str, int] | None = None,
    alluredir: str | None = None,
) -> Path:
    """The index entry of a run that has just started (status ``running``)."""
    data_sources = list(data_sources)
    start = RunStart(settings=settings, pytest_args=list(pytest_args), data_sources=data_sources,
                     suite_sizes=dict(suite_sizes or {}), alluredir=alluredir)
    return write_index(run_dir, RunIndex(
        run_id=run_id, model=str(settings.get("model", "")), backend=str(settings.get("backend", "")),
        suites=list(suites), started=started, status="running", partial=True,
        repeats=int(settings.get("repeats", 1) or 1), data=_fingerprints(data_sources),
        path=str(run_dir), json_path=settings.get("json_path"), toolbench_version=version,
        pid=os.getpid(), pid_stamp=process_stamp(), host=socket.gethostname(), start=start,
    ))


def index_from_report(record: RunRecord, run_dir: Path,
                      headlines: Mapping[str, HeadlineDeclaration] | None = None) -> RunIndex:
    """The index entry of a finished (or interrupted) run, from its record (the JSON report).
    ``headlines``: each benchmark's declared headline, which picks the metric a scenario's row
    shows (the registry's when not given; a benchmark it lacks shows its first metric)."""
    from pytest_toolbench.results.headline import DEFAULT_HEADLINE, lead_metric

    if headlines is None:
        from pytest_toolbench.benchmarks import registry
        from pytest_toolbench.results.headline import headlines_of

        headlines = headlines_of(registry())
    run = record.run
    settings = run.settings
    scenarios = record.metrics.scenarios
    headline = []
    for s in scenarios:
        name = lead_metric(headlines.get(s.benchmark, DEFAULT_HEADLINE), s.scenario, s.metrics)
        if name is not None:
            mv = s.metrics[name]
            headline.append(Headline(
                benchmark=s.benchmark, scenario=s.scenario, metric=name, value=mv.value,
                ci_low=mv.ci_low, ci_high=mv.ci_high, n=mv.n, is_rate=mv.is_rate,
            ))
    suites = sorted({s.benchmark for s in scenarios} | set(run.coverage))
    return RunIndex(
        run_id=str(run.run_id or run_dir.name), model=str(settings.model or ""),
        backend=str(settings.backend or ""), suites=suites, started=run.started,
        finished=run.finished, status=_ended_status(record.partial, run),
        partial=record.partial, interrupted_by=run.interrupted_by, pytest_stop=run.pytest_stop,
        n_cases=len({_base_id(c) for c in record.cases}),
        n_runs=len(record.cases),
        n_errors=sum(s.n_errors for s in scenarios),
        repeats=int(settings.repeats or 1), headline=headline,
        subsets={n: (c.cases, c.suite_cases) for n, c in run.coverage.items()
                 if c.subset and c.suite_cases is not None},
        data=_fingerprints(run.data_sources), path=str(run_dir),
        report=str(run_dir / REPORT_NAME), json_path=settings.json_path,
        toolbench_version=run.toolbench_version,
        exit_status=run.exit_status,
        gates_passed=sum(g.passed for g in record.gates),
        gates_failed=[g.gate for g in record.gates if not g.passed],
        prompt_tokens=run.usage.prompt_tokens if run.usage else None,
        completion_tokens=run.usage.completion_tokens if run.usage else None,
        model_calls=run.cache.model_calls if run.cache else None,
        cached_calls=run.cache.replies_from_cache if run.cache else 0,
    )


def _ended_status(partial: bool, run: RunInfo) -> Status:
    """``interrupted`` (Ctrl-C, SIGTERM, SIGHUP), ``incomplete`` (cases lost or an output
    unwritten, the run ended by itself) or ``finished``."""
    if not partial:
        return "finished"
    if run.interrupted_by is None and (run.missing_cases or run.output_errors):
        return "incomplete"
    return "interrupted"


def _base_id(case: CaseResult) -> str:
    suffix = f"-r{case.repeat}" if case.repeat is not None else ""
    return case.case_id[: -len(suffix)] if suffix and case.case_id.endswith(suffix) else case.case_id


def save_report(run_dir: Path, record: RunRecord, *, cases_in_journal: bool,
                cases: Callable[[], Iterable[dict[str, Any]]] | None = None) -> RunIndex:
    """Write ``report.json`` (the ``--toolbench-json`` document, by the record's one JSON writer)
    and the final ``run.json``. ``cases_in_journal``: the run's journal holds every case of the
    record, so the report names it instead of repeating them (results/case_store.py); else
    ``cases`` gives them as JSON values (the controller's: results/held_results.py)."""
    if cases_in_journal and record.cases:  # (a run without a result may have no journal)
        reference = case_store.cases_reference(len(record.cases))
        record.write(run_dir / REPORT_NAME, record.to_json(reference))
    else:
        record.write(run_dir / REPORT_NAME,
                     record.json_chunks(cases()) if cases is not None else None)
    index = index_from_report(record, run_dir)
    # (a run's index shrinks at its end, as its start goes: it fits where a full disk left it)
    write_index(run_dir, index, in_place_when_full=True)
    return index


def mark_ended(run_dir: Path, *, partial: bool, interrupted_by: str | None,
               exit_status: int | None = None) -> None:
    """A run that ended without a record (an output failed before any case reported, or pytest
    stopped with its own error): close its index entry (0 cases)."""
    index = read_index(run_dir)
    if index is None:
        return
    write_index(run_dir, index.model_copy(update={
        "finished": time.time(), "status": "interrupted" if partial else "finished",
        "partial": partial, "interrupted_by": interrupted_by, "pid": None, "pid_stamp": None,
        "start": None,
        "exit_status": exit_status,
    }))


def read_index(run_dir: Path) -> RunIndex | None:
    """The run's index entry; falls back to its report, then to its journal (a run killed before
    it could write either); None for a folder that holds none of them."""
    try:
        index = RunIndex.model_validate_json((run_dir / INDEX_NAME).read_text(encoding="utf-8"))
        if index.status == "running" and not _alive(index):
            index = index.model_copy(update={"status": "incomplete"})
        if index.status in ("running", "incomplete"):
            index.n_runs = max(index.n_runs, case_store.count_results(run_dir))
        return index
    except (OSError, ValueError, ValidationError):
        pass
    try:
        import json

        from pytest_toolbench.results.run_record import RunRecord

        report = run_dir / REPORT_NAME
        data = json.loads(report.read_bytes())
        case_store.resolve_cases(data, report)
        return index_from_report(RunRecord.model_validate(data), run_dir)
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        pass
    parts = case_store.journal_parts(run_dir)
    if parts:
        return RunIndex(run_id=run_dir.name, status="incomplete", partial=True,
                        started=max(p.stat().st_mtime for p in parts),
                        n_runs=case_store.count_results(run_dir), path=str(run_dir))
    return None


def _alive(index: RunIndex) -> bool:
    """Whether the process that wrote a ``running`` entry is still running (same host only)."""
    from pytest_toolbench.models.liveness import process_alive  # psutil: only when a run is listed

    return (index.pid is not None and index.host == socket.gethostname()
            and process_alive(index.pid) and same_process(index.pid, index.pid_stamp))
