"""Keep pytest's walk over the logger registry safe from loggers made on the harness's threads.

pytest's logging plugin attaches its handlers around every test phase, and to do so walks
``logging.root.manager.loggerDict`` (``_pytest.logging.catching_logs.__enter__``) without
logging's lock. The harness runs work on other threads while pytest's thread does that: a
Meta-Bench query searches FAISS in asyncio's executor, a ToolHop tool call waits there for its
sandbox worker, and the controller imports its end-of-run modules in the background. Such work
can import modules (the first search imports faiss, a real embedder transformers, which imports
its submodules on first use; the sandbox's reply check imported tqdm and requests there until
``ToolSandbox.arun`` resolved it first), and a module that makes a logger at import adds to
that dict. When the two met, the test in pytest's thread failed in its set-up or teardown with
"RuntimeError: dictionary changed size during iteration", raised through contextlib (seen
once, under heavy load, in ``toolhop-884-direct``; tests/test_logger_registry.py makes it).

:func:`guard_logger_registry` swaps the registry for a dict whose views read a copy
(``dict.copy`` runs in C without giving up the GIL, so no logger can be added half-way):
pytest's walk sees the registry as it was at one instant. Lookups and insertions are the plain
dict's. Importing beforehand every module such threads might touch cannot be complete, and
holding the threads back while pytest works would stall the run. It is put in place when the
command names benchmark tests (plugin.py), when a process builds its case runtime, and before
the controller's warm imports: each before the threads it guards against start.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any


class SnapshotIterationDict(dict[str, Any]):
    """A dict whose ``keys()``, ``values()`` and ``items()`` are views of a copy taken in one
    step: a loop over them never sees the dict change, whatever other threads add meanwhile.

    ``dict.copy`` copies a subclass in one C call only while the subclass keeps dict's own
    ``__iter__`` (it then never calls back into Python: 1.2 us for 200 loggers, six walks a
    test). Overriding ``__iter__`` as well would send the copy through ``keys()`` and recurse,
    so ``for name in registry`` still walks the live dict: pytest never does.
    """

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return dict.copy(self).keys()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return dict.copy(self).values()

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return dict.copy(self).items()


def guard_logger_registry() -> None:
    """Make walks over the logger registry safe against other threads adding loggers (once per
    process; later calls do nothing)."""
    manager = logging.Logger.manager
    if isinstance(manager.loggerDict, SnapshotIterationDict):
        return
    # Under logging's lock (``getLogger`` inserts under it, Python 3.10-3.13), so that no
    # logger made between the copy and the swap is lost.
    with getattr(logging, "_lock", None) or contextlib.nullcontext():
        manager.loggerDict = SnapshotIterationDict(manager.loggerDict)
