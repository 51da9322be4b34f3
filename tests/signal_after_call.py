"""pytest plugin for the interrupt tests (``-p signal_after_call`` with tests/ on the path): in
a run in one process (``-n 0``), the first case's test body runs whole (its Allure labels set,
its verdict raised), then a SIGTERM comes in before pytest makes the report that carries the
case's result, as a busy machine's scheduler can leave it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

_signalled: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if not _signalled and not hasattr(item.config, "workerinput"):
            _signalled.append(item.nodeid)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # the run's handler raises KeyboardInterrupt in here
