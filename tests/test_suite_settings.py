"""tests/conftest.py's settings hold however the suite is started, not only through `make test`:
the xdist groups (tests/xdist_groups.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).parent / "conftest.py"
GROUPS = Path(__file__).parent / "xdist_groups.py"

GROUPED_TESTS = '''
import os
import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    with open("workers.txt", "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")


@pytest.mark.slow  # the conftest puts every slow test in the real-vLLM group
@pytest.mark.parametrize("n", range(6))
def test_slow(n):
    with open("slow_workers.txt", "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
'''


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    shutil.copy(GROUPS, tmp_path / "xdist_groups.py")
    (tmp_path / "test_grouped.py").write_text(GROUPED_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: a real-vLLM test\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOOLBENCH_RUNS_DIR"))}
    cmd = [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", "-v",
           "--junitxml=junit.xml", *args, "test_grouped.py"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _workers(path: Path) -> list[str]:
    return path.read_text().split()


@pytest.mark.parametrize("dist", [None, "load", "worksteal", "loadgroup"])
def test_each_xdist_group_runs_on_one_worker(tmp_path: Path, dist: str | None) -> None:
    """``pytest -n 2`` (xdist's ``load``) spread the sandbox attacks over both workers, where one
    worker's ``kill_all_probe`` reached the other's decoy; and under pytest 9.2 even ``--dist
    loadgroup`` spread every group (pytest-xdist#1386). Any group-blind mode becomes
    ``loadgroup``, said in the header, the groups hold, and the test ids stay as they are."""
    proc = _run(tmp_path, *(["--dist", dist] if dist else []))
    grouped, slow = _workers(tmp_path / "workers.txt"), _workers(tmp_path / "slow_workers.txt")
    assert len(grouped) == 6 and len(set(grouped)) == 1, grouped
    assert len(slow) == 6 and len(set(slow)) == 1, slow
    if dist != "loadgroup":
        assert f"xdist: --dist {dist or 'load'} -> loadgroup" in proc.stdout
    else:
        assert "-> loadgroup" not in proc.stdout
    # xdist before 3.8 appends the group to a test's id under its own loadgroup ("[0]@together")
    own = "(?:@together)?" if dist == "loadgroup" else ""
    assert re.search(rf"PASSED test_grouped\.py::test_grouped\[0\]{own} ", proc.stdout)
    names = [re.sub(f"{own}$", "", name) for name in
             re.findall(r'<testcase [^>]*name="([^"]+)"', (tmp_path / "junit.xml").read_text())]
    assert sorted(names) == sorted([f"test_grouped[{n}]" for n in range(6)] + [f"test_slow[{n}]" for n in range(6)])


def test_an_explicit_grouping_mode_is_left_alone(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--dist", "loadfile")
    assert "-> loadgroup" not in proc.stdout
    assert len(_workers(tmp_path / "workers.txt")) == 6
