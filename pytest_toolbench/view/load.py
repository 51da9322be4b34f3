"""Find and read the run records the site is built from.

An argument may be a runs folder (``<runs-dir>/<run_id>/report.json``, the plugin's layout), one
run's folder, or a ``--toolbench-json`` file. Each is read as the one run record
(results/run_record.py ``RunRecord``) by the loader ``toolbench compare`` and ``--baseline`` use
(compare/load.py ``load_record``), which reads records written by older versions as they are
and passes over keys it does not know; the site shows the very record the comparisons compute
from. One that cannot be read is named with that loader's one-line reason and left out, never
a traceback that stops the whole site; so is a run folder with no report yet (a run still going,
one killed, one stopped by a full disk), with its ``toolbench runs`` status, which says what
would give it one, or none (no case ran, a usage error at its first case).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.compare.load import LoadedRun, RunLoadError, load_record
from pytest_toolbench.results.provenance import BenchmarkData, run_data
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.runs.record import INDEX_NAME, REPORT_NAME, read_index
from pytest_toolbench.runs.store import status_text


class ViewRun(DeferredModel):
    """One run as the site shows it: its record and a file-name-safe unique key."""

    key: str
    path: str
    record: RunRecord

    @property
    def model(self) -> str:
        return self.record.model

    @property
    def run_id(self) -> str:
        return self.record.run.run_id or self.key

    def benchmarks(self) -> list[str]:
        """Every benchmark the run has a case or a scenario's metrics of, A-Z."""
        return sorted({c.benchmark for c in self.record.cases}
                      | {s.benchmark for s in self.record.metrics.scenarios})

    def data(self) -> list[BenchmarkData]:
        """Per benchmark, what its data was (results/provenance.py; unknown where not kept)."""
        return run_data(self.record.run.data_sources, self.benchmarks())

    def for_compare(self) -> LoadedRun:
        """The run as ``toolbench compare`` loads it: this record, labelled as compare/load.py
        ``load_run`` labels a file (its model, else the file's stem)."""
        return LoadedRun(label=self.record.model or Path(self.path).stem, record=self.record,
                         path=self.path)


class LoadResult(DeferredModel):
    runs: list[ViewRun]
    #: One line per record that could not be read (``path: why``).
    skipped: list[str]


def find_reports(paths: Sequence[str | Path]) -> list[Path]:
    """Every report under ``paths``: a JSON file as given, a folder's own ``report.json``, else
    the ``report.json`` of each of its subfolders (a runs folder). Duplicates dropped."""
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_file():
            found.append(p)
        elif (p / REPORT_NAME).is_file():
            found.append(p / REPORT_NAME)
        elif p.is_dir():
            found += sorted(d / REPORT_NAME for d in p.iterdir() if (d / REPORT_NAME).is_file())
    seen: set[Path] = set()
    out = []
    for f in found:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            out.append(f)
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _key(record: RunRecord, path: Path, taken: set[str]) -> str:
    """The run id, else the file's stem (the folder's name for a ``report.json``), made safe
    for a file name and unique."""
    base = record.run.run_id or (path.parent.name if path.name == REPORT_NAME else path.stem)
    key = _UNSAFE.sub("_", base).strip("._") or "run"
    out, k = key, 2
    while out in taken:
        out, k = f"{key}-{k}", k + 1
    taken.add(out)
    return out


def load_view_runs(paths: Sequence[str | Path]) -> LoadResult:
    """The runs under ``paths``, oldest first (the order a reader expects a history in)."""
    runs: list[ViewRun] = []
    skipped: list[str] = []
    taken: set[str] = set()
    for path in find_reports(paths):
        try:
            record = load_record(path)
        except RunLoadError as exc:
            skipped.append(str(exc))
            continue
        runs.append(ViewRun(key=_key(record, path, taken), path=str(path), record=record))
    runs.sort(key=lambda r: (r.record.run.started or 0.0, r.key))
    return LoadResult(runs=runs, skipped=skipped + unreported_runs(paths))


def unreported_runs(paths: Sequence[str | Path]) -> list[str]:
    """``<folder>: no report yet: killed (toolbench finish scores it)`` (or ``no report: no case
    ran``) for each run folder under ``paths`` (as :func:`find_reports` looks) that has an index
    but no report: without a word, a run missing from the site reads as a run that never
    happened."""
    folders: list[Path] = []
    for given in paths:
        p = Path(given)
        if not p.is_dir() or (p / REPORT_NAME).is_file():
            continue
        if (p / INDEX_NAME).is_file():
            folders.append(p)
        else:
            folders += sorted(d for d in p.iterdir()
                              if (d / INDEX_NAME).is_file() and not (d / REPORT_NAME).is_file())
    out = []
    for folder in folders:
        index = read_index(folder)
        if index is not None:
            # "yet" only where one may come: a run still going, or one toolbench finish scores
            # (its start kept); a run that ended without one (no case ran, stopped at its
            # first case by a usage error) will not get one
            pending = index.status == "running" or index.start is not None
            out.append(f"{folder}: no report{' yet' if pending else ''}: {status_text(index)}")
    return out
