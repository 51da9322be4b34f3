"""The run's shared SDK process (models/sdk_process): whether the run has one is decided once, at
configure, from the run's settings.

The first request cannot leave before that process has imported openai, so the plugin's import
may already have started one on a guess from the raw command line (``launcher.start_at_import``),
which lets that import overlap pytest's own start-up. The guess decides nothing: configure keeps
that process when the run wants one, stops it when not, and starts one when none was guessed
(e.g. the model came from the ini file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.sdk_process import launcher
from pytest_toolbench.session.listing import runs_tests
from pytest_toolbench.session.selection import has_toolbench_tests
from pytest_toolbench.session.state import STATE_KEY, is_worker, state

if TYPE_CHECKING:
    from pytest_toolbench.models.sdk_process.protocol import SdkLink


def wants_sdk_process(config: pytest.Config, settings: RunSettings) -> bool:
    """A run that may send requests to an endpoint, with ``--sdk-process shared``."""
    return (
        settings.sdk_process == "shared"
        and settings.resolved_backend in ("openai", "vllm")
        and not settings.cache_only
        and runs_tests(config)  # a listing command (--collect-only, --fixtures...) sends none
        and has_toolbench_tests(config)
    )


def decide(config: pytest.Config, settings: RunSettings) -> launcher.SdkProcess | None:
    """The run's SDK process (controller only): the one the import started if the run wants
    one, else a new one; None when it does not (a process started on a wrong guess is stopped)."""
    guessed = launcher.claim_started_at_import()
    if is_worker(config) or not wants_sdk_process(config, settings):
        if guessed is not None:
            guessed.stop()
        return None
    if guessed is not None:
        return guessed
    # Its SDK import overlaps collection, unless the cache may answer the run (launcher.py).
    empty = not settings.use_cache or not launcher.cache_holds_replies(settings.cache_dir)
    return launcher.SdkProcess(import_sdk_at_start=empty)


def sdk_address(config: pytest.Config) -> dict[str, Any] | None:
    """How this pytest process reaches the run's SDK process (None: call the SDK in process)."""
    if is_worker(config):
        return config.workerinput.get("toolbench_sdk")  # type: ignore[attr-defined]
    sdk = state(config).sdk
    return sdk.address() if sdk is not None else None


def sdk_link(config: pytest.Config) -> SdkLink | None:
    """How this pytest process uses the run's SDK process: its address and how many pytest
    processes share it (None: call the SDK in process)."""
    address = sdk_address(config)
    if address is None:
        return None
    from pytest_toolbench.models.sdk_process.protocol import SdkAddress, SdkLink

    processes = int(getattr(config, "workerinput", {}).get("workercount", 1))
    return SdkLink(address=SdkAddress.model_validate(address), processes=processes)


def stop(config: pytest.Config) -> None:
    st = config.stash.get(STATE_KEY, None)
    if st is not None and st.sdk is not None:
        st.sdk.stop()
        st.sdk = None
