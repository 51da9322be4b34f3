"""pytest-xdist scheduling that keeps every worker's run-ahead window full.

A worker can only start cases it has been handed (runtime/upcoming.py reads its queue). xdist's
``--dist load`` hands out items in shrinking chunks and refills a worker only when its queue falls
below a quarter of the remaining items per worker; it also holds back a worker whose last test
took 0.1 s or more, taking it for a slow test. A toolbench test takes that long whenever it waits
for its model call, so workers ran with a few items queued and most of ``--concurrency`` unused
(about half the in-flight window at ``-n 2``). This scheduler is ``--dist load`` with one
change: a worker's queue never drops below ``window`` items while items remain, and a test's
duration is ignored (it measures the endpoint, not the test). Other ``--dist`` modes are left alone.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler.load import LoadScheduling


class RunAheadScheduling(LoadScheduling):
    def __init__(self, config: Any, log: Any = None, *, window: int):
        super().__init__(config, log)
        #: Items each worker should hold: what it has in flight, what it submits next, and 2 more.
        self.window = max(2, window)

    def schedule(self) -> None:
        super().schedule()
        for node in self.nodes:
            self._top_up(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        super().check_schedule(node, duration=0)  # a wait for the endpoint is not a slow test
        self._top_up(node)

    def _top_up(self, node: Any) -> None:
        if node.shutting_down or not self.pending:
            return
        missing = self.window - len(self.node2pending[node])
        if missing > 0:
            # Once nothing is left, each worker is shut down (after its queue) by the next test it
            # completes, as under --dist load.
            self._send_tests(node, missing)
