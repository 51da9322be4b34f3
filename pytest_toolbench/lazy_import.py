"""A module imported on first use, for heavy dependencies that many processes never touch.

Every pytest process imports the plugin, its fixtures and every benchmark (options, markers):
the xdist workers, ``--collect-only``, ``--help``. numpy is needed only when retrieval indexes or
metrics are built, and the openai SDK (a slow import) only when a request is actually sent. ``np = LazyModule("numpy")`` reads like the import it replaces; type checkers are
given the real import under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for module ``name``; the first attribute read imports it (then a dict lookup)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
