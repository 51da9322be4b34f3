"""pytest plugin for the interrupt tests (``-p slow_start`` with tests/ on the path): the start of
a run takes ``$TOOLBENCH_TEST_START_DELAY`` seconds (default 5) longer, after creating the file
``$TOOLBENCH_TEST_STARTING`` names, so a test knows when to send a signal there.
``$TOOLBENCH_TEST_SLOW_AT`` says where: ``workers`` (xdist starting each worker, in the session
start), ``validation`` (the controller's reading of the selection and its data, in the session
start) or ``collection`` (pytest's collection: in-process, or in each xdist worker, while the
controller waits for their node ids)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_toolbench.session import run_start

_original_validate_selection = run_start.validate_selection


_paused: set[str] = set()


def _pause(phase: str) -> None:
    if os.environ.get("TOOLBENCH_TEST_SLOW_AT") != phase or phase in _paused:
        return  # once a process (a second collection: the session end's, of a run it stopped)
    _paused.add(phase)
    marker = os.environ.get("TOOLBENCH_TEST_STARTING")
    if marker:
        Path(marker).write_text(f"{phase}\n", encoding="utf-8")
    time.sleep(float(os.environ.get("TOOLBENCH_TEST_START_DELAY", "5")))


def _slow_validate_selection(*args: Any, **kwargs: Any) -> Any:
    _pause("validation")
    return _original_validate_selection(*args, **kwargs)


run_start.validate_selection = _slow_validate_selection


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    if not config.pluginmanager.has_plugin("dsession"):  # (an xdist controller collects only
        _pause("collection")  # at the session end of a run interrupted before its workers did)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # pytest-xdist, controller side
    _pause("workers")
