"""The toolbox suite is collected only where the toolbox benchmark is registered (its subprocess
run in tests/test_toolbox_benchmark.py); a plain run of tests/ must not collect a suite of an
unknown benchmark."""

from pytest_toolbench.benchmarks import registry

collect_ignore_glob = [] if "toolbox" in registry() else ["suites/*"]
