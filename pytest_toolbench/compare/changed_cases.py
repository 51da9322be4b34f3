"""Which cases changed between two runs: right in the reference and wrong in the other run, and
the reverse, by case id.

A metric's difference says *how much* a run moved; a reviewer deciding whether to merge also needs
*which* cases moved (to read their transcripts). "Right" is the case's own outcome (the benchmark's
correctness criterion, ``Outcome.PASSED``), so every benchmark has it. A case that ran several
times (``--repeats``) is its share of right runs, and it counts as worse (better) when that share
went down (up). Cases with an infrastructure error in either run are not listed: the comparison's
coverage already counts them, and they say nothing about the model's answers.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.comparison import CaseChanges
from pytest_toolbench.results.repeats import base_case_id

ScenarioKey = tuple[str, str]

#: How many ids a rendered line lists before "... and N more" (the JSON keeps them all).
SHOWN_IDS = 10


def id_order(case_id: str) -> tuple[tuple[int, int | str], ...]:
    """Sort ``toolhop-9-direct`` before ``toolhop-10-direct`` (digit runs compare as numbers)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", case_id) if p)


def right_shares(results: Sequence[CaseResult]) -> dict[ScenarioKey, dict[str, float]]:
    """Per scenario, each case's share of right runs among its scored runs (errors left out; a
    case whose every run errored is absent)."""
    runs: dict[ScenarioKey, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.outcome is not Outcome.ERROR:
            runs[(r.benchmark, r.scenario)][base_case_id(r)].append(r.outcome is Outcome.PASSED)
    return {key: {cid: sum(v) / len(v) for cid, v in by_id.items()} for key, by_id in runs.items()}


def case_changes(
    reference: Sequence[CaseResult], other: Sequence[CaseResult], run: int
) -> dict[ScenarioKey, CaseChanges]:
    """Per scenario present in both runs, the cases scored in both whose outcome moved."""
    ref, new = right_shares(reference), right_shares(other)
    out: dict[ScenarioKey, CaseChanges] = {}
    for key in ref.keys() & new.keys():
        a, b = ref[key], new[key]
        both = sorted(a.keys() & b.keys(), key=id_order)
        out[key] = CaseChanges(run=run, worse=[c for c in both if b[c] < a[c]],
                               better=[c for c in both if b[c] > a[c]])
    return out


def _ids(ids: Sequence[str], limit: int, code: bool) -> str:
    shown = [f"`{c}`" if code else c for c in ids[:limit]]
    more = f" ... and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(shown) + more


def changed_lines(
    scenario: str, changes: CaseChanges, other: str, *, limit: int = SHOWN_IDS, code: bool = False
) -> list[str]:
    """Lines such as ``toolhop/mandatory right in A, wrong in B (2): id1, id2`` (ids bounded by
    ``limit``; ``code`` puts each id in backticks for Markdown). No line when nothing moved."""
    lines = []
    if changes.worse:
        lines.append(f"{scenario} right in A, wrong in {other} ({len(changes.worse)}): "
                     + _ids(changes.worse, limit, code))
    if changes.better:
        lines.append(f"{scenario} wrong in A, right in {other} ({len(changes.better)}): "
                     + _ids(changes.better, limit, code))
    return lines


__all__ = ["SHOWN_IDS", "CaseChanges", "case_changes", "changed_lines", "right_shares"]
