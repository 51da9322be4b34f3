"""pytest plugin for the interrupt tests (``-p slow_plots`` with tests/ on the path): writing the
plots, at the session end, first creates the file ``$TOOLBENCH_TEST_PLOTTING`` names and then
takes ``$TOOLBENCH_TEST_PLOT_DELAY`` seconds (default 5), so a test knows when the reports are
being written and has time to send a signal then."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pytest_toolbench.report import plots

_original_write_plots = plots.write_plots


def _slow_write_plots(*args: Any, **kwargs: Any) -> list[Path]:
    marker = os.environ.get("TOOLBENCH_TEST_PLOTTING")
    if marker:
        Path(marker).write_text("plotting\n", encoding="utf-8")
    time.sleep(float(os.environ.get("TOOLBENCH_TEST_PLOT_DELAY", "5")))
    return _original_write_plots(*args, **kwargs)


plots.write_plots = _slow_write_plots
