"""pytest plugin for the interrupt tests (``-p signal_after_report`` with tests/ on the path): in
a run in one process (``-n 0``), the first case's call report is made (the case's result on
it), then a SIGTERM comes in before that report is logged, as a busy machine's scheduler can
leave it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

_signalled: list[str] = []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield  # the harness's own wrapper, inside this one, has put the result on it
    if (call.when == "call" and not _signalled
            and not hasattr(item.config, "workerinput")):
        _signalled.append(item.nodeid)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)  # the run's handler raises KeyboardInterrupt in here
    return report
