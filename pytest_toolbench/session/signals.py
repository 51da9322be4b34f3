"""SIGTERM (CI cancelling a job) ends the run like Ctrl-C: the summary and the reports are still
written, marked partial."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from pytest_toolbench.session.state import STATE_KEY


def install_sigterm(config: pytest.Config) -> None:
    """SIGTERM (CI cancelling a job) ends the run like Ctrl-C, so the summary and the JSON are
    still written (marked partial); the previous handler is restored at the end."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        st = config.stash.get(STATE_KEY, None)
        if st is not None and st.interrupted_by is None:
            st.interrupted_by = "SIGTERM"
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))
