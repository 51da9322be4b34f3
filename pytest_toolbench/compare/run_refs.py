"""What ``toolbench compare`` accepts for a run: a report path, a run folder, or a run id as
``toolbench runs`` prints it (its folder's ``report.json``), so nobody has to dig the path out of
the runs folder.

A unique prefix of a run id works too (``20260101-1200`` when only one run starts so). And before
comparing, runs that share no benchmark are refused: pairing a ToolHop run with a FamilyTool run
gives "0 paired" everywhere, which reads like a result but is a mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_toolbench.compare.load import LoadedRun, RunLoadError, report_file


def resolve_run(ref: str, runs_dir: Path) -> Path:
    """The report file ``ref`` names: a path (it exists, has a "/" or ends in .json; a run
    folder stands for its report), else a run id (or a unique prefix of one) under
    ``runs_dir``. RunLoadError (one line) for an id that names no run, or a run with no
    report."""
    if names_a_path(ref):  # load_run says what is wrong with it
        return report_file(Path(ref))
    return report_file(resolve_run_dir(ref, runs_dir, nor="no such report file"))


def names_a_path(ref: str) -> bool:
    """Whether a run reference is a path (it exists, has a "/" or ends in .json), not a run id:
    the one rule for ``toolbench compare`` and ``--baseline``."""
    return Path(ref).exists() or "/" in ref or ref.endswith(".json")


def resolve_run_dir(ref: str, runs_dir: Path, *, nor: str = "") -> Path:
    """The folder of the run whose id is ``ref`` (or starts with it, uniquely) under
    ``runs_dir``; RunLoadError (one line) when none or several match. ``nor``: what else ``ref``
    was looked for as, when the caller also took it for something else (compare: a report
    file), said first in the error."""
    root = Path(runs_dir)
    folders = sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []
    exact = [d for d in folders if d.name == ref]
    matches = exact or ([d for d in folders if d.name.startswith(ref)] if ref else [])
    if len(matches) > 1:
        names = ", ".join(d.name for d in matches[:5]) + (" ..." if len(matches) > 5 else "")
        raise RunLoadError(f"{ref}: matches {len(matches)} runs ({names}); give more of the run id")
    if not matches:
        raise RunLoadError(f"{ref}: {nor + ', and ' if nor else ''}no run with that id in {root} "
                           "(`toolbench runs` lists them; --runs-dir picks another runs folder)")
    return matches[0]


def repeated_reports(paths: Sequence[Path], names: Sequence[str]) -> list[str]:
    """One line for each run whose report file an earlier run already named (the same id twice,
    an id and its folder, a path through a symlink): it is compared with itself, so every paired
    difference is 0 by construction, which reads like a result."""
    notes = []
    for i, path in enumerate(paths):
        for j in range(i):
            if _same_file(path, paths[j]):
                notes.append(f"{names[i]} is the same report as {names[j]} ({path}): "
                             "their differences are 0 by construction")
                break
    return notes


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:  # load_runs read both, so this is a race with a deletion: not the same
        return False


def benchmarks_of(run: LoadedRun) -> set[str]:
    """The benchmarks a run has results or metrics for."""
    return {c.benchmark for c in run.cases} | {s.benchmark for s in run.metrics.scenarios}


class DifferentBenchmarksError(ValueError):
    """Runs that share no benchmark: no case can pair, so they are refused as runs with no
    case in common are (``toolbench compare``'s exit 4), not as unreadable input (exit 2)."""


def check_same_benchmarks(runs: Sequence[LoadedRun]) -> None:
    """Refuse (ValueError, one line) a run with no case result, and (DifferentBenchmarksError)
    one that shares no benchmark with the first one."""
    for run in runs:
        if not run.cases:  # (a run interrupted before its first result has a report too)
            why = ("it was interrupted before any case finished" if run.partial
                   else "no case ran: its selection left none")
            raise ValueError(f"{run.run_id or run.path or run.label} has no case result ({why}): "
                             "nothing to compare")
    reference = benchmarks_of(runs[0])
    for run in runs[1:]:
        if not benchmarks_of(run) & reference:
            raise DifferentBenchmarksError(
                f"runs of different benchmarks cannot be compared: {_describe(runs[0])} vs "
                f"{_describe(run)}; no case can pair"
            )


def _describe(run: LoadedRun) -> str:
    where = run.run_id or run.path or run.label
    return f"{where} ({', '.join(sorted(benchmarks_of(run))) or 'no benchmark'})"


__all__ = ["DifferentBenchmarksError", "benchmarks_of", "check_same_benchmarks", "names_a_path",
           "repeated_reports", "resolve_run", "resolve_run_dir"]
