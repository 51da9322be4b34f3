"""End-to-end: the FamilyTool suite run by pytest in a subprocess on the bundled sample."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_suite(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
    cmd = [sys.executable, "-m", "pytest", "suites/familytool", "-p", "no:cacheprovider", "-q",
           "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--toolbench-json", str(report),
           *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def metrics(report: dict) -> dict:
    return {s["scenario"]: (s["n_cases"], s["metrics"], s["breakdown"]) for s in report["metrics"]["scenarios"]}


def test_oracle_scores_100_and_tables_follow_the_paper_layout(tmp_path):
    proc, report = run_suite(tmp_path, "--model", "oracle", "-n", "0", "--no-cache")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "66 passed" in proc.stdout
    tables = {t["name"]: t for t in report["metrics"]["tables"]}
    assert set(tables) == {"extraction", "tooluse", "hops"}
    assert all(v == 100.0 for t in tables.values() for k, v in t["values"].items() if not k.endswith("FmtErr"))
    assert tables["extraction"]["values"]["extract-rr/e/FmtErr"] == 0.0
    assert [r[:3] for r in tables["tooluse"]["rows"]][:2] == [["golden sub-KG (T4)", "b", 6], ["golden sub-KG (T4)", "e", 5]]
    case = next(c for c in report["cases"] if c["case_id"] == "familytool-e-1-tooluse-gs")
    assert case["details"]["extraction"]["raw_output"].startswith("```python\nKG.search(")
    assert case["details"]["predicted_calls"] == [{"name": "order_coffee", "parameters": {"coffee": "coffee_0004", "address": "home_0004"}}]


def test_selection_flags_and_record_replay(tmp_path):
    rec = tmp_path / "rec.jsonl"
    args = ["--familytool-split", "e", "--familytool-kg-mode", "extracted,golden", "--familytool-extraction", "rr"]
    proc, first = run_suite(tmp_path, "--model", "oracle", "-n", "0", "--record", str(rec), *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # e only; extract-rr + tooluse-golden + tooluse-rr (tooluse-gs and tooluse-full deselected).
    assert sorted(metrics(first)) == ["extract-rr", "tooluse-golden", "tooluse-rr"]
    assert all(n == 5 for n, _, _ in metrics(first).values())
    proc, replay = run_suite(tmp_path, "--model", f"replay:{rec}", "-n", "0", "--no-cache", *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert metrics(replay) == metrics(first)


def test_xdist_gives_identical_metrics(tmp_path):
    args = ["--model", "oracle", "--no-cache", "--familytool-split", "b"]
    proc0, serial = run_suite(tmp_path, "-n", "0", *args)
    proc2, parallel = run_suite(tmp_path, "-n", "2", *args)
    assert proc0.returncode == 0 and proc2.returncode == 0, proc2.stdout[-3000:]
    assert metrics(serial) == metrics(parallel)
    assert serial["metrics"]["tables"] == parallel["metrics"]["tables"]
