"""An unsolvable gold plan with no UnsolvableQuery step (upstream ``utils/calculate_metrics.py``, "NaN hazard").

Upstream (``ToolBeHonest/ToolBeHonest`` @ 22da253, ``main.py --mode eval``, run beside this
project on these records with oracle replies) scores that record's L3 ``scorers`` as ``""``;
``np.mean`` of no scores is nan, so the subtask's and the scenario's "Level 3 Matching Score"
and ``overall`` are nan, and its tables print ``nan`` (``Evaluation_results_*.json`` holds
``NaN``), while every other cell is 1. The harness does the same by default; the fixed variant
(``--toolbehonest-empty-ms skip``) leaves the record out, as the harness did before.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks.dataset_errors import DatasetWarning
from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST, ToolBeHonestBenchmark
from pytest_toolbench.benchmarks.toolbehonest.options import ToolBeHonestOptions
from pytest_toolbench.benchmarks.toolbehonest.report import leaderboard, solvability_table
from pytest_toolbench.benchmarks.toolbehonest.runner import ToolBeHonestRunner
from pytest_toolbench.compare.load import load_run
from pytest_toolbench.fileio import indented_json
from pytest_toolbench.models.base import Sampling
from pytest_toolbench.models.oracle import OracleModel
from pytest_toolbench.report.json_report import build_json_report
from pytest_toolbench.report.markdown_report import render_markdown
from pytest_toolbench.report.terminal import render_summary
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.gates import evaluate_gate, parse_gate

TOOLS = (
    "1. DiskUsage: Reports the used and free space of every mounted disk.\n"
    "2. FileFinder: Finds files that match a name pattern under a folder.\n"
    "3. FileDeleter: Deletes the given files.\n"
    "4. Finish: Used to end the task.\n"
    "5. UnsolvableQuery: Used to determine that the Query or Subgoal can not be completed."
)
#: The seven keys upstream reads, as in ``test_en.json``. Record os-0 is well formed.
GOOD = {
    "subtask": "os",
    "task": "Free some disk space by deleting the old log files.",
    "tools": TOOLS,
    "unsolvable_task": "Free some disk space by deleting the old log files.",
    "unsolvable_tools": TOOLS.replace("3. FileDeleter: Deletes the given files.\n", "")
    .replace("4. Finish", "3. Finish").replace("5. Unsolvable", "4. Unsolvable"),
    "planning_tools": ["DiskUsage", "FileFinder", "FileDeleter", "Finish"],
    "planning_tools_unsolvable": ["DiskUsage", "FileFinder", "UnsolvableQuery", "Finish"],
}
#: os-1: the unsolvable gold plan has no UnsolvableQuery step (it repeats the solvable one).
NO_UQ = dict(
    GOOD,
    task="Delete the log files of last year.",
    unsolvable_task="Delete the log files of last year.",
    unsolvable_tools=TOOLS,
    planning_tools_unsolvable=["DiskUsage", "FileFinder", "FileDeleter", "Finish"],
)
NAN_CASE = "toolbehonest-os-1-L3-unsolvable"
PT_CELLS = ("PT L1-EM", "PT L2-PR", "PT L3-PR", "PT L3-MS")


class NameMatch:
    """The matching score when the nearest tool carries the gold name (what the oracle's
    subgoal text gets with the real MiniLM; that path is tested in test_toolbehonest_matching)."""

    def score(self, subtask, query, gold_name, gold_desc):
        return 1.0


def run_oracle(tmp_path: Path, **options) -> list[CaseResult]:
    """Every case of the two records, answered by the oracle (the gold) and scored."""
    folder = tmp_path / "toolbehonest"
    folder.mkdir(exist_ok=True)
    (folder / "test_en.json").write_text(json.dumps([GOOD, NO_UQ], indent=1), encoding="utf-8")
    bench = ToolBeHonestBenchmark()
    with pytest.warns(DatasetWarning, match="no UnsolvableQuery"):
        cases = bench.load_cases(tmp_path, ("PT",))
    runner = ToolBeHonestRunner(ToolBeHonestOptions(**options), Sampling(), NameMatch())
    model = OracleModel()
    return [asyncio.run(runner.run(case, model)) for case in cases]


@pytest.fixture
def results(tmp_path) -> list[CaseResult]:
    return run_oracle(tmp_path)


def by_id(results: list[CaseResult]) -> dict[str, CaseResult]:
    return {r.case_id: r for r in results}


def metrics_of(results: list[CaseResult]) -> RunMetrics:
    metrics = aggregate(results, {"toolbehonest": TOOLBEHONEST.metrics},
                        {"toolbehonest": TOOLBEHONEST.breakdown_labels}, n_boot=200)
    metrics.tables = TOOLBEHONEST.report_tables(results)
    return metrics


def leaderboard_cells(text: str) -> dict[str, str]:
    """The leaderboard row of a rendered summary, by column (scenario + metric)."""
    lines = text.split("Leaderboard (paper Table 2)", 1)[1].splitlines()
    head = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:3]]
    row = next(ln for ln in lines if ln.startswith("| oracle"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    names = [f"{a} {b}".strip() for a, b in zip(*head)]
    return dict(zip(names, cells))


# --------------------------------------------------------------------------- per case


def test_the_case_matching_score_and_overall_share_are_nan(results):
    case = by_id(results)[NAN_CASE]
    assert case.outcome is Outcome.PASSED  # the reply is the gold: nan is the data's
    assert case.values["l3_pr"] == 1.0
    assert math.isnan(case.values["l3_ms"])
    assert math.isnan(case.values["overall_sum"]) and case.values["overall_n"] == 2.0
    assert case.details["condition"] == "correct"
    assert "no UnsolvableQuery step" in case.details["matching_score"]
    # every other case is a plain 1.0, as upstream's other cells
    others = [v for r in results if r.case_id != NAN_CASE for k, v in r.values.items()
              if not k.startswith("overall")]
    assert others and all(v == 1.0 for v in others)


def test_nan_survives_the_xdist_transport_and_the_journal(results):
    case = by_id(results)[NAN_CASE]
    back = CaseResult.model_validate_json(case.model_dump_json())
    assert math.isnan(back.values["l3_ms"]) and math.isnan(back.values["overall_sum"])


# --------------------------------------------------------------------------- aggregates


def test_scenario_ms_and_overall_are_nan_as_upstream(results):
    board = leaderboard(results)
    v = board.values
    assert math.isnan(v["PT.l3_ms"]) and math.isnan(v["overall"])
    assert v["PT.l1_em"] == v["PT.l2_pr"] == v["PT.l3_pr"] == 1.0
    assert "os-1" in board.note and "--toolbehonest-empty-ms skip" in board.note
    table3 = solvability_table(results).values
    assert math.isnan(table3["unsolvable.l3"]) and math.isnan(table3["unsolvable.overall"])
    assert table3["solvable.overall"] == 1.0
    metrics = metrics_of(results)
    pt = metrics.scenario("toolbehonest", "PT")
    assert math.isnan(pt.metrics["l3_ms"].value) and math.isnan(pt.metrics["overall"].value)
    assert pt.metrics["l3_ms"].is_rate  # still shown as a rate column, not a raw number
    assert pt.metrics["l3_pr"].value == 1.0


def test_leaderboard_prints_nan_where_upstream_does(results):
    metrics = metrics_of(results)
    cells = leaderboard_cells(render_summary(metrics, [], width=200))
    assert cells["PT L3-MS"] == "nan" and cells["Overall"] == "nan"
    assert [cells[c] for c in PT_CELLS[:3]] == ["100.0"] * 3
    lines = render_markdown(metrics).splitlines()
    header = next(ln for ln in lines if ln.startswith("| Model |"))
    row = next(ln for ln in lines if ln.startswith("| oracle |"))
    md = dict(zip((c.strip() for c in header.split("|")), (c.strip() for c in row.split("|"))))
    assert md["PT L3-MS"] == md["Overall"] == "nan" and md["PT L3-PR"] == "100.0"
    summary = render_summary(metrics, [], width=200)
    assert "| l3_ms   |     nan |" in summary  # the per-scenario table: not "nan%"


def test_a_gate_on_a_nan_metric_fails_with_a_clear_reason(results):
    metrics = metrics_of(results)
    for text in ("toolbehonest.PT.l3_ms>=0.5", "toolbehonest.PT.l3_ms<=1",
                 "toolbehonest.PT.overall>=0", "toolbehonest.PT.overall.ci_low>=0"):
        verdict = evaluate_gate(parse_gate(text), metrics)
        assert not verdict.passed, text
        assert " is nan " in verdict.reason and "cannot pass" in verdict.reason, verdict.reason
    assert evaluate_gate(parse_gate("toolbehonest.PT.l3_pr>=1"), metrics).passed


def test_the_json_report_keeps_nan_and_reads_back(results, tmp_path):
    metrics = metrics_of(results)
    path = tmp_path / "report.json"
    path.write_bytes(indented_json(build_json_report(metrics, results, {"run_id": "x"})))
    text = path.read_text()
    assert '"l3_ms": NaN' in text  # as upstream's json.dump writes it
    data = json.loads(text)
    board = next(t for t in data["metrics"]["tables"] if t["name"] == "leaderboard")
    assert math.isnan(board["values"]["overall"]) and math.isnan(board["rows"][0][-1])
    run = load_run(path)  # the compare/ reader
    assert math.isnan(run.metrics.lookup("toolbehonest.PT.l3_ms"))
    assert math.isnan(by_id(run.cases)[NAN_CASE].values["l3_ms"])


# --------------------------------------------------------------------------- the fixed variant


def test_skip_leaves_the_record_out_and_is_recorded_as_a_deviation(tmp_path):
    results = run_oracle(tmp_path, empty_ms="skip")
    case = by_id(results)[NAN_CASE]
    assert "l3_ms" not in case.values
    assert case.values["overall_sum"] == 1.0 and case.values["overall_n"] == 1.0
    assert {d["kind"] for d in case.details["deviations"]} == {"empty_ms"}
    board = leaderboard(results)
    assert board.values["PT.l3_ms"] == 1.0 and board.values["overall"] == 1.0
    assert "left out" in board.note and "os-1" in board.note
