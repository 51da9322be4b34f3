"""Where the real datasets of ../shared live (CI clones the repo beside shared/)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = Path(os.environ.get("TOOLBENCH_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))
REAL_TOOLHOP = SHARED_DATASETS / "toolhop" / "ToolHop.sample80.json"
REAL_FAMILYTOOL = SHARED_DATASETS / "familytool"
FAMILYTOOL_SPECS = SHARED_DATASETS.parent / "specs" / "familytool"
SHARED_FIDELITY = SHARED_DATASETS.parent / "fidelity"
