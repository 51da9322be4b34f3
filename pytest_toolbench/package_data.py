"""Where the harness's own small samples lie, for every layer that names them (the benchmarks read
them, ``toolbench data list`` shows where they are).

Inside the package in a wheel install (setup.py copies ``data/`` there as ``bundled_data``), else
``data/`` beside the package (a checkout, an editable install). The wheel's copy is looked for
first: beside an installed package lies site-packages, whose ``data`` folder, if some other
distribution made one, is not ours.
"""

from __future__ import annotations

from pathlib import Path


def _bundled_data_dir() -> Path:
    package = Path(__file__).resolve().parent
    installed = package / "bundled_data"
    return installed if installed.is_dir() else package.parent / "data"


#: The harness's own small samples, read with --data sample and no --data-dir.
BUNDLED_DATA_DIR = _bundled_data_dir()
