"""The end-of-run summary as plain text, for pytest's terminal reporter and CI logs.

Rendered with rich into a string (no colour codes, ASCII-safe Markdown-style tables) so the
plugin can write it through ``terminalreporter`` and it stays readable in a 120-column log.
"""

from __future__ import annotations

from io import StringIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pytest_toolbench.results.aggregate import MetricValue, ReportTable, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.gates import GateVerdict


def format_number(x: float | None, *, is_rate: bool) -> str:
    if x is None:
        return "n/a"
    if x != x:  # nan, printed as upstream prints it (not "nan%")
        return "nan"
    return f"{100 * x:.2f}%" if is_rate else f"{x:.4g}"


def format_ci(mv: MetricValue, *, compact: bool = False) -> str:
    if mv.ci_low is None or mv.ci_high is None:
        return "n/a"
    if compact and mv.is_rate:  # "[35.00, 75.00]" inside a % cell
        return f"[{100 * mv.ci_low:.2f}, {100 * mv.ci_high:.2f}]"
    lo = format_number(mv.ci_low, is_rate=mv.is_rate)
    hi = format_number(mv.ci_high, is_rate=mv.is_rate)
    return f"[{lo}, {hi}]"


def _table(title: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.MARKDOWN, show_edge=True, pad_edge=True)


def _metric_table(s: ScenarioMetrics, confidence_label: str) -> Table:
    t = _table()
    t.add_column("metric", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column(confidence_label, justify="right", no_wrap=True)
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)  # direction hint
    for mv in s.metrics.values():
        t.add_row(
            mv.name,
            format_number(mv.value, is_rate=mv.is_rate),
            format_ci(mv),
            str(mv.n),
            "higher is better" if mv.higher_is_better else "lower is better",
        )
    return t


def _breakdown_table(s: ScenarioMetrics, label: str) -> Table:
    t = _table()
    t.add_column(label, justify="right", no_wrap=True)
    t.add_column("cases", justify="right", no_wrap=True)
    names = list(s.metrics)
    for name in names:
        t.add_column(f"{name} [95% CI] n", justify="right", no_wrap=True)
    for g in s.breakdown.get(label, []):
        cells = []
        for name in names:
            mv = g.metrics.get(name)
            if mv is None:
                cells.append("-")
                continue
            value = format_number(mv.value, is_rate=mv.is_rate)
            ci = "" if mv.value is None else f" {format_ci(mv, compact=True)}"
            cells.append(f"{value}{ci} n={mv.n}")
        errors = f" ({g.n_errors} err)" if g.n_errors else ""
        t.add_row(g.group, f"{g.n_cases}{errors}", *cells)
    return t


def _scenario_notes(s: ScenarioMetrics) -> list[str]:
    notes = []
    if s.n_errors:
        kinds = ", ".join(f"{k} x{v}" for k, v in s.error_kinds.items())
        plural = "error" if s.n_errors == 1 else "errors"
        notes.append(f"{s.n_errors} infrastructure {plural} excluded from metrics: {kinds}")
    else:
        notes.append("0 infrastructure errors")
    if s.n_parse_failures:
        notes.append(
            f"{s.n_parse_failures} tool-call parse failure(s) in {s.n_cases_with_parse_failures} "
            "case(s) (scored as the benchmark scores them; raw text in the JSON/Allure report)"
        )
    else:
        notes.append("0 tool-call parse failures")
    return notes


def _gate_table(verdicts: list[GateVerdict]) -> Table:
    t = _table()
    t.add_column("verdict", no_wrap=True)
    t.add_column("gate", overflow="fold")
    t.add_column("actual", justify="right", no_wrap=True)
    t.add_column("reason", overflow="fold")
    for v in verdicts:
        actual = "n/a" if v.actual is None else f"{v.actual:.4g}"
        t.add_row("PASS" if v.passed else "FAIL", v.gate, actual, v.reason)
    return t


def _console(buf: StringIO, width: int) -> Console:
    return Console(
        file=buf, width=width, force_terminal=False, color_system=None, highlight=False,
        emoji=False, markup=False, soft_wrap=False,
    )


def render_gates(verdicts: list[GateVerdict], *, width: int = 120) -> str:
    """The gate table alone (printed last, after pytest's own lines, so CI logs end on it)."""
    buf = StringIO()
    console = _console(buf, width)
    failed = sum(not v.passed for v in verdicts)
    status = "all passed" if not failed else f"{failed} FAILED"
    console.print(Text(f"== gates: {len(verdicts)} checked, {status} =="))
    console.print(_gate_table(verdicts))
    return _tidy(buf.getvalue())


def render_summary(
    metrics: RunMetrics,
    verdicts: list[GateVerdict],
    *,
    width: int = 120,
    confidence: float = 0.95,
    run_notes: list[str] | None = None,
    include_gates: bool = True,
) -> str:
    """The whole summary: run notes (data, subset, cache, partial), per-scenario metric and
    breakdown tables, error notes, and (unless ``include_gates`` is False) the gate verdicts."""
    buf = StringIO()
    console = _console(buf, width)
    ci_label = f"{round(100 * confidence)}% CI"
    for note in run_notes or []:
        console.print(Text(note), soft_wrap=True)  # a path must stay on one line
    if not metrics.scenarios:
        console.print("pytest-toolbench: no case results were collected")
    for s in metrics.scenarios:
        scored = s.n_cases - s.n_errors
        console.print(
            Text(f"== {s.benchmark} / {s.scenario}: {s.n_cases} cases, {scored} scored ==")
        )
        if s.metrics:
            console.print(_metric_table(s, ci_label))
        else:
            console.print("(no metrics declared for this scenario)")
        for label in s.breakdown:
            console.print(Text(f"-- {s.benchmark} / {s.scenario} by {label} --"))
            console.print(_breakdown_table(s, label))
        for note in _scenario_notes(s):
            console.print(Text(note))
        console.print()
    for table in metrics.tables:
        console.print(Text(f"== {table.benchmark}: {table.title} =="))
        console.print(_report_table(table))
        if table.note:
            console.print(Text(table.note))
        console.print()
    text = _tidy(buf.getvalue())
    if verdicts and include_gates:
        text += render_gates(verdicts, width=width)
    return text


def _report_table(table: ReportTable) -> Table:
    """A benchmark's own table (e.g. the paper's layout): each numeric column is as wide as its
    widest cell or header word, so headers wrap between words and nothing is cut ("Overall" stays
    whole); the first (label) column folds when the terminal is narrow."""
    out = _table()
    cells = [["n/a" if cell is None else str(cell) for cell in row] for row in table.rows]
    for i, column in enumerate(table.columns):
        if i == 0:
            out.add_column(column, justify="left", overflow="fold")
            continue
        widest_word = max((len(w) for w in str(column).split()), default=0)
        widest_cell = max((len(r[i]) for r in cells if i < len(r)), default=0)
        out.add_column(column, justify="right", width=max(widest_word, widest_cell))
    for row in cells:
        out.add_row(*row)
    return out


def _tidy(text: str) -> str:
    """Strip rich's trailing padding and the blank rows the Markdown box draws as edges."""
    out: list[str] = []
    for line in (ln.rstrip() for ln in text.splitlines()):
        if not line and (not out or not out[-1] or out[-1].startswith(("==", "--"))):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def coverage_notes(covered: dict[str, int], suite: dict[str, int]) -> list[str]:
    """``subset: 40 of 240 cases`` per benchmark whose metrics do not cover its whole suite."""
    out = []
    for name in sorted(covered):
        total = suite.get(name)
        if total is not None and covered[name] < total:
            out.append(f"{name} subset: {covered[name]} of {total} cases "
                       "(metrics cover only these; not comparable with a full run)")
    return out


def cache_note(model_calls: int, cached_calls: int) -> str | None:
    if not cached_calls:
        return None
    return f"replies from the response cache: {cached_calls} of {model_calls} model calls"
