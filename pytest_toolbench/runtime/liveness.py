"""Moved to :mod:`pytest_toolbench.models.liveness` (the model layer checks its own server); kept
for the SDK process's imports until they name the new place."""

from pytest_toolbench.models.liveness import dead_server_check, process_alive

__all__ = ["dead_server_check", "process_alive"]
