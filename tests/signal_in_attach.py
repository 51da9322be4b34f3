"""pytest plugin for the interrupt tests (``-p signal_in_attach`` with tests/ on the path): in a
run in one process (``-n 0``), a SIGTERM comes in while the first case's Allure result is being
labelled (report/allure_report.py ``attach_case``: its labels and model set, its ``case``
parameter not yet its id), as a busy machine's scheduler can leave it."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from pytest_toolbench.report import allure_report

_signalled: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    parameters = allure_report._parameters

    def signalled_first(result: Any) -> None:
        if not _signalled:
            _signalled.append(result.case_id)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # an unheld signal raises KeyboardInterrupt in here
        parameters(result)

    allure_report._parameters = signalled_first
