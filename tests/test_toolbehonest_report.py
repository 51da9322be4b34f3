"""ToolBeHonest tables: the Overall recomputed from the paper's own per-scenario numbers
(paper Table 2), and the three report tables from scored cases."""

from __future__ import annotations

import json

import pytest

from pytest_toolbench.benchmarks.toolbehonest.report import (
    error_analysis,
    leaderboard,
    main,
    overall_from_scenarios,
    solvability_table,
)
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome

# Paper Table 2 (x100): MNT, PT, LFT x (L1-EM, L2-PR, L3-PR, L3-MS), Overall.
TABLE2 = {
    "GPT-3.5-Turbo": ((16.0, 19.1, 15.6, 21.0), (5.0, 11.4, 11.6, 14.0), (33.0, 3.0, 1.4, 0.2), 13.4),
    "Gemini-1.0-Pro": ((12.0, 12.5, 41.2, 35.3), (3.0, 9.3, 48.0, 38.9), (25.0, 4.7, 3.2, 1.8), 20.6),
    "GPT-4-0613": ((59.3, 63.1, 29.2, 27.1), (44.0, 46.0, 23.5, 18.6), (31.0, 13.0, 0.0, 0.0), 31.7),
    "GPT-4-1106": ((44.7, 54.9, 34.5, 31.7), (32.0, 43.0, 34.1, 26.6), (42.0, 26.0, 1.5, 1.2), 32.5),
    "GPT-4-Turbo": ((58.7, 70.3, 28.2, 25.4), (45.0, 63.7, 30.5, 22.3), (42.0, 25.3, 0.3, 0.0), 35.9),
    "GPT-4o": ((53.3, 69.9, 24.8, 24.8), (47.0, 62.0, 27.9, 33.2), (56.0, 21.9, 6.8, 4.4), 37.0),
    "Gemini-1.5-Pro": ((62.7, 70.7, 42.8, 36.6), (56.0, 68.6, 43.6, 38.2), (69.0, 27.1, 8.5, 3.9), 45.3),
    "Llama-2-13B": ((16.7, 0.7, 0.0, 0.0), (2.0, 0.9, 1.0, 0.0), (20.0, 2.3, 0.0, 0.0), 3.7),
    "Mixtral-8x7B": ((4.0, 13.5, 1.4, 1.3), (0.0, 8.2, 2.0, 2.0), (18.0, 6.5, 0.0, 0.0), 4.8),
    "Llama-2-7B": ((5.3, 2.2, 2.0, 0.7), (4.0, 16.5, 0.3, 0.0), (46.0, 7.7, 0.5, 0.0), 6.5),
    "Llama-2-70B": ((17.3, 14.4, 2.0, 0.4), (2.0, 19.8, 2.7, 0.7), (33.0, 0.5, 0.2, 0.0), 7.9),
    "Llama-3-8B": ((13.3, 4.0, 7.0, 6.1), (7.0, 4.5, 5.1, 2.9), (45.0, 2.0, 1.3, 0.7), 8.1),
    "Mistral-7B": ((27.3, 9.1, 4.5, 1.9), (20.0, 4.7, 3.4, 1.2), (31.0, 15.0, 1.6, 0.3), 10.1),
    "Llama-3-70B": ((31.3, 35.5, 4.8, 4.9), (19.0, 23.6, 5.2, 4.3), (34.0, 4.0, 0.0, 0.0), 14.6),
}
KEYS = ("l1_em", "l2_pr", "l3_pr", "l3_ms")


def scenarios(model: str) -> dict[str, dict[str, float]]:
    mnt, pt, lft, _ = TABLE2[model]
    return {s: dict(zip(KEYS, cells)) for s, cells in (("MNT", mnt), ("PT", pt), ("LFT", lft))}


@pytest.mark.parametrize(
    ("model", "expected"),
    [("Gemini-1.5-Pro", 45.29), ("GPT-4o", 37.03), ("Gemini-1.0-Pro", 20.39),
     ("Llama-3-70B", 14.63), ("Llama-3-8B", 8.15)],
)
def test_overall_reproduces_spec_5_2(model, expected):
    assert overall_from_scenarios(scenarios(model)) == pytest.approx(expected, abs=0.005)


@pytest.mark.parametrize("model", sorted(TABLE2))
def test_overall_reproduces_the_paper_column(model):
    # every row within 0.05 of the printed Overall, except Gemini-1.0-Pro (a Table 2 typo)
    # (+1e-9: Llama-3-8B recomputes to 8.15, printed as 8.1: a half-way rounding of the cells)
    tolerance = 0.25 if model == "Gemini-1.0-Pro" else 0.05 + 1e-9
    assert overall_from_scenarios(scenarios(model)) == pytest.approx(TABLE2[model][3], abs=tolerance)


def test_unweighted_mean_of_scenarios_would_not_reproduce_it():
    s = scenarios("Gemini-1.5-Pro")
    unweighted = overall_from_scenarios(s, {"MNT": 1, "PT": 1, "LFT": 1})
    assert unweighted == pytest.approx(43.97, abs=0.01) and abs(unweighted - 45.3) > 1


def test_aggregate_cli_prints_overall(tmp_path, capsys):
    path = tmp_path / "paper.json"
    path.write_text(json.dumps({m: scenarios(m) for m in ("GPT-4o", "Llama-3-8B")}))
    assert main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("GPT-4o") and lines[1].endswith("\t37.03")
    assert lines[2].endswith("\t8.15")


# --------------------------------------------------------------------------- tables from cases


_counter = iter(range(10_000))


def case(scenario, level, solvable, values, condition=None, error=False, subtask="os"):
    n = next(_counter)
    return CaseResult(
        case_id=f"toolbehonest-{subtask}-{n}-L{level}-{'solvable' if solvable else 'unsolvable'}",
        benchmark="toolbehonest",
        scenario=scenario,
        model="m",
        outcome=Outcome.ERROR if error else Outcome.PASSED,
        labels={"level": level, "subtask": subtask, "solvable": solvable},
        values={} if error else values,
        details={"condition": condition} if condition else {},
        error=InfraError(kind="x", message="y") if error else None,
    )


def results():
    return [
        # MNT: two unsolvable records
        case("MNT", 1, False, {"l1_em": 1.0, "overall_sum": 1.0, "overall_n": 1.0}),
        case("MNT", 1, False, {"l1_em": 0.0, "overall_sum": 0.0, "overall_n": 1.0}),
        case("MNT", 2, False, {"l2_pr": 0.5, "overall_sum": 0.5, "overall_n": 1.0}, "wrong_reasoning"),
        case("MNT", 2, False, {"l2_pr": 0.0, "overall_sum": 0.0, "overall_n": 1.0}, "solvability_hallu"),
        case("MNT", 3, False, {"l3_pr": 1.0, "l3_ms": 0.5, "overall_sum": 1.5, "overall_n": 2.0}, "correct"),
        case("MNT", 3, False, {"l3_pr": 0.0, "l3_ms": 0.0, "overall_sum": 0.0, "overall_n": 2.0}, "solvability_hallu"),
        # PT: one unsolvable record, all perfect; one errored case (excluded)
        case("PT", 1, False, {"l1_em": 1.0, "overall_sum": 1.0, "overall_n": 1.0}),
        case("PT", 2, False, {"l2_pr": 1.0, "overall_sum": 1.0, "overall_n": 1.0}, "correct"),
        case("PT", 3, False, {"l3_pr": 1.0, "l3_ms": 1.0, "overall_sum": 2.0, "overall_n": 2.0}, "correct"),
        case("PT", 3, False, {}, error=True),
        # solvable side (never in the leaderboard)
        case("MNT", 1, True, {"l1_em_solvable": 1.0}),
        case("MNT", 2, True, {"l2_pr_solvable": 0.5}),
        case("MNT", 3, True, {"l3_pr_solvable": 0.0}),
    ]


def test_leaderboard_is_unsolvable_only_and_pools_the_overall():
    table = leaderboard(results())
    v = table.values
    assert (v["MNT.l1_em"], v["MNT.l2_pr"], v["MNT.l3_pr"], v["MNT.l3_ms"]) == (0.5, 0.25, 0.5, 0.25)
    assert (v["PT.l1_em"], v["PT.l3_ms"]) == (1.0, 1.0)
    assert v["LFT.l1_em"] is None
    # pooled: (1+0+0.5+0+1.5+0 + 1+1+2) / (1+1+1+1+2+2 + 1+1+2) = 7/12
    assert v["overall"] == pytest.approx(7 / 12)
    assert table.rows[0][0] == "m" and table.rows[0][-1] == round(700 / 12, 2)
    assert table.columns[1] == "MNT L1-EM" and table.columns[-1] == "Overall"
    assert "only ['MNT', 'PT']" in table.note


def test_solvability_table_matches_paper_table_3_definitions():
    v = solvability_table(results()).values
    assert (v["solvable.l1"], v["solvable.l2"], v["solvable.l3"]) == (1.0, 0.5, 0.0)
    assert v["solvable.overall"] == 0.5
    # unsolvable L1 over 3 records: (1+0+1)/3; L2 (0.5+0+1)/3; L3 = mean(PR 2/3, MS 0.5)
    assert v["unsolvable.l1"] == pytest.approx(2 / 3)
    assert v["unsolvable.l2"] == pytest.approx(0.5)
    assert v["unsolvable.l3"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert v["unsolvable.overall"] == pytest.approx(7 / 12)


def test_error_analysis_counts_conditions_per_level_and_scenario():
    table = error_analysis(results())
    rows = {r[0]: r[1:] for r in table.rows}
    assert table.columns[1:] == [
        "Non-existent Tools", "Solvability Hallucination", "Wrong Tools",
        "Wrong UnsolvableQuery Index", "Wrong Tool Reasoning", "Correct",
    ]
    assert rows["Level 2 / MNT"] == [0, 1, 0, 0, 1, 0]
    assert rows["Level 3 / MNT"] == [0, 1, 0, 0, 0, 1]
    assert rows["Level 2 / Overall"] == [0, 1, 0, 0, 1, 1]
    assert rows["Level 3 / LFT"] == [0, 0, 0, 0, 0, 0]


def run_report(cells: dict[str, tuple[float, float, float, float]], n: dict[str, int]) -> dict:
    """The shape of a --toolbench-json report's per-scenario metrics (values as fractions)."""
    return {"metrics": {"scenarios": [
        {"benchmark": "toolbehonest", "scenario": s,
         "metrics": {k: {"value": v, "n": n[s]} for k, v in zip(KEYS, cells[s])}}
        for s in cells
    ] + [{"benchmark": "other", "scenario": "x", "metrics": {"l1_em": {"value": 0.0, "n": 99}}}]}}


def test_aggregate_cli_weights_a_run_report_by_its_own_record_counts(tmp_path, capsys):
    # 3 MNT records with avg4 = 1.0 and 1 PT record with avg4 = 0.0: the run pools to 3/4;
    # the paper's 150/100 weights would give 0.6.
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_report(
        {"MNT": (1.0, 1.0, 1.0, 1.0), "PT": (0.0, 0.0, 0.0, 0.0)}, {"MNT": 3, "PT": 1})))
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("\t0.75")
    assert main([str(path), "--counts", "MNT=150,PT=100"]) == 0  # explicit weights still win
    assert capsys.readouterr().out.splitlines()[1].endswith("\t0.60")


def test_aggregate_cli_bad_input_is_one_line(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"metrics": {"scenarios": []}}))
    with pytest.raises(SystemExit, match="no toolbehonest scenario metrics"):
        main([str(path)])
    paper = tmp_path / "paper.json"
    paper.write_text(json.dumps({"GPT-4o": scenarios("GPT-4o")}))
    with pytest.raises(SystemExit, match=r"no record count for scenario 'LFT'"):
        main([str(paper), "--counts", "MNT=150,PT=100"])
    with pytest.raises(SystemExit, match="--counts: expected"):
        main([str(paper), "--counts", "MNT150"])


def test_terminal_tables_fit_120_columns_without_truncation():
    from pytest_toolbench.report.terminal import render_summary
    from pytest_toolbench.results.aggregate import RunMetrics

    from pytest_toolbench.benchmarks.toolbehonest.report import report_tables

    text = render_summary(RunMetrics(scenarios=[], tables=report_tables(results())), [])
    lines = text.splitlines()
    assert "…" not in text
    assert any(line.rstrip("| ").endswith("Overall") for line in lines)  # leaderboard header
    assert any(line.startswith("| Level 2 / Overall ") for line in lines)  # one line, unwrapped
    assert all(len(line) <= 120 for line in lines)
    assert all(line.endswith("|") for line in lines if line.startswith("|"))  # nothing cropped
