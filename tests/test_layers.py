"""The package's layers (``[tool.importlinter]`` in pyproject.toml): no import runs back up.

A module may import from its own layer or lower ones only; the contract lists the layers from
the data flow (plugin at the top, config and the other leaves at the bottom), with no exceptions.
A new import that runs back up fails this test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def lint(config: Path) -> int:
    from importlinter.cli import lint_imports

    cwd = os.getcwd()
    os.chdir(REPO)  # the package is found from the repository root
    try:
        return lint_imports(config_filename=str(config), no_cache=True)
    finally:
        os.chdir(cwd)


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
