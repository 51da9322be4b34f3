"""``--toolbench-md PATH``: the run as GitHub-flavoured Markdown, for a CI job summary.

Point it at ``$GITHUB_STEP_SUMMARY`` (GitHub renders the file under the job) or attach it to a
merge request. It opens with one overview table of every suite (a PR comment's first screen);
each benchmark's full tables follow, collapsed; paths under the run's folder are relative. Every table is a plain GFM pipe table (header, separator, rows of the same width);
cells escape ``|`` so a gate or subgroup can never break a table.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_toolbench.compare.render import (change_lines, coverage_lines, fmt_diff, fmt_mcnemar,
                                             fmt_value, not_compared_lines, unequal_cases_note)
from pytest_toolbench.compare.render import legend as comparison_legend
from pytest_toolbench.compare.render import letter
from pytest_toolbench.fileio import atomic_write_text
from pytest_toolbench.report.terminal import format_ci, format_number
from pytest_toolbench.results.aggregate import ReportTable, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.headline import DEFAULT_HEADLINE, Headline, headlines_of
from pytest_toolbench.results.comparison import Comparison
from pytest_toolbench.results.infra_errors import describe_errors
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.results.safe_text import safe_text


def cell(value: object) -> str:
    """One table cell: no newlines, control and bidi characters escaped (results/safe_text.py),
    pipes escaped, never empty (an empty cell reads as missing)."""
    text = "n/a" if value is None else str(value)
    text = safe_text(" ".join(text.split())).replace("\\", "\\\\").replace("|", "\\|")
    return text or " "


def table(header: Sequence[str], rows: Iterable[Sequence[object]],
          align: Sequence[str] | None = None) -> list[str]:
    """A GFM table; ``align`` per column: "l" or "r" (default: first column left, rest right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "| " + " | ".join(sep) + " |"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row has {len(row)} cells, header {len(header)}: {row!r}")
        out.append("| " + " | ".join(cell(c) for c in row) + " |")
    return out


def _gates(verdicts: Sequence[GateVerdict]) -> list[str]:
    failed = sum(not v.passed for v in verdicts)
    head = ("**Gates: all passed**" if not failed
            else f"**Gates: {failed} of {len(verdicts)} failed**")
    rows = [("PASS" if v.passed else "**FAIL**", f"`{v.gate}`",
             "n/a" if v.actual is None else f"{v.actual:.4g}", v.reason) for v in verdicts]
    rows_table = table(["verdict", "gate", "actual", "reason"], rows, ["l", "l", "r", "l"])
    if not failed:  # nothing to act on: the verdicts stay one click away
        return ["### Gates", "", head, "", *_details(f"{len(verdicts)} gates", [*rows_table, ""])]
    return ["### Gates", "", head, "", *rows_table, ""]


def _scenario(s: ScenarioMetrics) -> list[str]:
    out = [f"#### {s.benchmark} / {s.scenario}", "",
           f"{s.n_cases} cases, {s.n_cases - s.n_errors} scored, {s.n_errors} infrastructure "
           f"errors, {s.n_parse_failures} tool-call parse failures"
           + (f", {s.n_cases_cut_short} with a reply cut short (finish_reason length or "
              "content_filter)" if s.n_cases_cut_short else ""), ""]
    if s.n_errors:  # cause, attempts and the option that would help, per kind
        errors = safe_text(describe_errors(s.error_kinds, s.error_details))  # quotes endpoints
        out[-1:-1] = ["", f"Infrastructure errors: {errors}"]
    rows = [(mv.name, format_number(mv.value, is_rate=mv.is_rate), format_ci(mv), mv.n,
             "higher" if mv.higher_is_better else "lower") for mv in s.metrics.values()]
    out += table(["metric", "value", "95% CI", "n", "better"], rows, ["l", "r", "r", "r", "l"])
    out.append("")
    for label, groups in s.breakdown.items():
        names = list(s.metrics)
        header = [label, "cases", *(f"{n} [95% CI]" for n in names), "n"]
        body = []
        for g in groups:
            vals = []
            for n in names:
                mv = g.metrics.get(n)
                vals.append("n/a" if mv is None else
                            f"{format_number(mv.value, is_rate=mv.is_rate)} "
                            f"{format_ci(mv, compact=True)}")
            n_scored = g.n_cases - g.n_errors
            body.append([g.group, g.n_cases, *vals, n_scored])
        out += [f"By {label}:", "", *table(header, body), ""]
    return out


def _report_table(t: ReportTable) -> list[str]:
    rows = [["n/a" if c is None else c for c in r] for r in t.rows]
    out = [f"#### {t.title}", "", *table(t.columns, rows), ""]
    return out + ([t.note, ""] if t.note else [])


def _comparison(comp: Comparison) -> list[str]:
    pct = f"{100 * comp.confidence:g}%"
    out = ["### Comparison with the baseline", ""]
    out += [f"- {line.strip()}" for line in comparison_legend(comp)]
    out += ["", f"Differences are B - A (this run minus the baseline) over the cases both runs "
            f"scored, with a paired bootstrap {pct} interval; rates in percentage points. "
            "McNemar b = cases with value 1 in A and 0 in B, c = the reverse.", ""]
    for benchmark in comp.benchmarks():
        header = ["scenario", "metric / subgroup", *(f"{letter(i)} [{pct} CI]"
                                                     for i in range(len(comp.runs)))]
        for i in range(1, len(comp.runs)):
            header += [f"{letter(i)} - A [paired {pct}]", "McNemar b/c p", "n paired"]
        rows = []
        for s in comp.scenarios:
            if s.benchmark != benchmark:
                continue
            for m in s.metrics:
                row: list[object] = [s.scenario, m.row_name + ("" if m.higher_is_better
                                                               else " (lower better)")]
                row += [fmt_value(v, m.is_rate) for v in m.values]
                for d in m.diffs:
                    row += [fmt_diff(d, m.is_rate), fmt_mcnemar(d), d.n_paired]
                rows.append(row)
        align = ["l", "l"] + ["r"] * (len(header) - 2)
        unequal = unequal_cases_note(comp, benchmark)
        out += [f"#### {benchmark}", "", *([unequal, ""] if unequal else []),
                *_details(f"{benchmark}: {len(rows)} compared values",
                          [*table(header, rows, align), ""])]
        out += [f"- {line}" for line in coverage_lines(comp, benchmark)
                + change_lines(comp, benchmark, code=True)] + [""]
    lone = not_compared_lines(comp)
    return out + ([f"- {line}" for line in lone] + [""] if lone else [])


def overview(metrics: RunMetrics, headlines: Mapping[str, Headline] | None = None) -> list[str]:
    """One table of every suite: per scenario its headline metric (the first the benchmark's
    headline names that the scenario has, else its first metric, as ``toolbench runs`` shows),
    value, CI and n, and its cases and errors; what a reader of a PR comment looks for first."""
    rows = []
    for s in metrics.scenarios:
        wanted = (headlines or {}).get(s.benchmark, DEFAULT_HEADLINE).metrics
        name = next((m for m in wanted if m in s.metrics), next(iter(s.metrics), None))
        mv = s.metrics.get(name) if name is not None else None
        if mv is None:
            rows.append([s.benchmark, s.scenario, "-", "n/a", "n/a", 0, s.n_cases, s.n_errors])
            continue
        rows.append([s.benchmark, s.scenario, mv.name, format_number(mv.value, is_rate=mv.is_rate),
                     format_ci(mv), mv.n, s.n_cases, s.n_errors])
    if not rows:
        return []
    head = ["benchmark", "scenario", "metric", "value", "95% CI", "n", "cases", "errors"]
    return ["### Overview", "", *table(head, rows, ["l", "l", "l", "r", "r", "r", "r", "r"]), ""]


def relative_paths(text: str, base: Path) -> str:
    """Absolute paths under ``base`` (the folder the run started in) written relative to it:
    a PR comment from a CI machine should not show its checkout's location."""
    prefix = str(base).rstrip("/") + "/"
    return re.sub(r"(?<![\w.])" + re.escape(prefix), "", text) if prefix != "/" else text


def _details(summary: str, body: list[str]) -> list[str]:
    """A collapsed section (GitHub renders the Markdown inside when blank lines surround it)."""
    return [f"<details><summary>{html.escape(summary)}</summary>", "", *body, "</details>", ""]


def render_markdown(
    metrics: RunMetrics,
    verdicts: Sequence[GateVerdict] = (),
    comparison: Comparison | None = None,
    *,
    model: str = "",
    run_id: str = "",
    notes: Sequence[str] = (),
    data: Sequence[str] = (),
    headlines: Mapping[str, Headline] | None = None,
) -> str:
    """The overview table first, then the gates and the data, then per benchmark every metric,
    breakdown and paper table (collapsed), then the baseline comparison."""
    title = "## pytest-toolbench" + (f": {model}" if model else "")
    out = [title, ""]
    if run_id:
        out += [f"run `{run_id}`", ""]
    out += overview(metrics, headlines)
    if data:  # what the numbers were computed on: real or sample, revision, fingerprint
        out += [f"**data:** {safe_text(line)}" + ("  " if i < len(data) - 1 else "")
                for i, line in enumerate(data)] + [""]
    if notes:
        out += _details(f"run notes ({len(notes)})", [f"- {safe_text(n)}" for n in notes] + [""])
    if verdicts:
        out += _gates(verdicts)
    benchmarks: list[str] = []
    for s in metrics.scenarios:
        if s.benchmark not in benchmarks:
            benchmarks.append(s.benchmark)
    for b in benchmarks:
        body: list[str] = []
        for s in metrics.scenarios:
            if s.benchmark == b:
                body += _scenario(s)
        for t in metrics.tables:
            if t.benchmark == b:
                body += _report_table(t)
        out += [f"### {b}", "", *_details(f"{b}: every metric, breakdown and paper table", body)]
    if comparison is not None:
        out += _comparison(comparison)
    # Every part that quotes data is escaped where it is laid out; the whole once more, so no
    # control or bidi character reaches a rendered job summary.
    return safe_text("\n".join(out).rstrip() + "\n", multiline=True)


def write_markdown_report(path: str | Path, record: RunRecord, *, notes: Sequence[str] = (),
                          base: Path | None = None) -> Path:
    """Write the run's summary; appended when ``path`` is ``$GITHUB_STEP_SUMMARY`` (other steps'
    output in that file is kept, as GitHub asks), else written atomically. Paths under ``base``
    (default: the working directory, where the run started) are written relative to it."""
    p = Path(path)
    from pytest_toolbench.benchmarks import registry
    from pytest_toolbench.results.provenance import BenchmarkData

    data = [BenchmarkData.model_validate(b).text()
            for b in (record.run.data or {}).get("benchmarks", [])]
    names = {s.benchmark for s in record.metrics.scenarios}
    headlines = headlines_of({n: b for n, b in registry().items() if n in names})
    text = render_markdown(record.metrics, record.gates, record.baseline, model=record.run.model,
                           run_id=record.run.run_id or "", notes=notes, data=data,
                           headlines=headlines)
    text = relative_paths(text, (base or Path.cwd()).resolve())
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and Path(step_summary).resolve() == p.resolve():
        with p.open("a", encoding="utf-8") as handle:
            handle.write(text)
    else:
        atomic_write_text(p, text)
    return p
