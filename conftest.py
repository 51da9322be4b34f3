"""Registers the suites' fixtures (model, sandbox, per-benchmark environments)."""

pytest_plugins = ["fixtures.toolbench", "fixtures.toolhop"]
