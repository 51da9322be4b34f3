"""``toolbench runs`` as text that fits the screen.

A run's row holds ten columns (a run id, the data's fingerprint, every scenario's headline metric):
~230 characters on one line, cut or wrapped mid-cell by an 80-column terminal or a CI log. The
columns are laid out as one table when they fit ``width``; below that each run is one block: a
first line with what tells runs apart (id, date, model, status), then ``key: value`` lines wrapped
under themselves. No line is longer than ``width`` unless a single word is (a run id, a path),
and none ends in a space.
"""

from __future__ import annotations

import time

from pytest_toolbench.results.provenance import run_data, short_line
from pytest_toolbench.results.safe_text import safe_text
from pytest_toolbench.runs.record import Headline, RunIndex
from pytest_toolbench.runs.store import exit_text, format_headlines, gates_text, status_text
from pytest_toolbench.word_wrap import wrap_words

COLUMNS = ["run id", "date", "model", "suites", "data", "cases", "tokens", "headline metrics",
           "gates", "exit", "status"]
#: What an indented ``key: value`` line is indented by, and what its wrapped lines hang under.
INDENT = "    "


def render_runs(runs: list[RunIndex], width: int) -> str:
    """One table when it fits ``width``, else one block per run."""
    if not runs:
        return "no runs found\n"
    rows = [[safe_text(c) for c in _cells(r)] for r in runs]
    widths = [max(len(x) for x in col) for col in zip(COLUMNS, *rows)]
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                 for row in [COLUMNS, *rows]]
    else:
        lines = []
        for r, row in zip(runs, rows):
            lines += [*_block(r, row, width), ""]
        lines = lines[:-1]
    return "\n".join(lines) + "\n"


def _date(r: RunIndex) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else "?"


def _cases(r: RunIndex) -> str:
    if r.status in ("running", "incomplete") and not r.n_cases:
        return f"{r.n_runs} so far"
    if r.repeats <= 1:
        return str(r.n_cases) + _subsets(r)
    planned = r.n_cases * r.repeats
    # a partial run of repeats ran fewer: "1199 x3" alone read as 3,597 results where 1,199 were
    return (f"{r.n_cases} x{r.repeats}" + _subsets(r)
            + (f" ({r.n_runs} of {planned} runs)" if r.n_runs != planned else ""))


def _subsets(r: RunIndex) -> str:
    """`` (toolhop subset: 18 of 240)``: a --limit run's headline beside a full run's is no
    like-for-like figure (the terminal summary's "subset" line, kept in the list)."""
    parts = [f"{name} subset: {cases} of {total}" for name, (cases, total) in sorted(r.subsets.items())]
    return f" ({'; '.join(parts)})" if parts else ""


def _cells(r: RunIndex) -> list[str]:
    # what the run's numbers were computed on: real or sample, revision, fingerprint
    data = short_line(run_data(r.data, r.suites))
    return [r.run_id, _date(r), r.model or "?", ",".join(r.suites) or "?", data, _cases(r),
            _tokens(r), format_headlines(r.headline) or "-", gates_text(r), exit_text(r),
            status_text(r)]


def _tokens(r: RunIndex) -> str:
    """The table's cell: prompt + completion tokens in all (the block has the split)."""
    total = (r.prompt_tokens or 0) + (r.completion_tokens or 0)
    return f"{total:,}" if total else "-"


def _block(r: RunIndex, row: list[str], width: int) -> list[str]:
    """``<run id>  <date>  <status>``, then model, suites, data, cases, tokens (where the
    endpoint reported them), gates and exit, and one line per benchmark's headline metric.
    An interruption's reason too long for that first line (a ``pytest.exit``'s) is a field of
    its own: wrapped there, it read as the next line of the block."""
    run_id, date, model, suites, data, cases, _, _, gates, exit_, status = row
    fields: list[tuple[str, str]] = []
    # only status_text's "partial (<reason>)" is split; another status keeps its own words
    too_long = len(f"{run_id}  {date}  {status}") > width
    if r.status == "interrupted" and r.interrupted_by and too_long:
        status = "partial"
        fields.append(("interrupted by", r.interrupted_by))
    if r.status == "incomplete" and r.pytest_stop:
        fields.append(("reason", r.pytest_stop))
    out = wrap_words(f"{run_id}  {date}  {status}", width, "")
    fields += [("model", model), ("suites", suites), ("data", data), ("cases", cases)]
    tokens = r.tokens_text()
    if tokens:  # not for the oracle, a replay, or a record without them
        fields.append(("tokens", tokens))
    fields.append(("gates", f"{gates}, exit {exit_}"))
    fields += [(name, value) for name, value in _headline_fields(r.headline)] or [("headline", "-")]
    key_width = max(len(k) for k, _ in fields) + 1
    for key, value in fields:
        head = f"{INDENT}{(safe_text(key) + ':').ljust(key_width)} "
        out += wrap_words(head + safe_text(value), width, " " * min(len(head), width // 2))
    return out


def _headline_fields(headlines: list[Headline]) -> list[tuple[str, str]]:
    """``("toolhop accuracy", "direct=83.3% mandatory=50.0%")``: one per (benchmark, metric),
    as :func:`format_headlines` groups them."""
    groups: dict[str, list[Headline]] = {}
    for h in headlines:
        groups.setdefault(f"{h.benchmark} {h.metric}", []).append(h)
    return [(key, format_headlines(hs)[len(key) + 1:]) for key, hs in groups.items()]
