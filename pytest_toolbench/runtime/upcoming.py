"""Which items this process will run next, so their cases can start before pytest reaches them.

Without xdist the answer is simply the items after the current one. Under xdist the controller
hands each worker a queue of item indices; pytest-xdist's ``WorkerInteractor`` keeps it in
``torun`` (a lock-protected deque) and ``nextitem_index``. Reading it is the only way to know a
worker's future work; if the internals change, we degrade to no run-ahead rather than fail.
"""

from __future__ import annotations

import pytest


def upcoming_items(session: pytest.Session, item: pytest.Item, count: int) -> list[pytest.Item]:
    if count <= 0:
        return []
    items = session.items
    interactor = _xdist_worker_interactor(session.config)
    if interactor is None:
        try:
            index = items.index(item)
        except ValueError:
            return []
        return items[index + 1 : index + 1 + count]
    try:
        indices: list[int] = []
        nxt = getattr(interactor, "nextitem_index", None)
        if isinstance(nxt, int):
            indices.append(nxt)
        with interactor.torun.lock() as queue:
            indices.extend(i for i in queue if isinstance(i, int))
        return [items[i] for i in indices[:count]]
    except Exception:
        return []


def _xdist_worker_interactor(config: pytest.Config):
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor":
            return plugin
    return None
