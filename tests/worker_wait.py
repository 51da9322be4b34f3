"""pytest plugin for the interrupt tests (``-p worker_wait`` with tests/ on the path): the
controller of an interrupted xdist run waits ``$TOOLBENCH_TEST_WORKER_WAIT`` seconds (default
120) for its workers to stop, instead of a few, so whether they stopped in time is the test's
choice, not the machine's load."""

from __future__ import annotations

import os

from pytest_toolbench.session import controller

_wait = controller.wait_for_workers_to_stop


def _waiting(config, timeout: float = controller.WORKER_STOP_WAIT) -> bool:
    return _wait(config, float(os.environ.get("TOOLBENCH_TEST_WORKER_WAIT", "120")))


controller.wait_for_workers_to_stop = _waiting
