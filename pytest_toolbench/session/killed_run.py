"""Score a run that was killed before its end: SIGKILL, the OOM killer, a CI runner that vanished.

Such a run keeps every result it journalled (results/journal.py) and, from its start, what its
end needs besides them (runs/record.py ``RunStart``: settings, command line, data sources, suite
sizes), but no report: ``toolbench runs`` lists it as incomplete, and ``compare``, ``view`` and
``--baseline`` cannot read it. :func:`finish_killed_run` does with those results what the run's
own end would have done (session/finish.py, the same code): the results only an xdist worker's
journal holds go into the run's journal, which is compacted (a pending file a compaction cut short
by the kill left plain included: results/journal.py ``pack_leftovers``); the metrics are scored;
``report.json`` and the final ``run.json`` are written, marked partial and interrupted
(``killed``); only then do the worker journals and scratch files go (a finish killed in between
can be run again). The selected cases without a result are named from
the selection the run kept among its scratch files (results/case_store.py ``write_selection``);
a run killed before it had collected kept none, and its report says they are unknown. Plots,
which the run would have written with its end, are not (``toolbench view`` and ``compare`` read
``report.json``); the reports a CI step expects beside the folder are written from what is
returned here by ``toolbench finish --toolbench-json``, ``--toolbench-md``, ``--junitxml`` and
``--alluredir`` (finish_cli.py).
"""

from __future__ import annotations

import contextlib
import socket
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_toolbench.counting import counted
from pytest_toolbench.benchmarks import declarations, registry
from pytest_toolbench.benchmarks.base import Case
from pytest_toolbench.benchmarks.data_source import DataSource
from pytest_toolbench.config import RunSettings
from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.fileio import PathLock
from pytest_toolbench.output_errors import OutputFailure
from pytest_toolbench.results import case_store
from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.journal import JournalError, pack_leftovers, read_journal
from pytest_toolbench.results.packed_journal import PackedJournalError
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.runs.record import REPORT_NAME, RunIndex, RunStart, read_index, save_report
from pytest_toolbench.session.end_summary import run_notes
from pytest_toolbench.session.finish import RunIdentity, run_record, score_run
from pytest_toolbench.session.run_end import RunEnd

#: How the report names the interruption (``run.interrupted_by``, the listing's status).
KILLED = "killed"
#: Held in the run's folder while a finish runs (fileio.py ``PathLock``: removed on release).
FINISH_LOCK = ".finish.lock"


class KilledRunError(ValueError):
    """A run that cannot be finished (message: one line, naming the run)."""


@dataclass
class FinishedRun:
    """What :func:`finish_killed_run` did: the run's new index entry and record (without a case
    when none had finished), and what the journals said on the way (a torn last line, results only
    a worker had kept)."""

    index: RunIndex
    record: RunRecord
    notes: list[str] = field(default_factory=list)
    #: Each selected case's id and pytest node id, in selection order, as the run kept them
    #: (None: not kept; a run killed before collecting, or by an older version).
    nodes: dict[str, str] | None = None
    #: The data the run read, as its start recorded it (the Allure files describe each).
    data_sources: list[DataSource] = field(default_factory=list)
    #: The lines under the metrics in the Markdown summary and the Allure text, as the run's own
    #: end would have written them (the interruption and the cases it left first), then ``notes``.
    report_notes: list[str] = field(default_factory=list)
    #: The run's settings as its start recorded them (its cases are loaded with them again for
    #: the Allure results of those it never finished: :func:`never_finished`).
    settings: RunSettings | None = None
    #: The run's start as its index entry recorded it (the entry finish writes has none).
    start: RunStart | None = None


def never_finished(done: FinishedRun) -> tuple[list[tuple[str, Case | None]], list[str]]:
    """(node id, its Case) of each selected case the killed run never finished, in selection
    order, as the run's own end hands them to report/allure_report.py ``write_not_run``; and
    notes. The cases are loaded again as the run loaded them (its recorded settings: data,
    benchmark options, repeats), for the title and labels their "not run" results share with
    their results in other runs; a case its data no longer holds (the data moved or changed)
    is None, named by its node alone, and said in a note. Nothing when the run kept no node ids
    (``done.nodes``)."""
    return cases_again(done, set(done.record.run.missing_cases), "never run")


def cases_again(done: FinishedRun, case_ids: set[str],
                what: str) -> tuple[list[tuple[str, Case | None]], list[str]]:
    """(node id, its Case) of each selected case among ``case_ids``, in selection order, the
    cases loaded again as the run loaded them (:func:`never_finished`); notes, ``what`` naming
    the cases in the one about those their data no longer holds."""
    if done.nodes is None or not case_ids:
        return [], []
    from pytest_toolbench.session.case_tracker import cases_by_id
    from pytest_toolbench.session.selection import load_all_cases

    settings = done.settings
    loaded: dict[str, list[Case]] = {}
    notes: list[str] = []
    if settings is not None:
        for name in sorted({b for b in registry() if any(i.startswith(f"{b}-") for i in case_ids)}):
            try:
                loaded[name] = load_all_cases(settings, name)
            except Exception as exc:  # noqa: BLE001 - its results are still written, case-less
                notes.append(f"{name}: its cases could not be loaded again ({exc})")
    cases = cases_by_id(loaded, settings.repeats if settings is not None else 1)
    nodes = [(nodeid, cases.get(case_id)) for case_id, nodeid in done.nodes.items()
             if case_id in case_ids]
    unknown = sum(1 for _, case in nodes if case is None)
    if unknown:
        notes.append(f"{counted(unknown, 'case')} {what} are named in Allure by their pytest node "
                     "alone: their data does not hold them as the run loaded it")
    return nodes, notes


def finish_killed_run(run_dir: Path, *, force: bool = False) -> FinishedRun:
    """Write the report of the run in ``run_dir``, which was killed before its end.

    Refused (:class:`KilledRunError`) for a run that ended (it has its report), one still
    running, one started on another host (unless ``force``: this host cannot tell whether it
    still runs there, and finishing a live run would remove the journals it writes), and one
    recorded by a version that did not keep its start. Two finishes of one run (a retried CI
    step) take turns: the second waits, then finds the report the first wrote."""
    run_dir = Path(run_dir)
    _killed_index(run_dir, force=force)  # refused before anything is made in the folder
    with _finishing(run_dir):
        return _finish(run_dir, force=force)


@contextlib.contextmanager
def _finishing(run_dir: Path) -> Iterator[None]:
    """Hold the run's finish lock: two finishes at once each merged the workers' journals and
    removed the scratch files the other was reading (its JUnit file was refused for want of the
    node ids, its report said the missing cases were unknown), and each wrote the report."""
    lock = PathLock(run_dir / FINISH_LOCK)
    try:
        lock.acquire()
    except OSError as exc:
        raise KilledRunError(f"run {run_dir.name}: cannot lock its folder to finish it ({exc})") from None
    try:
        yield
    finally:
        lock.release()


def _finish(run_dir: Path, *, force: bool) -> FinishedRun:
    index = _killed_index(run_dir, force=force)  # again: another finish may have ended it
    assert index.start is not None  # (_killed_index refuses a run without it)
    start = index.start
    # Everything that can refuse the run is read before its folder is touched (the merge below
    # compacts the journal and removes the workers' journals).
    settings = _settings(start, run_dir)
    _benchmarks(index.suites, run_dir)  # the benchmarks it targeted are installed here
    data_sources = _data_sources(start, run_dir)
    baseline = _baseline(settings, run_dir)
    finished = _last_write(run_dir) or index.started or 0.0
    selection = case_store.read_selection(run_dir)  # (before the scratch files go)
    nodes = case_store.read_selection_nodes(run_dir, selection)
    results, notes, tidy, journal_whole = _collect_results(run_dir)
    if not results:  # still a report, as the run's own end writes one: partial, every case missing
        notes = [*notes, "no case had finished: nothing to score"]
    benchmarks = _benchmarks(sorted({r.benchmark for r in results}), run_dir)  # as its end would
    # No estimates kept: the run's --cache-dir may be relative to a folder this is not run in.
    scores = score_run(results, benchmarks, settings, baseline, data_sources)
    started = index.started if index.started is not None else finished
    identity = RunIdentity(
        run_id=index.run_id, started=started, finished=finished, wall_s=max(0.0, finished - started),
        settings=settings, pytest_args=start.pytest_args,
        datasets={str(d.get("path")): str(d.get("sha256")) for d in start.data_sources
                  if d.get("path") and d.get("sha256")},
        data_sources=start.data_sources, suite_sizes=start.suite_sizes,
    )
    end = _killed_end(selection, reported={r.case_id for r in results}, stopped_by=index.stopped_by)
    record = run_record(scores, end, results, identity)
    report_notes = [*run_notes(record, end.notes(), data_sources, start.suite_sizes), *notes]
    try:
        # a journal with a line skipped: the report holds its cases, so no reader of the run's
        # folder (compare, view, --baseline) parses that line and refuses the run
        new_index = save_report(run_dir, record, cases_in_journal=journal_whole)
    except OSError as exc:
        raise KilledRunError(f"run {run_dir.name}: cannot write its report ({exc})") from None
    if tidy:
        _remove_leftovers(run_dir)
    return FinishedRun(new_index, record, notes, nodes, data_sources, report_notes, settings,
                       start)


def _remove_leftovers(run_dir: Path) -> None:
    """The workers' journals (merged into the run's) and the scratch files, once the report is
    written: a finish killed after removing the kept selection but before writing the report
    left a run that a second finish scored with no case missing ("run completed" passed on a
    run that had never run some of its cases). One left behind loses nothing."""
    with contextlib.suppress(OSError):
        case_store.remove_worker_journals(run_dir)
    case_store.remove_scratch(run_dir)  # (ignores errors itself)


def _killed_end(selection: list[str] | None, *, reported: set[str],
                stopped_by: OutputFailure | None = None) -> RunEnd:
    """How the killed run ended: interrupted, the selected cases without a result named (or,
    its selection not kept, said to be unknown). A run that stopped on an output it could not
    write, then could not write its report either (``stopped_by``), ended as its own end would
    have said: stopped by that output failure (exit OUTPUT_ERROR), not killed."""
    return RunEnd(pytest_status=int(ToolbenchExit.INTERRUPTED),
                  interrupted_by=KILLED if stopped_by is None else None,
                  output_failures=[] if stopped_by is None else [stopped_by],
                  missing=[i for i in selection or () if i not in reported],
                  selected=len(selection or ()), missing_unknown=selection is None)


def _killed_index(run_dir: Path, *, force: bool) -> RunIndex:
    """The run's index entry, if the run is one that :func:`finish_killed_run` may finish."""
    name = run_dir.name
    index = read_index(run_dir)
    if index is None:
        raise KilledRunError(f"{run_dir}: no run recorded there (no run.json and no journal)")
    if (run_dir / REPORT_NAME).exists():
        raise KilledRunError(f"run {name} has its report already ({index.status}): nothing to finish")
    if index.status in ("finished", "interrupted"):
        raise KilledRunError(f"run {name} ended ({index.status}) before any case's result: "
                             "nothing to finish")
    if index.status == "running":
        raise KilledRunError(f"run {name} is still running (pid {index.pid} on this host): stop it "
                             "first, or wait for its end")
    here = socket.gethostname()
    if index.host is not None and index.host != here and not force:
        raise KilledRunError(f"run {name} was started on host {index.host!r}, not here ({here!r}): "
                             "this host cannot tell whether it still runs there; finish it there, "
                             "or pass --force if it is gone")
    if index.start is None:
        raise KilledRunError(f"run {name}: its run.json keeps no start (settings, data sources), "
                             "as a run started by an older pytest-toolbench does not; it cannot "
                             "be scored")
    return index


def _settings(start: RunStart, run_dir: Path) -> RunSettings:
    """The run's settings from their JSON, each benchmark's options by its own model (a plain
    ``BaseModel`` field would keep none of their values)."""
    values: dict[str, Any] = dict(start.settings)
    options = values.pop("benchmark_options", None) or {}
    declared = declarations()
    try:
        settings = RunSettings.model_validate(values)
        settings.benchmark_options = {
            name: declared[name].options_model.model_validate(value)
            for name, value in options.items() if name in declared
        }
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "settings"
        raise KilledRunError(f"run {run_dir.name}: its recorded settings do not validate here "
                             f"({where}: {first.get('msg')}); a pytest-toolbench of another "
                             "version wrote them") from None
    return settings


def _last_write(run_dir: Path) -> float | None:
    """When the run last journalled a result: the time it ended, as near as the folder knows."""
    times = []
    for part in case_store.journal_parts(run_dir):
        try:
            times.append(part.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=None)


def _collect_results(run_dir: Path) -> tuple[list[CaseResult], list[str], bool, bool]:
    """Every journalled result (the last per case, as a report keeps), the worker journals'
    included; they end in the run's journal, compacted. An unreadable line (not only a torn
    last one) is skipped with a note naming file and line: refusing the run for it lost every
    other result. The flags: the run's journal holds them all, compacted, so the worker journals
    and scratch files may go once the report is written (:func:`_remove_leftovers`); and it
    holds no skipped line, so the report may name it for its cases."""
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:  # a torn last line: a note, not a warning
        warnings.simplefilter("always")
        try:
            journalled = read_journal(case_store.journal_path(run_dir), on_invalid=notes.append)
            journal_whole = not notes
            results = {r.case_id: r for r in journalled}
            journal = case_store.run_journal(run_dir)
            try:
                recovered = case_store.merge_worker_journals(run_dir, results, journal.append,
                                                             on_invalid=notes.append)
            finally:
                journal.close()  # compacts what the killed run left plain, with the recovered
        except (JournalError, PackedJournalError) as exc:
            raise KilledRunError(f"run {run_dir.name}: its journal cannot be read ({exc})") from None
        except OSError as exc:
            raise KilledRunError(f"run {run_dir.name}: cannot read or write its journal "
                                 f"({exc})") from None
    notes[:0] = [str(w.message) for w in caught]
    if recovered:
        notes.append(f"{counted(recovered, 'result')} only the xdist workers' journals held were "
                     "added to the run's journal")
    if not journal_whole:
        notes.append("the report holds its cases itself: the run's journal keeps a line no "
                     "reader can parse")
    if journal.compact_error is None:
        try:  # a compaction the kill cut short left a plain pending file: stored compressed too
            pack_leftovers(case_store.journal_path(run_dir))
        except (OSError, PackedJournalError) as exc:
            notes.append(f"a pending part of the journal was left as it is, plain ({exc})")
    else:  # the journal is whole, only not compacted: keep the rest as the run's end would
        notes.append(f"the journal was not compacted ({journal.compact_error})")
    return list(results.values()), notes, journal.compact_error is None, journal_whole


def _benchmarks(names: list[str], run_dir: Path) -> dict[str, Any]:
    """The benchmarks ``names``, installed here (else a refusal naming those that are not)."""
    known = registry()
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise KilledRunError(f"run {run_dir.name}: benchmark(s) {', '.join(unknown)} not installed "
                             "here; finish it where its benchmarks are")
    return {n: known[n] for n in sorted(names)}


def _data_sources(start: RunStart, run_dir: Path) -> list[DataSource]:
    try:
        return [DataSource.model_validate(d) for d in start.data_sources]
    except ValidationError as exc:
        raise KilledRunError(f"run {run_dir.name}: its recorded data sources do not validate here "
                             f"({exc.errors()[0].get('msg')})") from None


def _baseline(settings: RunSettings, run_dir: Path) -> Any:
    """The run's ``--baseline``, loaded as its start loaded it (None without one)."""
    if settings.baseline_path is None:
        return None
    from pytest_toolbench.compare.baseline import load_baseline

    try:
        return load_baseline(settings.baseline_path, settings.gates)
    except ValueError as exc:  # RunLoadError included
        raise KilledRunError(f"run {run_dir.name}: its --baseline cannot be read any more "
                             f"({exc})") from None


__all__ = ["KILLED", "FinishedRun", "KilledRunError", "cases_again", "finish_killed_run",
           "never_finished"]
