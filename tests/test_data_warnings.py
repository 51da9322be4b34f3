"""Data warnings: none for the bundled sample, once per run for a user's odd file (issue 22)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared_data import BUNDLED_TOOLHOP as BUNDLED

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--limit", "1",
           "-p", "no:cacheprovider", "-p", "no:randomly", "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
           *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _users_copy(path: Path) -> None:
    """The bundled sample's records in a file of the user's: the same JSON written anew, so its
    bytes differ (a byte-identical copy is the sample itself, next test)."""
    path.write_text(json.dumps(json.loads(BUNDLED.read_text(encoding="utf-8")), indent=1), encoding="utf-8")


def test_the_bundled_sample_runs_without_a_dataset_warning(tmp_path: Path) -> None:
    out = _run(tmp_path, "-n", "0")
    assert "DatasetWarning" not in out and "tolerated oddities" not in out, out[-3000:]


def test_a_byte_identical_copy_of_the_sample_is_the_sample(tmp_path: Path) -> None:
    """What a checkout run on a wheel install reads (--data sample takes the checkout's data/,
    the package's own copy lies in site-packages): no warning of the planted oddity, and the
    report calls it the bundled sample, not the user's local files."""
    data = tmp_path / "data" / "toolhop"
    data.mkdir(parents=True)
    shutil.copy(BUNDLED, data / "ToolHop.json")
    out = _run(tmp_path, "-n", "0", "--data-dir", str(tmp_path / "data"),
               "--toolbench-json", str(tmp_path / "report.json"))
    assert "DatasetWarning" not in out and "tolerated oddities" not in out, out[-3000:]
    (source,) = json.loads((tmp_path / "report.json").read_text())["run"]["data_sources"]
    assert (source["path"], source["bundled"], source["kind"]) == (str(data / "ToolHop.json"), True, "sample")


def test_a_users_odd_file_is_warned_about_once_with_xdist(tmp_path: Path) -> None:
    """Record 9006's duplicate tool name, in a file of the user's: one warning in pytest's
    warnings summary, not one per process (it was three with ``-n 2``, one raw on stderr)."""
    data = tmp_path / "data" / "toolhop"
    data.mkdir(parents=True)
    _users_copy(data / "ToolHop.json")
    out = _run(tmp_path, "-n", "2", "--data-dir", str(tmp_path / "data"))
    assert out.count("tolerated oddities") == 1, out[-4000:]
    summary = out.split("warnings summary", 1)
    assert len(summary) == 2 and "id=9006: duplicate tool names" in summary[1], out[-4000:]
    # about the user's data, located there: not at the harness's line that reported it
    assert "session/selection.py" not in summary[1] and "issue_" not in summary[1], summary[1]
    assert "<dataset>:0: DatasetWarning: " in summary[1], summary[1]


@pytest.mark.parametrize("error_filter", [
    "error::pytest_toolbench.benchmarks.dataset_errors.DatasetWarning", "error"])
def test_an_error_filter_still_stops_the_run_on_a_data_warning(tmp_path: Path,
                                                               error_filter: str) -> None:
    """The warning is issued by the harness, not by pytest's own method: ``-W error::...`` must
    still apply to it; and stop the run in one line, exit 4 (a project's ``filterwarnings =
    error`` made it pytest's INTERNALERROR, a traceback through the harness, exit 3)."""
    data = tmp_path / "data" / "toolhop"
    data.mkdir(parents=True)
    _users_copy(data / "ToolHop.json")
    cmd = [sys.executable, "-m", "pytest", "suites/toolhop", "--model", "oracle", "--limit", "1",
           "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0",
           "--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"),
           "--data-dir", str(tmp_path / "data"),
           "-W", error_filter]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4 and "tolerated oddities" in out, out[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("ERROR: ")]
    assert line.endswith("(a warning, made an error by -W or filterwarnings; -W 'default::"
                         "pytest_toolbench.benchmarks.dataset_errors.DatasetWarning' lets the "
                         "run go on)"), line
    assert "INTERNALERROR" not in out and "Traceback" not in out, out[-3000:]
