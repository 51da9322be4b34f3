"""Find and read the run records the site is built from.

An argument may be a runs folder (``<runs-dir>/<run_id>/report.json``, the plugin's layout), one
run's folder, or a ``--toolbench-json`` file. Each record is read into the site's own models
(record.py); one that cannot be read is named with the reason and left out, never a traceback
that stops the whole site.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, PrivateAttr, ValidationError

from pytest_toolbench.results.provenance import BenchmarkData, run_data
from pytest_toolbench.runs.record import REPORT_NAME
from pytest_toolbench.view.record import RunRecord


class ViewRun(BaseModel):
    """One run as the site shows it: its record and a file-name-safe unique key."""

    key: str
    path: str
    record: RunRecord
    _compared: object = PrivateAttr(default=None)

    @property
    def model(self) -> str:
        return self.record.model

    @property
    def run_id(self) -> str:
        return self.record.run.run_id or self.key

    def data(self) -> list[BenchmarkData]:
        """Per benchmark, what its data was (results/provenance.py; unknown where not kept)."""
        return run_data(self.record.run.data_sources, self.record.benchmarks())

    def for_compare(self):  # noqa: ANN201 - compare.load.LoadedRun, imported on first use
        """The run as ``toolbench compare`` loads it (compare/load.py), read once."""
        if self._compared is None:
            from pytest_toolbench.compare.load import load_run

            self._compared = load_run(self.path)
        return self._compared


class LoadResult(BaseModel):
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


class RecordError(ValueError):
    """A file that is not a readable run record (message: one line naming it)."""


def read_record(path: Path) -> RunRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise RecordError(f"{path}: not a pytest-toolbench JSON report (no 'cases' list)")
    try:
        return RunRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "record"
        raise RecordError(f"{path}: {where}: {err.get('msg', 'invalid')}") from None


def load_view_runs(paths: Sequence[str | Path]) -> LoadResult:
    """The runs under ``paths``, oldest first (the order a reader expects a history in)."""
    runs: list[ViewRun] = []
    skipped: list[str] = []
    taken: set[str] = set()
    for path in find_reports(paths):
        try:
            record = read_record(path)
        except RecordError as exc:
            skipped.append(str(exc))
            continue
        runs.append(ViewRun(key=_key(record, path, taken), path=str(path), record=record))
    runs.sort(key=lambda r: (r.record.run.started or 0.0, r.key))
    return LoadResult(runs=runs, skipped=skipped)
