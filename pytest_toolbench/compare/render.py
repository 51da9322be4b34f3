"""The comparison as plain-text tables (``toolbench compare``, the pytest summary) that fit the
width they are given: a pipe table, wrapped, or one block per row (text_table.py). The old rich
tables were 176 columns with lines of trailing spaces in an 80-column CI log.

Differences of rates are in percentage points ("pp"); a leading "+" means the run is higher than
the reference, whatever the metric's direction (the direction column says which way is better).
"""

from __future__ import annotations

from pytest_toolbench.compare.changed_cases import changed_lines
from pytest_toolbench.results.comparison import Comparison, MetricComparison, PairedDiff, RunValue
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.text_table import DEFAULT_WIDTH, TextTable, pipe_table
from pytest_toolbench.word_wrap import wrap_words


def fmt_value(v: RunValue | None, is_rate: bool) -> str:
    if v is None:
        return "-"
    if v.value is None:
        return f"n/a n={v.n}"
    if v.value != v.value:
        return f"nan n={v.n}"
    num = (lambda x: f"{100 * x:.2f}") if is_rate else (lambda x: f"{x:.4g}")
    unit = "%" if is_rate else ""
    ci = "" if v.ci_low is None or v.ci_high is None else f" [{num(v.ci_low)}, {num(v.ci_high)}]"
    return f"{num(v.value)}{unit}{ci}"


def fmt_diff(d: PairedDiff, is_rate: bool) -> str:
    if d.diff is None:
        return "n/a"
    if d.diff != d.diff:
        return "nan"
    num = (lambda x: f"{100 * x:+.2f}") if is_rate else (lambda x: f"{x:+.4g}")
    unit = " pp" if is_rate else ""
    ci = "" if d.ci_low is None or d.ci_high is None else f" [{num(d.ci_low)}, {num(d.ci_high)}]"
    return f"{num(d.diff)}{unit}{ci}"


def fmt_mcnemar(d: PairedDiff) -> str:
    t = d.mcnemar
    if t is None:
        return "-"
    return f"{t.b}/{t.c} p={t.p_value:.3g}" + ("" if t.method == "exact" else " (chi2)")


def coverage_lines(comp: Comparison, benchmark: str) -> list[str]:
    """One line per scenario and run, e.g. "toolhop/direct B vs A: 6 paired; only in A: 0,
    only in B: 1"; one per run with no case of the benchmark at all."""
    lines = []
    scenarios = [s for s in comp.scenarios if s.benchmark == benchmark]
    # A run with no case of the benchmark (a third run of one benchmark beside two of two): one
    # line, not one "0 paired; only in A: 11, only in C: 0" per scenario.
    absent = {cov.run for s in scenarios for cov in s.coverage} - {
        cov.run for s in scenarios for cov in s.coverage if cov.n_paired or cov.only_in_run}
    lines += [f"{benchmark}: {letter(i)} has no case of it (its cells are -)"
              for i in sorted(absent)]
    for s in scenarios:
        for cov in s.coverage:
            if cov.run in absent:
                continue
            other = letter(cov.run)
            text = (f"{s.benchmark}/{s.scenario} {other} vs A: {cov.n_paired} paired; "
                    f"only in A: {cov.only_in_reference}, only in {other}: {cov.only_in_run}")
            if cov.error_in_either:
                text += f"; {cov.error_in_either} paired with an infrastructure error (not scored)"
            lines.append(text)
    return lines


def not_compared_lines(comp: Comparison) -> list[str]:
    """One line per benchmark left out because no run pairs with A on it, e.g. "familytool:
    only in A (66 cases); no other run has it, so nothing to compare"."""
    lines = []
    for u in comp.not_compared:
        if u.n_cases[0]:
            lines.append(f"{u.benchmark}: only in A ({u.n_cases[0]} cases); no other run has "
                         "it, so nothing to compare")
            continue
        held = ", ".join(f"{letter(i)} {n} cases" for i, n in enumerate(u.n_cases) if n)
        lines.append(f"{u.benchmark}: not compared, A has no case of it ({held}); differences "
                     "are against A")
    return lines


def unequal_cases_note(comp: Comparison, benchmark: str) -> str | None:
    """Said above the values when the runs do not hold the same cases (a --limit run against a
    full one): "A 16.67%  B 0.00%  B - A +0.00 pp" then read as a contradiction, the values
    being over each run's own cases and the difference over the pairs only."""
    if not any(cov.only_in_reference or cov.only_in_run
               for s in comp.scenarios if s.benchmark == benchmark for cov in s.coverage):
        return None
    return ("the runs hold different cases: each value is over its own run's cases, each "
            "difference over the paired cases only (the counts are under the values)")


def change_lines(comp: Comparison, benchmark: str, *, code: bool = False) -> list[str]:
    """The cases that went from right to wrong (and back) per scenario and run, by id (bounded
    per line; the JSON keeps every id under ``scenarios[].changes``)."""
    lines = []
    for s in comp.scenarios:
        if s.benchmark == benchmark:
            for ch in s.changes:
                lines += changed_lines(f"{s.benchmark}/{s.scenario}", ch, letter(ch.run), code=code)
    return lines


def letter(i: int) -> str:
    """Short column names for runs: A, B, ..., Z, R27, ..."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def legend(comp: Comparison) -> list[str]:
    out = []
    for i, r in enumerate(comp.runs):
        where = f" ({r.path})" if r.path else ""
        ref = " [reference]" if i == 0 else ""
        out.append(f"{letter(i)} = {r.label}{where}{ref}")
        if r.data:
            out.append(f"    data: {r.data}")
        tokens = r.usage.text(r.model_calls, r.cached_calls or 0) if r.usage else None
        if tokens:
            out.append(f"    tokens: {tokens}")
    out += comp.different_data
    return out


def benchmark_table(comp: Comparison, benchmark: str) -> TextTable:
    """One row per scenario, metric and subgroup: each run's value with its CI, then per run
    after A its paired difference, McNemar's b/c and p, and the number of pairs. Text columns and
    the values may wrap between words (``83.33%`` over ``[50.00, 100.00]``) before the table
    goes vertical (text_table.py)."""
    pct = f"{100 * comp.confidence:g}%"
    columns = ["scenario", "metric / subgroup"]
    columns += [f"{letter(i)} [{pct} CI]" for i, _ in enumerate(comp.runs)]
    for i in range(1, len(comp.runs)):
        columns += [f"{letter(i)} - A [paired {pct}]", f"McNemar {letter(i)} vs A b/c p",
                    "n paired"]
    rows = []
    for s in comp.scenarios:
        if s.benchmark != benchmark:
            continue
        for m in s.metrics:
            cells = [s.scenario, _name(m)]
            cells += [fmt_value(v, m.is_rate) for v in m.values]
            for d in m.diffs:
                cells += [fmt_diff(d, m.is_rate), fmt_mcnemar(d), str(d.n_paired)]
            rows.append(cells)
    # TextTable escapes the cells: scenario and subgroup labels are data
    return TextTable(columns, rows, align=["l", "l"] + ["r"] * (len(columns) - 2))


def packed_lines(comp: Comparison, benchmark: str, width: int) -> list[str]:
    """Below the table's width: per scenario a title line, per metric its name and each run's
    value, then per run after A its difference, McNemar and pairs, packed onto as few lines of
    ``width`` as fit (a part never splits: ``B - A +16.67 pp [-10.00, 40.00]`` stays whole)."""
    pct = f"{100 * comp.confidence:g}%"
    out = [f"values [{pct} CI]; B - A [paired {pct} CI], McNemar b/c p, pairs"]
    for s in comp.scenarios:
        if s.benchmark != benchmark:
            continue
        out.append(safe_text(f"{s.benchmark} / {s.scenario}"))
        for m in s.metrics:
            parts = [f"{letter(i)} {fmt_value(v, m.is_rate)}" for i, v in enumerate(m.values)]
            lines = _pack("  " + safe_text(_name(m)), parts, width)
            for i, d in enumerate(m.diffs, start=1):
                lines += _pack(f"    {letter(i)} - A", [fmt_diff(d, m.is_rate),
                                                     f"McNemar {fmt_mcnemar(d)}",
                                                     f"{d.n_paired} paired"], width)
            out += lines
    return out


def _pack(head: str, parts: list[str], width: int) -> list[str]:
    """``head  part  part`` while it fits ``width``, then on lines indented by 6."""
    lines, line = [], head
    for part in parts:
        if len(line) + 2 + len(part) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * 6 + part
        else:
            line += "  " + part
    return [*lines, line.rstrip()]


def table_title(comp: Comparison, benchmark: str) -> str:
    differ = " (DIFFERENT DATA, --allow-different-data)" if comp.different_data else ""
    return f"{benchmark}: {' vs '.join(r.label for r in comp.runs)}{differ}"


def _name(m: MetricComparison) -> str:
    arrow = "" if m.higher_is_better else " (lower better)"
    return f"{m.row_name}{arrow}"


def comparison_lines(comp: Comparison, width: int) -> list[str]:
    """The comparison's lines, none longer than ``width`` unless a single word is (a path, a
    case id), none ending in a space."""
    out: list[str] = []
    for line in legend(comp):  # run labels and paths may hold anything a user named them
        out += wrap_words(safe_text(line), width)
    out += wrap_words("McNemar b = cases with value 1 (e.g. right) in A and 0 in the other run, "
                      "c = the reverse; differences of rates in percentage points (pp)", width)
    for benchmark in comp.benchmarks():
        out += wrap_words(safe_text(table_title(comp, benchmark)), width)
        unequal = unequal_cases_note(comp, benchmark)
        if unequal:
            out += wrap_words(unequal, width)
        out += pipe_table(benchmark_table(comp, benchmark), width) or packed_lines(
            comp, benchmark, width)
        for line in coverage_lines(comp, benchmark) + change_lines(comp, benchmark):
            out += wrap_words(safe_text(line), width)
        out.append("")
    for line in not_compared_lines(comp):
        out += wrap_words(safe_text(line), width)
    if comp.unknown_benchmarks:
        out += wrap_words("no metric declarations for " + ", ".join(comp.unknown_benchmarks)
                          + " (not a registered benchmark): values only, no paired statistics",
                          width)
    # why each is partial: "interrupted" was said of a run -x stopped or one that lost cases too
    partial = [f"{r.label}: {r.partial_reason or 'interrupted'}" for r in comp.runs if r.partial]
    if partial:
        out += wrap_words(safe_text("PARTIAL runs (fewer cases than they selected): "
                                    + "; ".join(partial)), width)
    return out


def comparison_text(comp: Comparison, *, width: int = DEFAULT_WIDTH) -> str:
    """Plain text (no colour codes) for ``toolbench compare``, pytest's terminal reporter and CI
    logs, at ``width`` columns."""
    return "".join(line + "\n" for line in comparison_lines(comp, width))


def baseline_summary(comp: Comparison, *, width: int = DEFAULT_WIDTH) -> str:
    """The ``--baseline`` section of the pytest terminal summary (A = baseline, B = this run)."""
    head = wrap_words("== comparison with the baseline (B - A: this run minus the baseline) ==", width)
    return "\n" + "\n".join(head) + "\n" + comparison_text(comp, width=width)
