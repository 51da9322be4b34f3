"""The installed packages' entry points, read once per process.

``importlib.metadata.entry_points(group=...)`` reads every installed distribution's metadata
again on each call (~15-20 ms with this project's dependencies); the benchmark registry and the
model providers each asked for their own group, so every pytest process (each xdist worker too)
paid that scan twice at start-up."""

from __future__ import annotations

import functools
import importlib.metadata


@functools.cache
def _installed() -> importlib.metadata.EntryPoints:
    return importlib.metadata.entry_points()


def entry_points_of(group: str) -> importlib.metadata.EntryPoints:
    """The entry points of ``group`` (one scan of the installed packages per process)."""
    return _installed().select(group=group)
