"""Which items this process will run next, so their cases can start before pytest reaches them.

Without xdist the answer is simply the items after the current one. Under xdist the controller
hands each worker a queue of item indices; pytest-xdist's ``WorkerInteractor`` keeps it in
``torun`` (a lock-protected deque) and ``nextitem_index``. Reading it is the only way to know a
worker's future work; if the internals change, we degrade to no run-ahead rather than fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import pytest

_POSITIONS = pytest.StashKey[dict[int, int]]()
_AHEAD = pytest.StashKey[list[int]]()
#: Under xdist: the item indices already handed out by :func:`new_upcoming_items`.
_HANDED = pytest.StashKey[set[int]]()
_INTERACTOR = pytest.StashKey[Any]()
#: The item pytest is setting up in this process (plugin.py's pytest_runtest_setup sets it).
_current: list[pytest.Item | None] = [None]


def set_current_item(item: pytest.Item | None) -> None:
    _current[0] = item


def current_item() -> pytest.Item | None:
    """The test being set up. Fixtures read it instead of asking for ``request``: pytest builds a
    new fixture definition (with an ``inspect.signature``) for every ``request`` asked for, a
    large part of the per-test cost of a run answered from the cache."""
    return _current[0]


def case_of(item: pytest.Item) -> Any:
    """The ``case`` parameter of a suite test's item (None for any other item)."""
    return getattr(getattr(item, "callspec", None), "params", {}).get("case")


def cases_of(items: Iterable[pytest.Item], benchmark: str) -> Iterator[Any]:
    """The cases of ``benchmark`` among ``items`` (e.g. the session's collected items), so a
    session fixture can build only what the selection needs."""
    for item in items:
        case = case_of(item)
        if getattr(case, "benchmark", None) == benchmark:
            yield case


def _queued_indices(interactor: Any, count: int) -> list[int]:
    """The indices of the next ``count`` items an xdist worker will run (raises if pytest-xdist's
    internals are not what this module reads)."""
    nxt = getattr(interactor, "nextitem_index", None)
    with interactor.torun.lock() as queue:
        window = list(islice(queue, count))  # copied in C, under the queue's lock
    if type(nxt) is int:  # not xdist's shutdown marker
        window.insert(0, nxt)
    # Item indices only (the queue also carries xdist's shutdown marker at its end).
    return [i for i in window[:count] if type(i) is int]


def new_upcoming_items(session: pytest.Session, item: pytest.Item, count: int) -> list[pytest.Item]:
    """Up to ``count`` of the items this process runs after ``item``, without those returned
    before: the window slides by about one item per test, so handing back all ``count`` items
    each time cost O(concurrency) per test for nothing (under xdist, a case lookup and a submit
    for each of 128 items per test). Without xdist they follow ``item`` in ``session.items``;
    under xdist they are read from the worker's queue, which the controller appends to as it
    goes, so the indices handed out are remembered rather than a position."""
    interactor = _xdist_worker_interactor(session.config)
    if interactor is not None:
        handed = session.stash.setdefault(_HANDED, set())
        try:
            fresh = [i for i in _queued_indices(interactor, count) if i not in handed]
            upcoming = [session.items[i] for i in fresh]
        except Exception:
            return []
        handed.update(fresh)
        return upcoming
    index = _position(session, item)
    if index is None or count <= 0:
        return []
    ahead = session.stash.setdefault(_AHEAD, [0])
    start = max(index + 1, ahead[0])
    end = index + 1 + count
    ahead[0] = max(ahead[0], end)
    return session.items[start:end]


def _position(session: pytest.Session, item: pytest.Item) -> int | None:
    """Index of ``item`` in ``session.items`` (a map built once: ``list.index`` per test was
    quadratic in the suite size)."""
    positions = session.stash.get(_POSITIONS, None)
    if positions is None or len(positions) != len(session.items):
        positions = {id(it): i for i, it in enumerate(session.items)}
        session.stash[_POSITIONS] = positions
    index = positions.get(id(item))
    if index is None or session.items[index] is not item:
        try:
            return session.items.index(item)
        except ValueError:
            return None
    return index


def _xdist_worker_interactor(config: pytest.Config) -> Any:
    """pytest-xdist's ``WorkerInteractor`` in a worker (looked up once), else None."""
    if not hasattr(config, "workerinput"):
        return None
    found = config.stash.get(_INTERACTOR, None)
    if found is None:
        found = next((plugin for plugin in config.pluginmanager.get_plugins()
                      if type(plugin).__name__ == "WorkerInteractor"), None)
        if found is not None:
            config.stash[_INTERACTOR] = found
    return found
