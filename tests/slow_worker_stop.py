"""pytest plugin for the interrupt tests (``-p slow_worker_stop`` with tests/ on the path): an
xdist worker takes ``$TOOLBENCH_TEST_WORKER_STOP_DELAY`` seconds (default 1) to stop after its
first SIGINT, going on with its case meanwhile (its result journalled, its report and Allure
result written), as a worker the scheduler of a busy machine left waiting does. The controller
is untouched."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

_taken: list[int] = []


def _later(signum: int, frame: Any) -> None:
    if _taken:  # the SIGINT sent below (or a second one): stop as Ctrl-C stops it
        raise KeyboardInterrupt
    _taken.append(signum)
    delay = float(os.environ.get("TOOLBENCH_TEST_WORKER_STOP_DELAY", "1"))
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        signal.signal(signal.SIGINT, _later)
