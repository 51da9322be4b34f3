"""ToolHop: one test per case of the benchmark ``toolhop``; the harness loads, runs and scores them
(pytest_toolbench.benchmarks.toolhop.benchmark).

Select with -m "scenario(name='direct')", -m "hops(n=...)", -m "domain(name=...)"; `toolbench list
toolhop` prints the values, and `pytest --help` its own flags under "pytest-toolbench: ToolHop".

Written by `toolbench init`, which rewrites it only with --overwrite.
"""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("toolhop")


def test_toolhop(case, case_result):
    assert_case_passed(case_result)
