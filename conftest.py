"""Registers the suites' fixtures: the shared ones, then ``fixtures/<benchmark>.py`` for every
registered benchmark that has one (optional: the harness builds runners without fixtures)."""

import importlib.util

from pytest_toolbench.benchmarks import registry

pytest_plugins = [
    "fixtures.toolbench",
    *(f"fixtures.{name}" for name in registry() if importlib.util.find_spec(f"fixtures.{name}") is not None),
]
