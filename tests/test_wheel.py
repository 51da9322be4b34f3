"""The wheel ``pip install .`` builds carries the bundled samples, and an installed package reads
them from there.

A wheel used to hold the package alone: ``data/`` lies beside it in the repository. Installed
without ``-e`` (Python 3.10 and 3.13 venvs), ``pytest suites`` in a checkout stopped at once on
Meta-Bench ("distractor tool file does not exist" under site-packages/data), and ``toolbench
list`` outside a checkout could read no benchmark's data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
#: What building the wheel reads (setup.py copies data/ into it).
_BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "pytest_toolbench", "data")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (the build writes build/ and egg-info beside
    them, which must not appear in the working tree other tests read)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    for name in _BUILD_INPUTS:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc", "bundled_data"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(path, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(root / "dist"), str(source)],
        capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = (root / "dist").glob("pytest_toolbench-*.whl")
    return path


def _sample_files() -> list[str]:
    return sorted(str(p.relative_to(REPO / "data")) for p in (REPO / "data").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def test_the_wheel_holds_every_bundled_sample(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        prefix = "pytest_toolbench/bundled_data/"
        samples = _sample_files()
        assert sorted(n[len(prefix):] for n in names if n.startswith(prefix)) == samples
        for rel in samples:  # byte for byte
            assert whl.read(prefix + rel) == (REPO / "data" / rel).read_bytes(), rel
        # the package data pyproject.toml declares is still there beside it
        assert any(n.startswith("pytest_toolbench/view/templates/") for n in names)


class Installed(NamedTuple):
    #: Where the wheel is unpacked, as pip installs it.
    site: Path
    #: The environment of an interpreter that imports ``pytest_toolbench`` from ``site``.
    env: dict[str, str]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel unpacked; PYTHONPATH puts it before the venv's editable install (whose finder
    comes last)."""
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as whl:
        whl.extractall(site)
    env = {k: v for k, v in os.environ.items() if k != "TOOLBENCH_RUNS_DIR"}
    return Installed(site, {**env, "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")])})


def test_an_installed_package_reads_its_samples_from_the_wheel(installed: Installed,
                                                               tmp_path: Path) -> None:
    """Outside a checkout (no ``data/`` anywhere near), ``toolbench list`` reads every benchmark's
    sample from the installed copy."""
    code = "import sys; from pytest_toolbench.cli import main; sys.exit(main(['list', '--json']))"
    listed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=installed.env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    benchmarks = {b["name"]: b for b in json.loads(listed.stdout)}
    assert set(benchmarks) >= {"toolhop", "familytool", "toolbehonest", "metabench"}
    for name in ("toolhop", "familytool", "toolbehonest", "metabench"):
        b = benchmarks[name]
        assert b["data_error"] is None and b["n_cases"] > 0, (name, b["data_error"])
        assert all(line.startswith(f"{installed.site}/pytest_toolbench/bundled_data/{name}/") for line in b["data"]), b["data"]
    code = "import sys; from pytest_toolbench.cli import main; sys.exit(main(['data', 'list', '--json']))"
    rows = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=installed.env,
                          capture_output=True, text=True, timeout=300)
    assert rows.returncode == 0, rows.stderr[-3000:]
    bundled = [row["where"] for row in json.loads(rows.stdout) if row["where"].startswith("bundled")]
    assert bundled == [f"bundled ({installed.site}/pytest_toolbench/bundled_data/metabench)"]


def test_a_checkout_runs_on_an_installed_package(installed: Installed, tmp_path: Path) -> None:
    """The failure as it was met: ``pytest suites/...`` in a checkout, the package installed from
    its wheel. Meta-Bench reads its distractor library from the package's copy; ``--data sample``
    reads the checkout's ``data/``, byte for byte the bundled sample, and the report calls it so
    (it said "mixed (real and other files)", and warned of the ToolHop sample's planted oddity)."""
    pytest.importorskip("faiss", reason="Meta-Bench's meta_tool needs the [retrieval] extra")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "metabench"),
         str(REPO / "suites" / "toolhop"), "--data", "sample", "--model", "oracle",
         "-p", "no:cacheprovider", "-q", "--runs-dir", str(tmp_path / "runs"),
         "--toolbench-json", str(tmp_path / "report.json"), "-W", "ignore::DeprecationWarning"],
        cwd=tmp_path, env=installed.env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "DatasetWarning" not in out and "tolerated oddities" not in out, out[-3000:]
    run_info = json.loads((tmp_path / "report.json").read_text())["run"]
    kinds = {d["benchmark"]: d["kind"] for d in run_info["data"]["benchmarks"]}
    assert kinds == {"metabench": "reconstruction", "toolhop": "sample"}, run_info["data"]
    library = [d["path"] for d in run_info["data_sources"] if d["path"].endswith("distractor_tools.json")]
    assert library == [f"{installed.site}/pytest_toolbench/bundled_data/metabench/library/distractor_tools.json"]


def test_an_installed_package_runs_the_suites_toolbench_init_writes(installed: Installed,
                                                                    tmp_path: Path) -> None:
    """No checkout at all: ``toolbench init`` writes the four suites into an empty project, and
    ``pytest suites/...`` there runs them on the installed package (its bundled samples, its
    fixtures), with the node ids a checkout has."""
    pytest.importorskip("faiss", reason="Meta-Bench's meta_tool needs the [retrieval] extra")
    project = tmp_path / "project"
    code = "import sys; from pytest_toolbench.cli import main; sys.exit(main(['init', 'project']))"
    init = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=installed.env,
                          capture_output=True, text=True, timeout=300)
    assert init.returncode == 0, init.stderr[-3000:]
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*.py")) == sorted(
        str(p.relative_to(REPO)) for p in (REPO / "suites").rglob("test_*.py"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/toolhop", "suites/metabench", "--data", "sample",
         "--model", "oracle", "-p", "no:cacheprovider", "-q", "-rA", "--runs-dir", str(tmp_path / "runs"),
         "--toolbench-json", str(tmp_path / "report.json"), "-W", "ignore::DeprecationWarning"],
        cwd=project, env=installed.env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "PASSED suites/toolhop/test_toolhop.py::test_toolhop[toolhop-9001-direct]" in out, out[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    kinds = {d["benchmark"]: d["kind"] for d in report["run"]["data"]["benchmarks"]}
    assert kinds == {"metabench": "reconstruction", "toolhop": "sample"}, report["run"]["data"]
    assert all(path.startswith(f"{installed.site}/") for path in
               (d["path"] for d in report["run"]["data_sources"])), report["run"]["data_sources"]
