"""The cyclic GC and a run's long-lived objects: collected items are frozen out of its reach."""

from __future__ import annotations

import atexit
import gc
import sys


def _unfreeze_for_nanobind() -> None:
    """Frozen objects are never freed at exit, which is the point (freeing 10,000 cases costs a
    second). nanobind extensions (triton, pulled in by torch/vLLM) count unfreed instances as
    leaks and print warnings, so processes that loaded one give them back to the final GC."""
    if "triton" in sys.modules:
        gc.unfreeze()


def freeze_collected() -> None:
    """Collected items live until the end: move them out of the cyclic GC's reach, so the full
    collections that allocation triggers during the run (and pytest's forced ones at exit) do not
    walk every case again and again (``gc.freeze`` is meant for such long-lived heaps)."""
    gc.freeze()
    atexit.unregister(_unfreeze_for_nanobind)  # once per process, however many sessions it runs
    atexit.register(_unfreeze_for_nanobind)


def freeze_at_exit() -> None:
    """pytest collects several times at exit: only what the run made since is walked."""
    gc.freeze()
