"""pytest plugin for the interrupt tests (``-p signal_in_allure_write`` with tests/ on the path):
in a run in one process (``-n 0``), a SIGTERM comes in while allure-commons hands the first
case's finished result to its file logger (before the file is written), as a busy machine's
scheduler can leave it: the case ran and reached the run's record, its result file never came."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import allure_commons
import pytest


class _StopInWrite:
    signalled = False

    @allure_commons.hookimpl(tryfirst=True)
    def report_result(self, result: Any) -> None:
        if not _StopInWrite.signalled:
            _StopInWrite.signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # the run's handler raises KeyboardInterrupt in here


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        allure_commons.plugin_manager.register(_StopInWrite())
