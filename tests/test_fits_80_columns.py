"""Every text output at 80 columns (issue 31 item 8): `toolbench runs`, `toolbench compare`, the
`--baseline` section and the data line, rendered with long model names, many scenarios and
subgroups; no line longer than 80, none ending in a space, nothing lost."""

from __future__ import annotations

import re

import pytest

from pytest_toolbench.compare import LoadedRun, compare_runs
from pytest_toolbench.compare.render import baseline_summary, comparison_text
from pytest_toolbench.report.terminal import render_overview
from pytest_toolbench.results.aggregate import RunMetrics
from pytest_toolbench.results.case_result import CaseResult, Outcome
from pytest_toolbench.results.metrics import MetricSpec
from pytest_toolbench.runs.listing import render_runs
from pytest_toolbench.runs.record import DataFingerprint, Headline, RunIndex

MODEL = "some-org/Some-Very-Long-Model-Name-Instruct-2507-AWQ"
SPECS = {"bench": (MetricSpec(name="accuracy", value="correct"),
                   MetricSpec(name="instance_error_rate", value="err", higher_is_better=False))}
LABELS = {"bench": ("hops",)}
SCENARIOS = ["direct", "mandatory-with-a-long-scenario-name", "free"]


def fits(lines: list[str], width: int = 80) -> None:
    bad = [line for line in lines if len(line) > width or line != line.rstrip()]
    assert not bad, "\n".join(bad)


def _cases(model: str, shift: int) -> list[CaseResult]:
    return [CaseResult(case_id=f"bench-{i}-{s}", benchmark="bench", scenario=s, model=model,
                       outcome=Outcome.PASSED, labels={"hops": 3 + i % 3},
                       values={"correct": float((i + shift) % 3 != 0), "err": float(i % 2)})
            for s in SCENARIOS for i in range(12)]


@pytest.fixture(scope="module")
def three_runs() -> list[LoadedRun]:
    return [LoadedRun.from_cases(f"{MODEL}-{k}", _cases(f"{MODEL}-{k}", k), SPECS, LABELS,
                                 n_boot=100) for k in range(3)]


def test_compare_of_three_runs_fits_and_keeps_every_number(three_runs) -> None:
    comp = compare_runs(three_runs, SPECS, LABELS, n_boot=100)
    lines = comparison_text(comp, width=80).splitlines()
    fits(lines)
    # every metric row of every scenario and subgroup, with each run's value and both diffs
    for s in SCENARIOS:
        at = lines.index(f"bench / {s}")
        block = " ".join(lines[at:at + 40])
        assert "accuracy [hops=5]" in block and "instance_error_rate (lower better)" in block
    assert sum(line.lstrip().startswith("B - A") for line in lines) == 3 * 8  # 2 metrics x 4 rows
    assert sum(line.lstrip().startswith("C - A") for line in lines) == 3 * 8
    wide = comparison_text(comp, width=400).splitlines()  # a wide terminal: the pipe table
    assert any(line.startswith("| scenario ") for line in wide)
    fits(wide, 400)


def test_the_baseline_section_fits(three_runs) -> None:
    comp = compare_runs(three_runs[:2], SPECS, LABELS, n_boot=100)
    lines = baseline_summary(comp, width=80).splitlines()
    fits(lines)
    assert lines[1].startswith("== comparison with the baseline")


def _index(i: int) -> RunIndex:
    return RunIndex(
        run_id=f"20260101-12000{i}-abcdef", model=MODEL, suites=["familytool", "metabench",
                                                                 "toolbehonest", "toolhop"],
        started=1767268800.0 + i, n_cases=219, gates_passed=22, gates_failed=["toolhop.x>1"],
        exit_status=10,
        data=[DataFingerprint(benchmark=b, path=f"/data/{b}.json", sha256="ab" * 32,
                              kind="sample") for b in ("toolhop", "familytool", "toolbehonest")],
        headline=[Headline(benchmark="metabench", scenario=f"simple-open-function_{n}",
                           metric="t_acc", value=0.5, is_rate=True) for n in range(8)]
        + [Headline(benchmark="toolhop", scenario=s, metric="accuracy", value=1.0, is_rate=True)
           for s in ("direct", "mandatory", "free")])


def test_runs_listing_fits_as_blocks_and_is_one_table_when_wide() -> None:
    runs = [_index(i) for i in range(3)]
    text = render_runs(runs, 80)
    fits(text.splitlines())
    blocks = text.strip("\n").split("\n\n")
    assert [b.splitlines()[0].split()[0] for b in blocks] == [r.run_id for r in runs]
    first = blocks[0]
    assert "FAILED 1/23, exit 10 GATE_FAILED" in first and "    model:" in first
    # each scenario's headline whole, under its benchmark and metric
    shown = " ".join(first.split())
    assert all(f"simple-open-function_{n}=50.0%" in shown for n in range(8))
    assert "toolhop accuracy: direct=100.0% mandatory=100.0% free=100.0%" in shown
    wide = render_runs(runs, 1000).splitlines()
    assert len(wide) == 4 and wide[0].split()[:3] == ["run", "id", "date"]


def test_the_data_line_fits(tmp_path) -> None:
    """The end-of-run screen's ``data:`` notes wrap under themselves at the width."""
    note = ("data: toolhop: real (bytedance-research/ToolHop), revision b439d7279af3, fingerprint "
            "0123456789ab; 995 records, ../shared/datasets/toolhop/ToolHop.json")
    lines = render_overview(RunMetrics(scenarios=[]), width=80, run_notes=[note]).splitlines()
    fits(lines)
    assert re.sub(r"\s+", " ", " ".join(lines)).count(note) == 1
