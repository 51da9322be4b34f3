"""The toy suite is collected only where the toy benchmark is registered (its subprocess run in
tests/test_toy_benchmark.py); a plain run of tests/ must not collect a suite of an unknown
benchmark."""

from pytest_toolbench.benchmarks import registry

collect_ignore_glob = [] if "toy" in registry() else ["suites/*"]
