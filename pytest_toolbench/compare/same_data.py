"""Whether two recorded runs ran on the same data (results/provenance.py), for ``toolbench
compare`` and ``--baseline``: runs on different data (another fingerprint, real vs sample,
another revision) or with no case in common are refused, exit 4 with one line, unless
``--allow-different-data``; a run recorded before provenance was kept is refused only when no
case pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pytest_toolbench.compare.load import LoadedRun
from pytest_toolbench.compare.run_refs import benchmarks_of
from pytest_toolbench.results.provenance import BenchmarkData, mismatch, run_data

CaseKey = tuple[str, str, str]


def case_keys(cases: Iterable[Any]) -> set[CaseKey]:
    """(benchmark, scenario, case id without its repeat suffix) of results or selected cases."""
    out = set()
    for c in cases:
        cid = getattr(c, "case_id", None) or getattr(c, "id", "")
        rep = getattr(c, "repeat", None)
        suffix = f"-r{rep}" if rep is not None else ""
        if suffix and cid.endswith(suffix):
            cid = cid[: -len(suffix)]
        out.add((c.benchmark, c.scenario, cid))
    return out


def data_of(run: LoadedRun) -> list[BenchmarkData]:
    """A loaded run's data per benchmark (``unknown`` where its report kept none)."""
    return run_data(run.record.run.data_sources, sorted(benchmarks_of(run)))


def keys_mismatch(ref_name: str, ref_data: Sequence[BenchmarkData], ref_keys: set[CaseKey],
                  other_name: str, other_data: Sequence[BenchmarkData], other_keys: set[CaseKey],
                  ) -> str | None:
    """How the two differ (one line) or None, over the benchmarks both have."""
    shared = {k[0] for k in ref_keys} & {k[0] for k in other_keys}
    if not shared:  # no results on one side: judge by the benchmarks the data names
        shared = {d.benchmark for d in ref_data} & {d.benchmark for d in other_data}
    if not shared:  # not "no case in common (only in A: 0, only in B: 0)", which reads as a bug
        def ran(keys: set[CaseKey], data: Sequence[BenchmarkData]) -> str:
            return ", ".join(sorted({k[0] for k in keys} | {d.benchmark for d in data})) or "nothing"

        return (f"{ref_name} ran {ran(ref_keys, ref_data)} and {other_name} ran "
                f"{ran(other_keys, other_data)}: no benchmark in common")
    ref_in = {k for k in ref_keys if k[0] in shared}
    other_in = {k for k in other_keys if k[0] in shared}
    common = ref_in & other_in
    return mismatch(ref_name, ref_data, other_name, other_data, shared, n_common=len(common),
                    n_only_ref=len(ref_in - common), n_only_other=len(other_in - common))


def runs_mismatch(ref: LoadedRun, other: LoadedRun, ref_name: str, other_name: str) -> str | None:
    return keys_mismatch(ref_name, data_of(ref), case_keys(ref.cases),
                         other_name, data_of(other), case_keys(other.cases))


def run_name(run: LoadedRun, letter: str) -> str:
    where = run.run_id or run.path or run.label
    return f"{letter} ({where})"


def comparison_mismatches(runs: Sequence[LoadedRun], names: Sequence[str]) -> list[str]:
    """For each run after the first: how it differs from the first (only those that do)."""
    out = []
    for run, name in zip(runs[1:], names[1:]):
        what = runs_mismatch(runs[0], run, names[0], name)
        if what:
            out.append(what)
    return out


__all__ = ["case_keys", "comparison_mismatches", "data_of", "keys_mismatch", "run_name",
           "runs_mismatch"]
