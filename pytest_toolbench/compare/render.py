"""The comparison as tables: rich for the terminal (``toolbench compare``, the pytest summary).

Differences of rates are in percentage points ("pp"); a leading "+" means the run is higher than
the reference, whatever the metric's direction (the direction column says which way is better).
"""

from __future__ import annotations

from io import StringIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pytest_toolbench.compare.changed_cases import changed_lines
from pytest_toolbench.results.comparison import Comparison, MetricComparison, PairedDiff, RunValue
from pytest_toolbench.results.safe_text import safe_text


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
    only in B: 1"."""
    lines = []
    for s in comp.scenarios:
        if s.benchmark != benchmark:
            continue
        for cov in s.coverage:
            other = letter(cov.run)
            text = (f"{s.benchmark}/{s.scenario} {other} vs A: {cov.n_paired} paired; "
                    f"only in A: {cov.only_in_reference}, only in {other}: {cov.only_in_run}")
            if cov.error_in_either:
                text += f"; {cov.error_in_either} paired with an infrastructure error (not scored)"
            lines.append(text)
    return lines


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
    out += comp.different_data
    return out


def benchmark_table(comp: Comparison, benchmark: str) -> Table:
    pct = f"{100 * comp.confidence:g}%"
    differ = " (DIFFERENT DATA, --allow-different-data)" if comp.different_data else ""
    title = Text(safe_text(f"{benchmark}: {' vs '.join(r.label for r in comp.runs)}{differ}"))
    t = Table(title=title, title_justify="left",
              box=box.MARKDOWN, show_edge=True, pad_edge=True)
    t.add_column("scenario", no_wrap=True)
    t.add_column("metric / subgroup", overflow="fold")
    for i, _ in enumerate(comp.runs):
        t.add_column(f"{letter(i)} [{pct} CI]", justify="right", overflow="fold")
    for i in range(1, len(comp.runs)):
        t.add_column(f"{letter(i)} - A [paired {pct}]", justify="right", overflow="fold")
        t.add_column(f"McNemar {letter(i)} vs A b/c p", justify="right", overflow="fold")
        t.add_column("n paired", justify="right", no_wrap=True)
    for s in comp.scenarios:
        if s.benchmark != benchmark:
            continue
        for m in s.metrics:
            cells = [s.scenario, _name(m)]
            cells += [fmt_value(v, m.is_rate) for v in m.values]
            for d in m.diffs:
                cells += [fmt_diff(d, m.is_rate), fmt_mcnemar(d), str(d.n_paired)]
            # Text: "[hops=3]" is not rich markup; labels come from datasets: shown escaped
            t.add_row(*(Text(safe_text(c)) for c in cells))
    return t


def _name(m: MetricComparison) -> str:
    arrow = "" if m.higher_is_better else " (lower better)"
    return f"{m.row_name}{arrow}"


def print_comparison(comp: Comparison, console: Console) -> None:
    for line in legend(comp):  # run labels and paths may hold anything a user named them
        console.print(safe_text(line), highlight=False, markup=False)
    console.print("McNemar b = cases with value 1 (e.g. right) in A and 0 in the other run, "
                  "c = the reverse; differences of rates in percentage points (pp)",
                  highlight=False, markup=False)
    for benchmark in comp.benchmarks():
        console.print(benchmark_table(comp, benchmark))
        for line in coverage_lines(comp, benchmark) + change_lines(comp, benchmark):
            console.print(safe_text(line), highlight=False, markup=False)
        console.print()
    if comp.unknown_benchmarks:
        console.print("no metric declarations for " + ", ".join(comp.unknown_benchmarks)
                      + " (not a registered benchmark): values only, no paired statistics",
                      highlight=False, markup=False)
    partial = [r.label for r in comp.runs if r.partial]
    if partial:
        console.print("PARTIAL runs (interrupted): " + ", ".join(partial), highlight=False,
                      markup=False)


def comparison_text(comp: Comparison, *, width: int = 200) -> str:
    """Plain text (no colour codes) for pytest's terminal reporter and CI logs."""
    buf = StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False,
                      highlight=False, emoji=False)
    print_comparison(comp, console)
    return buf.getvalue()


def baseline_summary(comp: Comparison, *, width: int = 200) -> str:
    """The ``--baseline`` section of the pytest terminal summary (A = baseline, B = this run)."""
    return "\n== comparison with the baseline (B - A: this run minus the baseline) ==\n" + (
        comparison_text(comp, width=width)
    )
