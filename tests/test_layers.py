"""The package's layers (``[tool.importlinter]`` in pyproject.toml): no import runs back up.

A module may import from its own layer or lower ones only; the contract lists the layers from
the data flow (plugin at the top, config and the other leaves at the bottom), with no exceptions.
A new import that runs back up fails this test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def lint(config: Path) -> int:
    """import-linter's exit status for ``config``. In a subprocess: its command configures
    logging with ``dictConfig``, which disables every logger that already exists, so in this
    process later tests would see none of the harness's warnings."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    print(proc.stdout[-5000:], proc.stderr[-2000:])
    return proc.returncode


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
