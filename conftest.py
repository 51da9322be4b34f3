"""Registers the suites' fixtures: the shared ones, then ``fixtures/<benchmark>.py`` for every
registered benchmark that has one (optional: the harness builds runners without fixtures).

The shared ones are registered as the package's own module, the one the plugin would register
itself at configure (plugin.py skips it once registered), never as ``fixtures/toolbench.py``,
which re-exports them: that second module would define each fixture a second time, and
``pytest --fixtures`` stops with an INTERNALERROR on two identical definitions (it sorts them
and cannot order them)."""

import importlib.util

from pytest_toolbench.benchmarks import registry

pytest_plugins = [
    "pytest_toolbench.session.fixtures",
    *(f"fixtures.{name}" for name in registry() if importlib.util.find_spec(f"fixtures.{name}") is not None),
]
