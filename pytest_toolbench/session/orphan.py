"""An xdist worker whose controller died under it (SIGKILL, the OOM killer) records nothing that
the controller's death alone caused, and stops without a word.

Why: the run's shared SDK process (models/sdk_process) is the controller's child and ends with it
(its stdin reaches EOF), so every model call an orphaned worker had in flight failed as
``sdk_process_gone``, and the worker wrote those cases into its backstop journal
(session/fixtures.py). ``toolbench finish`` merged them into the killed run's report as
infrastructure errors with the hint ``--sdk-process inline``, where the run had simply never
finished them: not run (killed), as every other case a killed run leaves. Each of the worker's
sends to the dead controller then failed ("cannot send"), and the last one, in xdist's session
end, came out as pluggy's PluggyTeardownRaisedWarning on the terminal the run had left.

Where: in the worker, the only process that still writes after the controller's death and the
only one that can tell why its case failed; ``toolbench finish`` cannot, as the journal keeps no
time of that death, and an ``sdk_process_gone`` a live controller saw is a real one.

A local worker is the controller's child (execnet's popen gateway), and the controller puts its
pid in the worker's input: a worker whose parent is that pid at its start watches it (one started
elsewhere, ``--tx ssh=...``, does not). Orphaned, the worker is adopted by another process, so its
parent pid changes for good and no pid that could be reused is compared.

With ``--sdk-process inline`` there is no SDK process, but a managed vLLM server is the
controller's child too, and dies with it: the calls in flight then fail to reach it
(:data:`ENDPOINT_GONE`), and are dropped alike.

Orphaned, the worker stops (:func:`stop_orphaned_worker`) when a case fails that way, since
every later call would fail alike, and before anything else it would send to the controller (a
test's start, report or end, a warning, its session end: :class:`ControllerWatch`'s hooks run
ahead of xdist's), so nothing is printed. A genuine death of the SDK process in a live run
(killed by itself, crashed) stays an infrastructure error as it was: the controller is still
the worker's parent.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from pytest_toolbench.exitcodes import ToolbenchExit
from pytest_toolbench.models.errors import TRANSPORT_KINDS
from pytest_toolbench.results.case_result import CaseResult

#: The worker input's key for the controller's pid (set by the controller, read by the worker).
CONTROLLER_PID = "toolbench_controller_pid"
#: Error kinds the controller's death gives the cases in flight: the shared SDK process is the
#: controller's child and goes with it.
KILLED_WITH_CONTROLLER = frozenset({"sdk_process_gone"})
#: Error kinds of a call whose endpoint went away. A server the run started (the managed vLLM
#: server, shared by the workers) dies with the controller (PDEATHSIG), so with
#: ``--sdk-process inline`` the calls in flight fail to connect, retried, then refused. Dropped
#: only once the controller is gone: that a dead run's worker could not reach its endpoint is no
#: finding about the endpoint (it is re-parented before its server is signalled, so no grace).
ENDPOINT_GONE = TRANSPORT_KINDS | {"server_died"}
#: How long a case failed as ``sdk_process_gone`` waits for the controller to be seen gone. Its
#: pipes close (the SDK process's stdin among them, which ends that process) a moment before its
#: children are handed to another parent; past this, the SDK process died on its own.
GRACE_S = 1.0
_WATCH_KEY = pytest.StashKey["ControllerWatch"]()


def tell_worker(node: Any) -> None:
    """Controller side (``pytest_configure_node``): the worker is told whose child it is."""
    node.workerinput[CONTROLLER_PID] = os.getpid()


class ControllerWatch:
    """Worker side: whether the run's controller, this worker's parent, is gone; registered as a
    plugin whose hooks stop the worker before it sends to a controller that is gone."""

    def __init__(self, controller_pid: int | None, grace_s: float = GRACE_S) -> None:
        #: None: not watched (not the controller's child, or not told its pid).
        self.controller_pid = controller_pid
        self.grace_s = grace_s
        #: Set once an ``sdk_process_gone`` came while the controller lived on past the grace:
        #: the SDK process died on its own, and each later such case is recorded at once.
        self.sdk_died_alone = False

    def controller_gone(self) -> bool:
        return self.controller_pid is not None and os.getppid() != self.controller_pid

    def killed_with_controller(self, result: CaseResult) -> bool:
        """Whether ``result`` failed only because the controller died: an error of a kind in
        :data:`KILLED_WITH_CONTROLLER`, the controller gone (waited for up to the grace), or of
        a kind in :data:`ENDPOINT_GONE`, the controller gone already."""
        error = result.error
        if self.controller_pid is None or error is None:
            return False
        if error.kind in ENDPOINT_GONE:
            return self.controller_gone()
        if error.kind not in KILLED_WITH_CONTROLLER or self.sdk_died_alone:
            return False
        deadline = time.monotonic() + self.grace_s
        while not self.controller_gone():
            if time.monotonic() >= deadline:
                self.sdk_died_alone = True
                return False
            time.sleep(0.01)
        return True

    def stop_if_orphaned(self) -> None:
        if self.controller_gone():
            stop_orphaned_worker()

    # Before xdist's own hooks, each of which sends to the controller.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self) -> None:
        self.stop_if_orphaned()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self) -> None:
        self.stop_if_orphaned()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logfinish(self) -> None:
        self.stop_if_orphaned()

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self) -> None:
        self.stop_if_orphaned()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop_if_orphaned()


def watch_controller(config: pytest.Config) -> ControllerWatch:
    """Worker side, at configure (the controller is alive: it is starting this worker)."""
    told = config.workerinput.get(CONTROLLER_PID)  # type: ignore[attr-defined]
    watch = ControllerWatch(told if isinstance(told, int) and told == os.getppid() else None)
    config.stash[_WATCH_KEY] = watch
    config.pluginmanager.register(watch, "toolbench-controller-watch")
    return watch


def killed_with_controller(config: pytest.Config, result: CaseResult) -> bool:
    """Whether this worker must not record ``result``: it failed only because the run's
    controller died (:meth:`ControllerWatch.killed_with_controller`). False outside a worker."""
    watch = config.stash.get(_WATCH_KEY, None)
    return watch is not None and watch.killed_with_controller(result)


def stop_orphaned_worker() -> None:
    """End this worker at once, as a SIGKILL of the whole run would have: what it leaves is what
    ``toolbench finish`` scores. Each case whose test ran is in its journal already (written
    before the case's report); no one is left to report to, and pytest's session end would only
    fail to send. Its sandbox zygotes go when their pipes close (sandbox/worker.py,
    ``abandon``); the SDK process is gone already."""
    os._exit(int(ToolbenchExit.INTERRUPTED))
