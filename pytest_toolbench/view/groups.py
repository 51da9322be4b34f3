"""Which runs may be ranked together: the same data (kind, revision, fingerprint per benchmark,
results/provenance.py) and the same coverage (full suite, or the same subset size).

A leaderboard that sorts a run on the bundled sample above one on the real data, or a 12-case
subset above a full run, ranks numbers that do not measure the same thing. Each run gets a group;
the leaderboard sorts within a group only and says what each group's data is.
"""

from __future__ import annotations

from collections.abc import Sequence


from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.view.load import ViewRun


class DataGroup(DeferredModel):
    """Runs on the same data and the same coverage."""

    letter: str
    #: One line per benchmark: its data and its coverage.
    lines: list[str]
    keys: list[str]


def _signature(run: ViewRun) -> tuple[tuple[str, ...], ...]:
    """Per benchmark: data kind, revision, fingerprint, cases and whether it was a subset."""
    coverage = run.record.run.coverage
    out = []
    for d in run.data():
        cov = coverage.get(d.benchmark)
        cases = str(cov.cases) if cov else "?"
        subset = "subset" if cov is None or cov.subset else "full"
        out.append((d.benchmark, d.kind, d.revision or "", d.fingerprint or "", cases, subset))
    return tuple(out)


def _line(sig: tuple[str, ...], run: ViewRun) -> str:
    benchmark, _kind, _rev, _fp, cases, subset = sig
    data = next(d for d in run.data() if d.benchmark == benchmark)
    cov = run.record.run.coverage.get(benchmark)
    if subset == "full":
        what = f"full suite, {cases} cases"
    elif cov is not None and cov.suite_cases:
        what = f"SUBSET: {cases} of {cov.suite_cases} cases"
    else:
        what = f"{cases} cases (coverage not recorded)"
    return f"{data.short()}; {what}"


def data_groups(runs: Sequence[ViewRun]) -> list[DataGroup]:
    """Groups in the order their first run appears; letters A, B, ... (then A2, B2...)."""
    groups: dict[tuple, DataGroup] = {}
    for run in runs:
        sig = _signature(run)
        if sig not in groups:
            i = len(groups)
            letter = chr(ord("A") + i % 26) + (str(i // 26 + 1) if i >= 26 else "")
            groups[sig] = DataGroup(letter=letter, lines=[_line(s, run) for s in sig] or
                                    ["no results recorded"], keys=[])
        groups[sig].keys.append(run.key)
    return list(groups.values())


def group_of(groups: Sequence[DataGroup]) -> dict[str, DataGroup]:
    return {k: g for g in groups for k in g.keys}


__all__ = ["DataGroup", "data_groups", "group_of"]
