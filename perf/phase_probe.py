"""A pytest plugin (``-p phase_probe``, this folder on ``PYTHONPATH``) that notes when each phase
of one pytest command ends, in seconds from the process's start, and appends them as one JSON line
to ``$PHASE_OUT`` at exit. ``$PHASE_PROFILE_END``: cProfile from the end of the runtest loop to
exit, written there. Used by rerun_phases.py."""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any

import pytest

_marks: dict[str, float] = {}
_tests = 0
_profile: list[Any] = []


def _process_age_s() -> float:
    """Seconds since this process started (its start time in /proc, in clock ticks)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


_T0 = time.perf_counter() - _process_age_s()


def _mark(name: str) -> None:
    _marks[name] = round(time.perf_counter() - _T0, 4)


def pytest_configure(config: pytest.Config) -> None:
    _mark("configure")


def pytest_collection_finish(session: pytest.Session) -> None:
    _mark("collected")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    global _tests
    _tests += 1
    if _tests <= 2:
        _mark(f"test{_tests}_start")


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _mark("last_test_end")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    try:
        return (yield)
    finally:
        _mark("runtestloop_end")
        if os.environ.get("PHASE_PROFILE_END"):
            import cProfile

            _profile.append(cProfile.Profile())
            _profile[0].enable()


@atexit.register
def _write() -> None:
    _mark("exit")
    if _profile:
        _profile[0].disable()
        _profile[0].dump_stats(os.environ["PHASE_PROFILE_END"])
    if os.environ.get("PHASE_OUT"):
        with open(os.environ["PHASE_OUT"], "a") as f:
            f.write(json.dumps(_marks) + "\n")
