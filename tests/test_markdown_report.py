"""--toolbench-md: every table is a valid GFM pipe table (header, separator, equal widths)."""

from __future__ import annotations

import re

import pytest

from test_compare import A_OK, B_OK, LABELS, SPECS, case, run

from pytest_toolbench.compare import compare_runs
from pytest_toolbench.report.markdown_report import cell, render_markdown, table, write_markdown_report
from pytest_toolbench.results.aggregate import ReportTable
from pytest_toolbench.results.gates import Baseline, evaluate_gates, parse_gates
from pytest_toolbench.results.run_record import RunInfo, RunRecord

_SEPARATOR = re.compile(r"^\|( *:?-{3,}:? *\|)+$")


def split_row(line: str) -> list[str]:
    """Cells of a pipe-table row; an escaped ``\\|`` stays inside its cell."""
    assert line.startswith("|") and line.endswith("|") and not line.endswith("\\|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table (consecutive lines starting with "|"), checked for GFM validity."""
    tables, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            assert len(block) >= 2, f"table without separator: {block}"
            assert _SEPARATOR.match(block[1]), f"bad separator row: {block[1]!r}"
            rows = [split_row(r) for r in block]
            width = len(rows[0])
            assert all(len(r) == width for r in rows), f"ragged table: {block}"
            assert all(c for c in rows[0]), f"empty header cell: {block[0]}"
            tables.append([rows[0]] + rows[2:])
            block = []
    return tables


@pytest.fixture
def rendered() -> str:
    base = run("model-a", [case(i, v, model="model-a") for i, v in enumerate(A_OK)])
    cur = run("model-b", [case(i, v, model="model-b") for i, v in enumerate(B_OK)])
    comp = compare_runs([base, cur], SPECS, LABELS, n_boot=300)
    verdicts = evaluate_gates(
        parse_gates(["bench.s.accuracy>=baseline-0.02", "bench.s[hops=3].accuracy.diff_lower>=0",
                     "bench.s.accuracy>=0.95"]),
        cur.metrics, Baseline(metrics=base.metrics, comparison=comp),
    )
    cur.metrics.tables.append(ReportTable(benchmark="bench", name="t", title="Paper table",
                                          columns=["model", "a|b"], rows=[["x", None]]))
    return render_markdown(cur.metrics, verdicts, comp, model="model-b", run_id="r1",
                           notes=["data: bundled"])


def test_every_table_is_a_valid_gfm_table(rendered: str) -> None:
    tables = markdown_tables(rendered)
    # the overview of every suite first, then gates, metrics, by hops, the benchmark's own
    # table, the comparison
    assert len(tables) == 6
    overview, gates, metrics, hops, own, comparison = tables
    assert rendered.index("### Overview") < rendered.index("### Gates")
    assert overview[0] == ["benchmark", "scenario", "metric", "value", "95% CI", "n", "cases",
                           "errors"]
    assert overview[1][:4] == ["bench", "s", "accuracy", "90.00%"] and overview[1][5:] == ["10", "10", "0"]
    assert gates[0] == ["verdict", "gate", "actual", "reason"]
    assert [r[0] for r in gates[1:]] == ["PASS", "PASS", "**FAIL**"]
    assert "**Gates: 1 of 3 failed**" in rendered
    assert metrics[1][:2] == ["accuracy", "90.00%"]
    assert [r[0] for r in hops[1:]] == ["3", "4"]
    assert own[0] == ["model", "a\\|b"] and own[1] == ["x", "n/a"]
    assert comparison[0][:4] == ["scenario", "metric / subgroup", "A [95% CI]", "B [95% CI]"]
    acc = next(r for r in comparison[1:] if r[1] == "accuracy")
    assert acc[2].startswith("60.00%") and acc[3].startswith("90.00%")
    assert acc[4].startswith("+30.00 pp [") and acc[5] == "1/4 p=0.375" and acc[6] == "10"
    assert "- bench/s B vs A: 10 paired; only in A: 0, only in B: 0" in rendered
    assert rendered.startswith("## pytest-toolbench: model-b\n")


def test_cells_escape_pipes_and_newlines() -> None:
    assert cell("a|b\nc") == "a\\|b c"
    assert cell(None) == "n/a" and cell("") == " "
    with pytest.raises(ValueError, match="row has 1 cells"):
        table(["a", "b"], [["x"]])


def test_written_to_github_step_summary_it_appends(tmp_path, monkeypatch, rendered) -> None:
    from pytest_toolbench.results.aggregate import RunMetrics

    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    write_markdown_report(path, RunRecord(run=RunInfo(settings={"model": "m"}), cases=[]))
    assert path.read_text().startswith("earlier step\n## pytest-toolbench: m")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    write_markdown_report(path, RunRecord(run=RunInfo(settings={"model": "m"}), cases=[]))
    assert path.read_text().startswith("## pytest-toolbench: m")


def test_paths_under_the_run_s_folder_are_relative(tmp_path) -> None:
    """A PR comment from a CI machine shows data/toolhop/ToolHop.json, not the checkout's
    location; a path outside the folder stays as it is."""
    note = f"data: toolhop: {tmp_path}/data/toolhop/ToolHop.json; cache /elsewhere/x.json"
    out = tmp_path / "summary.md"
    write_markdown_report(out, RunRecord(run=RunInfo(settings={"model": "m"}), cases=[]),
                          notes=[note], base=tmp_path)
    text = out.read_text()
    assert "- data: toolhop: data/toolhop/ToolHop.json; cache /elsewhere/x.json" in text
    assert str(tmp_path) not in text


def test_replies_cut_short_are_counted_per_scenario() -> None:
    """A reply cut off by max_tokens or a content filter is scored as it came back; the summary
    says how many cases had one, and says nothing when none had."""
    cur = run("model-b", [case(i, v, model="model-b") for i, v in enumerate(B_OK)])
    assert "cut short" not in render_markdown(cur.metrics, model="model-b")
    cur.metrics.scenarios[0].n_cases_cut_short = 2
    assert "2 with a reply cut short (finish_reason length or content_filter)" in render_markdown(
        cur.metrics, model="model-b")


def test_a_benchmark_the_baseline_lacks_is_a_line_not_a_table() -> None:
    from test_compare import LABELS_TWO, SPECS_TWO, with_other

    base = run("model-a", [case(i, v, model="model-a") for i, v in enumerate(A_OK)])
    cur = with_other("model-b", [case(i, v, model="model-b") for i, v in enumerate(B_OK)],
                     [case(i, 1, model="model-b") for i in range(3)])
    comp = compare_runs([base, cur], SPECS_TWO, LABELS_TWO, n_boot=100)
    text = render_markdown(cur.metrics, [], comp, model="model-b", run_id="r1")
    section = text[text.index("### Comparison with the baseline"):]
    assert "#### bench" in section and "#### other" not in section
    assert ("- other: not compared, A has no case of it (B 3 cases); differences are against A\n"
            in section)
