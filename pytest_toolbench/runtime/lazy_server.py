"""Moved to :mod:`pytest_toolbench.models.lazy_server` (the model layer starts its own server on
the first cache miss); kept for the imports that still name this place."""

from pytest_toolbench.models.lazy_server import (
    FAILED_FILE,
    POLL_S,
    READY_FILE,
    REQUEST_FILE,
    LazyServerModel,
    ServerOwner,
    ServerUnavailable,
    wait_for_server,
)

__all__ = ["FAILED_FILE", "POLL_S", "READY_FILE", "REQUEST_FILE", "LazyServerModel", "ServerOwner",
           "ServerUnavailable", "wait_for_server"]
