"""The end screen shows each paper's headline by default, the rest with -v (issue 29, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.benchmarks import registry
from pytest_toolbench.report.terminal import render_overview
from pytest_toolbench.results.aggregate import aggregate
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.headline import DEFAULT_HEADLINE, Headline, headline_of, headlines_of

REPO = Path(__file__).resolve().parents[1]
TBH_NAMES = ("MNT: missing necessary", "PT: potential tools", "LFT: limited", "functionality")


def _tbh(i: int, scenario: str, level: int) -> CaseResult:
    values = {"l3_pr": 0.5, "l3_ms": 0.25, "overall_sum": 0.75, "overall_n": 2.0} if level == 3 \
        else {"l1_em": float(i % 2), "overall_sum": float(i % 2), "overall_n": 1.0}
    return CaseResult(case_id=f"toolbehonest-x-{i}-L{level}-unsolvable", benchmark="toolbehonest",
                      scenario=scenario, model="m", outcome=Outcome.PASSED,
                      labels={"level": level, "solvable": False, "subtask": "x"}, values=values)


def _screen_lines(text: str, width: int = 80) -> list[str]:
    lines = text.splitlines()
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    assert all(ln == ln.rstrip() for ln in lines), "trailing spaces"
    return lines


def test_bundled_benchmarks_declare_a_headline_and_an_outside_one_falls_back() -> None:
    heads = headlines_of(registry())
    assert heads["toolhop"].metrics == ("accuracy",) and not heads["toolhop"].grids
    for name in ("toolbehonest", "familytool", "metabench"):
        assert heads[name].grids, name
        declared = {m.name for m in registry()[name].metrics}
        for grid in heads[name].grids:  # only declared metrics and scenarios: no scoring of its own
            assert {c.metric for c in grid.columns} <= declared
            assert set(grid.scenarios) <= set(registry()[name].scenarios)

    class Outside:
        name = "toy"

    assert headline_of(Outside()) is DEFAULT_HEADLINE
    with pytest.raises(TypeError):
        headline_of(type("Bad", (), {"headline": ("accuracy",)})())


def test_toolbehonest_level_3_only_shows_l3_and_the_overall_per_named_scenario() -> None:
    """The README's ``-m "level(n=3) and solvable(value=False)"``: L3 numbers, not ``n/a``."""
    tbh = registry()["toolbehonest"]
    results = [_tbh(i, s, 3) for i, s in enumerate(("MNT", "MNT", "PT", "LFT"))]
    metrics = aggregate(results, {"toolbehonest": tbh.metrics}, {"toolbehonest": ()},
                        n_boot=50, seed=1)
    metrics.tables.extend(tbh.report_tables(results))
    lines = _screen_lines(render_overview(metrics, width=80,
                                          headlines={"toolbehonest": tbh.headline}))
    text = "\n".join(lines)
    for name in TBH_NAMES:
        assert name in text
    row = next(ln for ln in lines if ln.startswith("| MNT"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["-", "-", "50.00", "25.00", "37.50", "2"]
    total = next(ln for ln in lines if ln.startswith("| all scenarios"))
    assert "37.50" in total and total.rstrip().endswith("4 |")
    assert "l1_em" not in text and "Leaderboard" not in text


def test_toolbench_runs_leads_each_scenario_with_the_metric_the_terminal_leads_with(tmp_path) -> None:
    """run.json's headline (``toolbench runs``) is the headline's lead metric, as the terminal's
    and the leaderboard's: an L3-only ToolBeHonest run shows its Overall, not an ``l1_em`` it
    never computed; a benchmark without a declared headline still shows its first metric."""
    from pytest_toolbench.results.run_record import RunRecord
    from pytest_toolbench.runs.record import index_from_report

    tbh = registry()["toolbehonest"]
    results = [_tbh(i, s, 3) for i, s in enumerate(("MNT", "MNT", "PT"))]
    metrics = aggregate(results, {"toolbehonest": tbh.metrics}, {"toolbehonest": ()},
                        n_boot=50, seed=1)
    assert next(iter(metrics.scenarios[0].metrics)) == "l1_em"  # the first declared: none here
    record = RunRecord(metrics=metrics, cases=results)
    index = index_from_report(record, tmp_path)  # the registry's headlines
    assert [(h.scenario, h.metric, h.value) for h in index.headline] == [
        ("MNT", "overall", 0.375), ("PT", "overall", 0.375)]
    generic = index_from_report(record, tmp_path, headlines={})
    assert [(h.metric, h.value) for h in generic.headline] == [("l1_em", None)] * 2


def test_without_a_headline_each_scenario_shows_its_first_metric() -> None:
    tbh = registry()["toolbehonest"]
    results = [_tbh(i, "MNT", 1) for i in range(4)]
    metrics = aggregate(results, {"toolbehonest": tbh.metrics}, {"toolbehonest": ()},
                        n_boot=50, seed=1)
    text = render_overview(metrics, width=80)  # no headlines: today's overview
    assert "| MNT" in text and "l1_em" in text and "L1-EM" not in text
    generic = render_overview(metrics, width=80, headlines={"toolbehonest": Headline()})
    assert generic == text


def _run(args: list[str], tmp_path: Path, verbose: bool) -> str:
    cmd = [sys.executable, "-m", "pytest", *args, "--model", "oracle", "-n", "0",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"),
           "--runs-dir", str(tmp_path / "runs"), "-v" if verbose else "-q"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # -v prints the details above the summary section: all of the output then
    return done.stdout if verbose else done.stdout.split("= pytest-toolbench =", 1)[1]


SUITES = {
    "toolbehonest": (["suites/toolbehonest", "--data", "sample",
                      "-m", "level(n=3) and solvable(value=False)"],
                     [*TBH_NAMES, "L1-EM", "L3-PR", "L3-MS", "Overall", "all scenarios"],
                     ["Leaderboard (paper Table 2)", "l3_ms", "by subtask"]),
    "metabench": (["suites/metabench", "--data", "sample"],
                  ["T-Acc", "P-Acc", "T-Acc 95% CI", "simple open FM", "hard closed multi"],
                  ["hr_1", "fmd", "paper Table 3"]),
    "familytool": (["suites/familytool", "--data", "sample", "--limit", "2"],
                   ["golden sub-KG", "extracted sub-KG, GS", "full KG", "b EM", "Greedy Search"],
                   ["no_hallucination", "extract-gs by split", "EM by split and hop count"]),
}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_oracle_run_shows_the_headline_by_default_and_everything_with_v(
        suite: str, tmp_path: Path) -> None:
    args, headline, details = SUITES[suite]
    quiet = _run(args, tmp_path, verbose=False)
    screen = _screen_lines(quiet.split("run folder:", 1)[0])
    text = "\n".join(screen)
    for name in headline:
        assert name in text, (name, text)
    for name in details:
        assert name not in text, (name, text)
    assert "-v prints every metric" in text
    verbose = _run(args, tmp_path, verbose=True)
    for name in (*headline, *details):
        assert name in verbose, (name, verbose[-4000:])
