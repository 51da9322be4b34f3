"""Data warnings: none for the bundled sample, once per run for a user's odd file (issue 22)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "data" / "toolhop" / "ToolHop.json"


def _run(tmp_path: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--limit", "1",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
           *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_the_bundled_sample_runs_without_a_dataset_warning(tmp_path: Path) -> None:
    out = _run(tmp_path, "-n", "0")
    assert "DatasetWarning" not in out and "tolerated oddities" not in out, out[-3000:]


def test_a_users_odd_file_is_warned_about_once_with_xdist(tmp_path: Path) -> None:
    """Record 9006's duplicate tool name, in a file of the user's: one warning in pytest's
    warnings summary, not one per process (it was three with ``-n 2``, one raw on stderr)."""
    data = tmp_path / "data" / "toolhop"
    data.mkdir(parents=True)
    shutil.copy(BUNDLED, data / "ToolHop.json")
    out = _run(tmp_path, "-n", "2", "--data-dir", str(tmp_path / "data"))
    assert out.count("tolerated oddities") == 1, out[-4000:]
    summary = out.split("warnings summary", 1)
    assert len(summary) == 2 and "id=9006: duplicate tool names" in summary[1], out[-4000:]
