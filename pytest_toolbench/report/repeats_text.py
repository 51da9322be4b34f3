"""The terminal's ``--repeats`` section: pass@k / pass^k per scenario and the unstable cases."""

from __future__ import annotations

import textwrap

from pytest_toolbench.text_table import TextTable, render_table
from pytest_toolbench.results.repeats import RepeatStats


def render_repeats(stats: RepeatStats, *, max_unstable: int = 20, width: int = 120) -> str:
    """Plain-text section for the terminal summary (its table fits ``width``: text_table.py)."""
    k_max = stats.repeats
    lines = textwrap.wrap(
        f"repeats: each case ran {k_max} times; the metrics are means over all runs ('cases' "
        "counts runs; n and the CIs are over cases). pass@k: at least one of k runs passes; "
        f"pass^k: all k pass (unbiased estimators from the {k_max} runs)", width,
        subsequent_indent="    ", break_on_hyphens=False)
    head = ["scenario", "metric", "mean"] + [f"pass@{k}" for k in range(1, k_max + 1)] + [
        f"pass^{k}" for k in range(1, k_max + 1)] + ["unstable"]
    rows = []
    for s in stats.scenarios:
        for b in s.binary:
            rows.append([f"{s.benchmark}.{s.scenario}", b.metric, _pct(b.mean)]
                        + [_pct(p.pass_at) for p in b.by_k] + [_pct(p.pass_hat) for p in b.by_k]
                        + [f"{s.n_unstable}/{s.n_cases}"])
        if not s.binary:
            rows.append([f"{s.benchmark}.{s.scenario}", "(no binary metric)", ""]
                        + [""] * (2 * k_max) + [f"{s.n_unstable}/{s.n_cases}"])
    lines += render_table(TextTable(head, [[str(c) for c in r] for r in rows],
                                    align=["l", "l"] + ["r"] * (len(head) - 2), wrap={0}), width)
    if stats.unstable:
        lines.append(f"unstable cases ({len(stats.unstable)}): outcome per repeat")
        for u in stats.unstable[:max_unstable]:
            marks = "".join({"passed": "P", "failed": "F", "error": "E"}.get(o, "-") for o in u.outcomes)
            extra = f"  differs: {', '.join(u.metrics)}" if u.metrics else ""
            lines.append(f"  {u.case_id}  {marks}  ({u.n_passed}/{u.n_scored} passed){extra}")
        if len(stats.unstable) > max_unstable:
            lines.append(f"  ... {len(stats.unstable) - max_unstable} more in the JSON report")
    else:
        lines.append("unstable cases: none")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"
