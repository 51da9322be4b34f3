"""A run folder's cases: the one module that writes, merges and reads them.

Each case's result (with its transcript) is stored once per run, in the run's journal
(results/journal.py): appended plain as it arrives, so a killed run keeps every line written, and
compacted as it grows into ``results.jsonl.gz``, gzip members whose long texts (the knowledge
graph, tool documents, system prompt every case's prompt repeats) are interned once per run
(results/text_interning.py). A finished run's folder holds that ``.gz`` alone.

* Under xdist each worker also journals its own results (``worker-<id>.jsonl``, compacted as
  the run's journal is): the backstop of the report channel. At the session end the controller
  merges what only they hold into the run's journal (:func:`merge_worker_journals`) and, once
  the run's journal is closed whole and every worker has ended, removes them
  (:func:`remove_worker_journals`).
* The run folder's ``report.json`` keeps the run, metrics and gates and names the journal in
  ``cases_journal`` instead of repeating every case (:func:`cases_reference`); readers go through
  :func:`resolve_cases`, which fills ``cases`` from the journal exactly as the report would have
  held them (the last result per case id, in the report's order), and reads reports that hold
  their cases inline (``--toolbench-json``, older runs) as they are.
* Files the run's processes share only while it runs (FamilyTool's extraction memo) live in
  its ``scratch/`` folder (:func:`scratch_dir`), removed with the worker journals once the run
  has ended whole (:func:`remove_scratch`): the journal holds what the cases made of them. The
  selection (:func:`write_selection`) is one: a run killed before its end names from it the
  cases it left without a result when ``toolbench finish`` scores it (session/killed_run.py).
* Older run folders (plain ``results.jsonl``, worker journals beside it) read the same way.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic_core

from pytest_toolbench.results.case_result import CaseResult
from pytest_toolbench.results.journal import (
    InvalidLineNote,
    JournalError,
    ResultJournal,
    iter_journal_lines,
    journal_array,
    journal_files,
    line_case_id,
    read_journal,
    recover_missing,
)
from pytest_toolbench.results.packed_journal import PackedJournalError

#: The run's journal, as the run folder names it (``.gz`` beside it once compacted).
JOURNAL_NAME = "results.jsonl"
#: The key of a run folder's report that names the journal holding its cases.
CASES_REF = "cases_journal"


class CaseStoreError(ValueError):
    """A report's cases cannot be read from the journal it names (message: one line)."""


def journal_path(run_dir: Path) -> Path:
    return Path(run_dir) / JOURNAL_NAME


def run_journal(run_dir: Path) -> ResultJournal:
    """The run's own journal: compacted into gzip as it grows, and when closed."""
    return ResultJournal(journal_path(run_dir), compact=True)


#: zlib level of the workers' journals: read back only if a report went missing, then removed,
#: so cheap compression, and no interned texts, so the session end's merge reads one member at
#: a time. A FamilyTool run over the shared data (5,628 cases, -n 2) peaked at 80 MB in its run
#: folder with them plain, for 3 MB at its end; its 72 MB of lines pack to 8.0 MB so (0.25 s of
#: CPU; interned and at level 1: 5.4 MB, 0.65 s).
WORKER_LEVEL = 1


def worker_journal(run_dir: Path, worker: str) -> ResultJournal:
    """An xdist worker's backstop journal, compacted as the run's is (cheaper, see above)."""
    return ResultJournal(Path(run_dir) / f"worker-{worker}.jsonl", compact=True,
                         level=WORKER_LEVEL, intern=False)


def journal_parts(run_dir: Path) -> list[Path]:
    """Every file of the run's journal and the worker journals that exists."""
    paths = [journal_path(run_dir), *worker_journal_paths(run_dir)]
    return [part for path in paths for part in journal_files(path)]


def worker_journal_paths(run_dir: Path) -> list[Path]:
    """Each worker journal's path (its plain file's name) of which any file exists: the plain
    file, a pending one or the compacted ``.gz`` (a closed journal is the ``.gz`` alone)."""
    names = {p.name[:p.name.index(".jsonl")] for p in Path(run_dir).glob("worker-*.jsonl*")}
    return [Path(run_dir) / f"{name}.jsonl" for name in sorted(names)]


#: The run folder's folder of files shared only while the run runs.
SCRATCH = "scratch"


def scratch_dir(run_dir: Path, name: str) -> Path:
    """``name``'s folder among the run's scratch files (not made: its user makes it)."""
    return Path(run_dir) / SCRATCH / name


#: The selected cases' ids, one per line, gzip: written once the selection is known.
SELECTION = "selection.txt.gz"
#: Their pytest node ids, line for line (``toolbench finish --junitxml`` names its testcases so).
SELECTION_NODES = "selection-nodes.txt.gz"


def write_selection(run_dir: Path, case_ids: list[str], node_ids: list[str] | None = None) -> None:
    """Keep the ids of the selected cases (after -k/-m, repeats expanded), and their node ids
    line for line, among the scratch files. Not durable (no fsync): it matters only if the run
    is killed, and a machine that goes down may at worst lose it, leaving the missing cases
    unnamed."""
    _write_lines(Path(run_dir) / SCRATCH / SELECTION, case_ids)
    if node_ids is not None:
        _write_lines(Path(run_dir) / SCRATCH / SELECTION_NODES, node_ids)


def read_selection(run_dir: Path) -> list[str] | None:
    """The ids :func:`write_selection` kept, in selection order; None when none were kept (or
    they cannot be read: the missing cases are then unknown, not wrongly named)."""
    return _read_lines(Path(run_dir) / SCRATCH / SELECTION)


def read_selection_nodes(run_dir: Path, ids: list[str] | None) -> dict[str, str] | None:
    """Each of the kept case ``ids`` (as :func:`read_selection` gave them) with its node id, in
    selection order; None when they were not kept (a run of an older version) or do not pair
    line for line with the ids."""
    nodes = _read_lines(Path(run_dir) / SCRATCH / SELECTION_NODES)
    if ids is None or nodes is None or len(ids) != len(nodes):
        return None
    return dict(zip(ids, nodes))


def _write_lines(path: Path, lines: list[str]) -> None:
    import gzip

    from pytest_toolbench.fileio import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress("".join(f"{line}\n" for line in lines).encode("utf-8"), compresslevel=1,
                         mtime=0)
    atomic_write_bytes(path, data, durable=False)


def _read_lines(path: Path) -> list[str] | None:
    import gzip

    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError):  # gzip.BadGzipFile is an OSError
        return None
    return text.split("\n")[:-1]  # as written: not splitlines, which an id's U+2028 would split


def remove_scratch(run_dir: Path) -> None:
    """Every scratch file of the run (called once the run has ended whole)."""
    shutil.rmtree(Path(run_dir) / SCRATCH, ignore_errors=True)


def merge_worker_journals(run_dir: Path, results: dict[str, CaseResult],
                          append: Callable[[CaseResult], None], *,
                          on_invalid: InvalidLineNote | None = None) -> int:
    """Results only the worker journals hold (a report lost on its way to the controller) go
    into ``results`` and, through ``append``, into the run's journal; returns how many. A bad
    line: results/journal.py ``read_journal``."""
    before = set(results)
    recovered = recover_missing(worker_journal_paths(run_dir), results, on_invalid=on_invalid)
    for case_id, result in list(results.items()):
        if case_id not in before:
            append(result)
    return recovered


def remove_worker_journals(run_dir: Path) -> None:
    """Every file of the worker journals (called once the run's journal holds their results)."""
    for path in worker_journal_paths(run_dir):
        for part in journal_files(path):
            part.unlink(missing_ok=True)


def count_results(run_dir: Path) -> int:
    """Results journalled so far (a running or killed run): the run's journal, or a worker's if
    one holds more (a controller killed before the workers' reports reached it)."""
    counts = []
    for path in [journal_path(run_dir), *worker_journal_paths(run_dir)]:
        try:
            with warnings.catch_warnings():  # a count for a listing: a torn line is not news
                warnings.simplefilter("ignore")
                counts.append(sum(1 for _ in iter_journal_lines(path)))
        except (OSError, ValueError):
            continue
    return max(counts, default=0)


def cases_reference(count: int) -> dict[str, Any]:
    """What a run folder's report holds instead of its cases: the journal, relative to the
    report's folder, and how many cases the report has."""
    return {"file": JOURNAL_NAME, "count": count}


#: The fields a report sorts its cases by, in this order (RunRecord.build and the readers here).
CASE_ORDER = ("case_id", "scenario", "benchmark")


def result_order(result: CaseResult) -> tuple[str, ...]:
    """A result's place in a report (sort key)."""
    return tuple(getattr(result, field) for field in CASE_ORDER)


def report_order(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last result per case id, sorted as a report sorts its cases (:func:`result_order`)."""
    latest = {c.get("case_id"): c for c in cases}
    return sorted(latest.values(), key=lambda c: tuple(str(c.get(field)) for field in CASE_ORDER))


def resolve_cases(data: dict[str, Any], report: Path) -> None:
    """Fill ``data["cases"]`` from the journal a run folder's report names (no-op for a report
    with its cases inline); :class:`CaseStoreError` when the journal is missing, unreadable or
    holds another number of cases than the report says."""
    ref = data.get(CASES_REF)
    if "cases" in data or not isinstance(ref, dict):
        return
    name = ref.get("file")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise CaseStoreError(f"{report}: '{CASES_REF}' names no journal file in its folder")
    path = Path(report).parent / name
    if not journal_files(path):
        raise CaseStoreError(f"{report}: its cases are in {path}, which is missing")
    try:
        # pydantic-core's parser: the same values as json.loads (NaN included), in 0.7x its CPU
        cases = report_order(pydantic_core.from_json(journal_array(path)))
    except (OSError, JournalError, PackedJournalError, ValueError) as exc:
        raise CaseStoreError(f"{report}: cannot read its cases from {path} ({exc})") from None
    if len(cases) != ref.get("count"):
        raise CaseStoreError(f"{report}: its journal {path} holds {len(cases)} cases, the report "
                             f"says {ref.get('count')}")
    del data[CASES_REF]
    data["cases"] = cases


def journal_case_lines(run_dir: Path) -> tuple[Path, dict[str | None, bytes]]:
    """The run's journal and its last line per case id, unparsed: a writer that streams a
    report's cases (results/held_results.py ``whole_cases``) parses one at a time, so the
    cases are never all in memory as Python values (a FamilyTool run's 5,628 took ~250 MB).
    :class:`CaseStoreError` when the journal cannot be read."""
    path = journal_path(run_dir)
    try:
        lines = iter_journal_lines(path) if journal_files(path) else iter(())
        return path, {line_case_id(line): line for _where, _n, line in lines}
    except (OSError, JournalError, PackedJournalError, ValueError) as exc:
        raise CaseStoreError(f"cannot read the cases back from {path} ({exc})") from None


def read_cases(run_dir: Path) -> list[CaseResult]:
    """The run's cases from its journal alone (a run killed before its report), report order."""
    results = {r.case_id: r for r in read_journal(journal_path(run_dir))}
    return sorted(results.values(), key=result_order)
