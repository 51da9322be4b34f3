"""pytest plugin for the interrupt tests (``-p signal_in_allure_teardown`` with tests/ on the
path): in a run in one process (``-n 0``), a SIGTERM comes in inside allure-pytest's teardown
of the first test, after it set the result's history id and before it added the run's labels
(host, thread, framework, language, package), as a busy machine's scheduler can leave it."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from allure_pytest import listener

_signalled: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    labels = listener.allure_labels  # called right after the history id is set

    def signalled_first(item: Any) -> Any:
        if not _signalled:
            _signalled.append(item.nodeid)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # the run's handler raises KeyboardInterrupt in here
        return labels(item)

    listener.allure_labels = signalled_first
