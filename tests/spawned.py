"""Run a function in several spawned processes at once and wait for all of them, for tests that
check files several processes write together (journals): a spawn context, so no test inherits
another's locks or threads through fork."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from typing import Any


def run_in_processes(target: Callable[..., Any], each_args: Iterable[tuple[Any, ...]],
                     timeout: float = 120) -> None:
    """Start ``target(*args)`` once per ``args``, all at once; every one must exit 0 in time."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in each_args]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0, f"{target.__name__}{p.name}: exit {p.exitcode}"
