"""Two real recorded runs of the ToolHop suite on the bundled sample, compared end to end.

Run A: ``--model oracle`` (gold answers). Run B: a real local OpenAI-compatible endpoint
(tests/fake_openai_server.py) that answers every odd record id wrongly. On the six bundled
records that is 9001, 9003 and 9005, but upstream's scorer counts 9005 correct whatever the
answer (gold "0" is stripped to "", code/evaluation_*.py), so per scenario: A 6/6, B 4/6, b = 2 (A right,
B wrong), c = 0, exact McNemar p = 2 * (1/2)^2 = 0.5, paired difference -1/3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fake_openai_server import FakeOpenAIServer, completion
from pytest_toolbench.exitcodes import ToolbenchExit
from shared_data import BUNDLED_TOOLHOP

REPO = Path(__file__).resolve().parents[1]
RECORDS = json.loads(BUNDLED_TOOLHOP.read_text())
SCENARIOS = ("direct", "mandatory", "free")


def odd_ids_wrong(body: dict, index: int):
    text = json.dumps(body["messages"])
    record = next(r for r in RECORDS if json.dumps(r["question"])[1:-1] in text)
    answer = record["answer"] if record["id"] % 2 == 0 else "definitely-wrong"
    return 200, {}, completion(f"<answer>{answer}</answer>")


def run_suite(tmp: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    report = tmp / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-o", f"cache_dir={tmp / 'pytest-cache'}", "--cache-dir", str(tmp / "cache"), "--runs-dir", str(tmp / "runs"),
           "--toolbench-json", str(report), "--junitxml", str(tmp / f"{name}.xml"), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GITHUB_"))}
    env["COLUMNS"] = "80"  # what pytest's terminal writer reads off a terminal
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    return proc, json.loads(report.read_text()) if report.exists() else None


def degraded_args(server: FakeOpenAIServer) -> list[str]:
    return ["--base-url", server.base_url, "--api-key", "t", "--model", "degraded", "--no-cache"]


GATES = ["toolhop.mandatory.accuracy>=baseline-0.02",
         "toolhop.mandatory.accuracy[hops=3]>=baseline",
         "toolhop.direct.accuracy.diff_lower>=-0.05"]


def gate_args() -> list[str]:
    return [a for g in GATES for a in ("--gate", g)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("runs")
    oracle, oracle_report = run_suite(tmp, "oracle", "--model", "oracle")
    assert oracle.returncode == 0, oracle.stdout[-3000:]
    baseline = str(tmp / "oracle.json")
    same, same_report = run_suite(tmp, "same", "--model", "oracle", "--baseline", baseline,
                                  "--toolbench-md", str(tmp / "same.md"), *gate_args())
    with FakeOpenAIServer(odd_ids_wrong) as server:
        worse, worse_report = run_suite(tmp, "worse", *degraded_args(server), "--baseline", baseline,
                                        "--toolbench-md", str(tmp / "worse.md"), *gate_args())
    return {"tmp": tmp, "baseline": baseline, "same": (same, same_report),
            "worse": (worse, worse_report), "oracle_report": oracle_report}


def gate_cases(xml: Path) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")
            if c.get("classname") == "toolbench-gates"}


def test_baseline_gates_on_identical_runs_pass(runs) -> None:
    proc, report = runs["same"]
    assert proc.returncode == ToolbenchExit.OK, proc.stdout[-4000:]
    assert [v["passed"] for v in report["gates"] if v["kind"] == "metric"] == [True, True, True]
    for scenario in SCENARIOS:
        cov = next(s for s in report["baseline"]["scenarios"] if s["scenario"] == scenario)
        assert cov["coverage"][0] == {"run": 1, "n_paired": 6, "only_in_reference": 0,
                                      "only_in_run": 0, "error_in_either": 0}
    assert "comparison with the baseline" in proc.stdout
    cases = gate_cases(runs["tmp"] / "same.xml")
    assert set(cases) == {"toolhop.mandatory.accuracy>=baseline-0.02",
                          "toolhop.mandatory[hops=3].accuracy>=baseline",
                          "toolhop.direct.accuracy.diff_lower>=-0.05"}
    assert all(c.find("failure") is None for c in cases.values())


def test_baseline_gates_on_a_degraded_run_fail_with_exit_10_and_junit_failures(runs) -> None:
    proc, report = runs["worse"]
    assert proc.returncode == ToolbenchExit.GATE_FAILED, proc.stdout[-4000:]
    verdicts = {v["gate"]: v for v in report["gates"] if v["kind"] == "metric"}
    mand = verdicts["toolhop.mandatory.accuracy>=baseline-0.02"]
    assert not mand["passed"] and mand["actual"] == pytest.approx(4 / 6)
    assert "baseline 1-0.02 = 0.98" in mand["reason"]
    hops3 = verdicts["toolhop.mandatory[hops=3].accuracy>=baseline"]  # 9001 wrong, 9002 right
    assert not hops3["passed"] and hops3["actual"] == pytest.approx(0.5)
    low = verdicts["toolhop.direct.accuracy.diff_lower>=-0.05"]
    assert not low["passed"] and low["actual"] <= -1 / 6
    cases = gate_cases(runs["tmp"] / "worse.xml")
    assert all(c.find("failure") is not None for c in cases.values())
    assert "gates FAILED (exit status 10 GATE_FAILED)" in proc.stdout


def test_the_terminal_and_markdown_list_the_cases_that_went_from_right_to_wrong(runs) -> None:
    """Which cases regressed, by id: 9001 and 9003 in every scenario (9005 still scores right)."""
    proc, report = runs["worse"]
    markdown = (runs["tmp"] / "worse.md").read_text()
    shown = " ".join(proc.stdout.split())  # a line longer than 80 columns wraps between ids
    for scenario in SCENARIOS:
        ids = [f"toolhop-{i}-{scenario}" for i in (9001, 9003)]
        assert f"toolhop/{scenario} right in A, wrong in B (2): {', '.join(ids)}" in shown
        assert f"toolhop/{scenario} right in A, wrong in B (2): `{ids[0]}`, `{ids[1]}`" in markdown
        s = next(s for s in report["baseline"]["scenarios"] if s["scenario"] == scenario)
        assert s["changes"] == [{"run": 1, "worse": ids, "better": []}]
    assert "wrong in A, right in B" not in proc.stdout
    same, _ = runs["same"]
    assert "right in A, wrong in B" not in same.stdout


def test_compare_cli_lists_the_cases_that_went_from_wrong_to_right(runs) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "compare",
                           str(runs["tmp"] / "worse.json"), runs["baseline"]],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ("toolhop/direct wrong in A, right in B (2): toolhop-9001-direct, toolhop-9003-direct"
            in " ".join(proc.stdout.split()))
    assert all(len(line) <= 80 and line == line.rstrip() for line in proc.stdout.splitlines())


def test_the_baseline_comparison_fits_80_columns(runs) -> None:
    """The --baseline section and everything pytest-toolbench prints after it, at 80 columns
    (a CI log): no line longer, none ending in a space (the rich table was 176 columns)."""
    proc, _ = runs["worse"]
    ours = proc.stdout.split("== comparison with the baseline", 1)[1].splitlines()[1:]
    ours = ours[:next(i for i, line in enumerate(ours) if line.startswith("run folder: "))]
    assert ours and "toolhop / direct" in ours
    too_long = [line for line in ours if len(line) > 80 or line != line.rstrip()]
    assert not too_long, "\n".join(too_long)


def test_a_baseline_run_draws_the_model_comparison_chart_beside_its_json(runs) -> None:
    """--baseline makes toolbench compare's chart (baseline vs this run, CI bars) one of the
    run's plots: a real PNG in ``<json>.plots/``, attached to Allure with the others."""
    chart = runs["tmp"] / "worse.plots" / "comparison-with-baseline.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (runs["tmp"] / "oracle.plots" / "comparison-with-baseline.png").exists()


def test_the_baseline_comparison_in_the_json_report_by_hand(runs) -> None:
    _, report = runs["worse"]
    comp = report["baseline"]
    assert [r["model"] for r in comp["runs"]] == ["oracle", "degraded"]
    for scenario in SCENARIOS:
        s = next(s for s in comp["scenarios"] if s["scenario"] == scenario)
        acc = next(m for m in s["metrics"] if m["metric"] == "accuracy" and m["label"] is None)
        assert [v["value"] for v in acc["values"]] == pytest.approx([1.0, 4 / 6])
        d = acc["diffs"][0]
        assert d["n_paired"] == 6 and d["diff"] == pytest.approx(-1 / 6 * 2)
        assert d["ci_low"] <= d["diff"] <= d["ci_high"] <= 0.0
        assert d["mcnemar"] == {"b": 2, "c": 0, "p_value": pytest.approx(0.5), "method": "exact"}
        hops3 = next(m for m in s["metrics"] if m["metric"] == "accuracy" and m["group"] == "3")
        assert hops3["diffs"][0]["n_paired"] == 2 and hops3["diffs"][0]["diff"] == pytest.approx(-0.5)


def test_a_baseline_gate_without_baseline_is_a_one_line_usage_error(tmp_path) -> None:
    with FakeOpenAIServer(odd_ids_wrong) as server:
        proc, report = run_suite(tmp_path, "r", *degraded_args(server),
                                 "--gate", "toolhop.direct.accuracy>=baseline-0.02")
        assert server.requests == []  # no model call
    assert proc.returncode == ToolbenchExit.USAGE_ERROR, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "pass --baseline RUN.json" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and report is None


def test_an_unreadable_baseline_is_a_one_line_usage_error(tmp_path, runs) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc, report = run_suite(tmp_path, "r", "--model", "oracle", "--baseline", str(bad))
    assert proc.returncode == ToolbenchExit.USAGE_ERROR
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "bad.json:1: not JSON" in errors[0], proc.stderr
    # A gate on a subgroup the baseline never had is caught before the run, too.
    proc, _ = run_suite(tmp_path, "r", "--model", "oracle", "--baseline", runs["baseline"],
                        "--gate", "toolhop.direct[hops=9].accuracy>=baseline")
    assert proc.returncode == ToolbenchExit.USAGE_ERROR
    assert "has no toolhop.direct[hops=9].accuracy" in proc.stderr


def test_a_baseline_named_by_its_run_id_is_that_run_s_report(runs) -> None:
    """``--baseline ID`` as ``toolbench runs`` prints it (or a unique prefix), as ``toolbench
    compare`` takes it: it was read as a file in the current folder, "No such file"."""
    tmp = runs["tmp"]
    oracle_id = runs["oracle_report"]["run"]["run_id"]
    proc, report = run_suite(tmp, "by-id", "--model", "oracle", "--baseline", oracle_id,
                             *gate_args())
    assert proc.returncode == ToolbenchExit.OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["baseline"] is not None
    assert f"{tmp / 'runs' / oracle_id / 'report.json'}" in " ".join(proc.stdout.split())
    proc, _ = run_suite(tmp, "by-id", "--model", "oracle", "--baseline", "no-such-run")
    assert proc.returncode == ToolbenchExit.USAGE_ERROR
    assert ("--baseline no-such-run: no such report file, and no run with that id in "
            f"{tmp / 'runs'}") in proc.stderr


def test_toolbench_compare_cli_on_the_two_recorded_runs(runs) -> None:
    tmp = runs["tmp"]
    out_json, out_png = tmp / "cmp.json", tmp / "cmp.png"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_toolbench.cli", "compare", runs["baseline"],
         str(tmp / "worse.json"), "--json", str(out_json), "--plot", str(out_png)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "A = oracle" in out and "B = degraded" in out
    # off a terminal: 80 columns, each metric's cells packed under its name
    lines = out.splitlines()
    at = lines.index("toolhop / direct")
    assert lines[at + 1].startswith("  accuracy  A 100.00% [100.00, 100.00]  B 66.67% [")
    assert lines[at + 2].startswith("    B - A  -33.33 pp [")
    assert lines[at + 2].endswith("  McNemar 2/0 p=0.5  6 paired")
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), out
    assert "toolhop/direct B vs A: 6 paired; only in A: 0, only in B: 0" in out
    comp = json.loads(out_json.read_text())
    assert comp["runs"][1]["model"] == "degraded"
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_cli_counts_cases_in_one_run_only(runs, tmp_path) -> None:
    report = json.loads(Path(runs["baseline"]).read_text())
    report["cases"] = [c for c in report["cases"] if c["case_id"] != "toolhop-9001-direct"]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(report))
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "compare", str(cut),
                           str(runs["tmp"] / "worse.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "toolhop/direct B vs A: 5 paired; only in A: 0, only in B: 1" in proc.stdout


def test_compare_cli_input_errors_are_one_line(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_toolbench.cli", "compare",
                           str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "a.json: cannot read" in proc.stderr


def test_markdown_summary_of_a_suite_run_with_baseline(runs) -> None:
    from test_markdown_report import markdown_tables

    text = (runs["tmp"] / "worse.md").read_text()
    tables = markdown_tables(text)
    overview, gates = tables[:2]  # the overview of every suite opens the summary
    assert [r[:3] for r in overview[1:]] == [["toolhop", s, "accuracy"]
                                             for s in ("direct", "mandatory", "free")]
    assert [r[0] for r in gates[1:4]] == ["**FAIL**"] * 3
    assert "### Comparison with the baseline" in text
    comparison = tables[-1]
    row = next(r for r in comparison[1:] if r[:2] == ["direct", "accuracy"])
    assert row[4].startswith("-33.33 pp") and row[5] == "2/0 p=0.5"
    assert "#### toolhop / mandatory" in text
