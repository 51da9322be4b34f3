"""Real recorded runs for the ``toolbench view`` tests (test_view_site.py, test_view_browser.py):
the ToolHop suite on its bundled sample, run by pytest as a user runs it.

- ``oracle``: gold answers, every case right;
- ``half``: ``--model replay:`` replies that give the gold answer for even record ids and a wrong
  one for odd ids (9005's gold "0" still scores right under upstream's scorer), so against the
  oracle 9001 and 9003 flip in each scenario;
- ``subset``: the oracle again with ``--limit 2``: a subset, never ranked with the full runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_suite(tmp: Path, name: str, model: str, *extra: str) -> dict:
    """One ToolHop run into ``tmp/runs``; its JSON record (``tmp/<name>.json``)."""
    report = tmp / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "--data", "sample", "--cache-dir", str(tmp / "cache"),
           "--runs-dir", str(tmp / "runs"), "--model", model, "--toolbench-json", str(report),
           "--no-plots", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GITHUB_"))}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(report.read_text())


def half_wrong_replay(oracle: dict, path: Path) -> Path:
    """Replies that answer even record ids with their gold and odd ids wrongly."""
    lines = []
    for c in oracle["cases"]:
        record_id = int(c["case_id"].split("-")[1])
        answer = c["details"]["gold"] if record_id % 2 == 0 else "definitely-wrong"
        lines.append(json.dumps({"case_id": c["case_id"], "responses": [
            {"role": "assistant", "content": f"<answer>{answer}</answer>"}]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def make_runs(tmp: Path) -> dict[str, dict]:
    """The three runs, in this order (oldest first), under ``tmp/runs``."""
    oracle = run_suite(tmp, "oracle", "oracle")
    half = run_suite(tmp, "half", f"replay:{half_wrong_replay(oracle, tmp / 'half.jsonl')}")
    subset = run_suite(tmp, "subset", "oracle", "--limit", "2")
    return {"oracle": oracle, "half": half, "subset": subset}
