"""Where the datasets the tests read live: the bundled sample (``data/``, found as the harness
finds it) and the real datasets of ../shared (CI clones the repo beside shared/)."""

import os
from pathlib import Path

from pytest_toolbench.benchmarks.data_source import BUNDLED_DATA_DIR

REPO = Path(__file__).resolve().parents[1]
#: The ToolHop sample bundled with the package (what a run reads without --data-dir).
BUNDLED_TOOLHOP = BUNDLED_DATA_DIR / "toolhop" / "ToolHop.json"
#: ``../shared``; ``TOOLBENCH_SHARED_DIR`` names another (a clone not beside it), and
#: ``TOOLBENCH_SHARED_DATASETS`` its datasets alone (the specs and fidelity files beside them).
SHARED = Path(os.environ.get("TOOLBENCH_SHARED_DIR") or REPO.parent / "shared")
SHARED_DATASETS = Path(os.environ.get("TOOLBENCH_SHARED_DATASETS", SHARED / "datasets"))
REAL_TOOLHOP = SHARED_DATASETS / "toolhop" / "ToolHop.sample80.json"
REAL_FAMILYTOOL = SHARED_DATASETS / "familytool"
FAMILYTOOL_SPECS = SHARED_DATASETS.parent / "specs" / "familytool"
SHARED_FIDELITY = SHARED_DATASETS.parent / "fidelity"
