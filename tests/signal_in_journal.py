"""pytest plugin for the interrupt tests (``-p signal_in_journal`` with tests/ on the path): in
xdist worker gw0, the first case's journal line is written, then the run is interrupted (its
controller gets a SIGTERM, which it passes on to the workers as SIGINT) while the worker is still
inside the journal's append (it waits there up to 2 s), as a busy machine's scheduler can leave
it. The controller is untouched."""

from __future__ import annotations

import os
import signal
import time
import pytest

from pytest_toolbench.results.journal import ResultJournal

_appended: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", {}).get("workerid") != "gw0":
        return
    append = ResultJournal.append_json

    def append_then_interrupted(self: ResultJournal, text: str) -> None:
        append(self, text)
        if not _appended:
            _appended.append(text)
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(2)  # the controller's SIGINT comes in here

    ResultJournal.append_json = append_then_interrupted  # type: ignore[method-assign]
