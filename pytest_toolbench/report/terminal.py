"""The end-of-run summary as plain text, for pytest's terminal reporter and CI logs.

A run ends with one screen: per benchmark, the numbers its paper leads with (the ``headline`` it
declares, results/headline.py: ToolHop's accuracy per scenario with its confidence interval and
n, ToolBeHonest's Table 2 per scenario and its Overall, FamilyTool's table per KG input and
split, Meta-Bench's T-Acc/P-Acc; a benchmark that declares none shows each scenario's first
metric), the infrastructure errors and parse failures, and the gates (printed last, after
pytest's own closing line). Everything else (each scenario's full
metric table, its breakdowns by label, the benchmark's paper tables) is printed above that screen
with ``-v``, and is always in the run's JSON report, the ``--toolbench-md`` Markdown and Allure.
Tables never lose a column: at any width they are pipe tables, wrapped pipe tables or one block
per row (pytest_toolbench/text_table.py). Plain ASCII, no colour codes.

How to read the end of a run (``pytest suites/toolhop --model M --limit 4 --gate
"toolhop.mandatory.accuracy>=0.5" --max-error-rate 0.5`` at 80 columns, against an endpoint
that failed record 9003's direct question and every ``free`` request)::

    =============================== pytest-toolbench ===============================
    model: Qwen/Qwen2.5-7B-Instruct   run: 20261124-221822-3af063
    wall time 0:02
    data: toolhop: bundled sample (not the real benchmark), no upstream revision,
        fingerprint 5d0b7f3c1a29; 6 records, data/toolhop/ToolHop.json
    toolhop subset: 12 of 18 cases (metrics cover only these; not comparable with a
        full run)

    | toolhop   | metric   |  value |         95% CI |         n |
    |-----------|----------|--------|----------------|-----------|
    | direct    | accuracy | 66.67% | [0.00, 100.00] | 3 (1 err) |
    | mandatory | accuracy | 50.00% | [0.00, 100.00] |         4 |
    | free      | accuracy |    n/a |            n/a | 0 (4 err) |

    infrastructure errors: toolhop / direct: 1 infrastructure error excluded from
        metrics: http_500 x1 (the endpoint returned a server error; 2 attempts per
        call; try: raise --max-retries; check the server log)
    infrastructure errors: toolhop / free: 4 infrastructure errors excluded from
        metrics: http_500 x4 (the endpoint returned a server error; 2 attempts per
        call; try: raise --max-retries; check the server log)
    tool-call parse failures: none
    details: -v prints every metric, the breakdowns and the paper tables; all are in
        the run's report.json (toolbench runs) and --toolbench-md
    run folder: .toolbench/runs/20261124-221822-3af063
    ================== 4 passed, 3 wrong, 5 infra-error in 2.26s ===================
    ============================ pytest-toolbench gates ============================
    == gates: 4 checked, 1 FAILED ==
    PASS  toolhop.mandatory.accuracy>=0.5  (actual 0.5)
          actual 0.5 satisfies >= 0.5
    PASS  toolhop.direct.error_rate<=0.5  (actual 0.25)
          1/4 cases hit infrastructure errors (http_500 x1 (the endpoint returned a
          server error; 2 attempts per call; try: raise --max-retries; check the
          server log)); within the 50.00% limit
    PASS  toolhop.mandatory.error_rate<=0.5  (actual 0)
          0/4 cases hit infrastructure errors (none); within the 50.00% limit
    FAIL  toolhop.free.error_rate<=0.5  (actual 1)
          4/4 cases hit infrastructure errors (http_500 x4 (the endpoint returned a
          server error; 2 attempts per call; try: raise --max-retries; check the
          server log)); above the 50.00% limit
    gates FAILED (exit status 11 INFRA_ERRORS): set by the gates, not single cases

- One table per benchmark, one row per scenario: the scenario's headline metric (for a
  benchmark that declares no ``headline``, the first metric it declares; ``-v`` shows all of
  them). A benchmark whose paper leads with a table shows that table instead (one row per
  scenario, named as the paper names it; values x100 as the paper prints them, ``-`` where
  the run has nothing to show, e.g. a level left out by ``-m``; ``cases``: scored cases).
- ``value``: that metric over the scenario's scored cases; a rate is in % (``66.67%``).
- ``95% CI``: the bootstrap confidence interval of the value, in the same unit (percentage
  points for a rate, without the % sign). A wide interval means few cases: a difference that
  lies inside it may be chance.
- ``n``: how many cases (for a ratio metric: units, e.g. tool calls) the value is computed over.
- ``(1 err)``: cases of that scenario that ended in an infrastructure error (endpoint down,
  timeout, server error...). They are in no metric (neither right nor wrong), the
  ``infrastructure errors`` line gives their cause, attempts and the option that would help,
  and the error-rate gate (``--max-error-rate``, default 0) counts them.
- ``n/a``: there is nothing to measure, e.g. every case of the scenario was an infrastructure
  error, or a per-call rate where no tool was called. ``nan`` is different: the benchmark's own
  scoring produced NaN, printed as its paper's code prints it.
- ``<benchmark> subset: 12 of 18 cases``: ``--limit``, ``--sample-ids``, ``--scenario``, ``-k``
  or ``-m`` left part of the suite out; the metrics cover only the cases that ran and are not
  comparable with a full run (or the paper). No subset line: the whole suite ran.
  ``<benchmark>: 0 of 11 cases, no metrics``: a targeted suite the selection left empty (or
  whose cases never ran), so it has no table.
- ``data: toolhop: bundled sample (not the real benchmark), no upstream revision, fingerprint
  ...``: one line per benchmark saying what the numbers were computed on: ``real`` with the
  upstream source and revision, the bundled sample (``--data sample``; not the benchmark's
  number), Meta-Bench's ``this project's reconstruction``, or ``local files`` matching no pin;
  the fingerprint is the same in the JSON report, Markdown, Allure, JUnit, ``toolbench runs``
  and every gate line, so two results can be told to be on the same data. ``-v`` adds each
  file's path, record count and sha256.
- The gates come last, after pytest's own line, so a CI log ends on them; with gates the exit
  status is theirs, not the single cases' (``wrong`` and ``infra-error`` are not failures then).
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_toolbench.counting import counted
from pytest_toolbench.report.headline_table import grid_table
from pytest_toolbench.text_table import TextTable, pipe_table, render_table
from pytest_toolbench.word_wrap import wrap_words
from pytest_toolbench.results.aggregate import MetricValue, ReportTable, RunMetrics, ScenarioMetrics
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.headline import DEFAULT_HEADLINE, Headline
from pytest_toolbench.results.infra_errors import describe_errors, unreachable_lines
from pytest_toolbench.results.run_record import RunRecord
from pytest_toolbench.results.safe_text import safe_text

DETAILS_HINT = ("details: -v prints every metric, the breakdowns and the paper tables; all are in "
                "the run's report.json (toolbench runs) and --toolbench-md")


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


def _cell(mv: MetricValue) -> str:
    """``80.00% [51.00, 100.00] n=5``: a metric in one cell of a breakdown."""
    value = format_number(mv.value, is_rate=mv.is_rate)
    ci = "" if mv.value is None else f" {format_ci(mv, compact=True)}"
    return f"{value}{ci} n={mv.n}"


def _with_errors(count: int | str, n_errors: int) -> str:
    return f"{count} ({n_errors} err)" if n_errors else str(count)


def wrap_note(text: str, width: int) -> list[str]:
    """A note wrapped to the width; paths and other long words stay whole. Notes quote data
    (an endpoint's error, a path): escaped first, so none can move the cursor or start a line."""
    return wrap_words(safe_text(text), width)


# --------------------------------------------------------------------------- errors
def infra_error_note(s: ScenarioMetrics) -> str | None:
    """The one sentence about a scenario's infrastructure errors (None: it had none): what was
    excluded, each kind's cause, attempts and the option that would help (results/infra_errors)."""
    if not s.n_errors:
        return None
    kinds = describe_errors(s.error_kinds, s.error_details)  # cause, attempts, option
    return f"{counted(s.n_errors, 'infrastructure error')} excluded from metrics: {kinds}"


def _parse_failure_note(s: ScenarioMetrics) -> str | None:
    if not s.n_parse_failures:
        return None
    return (f"{counted(s.n_parse_failures, 'tool-call parse failure')} in "
            f"{counted(s.n_cases_with_parse_failures, 'case')} (scored as the benchmark scores "
            "them; raw text in the JSON/Allure report)")


def _scenario_notes(s: ScenarioMetrics) -> list[str]:
    return [infra_error_note(s) or "0 infrastructure errors",
            _parse_failure_note(s) or "0 tool-call parse failures"]


def error_lines(metrics: RunMetrics, width: int) -> list[str]:
    """The overview's error lines: every scenario with infrastructure errors (or ``none``), then
    the tool-call parse failures."""
    out: list[str] = []
    for line in unreachable_lines(metrics.scenarios):  # a dead endpoint: one line for the run
        out += wrap_note(line, width)
    errors = [(s, infra_error_note(s)) for s in metrics.scenarios if s.n_errors]
    if not errors:
        out.append("infrastructure errors: none")
    for s, note in errors:
        out += wrap_note(f"infrastructure errors: {s.benchmark} / {s.scenario}: {note}", width)
    failing = [s for s in metrics.scenarios if s.n_parse_failures]
    if not failing:
        out.append("tool-call parse failures: none")
    else:
        total = sum(s.n_parse_failures for s in failing)
        where = ", ".join(f"{s.benchmark} / {s.scenario} {s.n_parse_failures}" for s in failing)
        out += wrap_note(f"tool-call parse failures: {total} ({where}); scored as the benchmark "
                          "scores them, raw text in the JSON/Allure report", width)
    cut = [s for s in metrics.scenarios if s.n_cases_cut_short]
    if cut:  # finish_reason length/content_filter: a reply cut short; none: no line
        total = sum(s.n_cases_cut_short for s in cut)
        where = ", ".join(f"{s.benchmark} / {s.scenario} {s.n_cases_cut_short}" for s in cut)
        out += wrap_note("replies cut short (finish_reason length or content_filter): "
                          f"{counted(total, 'case')} ({where}); scored as given, turns in "
                          "details.cut_replies of the JSON report; --max-tokens may help", width)
    return out


# --------------------------------------------------------------------------- the one screen
def _benchmarks(metrics: RunMetrics) -> list[str]:
    return list(dict.fromkeys(s.benchmark for s in metrics.scenarios))


def overview_table(metrics: RunMetrics, benchmark: str, headline_metrics: Sequence[str] = (),
                   scenarios: Collection[str] | None = None) -> TextTable:
    """One row per scenario of ``benchmark`` (of ``scenarios`` when given) and metric: the
    ``headline_metrics`` it declares, else its first declared metric."""
    rows = []
    for s in metrics.scenarios:
        if s.benchmark != benchmark or (scenarios is not None and s.scenario not in scenarios):
            continue
        names = [n for n in headline_metrics if n in s.metrics] or list(s.metrics)[:1]
        if not names:
            rows.append([s.scenario, "-", "n/a", "n/a", _with_errors(0, s.n_errors)])
            continue
        for name in names:
            mv = s.metrics[name]
            rows.append([s.scenario, mv.name, format_number(mv.value, is_rate=mv.is_rate),
                         format_ci(mv, compact=True), _with_errors(mv.n, s.n_errors)])
    return TextTable([benchmark, "metric", "value", "95% CI", "n"], rows,
                     align=["l", "l", "r", "r", "r"], wrap={0})


def headline_lines(metrics: RunMetrics, benchmark: str, headline: Headline | None = None, *,
                   width: int = 80, confidence: float = 0.95) -> list[str]:
    """What the end screen shows of ``benchmark``: its declared headline (results/headline.py),
    i.e. its paper-layout grids, then the generic overview of the scenarios no grid lists."""
    headline = headline or DEFAULT_HEADLINE
    out: list[str] = []
    gridded: set[str] = set()
    for grid in headline.grids:
        gridded.update(grid.scenarios)
        table = grid_table(metrics, benchmark, grid, confidence=confidence)
        if table is None:
            continue
        out += ["", *render_table(table, width)]
        if grid.note:
            out += wrap_note(grid.note, width)
    rest = [s.scenario for s in metrics.scenarios
            if s.benchmark == benchmark and s.scenario not in gridded]
    if rest:
        table = overview_table(metrics, benchmark, headline.metrics, rest)
        table.columns[3] = f"{round(100 * confidence)}% CI"
        out += ["", *render_table(table, width)]
    return out


def render_overview(
    metrics: RunMetrics,
    *,
    width: int = 80,
    confidence: float = 0.95,
    run_notes: Sequence[str] = (),
    details_hint: bool = True,
    headlines: Mapping[str, Headline] | None = None,
) -> str:
    """The one screen that ends a run (see the module docstring for how to read it).
    ``headlines``: benchmark -> its declared headline; a benchmark not in it (or None) shows
    each scenario's first declared metric."""
    out: list[str] = []
    for note in run_notes:  # wrapped at the width; a path or checksum stays whole on its line
        out += wrap_note(note, width)
    if not metrics.scenarios and not metrics.tables:
        out.append("pytest-toolbench: no case results were collected")
    for benchmark in _benchmarks(metrics):
        out += headline_lines(metrics, benchmark, (headlines or {}).get(benchmark), width=width,
                              confidence=confidence)
    if metrics.scenarios:
        out += ["", *error_lines(metrics, width)]
    if details_hint and (metrics.scenarios or metrics.tables):
        out += wrap_note(DETAILS_HINT, width)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- details (-v)
def _metric_table(s: ScenarioMetrics, confidence_label: str) -> TextTable:
    rows = [[mv.name, format_number(mv.value, is_rate=mv.is_rate), format_ci(mv), str(mv.n),
             "higher is better" if mv.higher_is_better else "lower is better"]
            for mv in s.metrics.values()]
    return TextTable(["metric", "value", confidence_label, "n", ""], rows,
                     align=["l", "r", "r", "r", "l"])


def breakdown_lines(s: ScenarioMetrics, label: str, width: int) -> list[str]:
    """A breakdown by one label: one column per metric when that fits the width, else one row
    per (group, metric), which fits 80 columns however many metrics the scenario has."""
    names = list(s.metrics)
    groups = s.breakdown.get(label, [])
    wide = TextTable(
        [label, "cases", *names],
        [[g.group, _with_errors(g.n_cases, g.n_errors),
          *(_cell(g.metrics[n]) if n in g.metrics else "-" for n in names)] for g in groups],
        align=["r"] * (len(names) + 2),
    )
    title = f"-- {s.benchmark} / {s.scenario} by {label} --"
    lines = pipe_table(wide, width)
    if lines is not None:
        return [f"-- {s.benchmark} / {s.scenario} by {label} (value [95% CI] n) --", *lines]
    rows = []
    for g in groups:
        for k, name in enumerate(names):
            mv = g.metrics.get(name)
            first = k == 0
            rows.append([g.group if first else "", _with_errors(g.n_cases, g.n_errors) if first else "",
                         name, "-" if mv is None else format_number(mv.value, is_rate=mv.is_rate),
                         "" if mv is None or mv.value is None else format_ci(mv, compact=True),
                         "-" if mv is None else str(mv.n)])
    long = TextTable([label, "cases", "metric", "value", "95% CI", "n"], rows,
                     align=["r", "r", "l", "r", "r", "r"])
    return [title, *render_table(long, width)]


def _report_table(table: ReportTable) -> TextTable:
    """A benchmark's own table (e.g. the paper's layout): headers wrap between words, the first
    (label) column wraps when the terminal is narrow, numbers never do."""
    cells = [["n/a" if cell is None else str(cell) for cell in row] for row in table.rows]
    return TextTable([str(c) for c in table.columns], cells, wrap={0}, narrow_headers=True)


def render_details(metrics: RunMetrics, *, width: int = 120, confidence: float = 0.95) -> str:
    """Every scenario's metric table, breakdowns and notes, then the benchmarks' own tables."""
    out: list[str] = []
    ci_label = f"{round(100 * confidence)}% CI"
    for s in metrics.scenarios:
        scored = s.n_cases - s.n_errors
        out.append(f"== {s.benchmark} / {s.scenario}: {s.n_cases} cases, {scored} scored ==")
        if s.metrics:
            out += render_table(_metric_table(s, ci_label), width)
        else:
            out.append("(no metrics declared for this scenario)")
        for label in s.breakdown:
            out += breakdown_lines(s, label, width)
        for note in _scenario_notes(s):
            out += wrap_note(note, width)
        out.append("")
    for table in metrics.tables:
        out.append(f"== {table.benchmark}: {table.title} ==")
        out += render_table(_report_table(table), width)
        if table.note:
            out += wrap_note(table.note, width)
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def render_summary(
    metrics: RunMetrics,
    verdicts: list[GateVerdict],
    *,
    width: int = 120,
    confidence: float = 0.95,
    run_notes: list[str] | None = None,
    include_gates: bool = True,
    verbose: bool = True,
    headlines: Mapping[str, Headline] | None = None,
) -> str:
    """The details (``verbose``), then the one screen, then (unless ``include_gates`` is False)
    the gate verdicts. The pytest summary passes ``verbose`` from ``-v``; the Allure attachment
    and the tests take everything."""
    text = ""
    if verbose:
        text += render_details(metrics, width=width, confidence=confidence)
        if text:
            text += "== overview ==\n"
    text += render_overview(metrics, width=width, confidence=confidence,
                            run_notes=run_notes or [], details_hint=not verbose,
                            headlines=headlines)
    if verdicts and include_gates:
        text += render_gates(verdicts, width=width)
    return text


# --------------------------------------------------------------------------- gates
def _gate_table(verdicts: list[GateVerdict]) -> TextTable:
    rows = [["PASS" if v.passed else "FAIL", v.gate,
             "n/a" if v.actual is None else f"{v.actual:.4g}", v.reason] for v in verdicts]
    return TextTable(["verdict", "gate", "actual", "reason"], rows,
                     align=["l", "l", "r", "l"], wrap={3})


#: Narrower than this, a gate's reason is hard to read in a table column: one block per gate.
MIN_REASON_WIDTH = 36


def render_gates(verdicts: list[GateVerdict], *, width: int = 120) -> str:
    """The gate table alone (printed last, after pytest's own lines, so CI logs end on it).
    When the table would leave the reasons a narrow column, each gate is a block instead:
    ``PASS  <gate>  (actual x)`` and its reason wrapped under it."""
    failed = sum(not v.passed for v in verdicts)
    status = "all passed" if not failed else f"{failed} FAILED"
    lines = [f"== gates: {len(verdicts)} checked, {status} =="]
    table = _gate_table(verdicts)
    fixed = [max(len(table.columns[i]), *(len(r[i]) for r in table.rows)) for i in (0, 1, 2)]
    reason = max(len(table.columns[3]), *(len(r[3]) for r in table.rows))
    if sum(fixed) + min(reason, MIN_REASON_WIDTH) + 13 <= width:
        lines += render_table(table, width)
    else:
        for verdict, gate, actual, reason in table.rows:
            lines += wrap_note(f"{verdict:<4}  {gate}  (actual {actual})", width)
            lines += textwrap.wrap(reason, width, initial_indent="      ",  # escaped: a cell
                                   subsequent_indent="      ", break_long_words=False,
                                   break_on_hyphens=False)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- run notes
def coverage_notes(covered: dict[str, int], suite: dict[str, int], *,
                   partial_said: bool = False) -> list[str]:
    """``subset: 40 of 240 cases`` per benchmark whose metrics do not cover its whole suite;
    ``0 of 11 cases, no metrics`` for a targeted suite without a result (its selection was
    empty, or none of its cases ran; the record's coverage names it with 0, session/finish.py
    ``run_record``): its table is missing, and this line says why. ``partial_said``: the
    PARTIAL RESULTS line above has said that the metrics cover only the cases that reported."""
    out = []
    for name in sorted(covered):
        total, cases = suite.get(name), covered[name]
        if total is None or cases >= total:
            continue
        if cases:
            why = "" if partial_said else "metrics cover only these; "
            out.append(f"{name} subset: {cases} of {total} cases "
                       f"({why}not comparable with a full run)")
        else:
            out.append(f"{name}: 0 of {total} cases, no metrics")
    return out


def cache_note(model_calls: int, cached_calls: int, cached_results: int = 0) -> str | None:
    if not cached_calls:
        return None
    note = f"replies from the response cache: {cached_calls} of {model_calls} model calls"
    if cached_results:  # those cases were not scored again in this run (--rescore scores them)
        note += (f"; {counted(cached_results, 'case')} answered whole by the result cache, "
                 "not scored again (--rescore scores them)")
    return note


def data_notes(sources: Sequence[Any], *, verbose: bool) -> list[str]:
    """``data:`` lines, one per benchmark: real or sample (Meta-Bench: this project's
    reconstruction), the revision and the fingerprint (results/provenance.py), then its records
    and its file (or folder); ``-v`` adds a line per file (path, records, sha256)."""
    from pytest_toolbench.results.provenance import run_data

    by_benchmark: dict[str, list[Any]] = {}
    for d in sources:
        by_benchmark.setdefault(d.benchmark, []).append(d)
    out = []
    for data in run_data(sources):
        group = by_benchmark.get(data.benchmark, [])
        if len(group) == 1:
            where = f"{group[0].records} {group[0].unit}, {_shown_path(group[0].path)}"
        else:
            folders = sorted({_shown_path(d.path.parent) for d in group})
            place = folders[0] if len(folders) == 1 else f"{len(folders)} folders"
            where = f"{_counts(group)} in {place}"
        out.append(f"data: {data.text()}; {where}")
        if verbose:
            out += [f"data: {d.describe()}" for d in group]
    return out


def _counts(group: Sequence[Any]) -> str:
    """``938 records in 2 files and 645 KG triples in 2 files``: each unit summed apart (a
    KG's triples added to the records gave FamilyTool "1583 records")."""
    units: dict[str, list[Any]] = {}
    for d in group:
        units.setdefault(d.unit, []).append(d)
    return " and ".join(f"{sum(d.records for d in files)} {unit} in {len(files)} "
                        f"file{'s' if len(files) > 1 else ''}" for unit, files in units.items())


def _shown_path(path: Path) -> str:
    """Relative to the working directory when inside it (shorter), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _sections(record: RunRecord, width: int) -> str:
    """The repeats (pass@k), then the ``--baseline`` comparison, at ``width``."""
    sections = ""
    if record.repeats is not None:
        from pytest_toolbench.report.repeats_text import render_repeats

        sections += render_repeats(record.repeats, width=width)
    if record.baseline is not None:
        from pytest_toolbench.compare.render import baseline_summary

        sections += baseline_summary(record.baseline, width=width)
    return sections


def render_run(record: RunRecord, *, notes: Sequence[str], data_sources: Sequence[Any] = (),
                   verbose: bool = False, width: int = 120,
                   headlines: Mapping[str, Headline] | None = None) -> tuple[str, str]:
    """(the terminal's text, the full text for Allure) of a run's record. The terminal ends on
    one screen; ``verbose`` puts every table above it. Sections between the two, in this order:
    the repeats (pass@k), then the ``--baseline`` comparison (its table and the cases that
    changed); the Allure text has everything at 120 columns. ``data: `` notes are shown on
    screen as :func:`data_notes` groups them."""
    sections, full_sections = _sections(record, width), _sections(record, 120)
    notes = list(notes)
    first_data = next((i for i, n in enumerate(notes) if n.startswith("data: ")), len(notes))
    other = [n for n in notes if not n.startswith("data: ")]
    screen_notes = (other[:first_data] + data_notes(data_sources, verbose=verbose)
                    + other[first_data:])
    metrics = record.metrics
    details = render_details(metrics, width=width) if verbose else ""
    screen = render_overview(metrics, width=width, run_notes=screen_notes, details_hint=not verbose,
                             headlines=headlines)
    full = (render_details(metrics, width=120) + full_sections
            + render_overview(metrics, width=120, run_notes=notes, details_hint=False,
                              headlines=headlines))
    if verbose:
        screen = "== overview ==\n" + screen
    return details + sections + screen, full
