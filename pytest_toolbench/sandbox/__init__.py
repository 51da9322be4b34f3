"""Confined warm worker pool for untrusted code (see pool.py, policy.py, worker.py).

Exports are lazy so that the worker process, which imports this package, does not pay for
pydantic and the harness config it never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_toolbench.sandbox.pool import SandboxOutcome, SandboxStartError, ToolSandbox

__all__ = ["SandboxOutcome", "SandboxStartError", "ToolSandbox"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pytest_toolbench.sandbox import pool

        return getattr(pool, name)
    raise AttributeError(name)
