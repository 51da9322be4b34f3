"""The terminal summary at 80 columns: no column lost, one screen at the end (issue 22)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolbench.report.terminal import (
    breakdown_lines,
    render_details,
    render_gates,
    render_overview,
    render_summary,
)
from pytest_toolbench.text_table import TextTable, render_table
from pytest_toolbench.results.aggregate import RunMetrics, aggregate
from pytest_toolbench.results.case_result import CaseResult, InfraError, Outcome
from pytest_toolbench.results.gates import GateVerdict
from pytest_toolbench.results.metrics import MetricSpec

#: FamilyTool's extraction scenarios: 5 metrics, breakdowns by split and hops.
FIVE = ("em", "f1", "no_hallucination", "coverage", "format_error")
SPECS = {"familytool": tuple(MetricSpec(name=n, value=n, higher_is_better=n != "format_error")
                             for n in FIVE)}
BREAKDOWN = {"familytool": ("split", "hops")}
REPO = Path(__file__).resolve().parents[1]


def _case(i: int, *, scenario: str = "extract-gs", error: bool = False) -> CaseResult:
    return CaseResult(
        case_id=f"familytool-{i:03d}-{scenario}", benchmark="familytool", scenario=scenario,
        model="some-org/Some-Very-Long-Model-Name-Instruct-2507",
        outcome=Outcome.ERROR if error else Outcome.PASSED,
        labels={"split": "be"[i % 2], "hops": 1 + i % 4},
        values={} if error else {n: float(i % 3 != 0) for n in FIVE},
        error=InfraError(kind="timeout", message="no reply in 120 s") if error else None,
    )


@pytest.fixture(scope="module")
def metrics() -> RunMetrics:
    results = [_case(i) for i in range(11)] + [_case(11, error=True)]
    results += [_case(i, scenario="tooluse-golden-with-a-long-scenario-name") for i in range(5)]
    return aggregate(results, SPECS, BREAKDOWN, n_boot=200, seed=1)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_five_metric_breakdown_keeps_every_column(metrics: RunMetrics, width: int) -> None:
    s = metrics.scenario("familytool", "extract-gs")
    for label in ("split", "hops"):
        lines = breakdown_lines(s, label, width)
        assert all(len(ln) <= width for ln in lines), lines
        assert "||" not in "\n".join(lines)  # a column squeezed to nothing (the old |||)
        assert "…" not in "\n".join(lines)  # nor a cut cell
        header = _cells(lines[1])
        assert header[0] == label and all(h for h in header), header
        rows = [_cells(ln) for ln in lines[3:]]
        groups = [r[0] for r in rows if r[0]]
        assert groups == [g.group for g in s.breakdown[label]]
        # Every metric of every group is on the screen, with its CI and n.
        text = "\n".join(lines)
        for name in FIVE:
            assert text.count(name) >= len(groups)
        assert "(1 err)" in text  # the infrastructure error, by group


def test_text_table_falls_back_to_wrapping_then_to_a_vertical_layout() -> None:
    t = TextTable(["gate", "reason"], [["toolhop.mandatory.accuracy>=0.5",
                                        "actual 0.42 is below 0.5 " * 5]], wrap={0, 1})
    wrapped = render_table(t, 60)
    assert all(len(ln) <= 60 for ln in wrapped) and len(wrapped) > 3
    assert wrapped[0].startswith("| gate")
    wide = TextTable(["model"] + [f"metric {i}" for i in range(12)],
                     [["m"] + ["100.00%"] * 12])
    vertical = render_table(wide, 80)
    assert vertical[0] == "* model: m"
    assert len(vertical) == 13 and all("100.00%" in ln for ln in vertical[1:])
    assert all(len(ln) <= 80 for ln in vertical)


def test_overview_is_one_short_screen_with_headline_ci_n_and_errors(metrics: RunMetrics) -> None:
    text = render_overview(metrics, width=80, run_notes=["familytool subset: 17 of 66 cases "
                                                         "(metrics cover only these)"])
    lines = text.splitlines()
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines), text
    row = next(_cells(ln) for ln in lines if ln.startswith("| extract-gs "))
    assert row[1] == "em" and row[2].endswith("%") and re.fullmatch(r"\[\d+\.\d\d, \d+\.\d\d\]", row[3])
    assert row[4] == "11 (1 err)"
    # A name too long for its column wraps after a hyphen; it is never cut.
    first = next(i for i, ln in enumerate(lines) if ln.startswith("| tooluse-golden"))
    name = _cells(lines[first])[0] + _cells(lines[first + 1])[0]
    assert name == "tooluse-golden-with-a-long-scenario-name"
    assert re.search(r"infrastructure errors: familytool / extract-gs: 1 infrastructure error", text)
    assert "tool-call parse failures: none" in text
    assert "-v" in text and "subset: 17 of 66" in text
    assert "by split" not in text and "no_hallucination" not in text  # breakdowns are behind -v


def test_details_hold_the_breakdowns_and_summary_ends_on_the_overview(metrics: RunMetrics) -> None:
    details = render_details(metrics, width=80)
    assert "familytool / extract-gs by split" in details and "no_hallucination" in details
    full = render_summary(metrics, [], width=80)
    assert full.index("by hops") < full.index("== overview ==") < full.index("| familytool")
    short = render_summary(metrics, [], width=80, verbose=False)
    assert "by hops" not in short and "| familytool" in short


def test_gates_stay_whole_and_readable_at_80_columns() -> None:
    verdicts = [GateVerdict(gate="familytool.extract-gs[split=b].no_hallucination>=0.9", actual=0.5,
                            passed=False, reason="actual 0.5 < 0.9; " + "timeout x3 after 7 attempts " * 4),
                GateVerdict(gate="familytool.extract-gs.error_rate<=0", actual=0.0, passed=True,
                            reason="0/12 cases hit infrastructure errors")]
    narrow = render_gates(verdicts, width=80).splitlines()
    assert all(len(ln) <= 80 for ln in narrow), narrow
    # Each gate on one line with its verdict and value, its reason wrapped under it, whole.
    assert narrow[1] == f"FAIL  {verdicts[0].gate}  (actual 0.5)"
    reason = " ".join(ln.strip() for ln in narrow[2:narrow.index(f"PASS  {verdicts[1].gate}  (actual 0)")])
    assert reason == verdicts[0].reason.strip()
    wide = render_gates(verdicts, width=140).splitlines()
    assert wide[1].startswith("| verdict | gate") and wide[3].startswith(f"| FAIL    | {verdicts[0].gate} |")
    assert all(len(ln) <= 140 for ln in wide)


def test_a_real_oracle_run_ends_on_one_screen_at_80_columns(tmp_path: Path) -> None:
    """The suites' summary through pytest itself: the metrics screen is short, fits 80 columns,
    and ``-v`` adds the breakdowns."""
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "-n", "0",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs")]
    env = {**os.environ, "COLUMNS": "80"}
    quiet = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == 0, quiet.stdout[-3000:]
    section = quiet.stdout.split("= pytest-toolbench =", 1)[1]
    assert "| toolhop" in section and "| mandatory" in section, section
    assert "by hops" not in section and len(section.splitlines()) <= 24, section
    assert all(len(ln) <= 80 for ln in section.splitlines() if ln.startswith("|")), section
    verbose = subprocess.run(cmd + ["-v"], cwd=REPO, capture_output=True, text=True, timeout=300,
                             env=env)
    assert "toolhop / mandatory by hops" in verbose.stdout, verbose.stdout[-3000:]
    assert verbose.stdout.rstrip().splitlines()[-2].startswith("run folder:")


def test_data_lines_name_kind_revision_and_fingerprint_wrapped_at_80(tmp_path: Path) -> None:
    """One ``data:`` line per benchmark: real or sample, the revision, the fingerprint; wrapped
    at 80 columns with no trailing spaces; ``-v`` adds each file (path, records, sha256)."""
    from pytest_toolbench.benchmarks.data_source import DataSource
    from pytest_toolbench.report.terminal import data_notes
    from pytest_toolbench.results.provenance import run_data

    real = tmp_path / "ToolHop.json"
    real.write_text("[]")
    sources = [DataSource.for_file("familytool", REPO / "data" / "familytool" / name, 5, bundled=True)
               for name in ("familytool-b.jsonl", "familykg-b.txt")]
    sources.append(DataSource.for_file("toolhop", real, 995, bundled=False))
    fp = {d.benchmark: d.fingerprint for d in run_data(sources)}
    short = data_notes(sources, verbose=False)
    assert short[0] == ("data: familytool: bundled sample (not the real benchmark), no upstream "
                        f"revision, fingerprint {fp['familytool']}; 10 records in 2 files in "
                        "data/familytool")
    assert short[1].startswith("data: toolhop: local files (no pin matched), no upstream "
                               f"revision, fingerprint {fp['toolhop']}; 995 records, ")
    verbose = data_notes(sources, verbose=True)
    assert len(verbose) == 5 and f"data: {sources[2].describe()}" in verbose
    screen = render_overview(RunMetrics(scenarios=[]), width=80, run_notes=short)
    lines = screen.splitlines()
    assert all(len(ln) <= 80 and ln == ln.rstrip() for ln in lines if " " in ln.strip()), screen
    assert any(fp["familytool"] in ln for ln in lines) and any(fp["toolhop"] in ln for ln in lines)


def test_familytool_kg_triples_are_counted_apart_from_its_records() -> None:
    """The ``data:`` line and the JSON report's ``run.data`` count FamilyTool's records (the
    JSONL lines), not its KG triples as more records; each source says what it counts."""
    from pytest_toolbench.benchmarks.familytool.benchmark import FAMILYTOOL
    from pytest_toolbench.report.terminal import _shown_path, data_notes
    from pytest_toolbench.results.provenance import run_data

    folder = REPO / "data" / "familytool"

    def lines(pattern: str) -> int:
        return sum(1 for p in folder.glob(pattern)
                   for line in p.read_text().splitlines() if line.strip())

    sources = FAMILYTOOL.data_sources(None)
    assert sorted({(s.path.name[:10], s.unit) for s in sources}) == [
        ("familykg-b", "KG triples"), ("familykg-e", "KG triples"),
        ("familytool", "records")]
    [data] = run_data(sources)
    assert (data.records, data.files) == (lines("familytool-*.jsonl"), 4)
    [note] = data_notes(sources, verbose=False)
    assert note.endswith(f"; {lines('familytool-*.jsonl')} records in 2 files and "
                         f"{lines('familykg-*.txt')} KG triples in 2 files in "
                         f"{_shown_path(folder)}")


@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_long_model_name_in_a_paper_table_is_never_cut(width: int) -> None:
    from pytest_toolbench.results.aggregate import ReportTable

    model = "meta-llama/Llama-3.1-70B-Instruct"
    cols = ["Model"] + [f"{s} {m}" for s in ("MNT", "PT", "LFT")
                        for m in ("L1-EM", "L2-PR", "L3-PR", "L3-MS")] + ["Overall"]
    table = ReportTable(benchmark="toolbehonest", name="lb", title="Leaderboard (paper Table 2)",
                        columns=cols, rows=[[model] + [55.5] * 13], values={})
    lines = render_details(RunMetrics(scenarios=[], tables=[table]), width=width).splitlines()
    assert all(len(ln) <= width for ln in lines) and "…" not in "\n".join(lines)
    if lines[1].startswith("* "):  # the vertical layout
        assert lines[1] == f"* Model: {model}" and sum("55.5" in ln for ln in lines) == 13
    else:
        body = [_cells(ln) for ln in lines if ln.startswith("|") and not ln.startswith("|-")]
        first = next(i for i, r in enumerate(body) if r[1] == "55.5")
        assert "".join(r[0] for r in body[first:]).replace(" ", "") == model
        assert body[first].count("55.5") == 13


def test_a_partial_run_s_subset_line_does_not_say_again_what_its_partial_line_said() -> None:
    """"PARTIAL RESULTS: ...; metrics cover only the cases that reported" then "toolhop subset:
    1 of 18 cases (metrics cover only these; ...)": said twice, six lines apart."""
    from pytest_toolbench.report.terminal import coverage_notes
    from pytest_toolbench.results.partial_run import METRICS_COVER_ONLY, partial_notes

    said = partial_notes([], None, ["toolhop-9002-direct"], 18, pytest_stop="-x stopped it")
    assert METRICS_COVER_ONLY in said[0]
    partial = any(METRICS_COVER_ONLY in n for n in said)
    assert coverage_notes({"toolhop": 1}, {"toolhop": 18}, partial_said=partial) == [
        "toolhop subset: 1 of 18 cases (not comparable with a full run)"]
    assert coverage_notes({"toolhop": 12}, {"toolhop": 18}) == [  # a -k / --limit subset
        "toolhop subset: 12 of 18 cases (metrics cover only these; not comparable with a full run)"]
