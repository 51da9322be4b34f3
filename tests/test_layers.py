"""The package's layers (``[tool.importlinter]`` in pyproject.toml): no import runs back up,
and no bundled benchmark imports another.

A module may import from its own layer or lower ones only; the contract lists the layers from
the data flow (plugin at the top, config and the other leaves at the bottom), with no exceptions.
The four benchmark packages are independent: what two of them share lives in ``benchmarks/``
itself. A new import that runs back up, or across benchmarks, fails this test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_lint(config: Path, root: Path = REPO) -> subprocess.CompletedProcess[str]:
    """import-linter over the package found in ``root`` (the repository, or a copy). In a
    subprocess: its command configures logging with ``dictConfig``, which disables every logger
    that already exists, so in this process later tests would see none of the harness's
    warnings."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=300)
    print(proc.stdout[-5000:], proc.stderr[-2000:])
    return proc


def lint(config: Path) -> int:
    """import-linter's exit status for ``config`` over this repository's package."""
    return run_lint(config).returncode


def test_no_import_runs_back_up_a_layer() -> None:
    assert lint(REPO / "pyproject.toml") == 0, "an import runs back up a layer: see the output above"


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The same contract with the model layer moved to the top fails: the benchmarks import the
    models, so the check does see an import that runs back up."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '    "models",\n' in text and '    "cli | plugin",\n' in text
    upside_down = text.replace('    "models",\n', "").replace(
        '    "cli | plugin",\n', '    "models",\n    "cli | plugin",\n')
    config = tmp_path / "pyproject.toml"
    config.write_text(upside_down, encoding="utf-8")
    if lint(REPO / "pyproject.toml") != 0:
        pytest.skip("the contract itself is broken (the test above says why)")
    assert lint(config) == 1


def test_the_contract_catches_an_import_across_benchmarks(tmp_path: Path) -> None:
    """A copy of the package in which Meta-Bench's scoring imports ToolHop's fails the
    independence contract (and only it): the check sees an import from one benchmark package
    into another."""
    if lint(REPO / "pyproject.toml") != 0:
        pytest.skip("the contract itself is broken (the test above says why)")
    copy = tmp_path / "pytest_toolbench"
    shutil.copytree(REPO / "pytest_toolbench", copy,
                    ignore=lambda folder, names: [n for n in names if n == "__pycache__" or (
                        not n.endswith(".py") and not (Path(folder) / n).is_dir())])
    scoring = copy / "benchmarks" / "metabench" / "scoring.py"
    text = scoring.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    assert marker in text
    cross = "\nimport pytest_toolbench.benchmarks.toolhop.scoring\n"
    scoring.write_text(text.replace(marker, marker + cross, 1), encoding="utf-8")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = run_lint(tmp_path / "pyproject.toml", root=tmp_path)
    assert proc.returncode == 1
    assert "benchmark packages import nothing from each other BROKEN" in proc.stdout
    assert "layers follow the data flow KEPT" in proc.stdout
    chain = "pytest_toolbench.benchmarks.metabench.scoring -> pytest_toolbench.benchmarks.toolhop"
    assert chain in " ".join(proc.stdout.split())
