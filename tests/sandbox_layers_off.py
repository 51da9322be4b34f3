"""pytest plugin for the sandbox report tests (``-p sandbox_layers_off`` with tests/ on the path):
every ToolSandbox the suite starts treats Landlock and seccomp as unavailable, through the pool's
own ``disable_layers`` switch, so a run sees what a machine without those kernel layers gives."""

from __future__ import annotations

from pytest_toolbench.sandbox import pool

_original_init = pool.ToolSandbox.__init__


def _init_without_layers(self, limits=None, **kwargs):  # type: ignore[no-untyped-def]
    kwargs.setdefault("disable_layers", ("landlock", "seccomp"))
    _original_init(self, limits, **kwargs)


pool.ToolSandbox.__init__ = _init_without_layers  # type: ignore[method-assign]
