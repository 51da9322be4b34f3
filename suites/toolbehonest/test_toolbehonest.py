"""ToolBeHonest: one test per case of the benchmark ``toolbehonest``; the harness loads, runs and
scores them (pytest_toolbench.benchmarks.toolbehonest.benchmark).

Select with -m "scenario(name='MNT')", -m "level(n=...)", -m "subtask(name=...)",
-m "solvable(value=...)"; `toolbench list toolbehonest` prints the values, and `pytest --help` its
own flags under "pytest-toolbench: ToolBeHonest".

Written by `toolbench init`, which rewrites it only with --overwrite.
"""

import pytest

from pytest_toolbench.session.fixtures import assert_case_passed

pytestmark = pytest.mark.toolbench("toolbehonest")


def test_toolbehonest(case, case_result):
    assert_case_passed(case_result)
