"""A test's reported time is its case's own time, not its wait for it.

``case_result`` submits the next cases ahead of their tests (up to twice ``--concurrency``), then
blocks in its test's set-up until this test's case is done. pytest times that set-up, so a
test's duration was its *wait*: the first test of a batch read the whole batch's time, the others
near 0, as their cases had finished while it waited. JUnit's testcase ``time`` and
``--durations`` then named the wrong cases as slow, and disagreed with the times
``toolbench finish --junitxml`` gives the same cases of a killed run.

So the wait is taken out of the set-up's duration and the case's own wall time
(``CaseResult.wall_s``: from its start in its process to its result) is put on the report that ends
the test (the call, a failed set-up, a set-up under ``--setup-only``), as report/junit_gates.py
does for a case whose reports never came. Whatever else pytest measured stays where it was: a
session fixture's start (the vLLM server's included) on the set-up of the test that triggered it,
the call's assertion, the teardown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import pytest

from pytest_toolbench.session.transport import RESULT_KEY, ends_the_test

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: Seconds the test's set-up spent blocked on its case (set by ``timed_wait``), kept until the
#: report that ends the test has taken the case's time in its place.
_WAIT_KEY = pytest.StashKey[float]()


def timed_wait(item: pytest.Item, wait: Callable[_P, _T], *args: _P.args,
               **kwargs: _P.kwargs) -> _T:
    """``wait(*args, **kwargs)``, its duration kept on ``item`` for :func:`retime` (also when it
    raises)."""
    start = time.monotonic()
    try:
        return wait(*args, **kwargs)
    finally:
        item.stash[_WAIT_KEY] = time.monotonic() - start


def retime(item: pytest.Item, report: pytest.TestReport) -> None:
    """Move ``report``'s duration from the wait to the case's own time (``makereport``): the
    set-up loses the wait, the report that ends the test gains the case's wall time. A test
    whose case has no wall time (none was awaited, or its result predates ``wall_s``) keeps
    pytest's durations."""
    if report.when not in ("setup", "call"):
        return
    wait = item.stash.get(_WAIT_KEY, None)
    if wait is None:
        return
    result = item.stash.get(RESULT_KEY, None)
    if result is None or result.wall_s is None:
        del item.stash[_WAIT_KEY]
        return
    if report.when == "setup":
        report.duration = max(0.0, report.duration - wait)
    if ends_the_test(item, report):  # the call; an infrastructure error or --setup-only: the set-up
        del item.stash[_WAIT_KEY]
        report.duration += result.wall_s
