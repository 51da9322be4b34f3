"""Registers the suites' fixtures: the shared ones, then ``fixtures/<benchmark>.py`` for every
registered benchmark (found by name, so adding a benchmark needs no edit here)."""

from pytest_toolbench.benchmarks import registry

pytest_plugins = ["fixtures.toolbench", *(f"fixtures.{name}" for name in registry())]
