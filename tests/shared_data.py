"""Where the real datasets of ../shared live (CI clones the repo beside shared/)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: ``../shared``; ``TOOLBENCH_SHARED_DIR`` names another (a clone not beside it), and
#: ``TOOLBENCH_SHARED_DATASETS`` its datasets alone (the specs and fidelity files beside them).
SHARED = Path(os.environ.get("TOOLBENCH_SHARED_DIR") or REPO.parent / "shared")
SHARED_DATASETS = Path(os.environ.get("TOOLBENCH_SHARED_DATASETS", SHARED / "datasets"))
REAL_TOOLHOP = SHARED_DATASETS / "toolhop" / "ToolHop.sample80.json"
REAL_FAMILYTOOL = SHARED_DATASETS / "familytool"
FAMILYTOOL_SPECS = SHARED_DATASETS.parent / "specs" / "familytool"
SHARED_FIDELITY = SHARED_DATASETS.parent / "fidelity"
